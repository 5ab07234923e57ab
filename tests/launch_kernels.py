"""Kernels launched by every path Triton offers, and grading of tests/submissions/compile/, for
tests/test_launch_paths.py and test_gpucompile.py.

Import gpuprinciples before this module (conftest does; a subprocess must too): the mode decides
whether @triton.jit makes JITFunctions or the interpreter's InterpretedFunctions.
"""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
import triton
import triton.language as tl


@triton.jit
def double(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, 2 * tl.load(src + at, mask=inside), mask=inside)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4),
                          triton.Config({"BLOCK": 256}, num_warps=8)], key=["n"])
@triton.jit
def double_tuned(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, 2 * tl.load(src + at, mask=inside), mask=inside)


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"]) if args["n"] < 1024 else 1024})
@triton.jit
def double_heuristic(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, 2 * tl.load(src + at, mask=inside), mask=inside)


@triton.jit
def tile_matmul(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                PRECISION: tl.constexpr):
    """One BM×BK by BK×BN tile product, c in float32."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b, input_precision=PRECISION))


def launch_plain(x):
    y = torch.empty_like(x)
    double[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
    return y


def launch_grid_callable(x):
    y = torch.empty_like(x)
    double[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel(), BLOCK=128)
    return y


def launch_warmup_handle(x):
    """Compile with `warmup`, then launch the handle it returns with every argument in order."""
    y = torch.empty_like(x)
    handle = double.warmup(x, y, x.numel(), BLOCK=128, num_warps=4, grid=(1,))
    handle._init_handles()
    handle[(triton.cdiv(x.numel(), 128), 1, 1)](x, y, x.numel(), 128)
    return y


def launch_autotuned(x):
    y = torch.empty_like(x)
    double_tuned[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
    return y


def launch_heuristic(x):
    y = torch.empty_like(x)
    double_heuristic[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
    return y


PATHS = {"kernel[grid]": launch_plain, "kernel[grid callable]": launch_grid_callable,
         "warmup handle[grid]": launch_warmup_handle, "autotune": launch_autotuned, "heuristics": launch_heuristic}


def matmul_tile(dtype, rows: int, precision: str = "ieee", num_warps: int = 4):
    """Launch tile_matmul on rows×32 by 32×32 random tiles of `dtype`; returns (c, a, b)."""
    from gpuprinciples.machine import runtime
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(rows, 32, generator=gen).to(dtype).to(runtime.DEVICE)
    b = torch.randn(32, 32, generator=gen).to(dtype).to(runtime.DEVICE)
    c = torch.empty(rows, 32, device=runtime.DEVICE)
    tile_matmul[(1,)](a, b, c, BM=rows, BN=32, BK=32, PRECISION=precision, num_warps=num_warps)
    return c, a, b


# -------------------------------------------------------------------------------------------------
# Grading the submissions under tests/submissions/compile/
# -------------------------------------------------------------------------------------------------

SUBMISSIONS = Path(__file__).resolve().parent / "submissions" / "compile"


def grade_submissions(graded: dict) -> dict:
    """{stem: (exercise, function)} -> {stem: Report}, two at a time on a CPU (each grade mostly waits
    on its child's start-up), one at a time on a GPU (timings must not be disturbed)."""
    from gpuprinciples.grader.grading import grade
    from gpuprinciples.machine import runtime
    from gpuprinciples.sandbox.submission import from_path

    def one(stem):
        exercise, name = graded[stem]
        return stem, grade(exercise, from_path(f"{SUBMISSIONS / stem}.py:{name}"))

    with ThreadPoolExecutor(1 if runtime.HAS_CUDA else 2) as pool:
        return dict(pool.map(one, graded))


def counted_checks_hold(report) -> bool:
    """Correct, and every requirement held (the timing judges aside: on a GPU they come on top)."""
    timed = ("speed", "speedup", "≥")
    return report.correct and all(line.passed is not False for line in report.checks if not line.name.startswith(timed))
