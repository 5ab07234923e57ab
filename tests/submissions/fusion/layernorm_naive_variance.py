# exercise: fusion.layernorm
# function: layernorm
# verdict: failed
# says: values wrong
# says: offset
"""Variance as E[x²] - E[x]² in float32: one reduction fewer, but with a mean of 16 next to a spread
of 1 the subtraction cancels most of the digits."""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, w_ptr, b_ptr, y_ptr, M, N, x_stride, eps, BLOCK: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    cm = cols < N
    w = tl.load(w_ptr + cols, mask=cm)
    b = tl.load(b_ptr + cols, mask=cm)
    for i in range(ROWS_PER_PROGRAM):
        row = tl.program_id(0) * ROWS_PER_PROGRAM + i
        if row < M:
            x = tl.load(x_ptr + row * x_stride + cols, mask=cm, other=0.0)
            mean = tl.sum(x, axis=0) / N
            var = tl.sum(x * x, axis=0) / N - mean * mean  # BUG: cancellation
            y = (x - mean) / tl.sqrt(var + eps) * w + b
            tl.store(y_ptr + row * N + cols, y, mask=cm)


def layernorm(x, weight, bias, eps):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    k[(triton.cdiv(m, 16),)](x, weight, bias, y, m, n, x.stride(0), eps, BLOCK=triton.next_power_of_2(n),
                             ROWS_PER_PROGRAM=16)
    return y
