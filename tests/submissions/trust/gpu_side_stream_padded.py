# graded-by: test_trust.py
"""GPU: a slow kernel (four passes over memory in one launch) hidden on a side stream that starts
only when the timed window closes. (It once padded the window with a PyTorch copy of the input's size, so
the time looked like a kernel at copy speed; the byte rule now fails such a copy before anything is timed.)"""
import torch
import triton
import triton.language as tl


@triton.jit
def slow_cos_cos(x_ptr, y_ptr, n, repeat, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for _ in range(repeat):  # the stores keep the compiler from hoisting the loads
        y = tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32)))
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


_side = []


def cos_cos(x):
    if not _side:
        _side.append(torch.cuda.Stream())
    side, current = _side[0], torch.cuda.current_stream()
    y = torch.empty_like(x)
    side.wait_stream(current)  # starts about when the window closes
    with torch.cuda.stream(side):
        slow_cos_cos[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), 4, BLOCK=1024, num_warps=4)
    return y
