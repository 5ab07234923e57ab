# exercise: fusion.softmax
# function: softmax
# verdict: failed
# cpu-says: not written by a triton store
# cpu-says: more rows than an h200's 132 sms, 4 times over
# gpu-says: wrong on the large timing input
"""A grid of four programs per SM, sized as a persistent kernel's, but one row per program and no row loop: rows past
4 × 132 = 528 are never written. The CPU's cases stopped at about 172 rows and passed it, where an H200's timed
input (4096 rows) fails it; the CPU's largest case now has more rows than four programs per SM can cover."""
import torch
import triton
import triton.language as tl

SMS = torch.cuda.get_device_properties(0).multi_processor_count


@triton.jit
def row_softmax(x_ptr, y_ptr, x_stride, y_stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    keep = lanes < cols
    x = tl.load(x_ptr + row * x_stride + lanes, mask=keep, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_stride + lanes, e / tl.sum(e, axis=0), mask=keep)


def softmax(x):
    rows, cols = x.shape
    y = torch.empty_like(x)
    row_softmax[(min(rows, 4 * SMS),)](x, y, x.stride(0), y.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
    return y
