"""Row softmax in one pass over memory: each row is loaded once, kept on chip, and written once.
The row maximum is subtracted first, so large inputs do not overflow exp.

The simplest grid is also the fastest here: one program per row (a few rows per program when rows
are short), and let the GPU schedule thousands of programs. Each program's load is in flight while
other programs on the same SM compute, so nothing else is needed to hide memory latency. Measured on
an H200 (tools/tune_fusion.py, 4096 × 4096 float32, L2 flushed before each call): 35.5 µs, 89 % of
the copy bandwidth and 1.6× torch.softmax, where a persistent grid of a few programs per SM looping
over rows with a software-pipelined load reached 41–58 µs.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                   ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_ok[None, :]
    rows = rows.to(tl.int64)  # row * stride can pass 2**31
    # lanes past a row's end load -inf: they must not win the max, and exp(-inf) = 0 adds nothing to
    # the sum (rows past the last one load 0 there, so they compute no NaN)
    pad = tl.where(col_ok, 0.0, -float("inf"))[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=pad)
    x = x.to(tl.float32)
    x = x - tl.max(x, axis=1)[:, None]
    num = tl.exp(x)
    y = num / tl.sum(num, axis=1)[:, None]
    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def launch_shape(n_cols: int) -> tuple[int, int, int]:
    """(BLOCK, ROWS, num_warps) for rows of n_cols: a power-of-two block holds a whole row; short rows
    go several to a program so each program has about 2048 elements; about 512 elements per warp
    (the H200's fastest in the tuning table: 8 warps for 4096, 16 for 8192)."""
    block = triton.next_power_of_2(n_cols)
    rows = max(1, min(16, 2048 // block))
    return block, rows, min(16, max(4, block * rows // 512))


def softmax(x: torch.Tensor, *, rows: int | None = None, num_warps: int | None = None) -> torch.Tensor:
    assert x.ndim == 2 and x.stride(1) == 1, "rows must be contiguous (any row stride is fine)"
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block, default_rows, default_warps = launch_shape(n)
    rows = rows or default_rows
    softmax_kernel[(triton.cdiv(m, rows),)](x, y, m, n, x.stride(0), y.stride(0), ROWS=rows, BLOCK=block,
                                            num_warps=num_warps or default_warps)
    return y
