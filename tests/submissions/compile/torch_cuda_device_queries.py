# exercise: fusion.softmax
# function: softmax
# verdict: passed
# modes: cpu
"""Right: a persistent row softmax whose host code asks PyTorch, not Triton, about the GPU, as Liger-Kernel's and
Triton's persistent-matmul wrappers do: `torch.cuda.get_device_properties(x.device).multi_processor_count` sizes
the grid, `torch.cuda.get_device_capability(torch.cuda.current_device())` picks the number of warps, the launch
sits inside `with torch.cuda.device(x.device)` (after `torch.cuda.set_device`, within `torch.cuda.device_of(x)`
and an NVTX range, as profiled code is), and `torch.cuda.synchronize()` follows it. Under the interpreter
PyTorch has no GPU; these failed there with "Torch not compiled with CUDA enabled" (or "Expected a cuda device,
but got: cpu") while a GPU runs the kernel. Graded on a CPU only: on
a GPU these are PyTorch's own answers, and whether this simple kernel meets the GPU's speed bar is not its point."""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, rows, cols, x_stride, y_stride, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), rows, tl.num_programs(0)):
        lanes = tl.arange(0, BLOCK)
        keep = lanes < cols
        x = tl.load(x_ptr + row * x_stride + lanes, mask=keep, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * y_stride + lanes, e / tl.sum(e, axis=0), mask=keep)


def softmax(x):
    rows, cols = x.shape
    y = torch.empty_like(x)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    warps = 8 if torch.cuda.get_device_capability(torch.cuda.current_device())[0] >= 9 else 4
    torch.cuda.set_device(x.device)
    with torch.cuda.device(x.device), torch.cuda.device_of(x), torch.cuda.nvtx.range("softmax"):
        k[(min(rows, 4 * sms),)](x, y, rows, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols),
                                 num_warps=warps)
    torch.cuda.synchronize()  # as code copied from a benchmark does
    return y
