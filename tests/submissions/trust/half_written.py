# graded-by: test_trust.py
"""Reads every input element in its kernel but stores only the first half of the result; the second
half is computed by PyTorch with the counters' dispatch mode switched off, straight into the output.
Bytes stay under the bound (it moves less than an honest kernel) and the kernel reads all its input:
only the store addresses show that half of the result never came from a kernel."""
import torch
import triton
import triton.language as tl
from torch.utils._python_dispatch import _disable_current_modes


@triton.jit
def _first_half(x_ptr, y_ptr, n, half, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.cos(tl.cos(x.to(tl.float32))), mask=offs < half)


def cos_cos(x):
    y = torch.empty_like(x)
    n = x.numel()
    half = n // 2
    _first_half[(triton.cdiv(n, 1024),)](x, y, n, half, BLOCK=1024)
    with _disable_current_modes():
        y.view(-1)[half:] = x.view(-1)[half:].cos().cos()
    return y
