# exercise: fusion.softmax
# function: softmax
# verdict: failed
# says: 2 triton launches per call
"""Two passes: one kernel writes each row's max to memory, a second reads x again."""
import torch
import triton
import triton.language as tl


@triton.jit
def row_max(x_ptr, m_ptr, n_cols, x_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(m_ptr + row, tl.max(x, axis=0))


@triton.jit
def normalise(x_ptr, m_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.load(m_ptr + row))
    tl.store(y_ptr + row * y_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x):
    m, n = x.shape
    y, mx = torch.empty((m, n), dtype=x.dtype, device=x.device), torch.empty(m, dtype=x.dtype, device=x.device)
    BLOCK = triton.next_power_of_2(n)
    row_max[(m,)](x, mx, n, x.stride(0), BLOCK=BLOCK)
    normalise[(m,)](x, mx, y, n, x.stride(0), y.stride(0), BLOCK=BLOCK)
    return y
