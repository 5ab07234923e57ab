"""Uses eps = 1e-5 whatever it is given: wrong where the variance is small and eps is 1e-3."""
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
            xc = tl.where(cm, x - mean, 0.0)
            var = tl.sum(xc * xc, axis=0) / N
            y = (x - mean) / tl.sqrt(var + eps) * w + b
            tl.store(y_ptr + row * N + cols, y, mask=cm)


def layernorm(x, weight, bias, eps):
    eps = 1e-5  # BUG: ignores the eps it is given
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype)
    k[(triton.cdiv(m, 16),)](x, weight, bias, y, m, n, x.stride(0), eps, BLOCK=triton.next_power_of_2(n),
                             ROWS_PER_PROGRAM=16)
    return y
