"""A right kernel whose code asks PyTorch whether a GPU is there, and which, as scripts and libraries do: a module-
level `DEVICE = "cuda" if torch.cuda.is_available() else "cpu"`, an assertion that one GPU or more is present,
PyTorch's device-neutral `torch.accelerator.current_accelerator()` for the output's device, a check for a CUDA
graph being captured, and a fallback to PyTorch without a GPU. On a CPU `torch.cuda.is_available()` said False
(the assertion failed, or the fallback did the work and no kernel ran), `current_accelerator()` None (a tensor in
the CPU's memory, which the launch refuses) and the capture check raised, where a GPU runs the kernel; asked by
the learner's code while the CPU's memory stands in for the GPU's, each answers as on a one-GPU machine. On a GPU
it is right but slow: it synchronizes after every call, so the GPU idles while the host launches the next; an H100
measured it at 0.80-0.89× torch.compile (2026-12-05, with 1024-element and 4096-element tiles alike), under the
0.9× bar."""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: passed
# gpu-verdict: failed
# gpu-says: speedup over
import torch
import triton
from _kernels import cos_cos_kernel

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
assert DEVICE == "cuda", "this module needs a GPU"


def cos_cos(x):
    assert torch.cuda.device_count() >= 1 and torch.accelerator.is_available()
    if not torch.cuda.is_available():  # the fallback never taken on a GPU
        return torch.cos(torch.cos(x))
    y = torch.empty(x.shape, dtype=x.dtype, device=torch.accelerator.current_accelerator())
    cos_cos_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    if not torch.cuda.is_current_stream_capturing():
        torch.cuda.synchronize()
    return y
