"""C = A @ B in Triton: output tiles, a grouped tile order, tensor descriptors, fp32 accumulation.

One program computes one BM×BN tile of C (or, persistent, several: tile, tile + programs, ...). It walks K
in steps of BK; at each step it loads a BM×BK tile of A and a BK×BN tile of B and adds their product to an
fp32 accumulator that stays in registers; then it stores the tile once, in C's dtype. So a program reads
(BM + BN)·K elements to do 2·BM·BN·K FLOPs: the larger the tile, the more each loaded byte is reused.

* Tiles are visited in *grouped* order: GROUP_M rows of tiles at a time, column by column. Tiles that run
  at the same time then share rows of A and columns of B, which the L2 cache serves to all of them.
* Loads go through tensor descriptors (`tl.make_tensor_descriptor`): on Hopper, TMA copies whole tiles to
  shared memory; rows and columns past the edges read as zeros and are never written, so M, N and K need not
  be multiples of the tile. TMA needs 16-byte aligned rows (K and N multiples of 8 in bf16); an operand whose
  rows are not takes the pointer path (`tl.load`), as do the operands left out of `Config.desc`.
* Pointer loads wrap rows past M and columns past N round (`% M`, `% N`: computed, never stored) and mask K
  only on the last, partial step. Triton's JIT marks an integer argument "divisible by 16" when it is, and
  nothing less: with K = 8184 or a row stride of 8200 it cannot prove 16-byte rows, and every load becomes a
  2-byte load with no pipelining. Where the rows are 16-byte aligned the wrapper says so (ALIGN) and the
  kernel rewrites K, N and the strides as (x // 8) * 8, which the compiler can read.
* `tl.dot` of bf16 tiles with an fp32 accumulator compiles to Hopper's warpgroup MMA (`wgmma`).
* On a GPU the default grid is persistent: one program per SM walks the tiles (tile, tile + programs, ...).
* Where B's rows do not start on 128-byte boundaries (8191×8200×8184: rows of 16,400 bytes), the wrapper first
  copies B into rows that do (`Config.pad`): B's 64×256 tiles are two thirds of the bytes a program loads per K
  step, and a 128-byte row of a TMA copy that spans two L2 lines costs more of its bandwidth. On an H200 the
  kernel ran at 0.82 of cuBLAS with those rows, 1.01 with B's alone in 128-byte rows; copy included, 0.91
  (docs/roof-h200.md). A's rows matter less (0.93 alone), C's not at all.

    python -m gpuprinciples.course.kernels.matmul       # GPU: check against torch.mm, then time both
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from ...machine import runtime


@triton.jit
def grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(row, column) of tile number `tile` when tiles are visited GROUP_M rows at a time, column by column."""
    per_group = GROUP_M * num_pid_n
    first_row = (tile // per_group) * GROUP_M
    rows = tl.minimum(num_pid_m - first_row, GROUP_M)  # the last group may be shorter
    within = tile % per_group
    return first_row + within % rows, within // rows


@triton.jit
def _tile_of_a(a, off_m, k, rows, ks, K, stride_am, DESC: tl.constexpr, LAST: tl.constexpr):
    """The BM×BK tile of A at (off_m, k): through its descriptor, or through pointers (`rows` already wrapped
    into [0, M)), masked along K only on the LAST step."""
    if DESC:
        return a.load([off_m, k])
    else:
        ptrs = a + rows[:, None] * stride_am + (k + ks)[None, :]
        if LAST:
            return tl.load(ptrs, mask=(k + ks)[None, :] < K, other=0.0)
        else:
            return tl.load(ptrs)


@triton.jit
def _tile_of_b(b, off_n, k, cols, ks, K, stride_bk, DESC: tl.constexpr, LAST: tl.constexpr):
    """The BK×BN tile of B at (k, off_n), as `_tile_of_a` (`cols` wrapped into [0, N))."""
    if DESC:
        return b.load([k, off_n])
    else:
        ptrs = b + (k + ks)[:, None] * stride_bk + cols[None, :]
        if LAST:
            return tl.load(ptrs, mask=(k + ks)[:, None] < K, other=0.0)
        else:
            return tl.load(ptrs)


@triton.jit
def matmul_kernel(A, B, C, M, N, K, stride_am, stride_bk, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                  DESC_A: tl.constexpr, DESC_B: tl.constexpr, DESC_C: tl.constexpr,
                  ALIGN: tl.constexpr = 1, SPLIT_C: tl.constexpr = 1, FLATTEN: tl.constexpr = False,
                  WS_TILES: tl.constexpr = False, WS_K: tl.constexpr = False):
    if ALIGN > 1:
        # The wrapper vouches that K, N and the row strides are multiples of ALIGN elements (16 bytes), which
        # Triton's JIT does not notice below 16 elements. Written as (x // ALIGN) * ALIGN, the compiler sees it
        # too (tl.multiple_of cannot mark a kernel argument), and the loads become 16-byte vector copies.
        K = K // ALIGN * ALIGN
        N = N // ALIGN * ALIGN
        stride_am = stride_am // ALIGN * ALIGN
        stride_bk = stride_bk // ALIGN * ALIGN
        stride_cm = stride_cm // ALIGN * ALIGN
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    if DESC_A:
        a = tl.make_tensor_descriptor(A, shape=[M, K], strides=[stride_am, 1], block_shape=[BM, BK])
    else:
        a = A
    if DESC_B:
        b = tl.make_tensor_descriptor(B, shape=[K, N], strides=[stride_bk, 1], block_shape=[BK, BN])
    else:
        b = B
    if DESC_C:
        c_desc = tl.make_tensor_descriptor(C, shape=[M, N], strides=[stride_cm, 1], block_shape=[BM, BN // SPLIT_C])
    ks = tl.arange(0, BK)
    if DESC_A and DESC_B:
        k_full = K  # TMA reads zeros past K: no step needs a mask
    else:
        k_full = K // BK * BK  # the steps before it need no mask
    # one tile per program when the grid has one program per tile; fewer programs walk several (persistent)
    # WS_TILES / WS_K: warp-specialise the loop over tiles or over K (a producer warp issues the loads ahead)
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0), flatten=FLATTEN,
                         warp_specialize=WS_TILES):
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        rows = off_m + tl.arange(0, BM)
        cols = off_n + tl.arange(0, BN)
        # pointer loads: rows past M and columns past N wrap round (% M, % N) instead of being masked; what
        # they compute is never stored
        rows_a = (rows % M).to(tl.int64)
        cols_b = cols % N
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in tl.range(0, k_full, BK, warp_specialize=WS_K):
            acc = tl.dot(_tile_of_a(a, off_m, k, rows_a, ks, K, stride_am, DESC_A, False),
                         _tile_of_b(b, off_n, k, cols_b, ks, K, stride_bk, DESC_B, False), acc)
        if not (DESC_A and DESC_B):
            if k_full < K:  # the last, partial step, masked along K
                acc = tl.dot(_tile_of_a(a, off_m, k_full, rows_a, ks, K, stride_am, DESC_A, True),
                             _tile_of_b(b, off_n, k_full, cols_b, ks, K, stride_bk, DESC_B, True), acc)
        c = acc.to(C.dtype.element_ty)
        if DESC_C:
            if SPLIT_C == 2:  # two halves: half the shared memory to stage the store (room for a pipeline stage)
                left, right = tl.split(tl.permute(tl.reshape(c, (BM, 2, BN // 2)), (0, 2, 1)))
                c_desc.store([off_m, off_n], left)
                c_desc.store([off_m, off_n + BN // 2], right)
            else:
                c_desc.store([off_m, off_n], c)
        else:
            rows_c = rows.to(tl.int64)
            tl.store(C + rows_c[:, None] * stride_cm + cols[None, :], c,
                     mask=(rows_c[:, None] < M) & (cols[None, :] < N))


@dataclass(frozen=True)
class Config:
    """A launch of `matmul_kernel`: tile sizes, order, warps, pipelining depth, loads, persistence."""

    BM: int = 128
    BN: int = 256
    BK: int = 64
    GROUP_M: int = 8
    num_warps: int = 8
    num_stages: int = 3
    desc: str = "abc"  # the operands (a, b, c) moved by tensor descriptors (TMA) where their rows are 16-byte aligned
    programs_per_sm: int = 0  # > 0: persistent, this many programs per SM walk all the tiles
    split_c: int = 1  # 2: C stored in two halves (half the shared memory to stage it)
    flatten: bool = False  # persistent: one software pipeline across tiles (tl.range(..., flatten=True))
    align_hint: bool = True  # tell the compiler that rows are 16-byte aligned where Triton's JIT cannot see it
    warp_specialize: str = ""  # "tiles" or "k": that loop warp-specialised (its loads in a producer warp)
    pad: str = ""  # the operands (a, b) copied into rows of a multiple of 128 bytes first, where theirs are not

    def label(self) -> str:
        loads = {"abc": "desc", "": "ptr"}.get(self.desc, f"desc {','.join(self.desc)}")
        extra = (f" persistent×{self.programs_per_sm}" if self.programs_per_sm else "") + (
            f" C/{self.split_c}" if self.split_c > 1 else "") + (" flat" if self.flatten else "") + (
            "" if self.align_hint else " no-hint") + (f" ws-{self.warp_specialize}" if self.warp_specialize else "") + (
            f" pad {','.join(self.pad)}" if self.pad else "")
        return (f"{self.BM}×{self.BN}×{self.BK} g{self.GROUP_M} w{self.num_warps} s{self.num_stages} "
                f"{loads}{extra}")


# Tuned on an H200 (tools/tune_matmul.py, 2026-12-03, torch 2.11+cu130, Triton 3.6): at 8192³ the persistent
# form, one 128×256 program per SM, ran at 1.00 of cuBLAS (one program per tile: 0.97); on the ragged
# 8191×8200×8184 it was the best of the sweep, 0.82 (one per tile: 0.75).
GPU_CONFIG = Config(programs_per_sm=1)
SMALL_GPU_CONFIG = Config(BM=64, BN=64, BK=64, GROUP_M=8, num_warps=4, num_stages=3)  # small problems
# rows that are 16-byte aligned but not 128-byte aligned (the ragged shape): B copied into 128-byte rows first
# (tools/tune_roof.py, 2026-12-04: 0.82 -> 0.91 of cuBLAS; padding A too, or warp-specialised loops, were slower)
RAGGED_GPU_CONFIG = Config(programs_per_sm=1, pad="b")
# the interpreter: tiles as small as still run on Tensor Cores once compiled for sm_90 (wgmma needs 64 rows and
# a warpgroup; 32×32 tiles compile to the older mma), few enough programs for NumPy
CPU_CONFIG = Config(BM=64, BN=64, BK=32, GROUP_M=4, num_warps=4, num_stages=3)


def default_config(M: int, N: int, K: int, device_type: str, rows_128: bool = True) -> Config:
    """The launch for this problem. `rows_128`: every row of A, B and C starts on a 128-byte boundary."""
    if device_type != "cuda":
        return CPU_CONFIG
    if M * N < 1024 * 1024:  # fewer 128×256 tiles than SMs: smaller tiles keep more SMs busy
        return SMALL_GPU_CONFIG
    return GPU_CONFIG if rows_128 else RAGGED_GPU_CONFIG


def _rows_aligned(t: torch.Tensor, boundary: int = 16) -> bool:
    """TMA's rule (boundary 16): base and row stride on `boundary` bytes, unit stride along the row."""
    size = t.element_size()
    return t.stride(-1) == 1 and (t.stride(0) * size) % boundary == 0 and t.data_ptr() % boundary == 0


def alignment_hint(itemsize: int, *ints: int) -> int:
    """ALIGN for the kernel: 16 bytes in elements when every one of `ints` (K, N, the row strides) is a multiple
    of it but not all are multiples of 16 (which Triton's JIT notices on its own); otherwise 1, no hint."""
    unit = max(16 // itemsize, 1)
    if all(i % 16 == 0 for i in ints) or any(i % unit for i in ints):
        return 1
    return unit


def kernel_constexprs(cfg: Config, desc: tuple[bool, bool, bool] | None = None, align: int = 1) -> dict:
    """The constexpr arguments of `matmul_kernel` for `cfg`: `desc`, whether A, B and C go through descriptors
    (by default, those `cfg.desc` names); `align`, the ALIGN hint."""
    desc = desc if desc is not None else tuple(name in cfg.desc for name in "abc")
    return {"BM": cfg.BM, "BN": cfg.BN, "BK": cfg.BK, "GROUP_M": cfg.GROUP_M, "DESC_A": desc[0], "DESC_B": desc[1],
            "DESC_C": desc[2], "ALIGN": align, "SPLIT_C": cfg.split_c, "FLATTEN": cfg.flatten,
            "WS_TILES": cfg.warp_specialize == "tiles", "WS_K": cfg.warp_specialize == "k"}


def launch_constexprs(cfg: Config, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> dict:
    """Everything after the runtime arguments in `matmul_kernel[grid](...)` for this launch: the constexprs
    (descriptors for the operands named in `cfg.desc` whose rows allow TMA) and num_warps, num_stages."""
    desc = tuple(name in cfg.desc and _rows_aligned(t) for name, t in zip("abc", (a, b, c)))
    K, N = a.shape[1], b.shape[1]
    align = alignment_hint(a.element_size(), K, N, a.stride(0), b.stride(0), c.stride(0)) if cfg.align_hint else 1
    return {**kernel_constexprs(cfg, desc, align), "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def matmul(a: torch.Tensor, b: torch.Tensor, config: Config | None = None, out: torch.Tensor | None = None
           ) -> torch.Tensor:
    """a @ b for a [M, K] and b [K, N] (each with unit stride along its rows), in a's dtype; fp32 accumulation.
    `out`: an [M, N] tensor to write into (unit stride along its rows; any row stride)."""
    assert a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0], "expected a [M, K] and b [K, N]"
    assert a.dtype == b.dtype, "a and b must have the same dtype"
    if a.stride(1) != 1:
        a = a.contiguous()
    if b.stride(1) != 1:
        b = b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    if out is None:
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    else:
        assert out.shape == (M, N) and out.dtype == a.dtype and out.stride(1) == 1, "out: [M, N], a's dtype, rows"
        c = out
    cfg = config or default_config(M, N, K, a.device.type, all(_rows_aligned(t, 128) for t in (a, b, c)))
    if "a" in cfg.pad:
        a = padded_rows(a)
    if "b" in cfg.pad:
        b = padded_rows(b)
    tiles = triton.cdiv(M, cfg.BM) * triton.cdiv(N, cfg.BN)
    programs = tiles
    if cfg.programs_per_sm and a.is_cuda:
        programs = min(tiles, cfg.programs_per_sm * torch.cuda.get_device_properties(a.device).multi_processor_count)
    matmul_kernel[(programs,)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                               **launch_constexprs(cfg, a, b, c))
    return c


def padded_rows(t: torch.Tensor, boundary: int = 128) -> torch.Tensor:
    """t itself if its rows start on `boundary` bytes; else a copy of it in rows a multiple of `boundary` bytes apart
    (a view of a wider buffer, which CUDA's allocator starts on 512 bytes)."""
    if _rows_aligned(t, boundary):
        return t
    unit = boundary // t.element_size()
    wide = torch.empty((t.shape[0], -(-t.shape[1] // unit) * unit), device=t.device, dtype=t.dtype)
    out = wide[:, :t.shape[1]]
    out.copy_(t)
    return out


def with_config(**changes) -> Config:
    """GPU_CONFIG with some fields changed (tools/tune_matmul.py, the lesson's experiments)."""
    return replace(GPU_CONFIG, **changes)


def _main(argv=None) -> None:  # pragma: no cover - needs a GPU
    import argparse

    from ...measure import timing

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
