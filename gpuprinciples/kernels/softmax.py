"""Row softmax in one pass over memory: each row is loaded once, kept on chip, and written once.
The row maximum is subtracted first, so large inputs do not overflow exp.

What makes it fast on a GPU (Triton's fused-softmax tutorial does the same):

* a persistent grid: a few programs per SM, each looping over rows, so launching and
  scheduling programs costs nothing per row;
* `tl.range(..., num_stages=...)`: the loop is software-pipelined, the next row's load is in
  flight while this row is computed;
* `ROWS` rows per step for short rows, so every thread has work; enough warps for long rows.

`rows`, `num_warps`, `num_stages` and `programs_per_sm` are parameters so variants can be timed.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride, n_programs,
                   ROWS: tl.constexpr, BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    # padding: -inf past the end of a row (it must not win the max, and exp(-inf) = 0)
    pad = tl.where(col_ok, 0.0, -float("inf"))[None, :]
    # n_programs is the grid size (tl.num_programs(0), passed in: Triton 3.6's interpreter
    # returns tl.num_programs as a 1-element array, which a loop bound cannot be)
    for first in tl.range(tl.program_id(0) * ROWS, n_rows, n_programs * ROWS, num_stages=NUM_STAGES):
        rows = first + tl.arange(0, ROWS)
        mask = (rows < n_rows)[:, None] & col_ok[None, :]
        rows = rows.to(tl.int64)  # row * stride can pass 2**31
        x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=pad)
        x = x.to(tl.float32)
        x = x - tl.max(x, axis=1)[:, None]
        num = tl.exp(x)
        y = num / tl.sum(num, axis=1)[:, None]
        tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _sm_count(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def softmax(x: torch.Tensor, *, rows: int | None = None, num_warps: int | None = None,
            num_stages: int | None = None, programs_per_sm: int | None = None) -> torch.Tensor:
    assert x.ndim == 2 and x.stride(1) == 1, "rows must be contiguous (any row stride is fine)"
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    BLOCK = triton.next_power_of_2(n)
    rows = rows or max(1, min(16, 2048 // BLOCK))  # short rows: several per step
    if x.is_cuda:
        num_warps = num_warps or (4 if BLOCK * rows <= 2048 else 8 if BLOCK * rows <= 8192 else 16)
        num_stages = num_stages or (4 if BLOCK * rows * x.element_size() <= 32768 else 2)
        programs = min(triton.cdiv(m, rows), (programs_per_sm or 4) * _sm_count(x.device))
    else:  # the interpreter runs programs one after another: a grid of one row-block each
        num_warps, num_stages = num_warps or 4, num_stages or 1
        programs = triton.cdiv(m, rows)
    softmax_kernel[(programs,)](x, y, m, n, x.stride(0), y.stride(0), programs,
                                ROWS=rows, BLOCK=BLOCK, NUM_STAGES=num_stages, num_warps=num_warps)
    return y
