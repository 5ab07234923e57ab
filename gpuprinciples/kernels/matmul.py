"""C = A @ B in Triton: output tiles, a grouped tile order, tensor descriptors, fp32 accumulation.

One program computes one BM×BN tile of C (or, persistent, several: tile, tile + programs, ...). It walks K
in steps of BK; at each step it loads a BM×BK tile of A and a BK×BN tile of B and adds their product to an
fp32 accumulator that stays in registers; then it stores the tile once, in C's dtype. So a program reads
(BM + BN)·K elements to do 2·BM·BN·K FLOPs: the larger the tile, the more each loaded byte is reused.

* Tiles are visited in *grouped* order: GROUP_M rows of tiles at a time, column by column. Tiles that run
  at the same time then share rows of A and columns of B, which the L2 cache serves to all of them.
* Loads go through tensor descriptors (`tl.make_tensor_descriptor`): on Hopper, TMA copies whole tiles to
  shared memory; rows and columns past the edges read as zeros and are never written, so M, N and K need not
  be multiples of the tile. TMA needs 16-byte aligned rows (K and N multiples of 8 in bf16); other shapes
  take the pointer path (masked `tl.load`), as does `desc=False`.
* `tl.dot` of bf16 tiles with an fp32 accumulator compiles to Hopper's warpgroup MMA (`wgmma`).

    python -m gpuprinciples.kernels.matmul       # GPU: check against torch.mm, then time both
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from .. import runtime


@triton.jit
def grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(row, column) of tile number `tile` when tiles are visited GROUP_M rows at a time, column by column."""
    per_group = GROUP_M * num_pid_n
    first_row = (tile // per_group) * GROUP_M
    rows = tl.minimum(num_pid_m - first_row, GROUP_M)  # the last group may be shorter
    within = tile % per_group
    return first_row + within % rows, within // rows


@triton.jit
def matmul_kernel(A, B, C, M, N, K, stride_am, stride_bk, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                  DESC: tl.constexpr):
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    if DESC:
        a_desc = tl.make_tensor_descriptor(A, shape=[M, K], strides=[stride_am, 1], block_shape=[BM, BK])
        b_desc = tl.make_tensor_descriptor(B, shape=[K, N], strides=[stride_bk, 1], block_shape=[BK, BN])
        c_desc = tl.make_tensor_descriptor(C, shape=[M, N], strides=[stride_cm, 1], block_shape=[BM, BN])
    # one tile per program when the grid has one program per tile; fewer programs walk several (persistent)
    for tile in range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0)):
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        if DESC:
            for k in range(0, K, BK):
                acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([k, off_n]), acc)
            c_desc.store([off_m, off_n], acc.to(C.dtype.element_ty))
        else:
            rows = (off_m + tl.arange(0, BM)).to(tl.int64)
            cols = (off_n + tl.arange(0, BN)).to(tl.int64)
            ks = tl.arange(0, BK)
            for k in range(0, K, BK):
                a = tl.load(A + rows[:, None] * stride_am + (k + ks)[None, :],
                            mask=(rows[:, None] < M) & ((k + ks)[None, :] < K), other=0.0)
                b = tl.load(B + (k + ks)[:, None] * stride_bk + cols[None, :],
                            mask=((k + ks)[:, None] < K) & (cols[None, :] < N), other=0.0)
                acc = tl.dot(a, b, acc)
            tl.store(C + rows[:, None] * stride_cm + cols[None, :], acc.to(C.dtype.element_ty),
                     mask=(rows[:, None] < M) & (cols[None, :] < N))


@dataclass(frozen=True)
class Config:
    """A launch of `matmul_kernel`: tile sizes, order, warps, pipelining depth, loads, persistence."""

    BM: int = 128
    BN: int = 256
    BK: int = 64
    GROUP_M: int = 8
    num_warps: int = 8
    num_stages: int = 3
    desc: bool = True  # tensor descriptors (TMA) where the rows are 16-byte aligned
    programs_per_sm: int = 0  # > 0: persistent, this many programs per SM walk all the tiles

    def label(self) -> str:
        loads = "desc" if self.desc else "ptr"
        grid = f" persistent×{self.programs_per_sm}" if self.programs_per_sm else ""
        return (f"{self.BM}×{self.BN}×{self.BK} g{self.GROUP_M} w{self.num_warps} s{self.num_stages} "
                f"{loads}{grid}")


# Phase-1 defaults: a configuration known to suit Hopper for bf16 (large tiles, 8 warps = 2 warpgroups).
# tools/tune_matmul.py measures the alternatives on an H200.
GPU_CONFIG = Config()
SMALL_GPU_CONFIG = Config(BM=64, BN=64, BK=64, GROUP_M=8, num_warps=4, num_stages=3)  # small problems
# the interpreter: tiles as small as still run on Tensor Cores once compiled for sm_90 (wgmma needs 64 rows and
# a warpgroup; 32×32 tiles compile to the older mma), few enough programs for NumPy
CPU_CONFIG = Config(BM=64, BN=64, BK=32, GROUP_M=4, num_warps=4, num_stages=3)


def default_config(M: int, N: int, K: int, device_type: str) -> Config:
    if device_type != "cuda":
        return CPU_CONFIG
    if M * N < 1024 * 1024:  # fewer 128×256 tiles than SMs: smaller tiles keep more SMs busy
        return SMALL_GPU_CONFIG
    return GPU_CONFIG


def _rows_aligned(t: torch.Tensor) -> bool:
    """TMA's rule: 16-byte aligned base and row stride, unit stride along the row."""
    size = t.element_size()
    return t.stride(-1) == 1 and (t.stride(0) * size) % 16 == 0 and t.data_ptr() % 16 == 0


def matmul(a: torch.Tensor, b: torch.Tensor, config: Config | None = None) -> torch.Tensor:
    """a @ b for a [M, K] and b [K, N] (each with unit stride along its rows), in a's dtype; fp32 accumulation."""
    assert a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0], "expected a [M, K] and b [K, N]"
    assert a.dtype == b.dtype, "a and b must have the same dtype"
    if a.stride(1) != 1:
        a = a.contiguous()
    if b.stride(1) != 1:
        b = b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    cfg = config or default_config(M, N, K, a.device.type)
    desc = cfg.desc and all(map(_rows_aligned, (a, b, c)))
    tiles = triton.cdiv(M, cfg.BM) * triton.cdiv(N, cfg.BN)
    programs = tiles
    if cfg.programs_per_sm and a.is_cuda:
        programs = min(tiles, cfg.programs_per_sm * torch.cuda.get_device_properties(a.device).multi_processor_count)
    matmul_kernel[(programs,)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                               BM=cfg.BM, BN=cfg.BN, BK=cfg.BK, GROUP_M=cfg.GROUP_M, DESC=desc,
                               num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return c


def with_config(**changes) -> Config:
    """GPU_CONFIG with some fields changed (tools/tune_matmul.py, the lesson's experiments)."""
    return replace(GPU_CONFIG, **changes)


def _main(argv=None) -> None:  # pragma: no cover - needs a GPU
    import argparse

    from .. import timing

    parser = argparse.ArgumentParser(description="check the matmul kernel against torch.mm and time both")
    parser.add_argument("--shape", default="8192,8192,8192", help="M,N,K")
    args = parser.parse_args(argv)
    assert runtime.HAS_CUDA, "this check needs a CUDA GPU"
    M, N, K = map(int, args.shape.split(","))
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=gen)
    want = torch.mm(a.float(), b.float())
    err = ((matmul(a, b).float() - want).abs().max() / want.abs().max()).item()
    print(f"{torch.cuda.get_device_name()}, Triton {triton.__version__}: M={M} N={N} K={K} bf16, "
          f"max error / max |C| = {err:.2e}")
    comparison = timing.compare({"triton": matmul, "torch.mm": torch.mm}, args=(a, b), device="cuda", budget_s=2.0)
    print(comparison.table())
    for name, t in comparison.timings.items():
        print(f"{name:>9}: {2 * M * N * K / t.median / 1e12:6.0f} TFLOP/s")


if __name__ == "__main__":  # pragma: no cover
    _main()
