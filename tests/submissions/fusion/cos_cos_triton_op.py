"""A right kernel made a PyTorch operator with torch.library.triton_op (how PyTorch lets torch.compile trace a
user's Triton kernel): the grader counted the operator as PyTorch's compute, its inputs and output as copies,
and failed it. The operator's Python body now runs in the counters' view, so its launch is the work: it passes."""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: passed
import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton


@triton.jit
def _cos_cos_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32)))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton_op("fixtures::cos_cos", mutates_args={})
def _cos_cos(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    wrap_triton(_cos_cos_kernel)[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


def cos_cos(x):
    return _cos_cos(x)
