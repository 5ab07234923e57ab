# exercise: fusion.softmax
# function: softmax
# verdict: failed
# cpu-says: not written by a triton store
# cpu-says: more rows than an h200's 132 sms
# gpu-says: wrong on the large timing input
"""A persistent grid of at most 132 programs (one per SM) walking the rows with a stride one too long: right
while there are at most 132 rows, wrong past them (row 132 is never computed). A CPU whose cases all had fewer
rows passed it; an H200's timed input (4096 rows) reaches the second wave."""
import torch
import triton
import triton.language as tl

NUM_SMS = 132


@triton.jit
def k(x_ptr, y_ptr, m, n, sx, sy, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for row in range(tl.program_id(0), m, STRIDE):
        x = tl.load(x_ptr + row * sx + cols, mask=cols < n, other=-float("inf"))
        e = tl.exp(x - tl.max(x, 0))
        tl.store(y_ptr + row * sy + cols, e / tl.sum(e, 0), mask=cols < n)


def softmax(x):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    k[(min(m, NUM_SMS),)](x, y, m, n, x.stride(0), y.stride(0), STRIDE=NUM_SMS + 1,  # BUG: NUM_SMS + 1
                          BLOCK=triton.next_power_of_2(n))
    return y
