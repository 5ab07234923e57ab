# exercise: fusion.softmax
# function: softmax
# verdict: failed
# says: values wrong
"""Masked-off lanes load 0 instead of -inf: the padding adds exp(0 - max) to every row's sum."""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(y_ptr + row * y_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    k[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y
