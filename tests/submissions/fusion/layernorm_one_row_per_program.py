"""Correct, one program per row: weight and bias are loaded again by every row (twice the bytes
of x for them alone when the rows are as long as they are many)."""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, w_ptr, b_ptr, y_ptr, N, x_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * N + cols, xc / tl.sqrt(var + eps) * w + b, mask=mask)


def layernorm(x, weight, bias, eps):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype)
    k[(m,)](x, weight, bias, y, n, x.stride(0), eps, BLOCK=triton.next_power_of_2(n))
    return y
