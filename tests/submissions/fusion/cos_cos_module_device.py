"""A right kernel written as Triton's tutorials write a script: `DEVICE = torch.device("cuda")` at the top, a tensor
made with it when the module is imported, the current stream asked for and entered. On a CPU the import raised
"Torch not compiled with CUDA enabled" where a GPU runs it; while a kernel exercise's module is imported, the
CPU's memory stands in for the GPU's, and the current stream is the one every launch here runs in. On a GPU it is
right but slow: it synchronizes after every call, so the GPU idles while the host launches the next; an H100
measured it at 0.82-0.88× torch.compile (2026-12-05, with 1024-element and 4096-element tiles alike), under the
0.9× bar."""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: passed
# gpu-verdict: failed
# gpu-says: speedup over
import torch
import triton
from _kernels import cos_cos_kernel

DEVICE = torch.device("cuda")
WARM = torch.zeros(1024, device=DEVICE)  # made at import, on the GPU


def cos_cos(x):
    y = torch.empty(x.shape, dtype=x.dtype, device=DEVICE)
    with torch.cuda.stream(torch.cuda.current_stream(DEVICE)):
        cos_cos_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    torch.cuda.current_stream().synchronize()
    return y
