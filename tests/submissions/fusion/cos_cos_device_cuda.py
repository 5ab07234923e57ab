"""A right kernel whose host code names the GPU outright, as Triton's tutorials and most scripts do:
`torch.empty(..., device="cuda")` for the output, `.cuda()` on the input. On a CPU, PyTorch has no GPU and raised
"Torch not compiled with CUDA enabled" where a GPU runs the code; under the grader's watch the CPU's memory stands
in for the GPU's, so it passes on both. (The reference's tiles, 4096 elements and 8 warps, with which an H100
passed it on 2026-12-05.)"""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: passed
import torch
import triton
from _kernels import cos_cos_kernel


def cos_cos(x):
    x = x.cuda()  # the tensor itself, on a GPU
    y = torch.empty(x.shape, dtype=x.dtype, device="cuda")
    cos_cos_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096, num_warps=8)
    return y
