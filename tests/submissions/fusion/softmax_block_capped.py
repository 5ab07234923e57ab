# exercise: fusion.softmax
# function: softmax
# verdict: failed
# says: not written by a triton store
"""A one-row-per-program softmax whose block is capped at 8192 columns (as libraries cap theirs), with no loop over
the columns past it: they are never written, and the rest is normalised over part of the row. Neither machine had
a row that wide, so it passed both; each now grades a row of more than 8192 columns."""
import torch
import triton
import triton.language as tl


@triton.jit
def row_softmax(x_ptr, y_ptr, x_stride, y_stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, BLOCK)
    keep = lanes < cols
    x = tl.load(x_ptr + row * x_stride + lanes, mask=keep, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_stride + lanes, e / tl.sum(e, axis=0), mask=keep)


def softmax(x):
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = min(triton.next_power_of_2(cols), 8192)
    row_softmax[(rows,)](x, y, x.stride(0), y.stride(0), cols, BLOCK=block, num_warps=8)
    return y
