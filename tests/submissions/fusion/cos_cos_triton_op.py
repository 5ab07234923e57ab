"""A right kernel made a PyTorch operator with torch.library.triton_op (how PyTorch lets torch.compile trace a user's
Triton kernel): the grader counted the operator as PyTorch's compute, its inputs and output as copies, and failed
it. The operator's Python body now runs in the counters' view, so its launch is the work: it passes. (The
reference's tiles, 4096 elements and 8 warps, with which an H100 passed it on 2026-12-05.)"""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: passed
import torch
import triton
from _kernels import cos_cos_kernel
from torch.library import triton_op, wrap_triton


@triton_op("fixtures::cos_cos", mutates_args={})
def _cos_cos(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    wrap_triton(cos_cos_kernel)[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096, num_warps=8)
    return y


def cos_cos(x):
    return _cos_cos(x)
