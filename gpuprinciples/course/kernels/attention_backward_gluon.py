"""FlashAttention backward in Gluon for Hopper (sm_90): `attention_backward`'s two passes, the GPU's parts named.

Lesson 12's "how far it goes": the exercise's bar is the Triton kernel; this one is timed beside it by
`gpuprinciples bench` on a Hopper GPU. `tools/check_gluon_backward.py` checks it against float64 autograd and times
it (docs/flash-backward-h200.md, run 6: on the H200, 0.81× cuDNN's backward not causal and causal, 1.57× and
1.52× SDPA FlashAttention's, where the Triton backward reaches 0.73× and 0.72× cuDNN's). It does
not run under the interpreter (Gluon has none): a CPU compiles it for sm_90 (`compile_for_hopper`, the tests).

Why Gluon. The package's Triton backward (`attention_backward.py`) reaches about 400 TFLOP/s on an H200, 0.73-0.77×
cuDNN's; every tile, stage and `warp_specialize=True` plan Triton 3.6 offers was timed
(docs/flash-backward-h200.md, runs 2 and 3). What Triton decides for itself there, Gluon leaves to the kernel:
the layouts of registers and shared memory, Hopper's warpgroup MMA (`wgmma`, asynchronous: issued, then waited
for), TMA copies that signal an mbarrier when their bytes have landed, and which warps do what
(`gl.warp_specialize`, with a register count per partition). FlashAttention-3's backward is built from the same
parts.

The algebra is `attention_backward`'s (FlashAttention-2, Algorithm 2 in two passes), with δ from its
`delta_kernel`:

* dK/dV pass, one CTA per key tile of 128 keys, in the transposed frame (rows = keys, so that dK and dV accumulate
  in registers as wgmma's M side): Sᵀ = K Qᵀ, Pᵀ = exp2(Sᵀ·scale − LSE·log2 e), dPᵀ = V dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ − δ),
  dV += Pᵀ dO, dK += dSᵀ Q. Pᵀ and dSᵀ never leave registers: wgmma takes its A operand from registers.
* dQ pass, one CTA per query tile of 128 queries: S = Q Kᵀ, P, dP = dO Vᵀ, dS, dQ += dS K.

Each pass comes twice:

* plain: every warp computes (two warpgroups, 64 rows each) and also issues the TMA loads, STAGES − 1 tiles ahead
  of the one being used, into a ring of shared-memory slots, each with a "ready" mbarrier;
* warp-specialised (`ws=True`): one extra warp only issues TMA loads, on few registers; the two computing
  warpgroups hand each slot back through an "empty" mbarrier once the products reading it are done, and
  get the registers the loader gives up (FA3's producer/consumer split, without its ping-pong).

What the compiler still decides: Triton 3.6 puts barriers of all the computing warps (`bar.sync`) around shared
memory and mbarrier operations it cannot prove independent. Per tile, the plain dK/dV loop gets five (three around
the TMA issue, the ring wait, the dV product); the warp-specialised loops two (the ring wait, the slot's hand-back,
which therefore comes last in a tile: an arrive in the middle cost a third). The two warpgroups thus run in step:
FA3's alternation of one warpgroup's softmax with the other's products (ping-pong) is not here.

Why two passes and not FA3's one (dQ added by each key tile's CTA with TMA reduces from a warpgroup of its own):
Triton 3.6's Gluon has no TMA reduce (3.9 has `tma.async_atomic_add`), and the package's own one-pass plans were
slower than two passes (docs/flash-backward-h200.md, run 2).

Limits (`unsupported` says which one an input meets): contiguous [B, H, N, D] inputs, N a multiple of 128 (no
tails: a tile never straddles two heads of the [B·H·N, D] views the descriptors read), D 64 or 128, bf16 or fp16.
"""

from __future__ import annotations

import math
import re

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ...toolchain.compat import gluon_tma_copies
from . import attention_backward as ab

LOG2E = 1.4426950408889634
_tma_load, _tma_store = gluon_tma_copies()

# (BLOCK_M queries, BLOCK_N keys, STAGES) per pass. dK/dV: 128 keys stay (K, V and two 128×D float32
# accumulators), 64 queries stream past; dQ the other way round. Shared memory at D = 128, bf16: K, V 64 KiB plus
# 32 KiB per stage (a Q and a dO tile) for dK/dV; the same for dQ with the roles swapped.
DKDV_TILES = (64, 128, 3)
DQ_TILES = (128, 64, 3)
NUM_WARPS = 8  # two warpgroups of 64 rows: wgmma's smallest M is 64 per warpgroup
LOADER_REGS = 24  # the fewest registers setmaxnreg allows: the loader only holds coordinates and phases
COMPUTE_MAXNREG = 168  # launch limit with 8 + 4 warps (12 × 32 × 168 ≤ 65,536); the compute partition grows past it
# Which passes run warp-specialised, by causal: (dK/dV, dQ). At B4 H16 N4096 D128 bf16 (docs/flash-backward-h200.md,
# run 4), on the H200: both specialised 2.998 ms not causal (plain 3.047); causal, both plain 1.818 ms (specialised
# 1.914, a specialised dQ pass alone 1.813). On an H100 the same order, by up to 5 %.
WARP_SPECIALISED = {False: (True, True), True: (False, False)}
# Causal, a CTA's work falls with its rank (the dK/dV pass's first key tile is seen by every query tile, its last by
# one), and a 2-D grid launches the CTAs head by head: the last heads' longest CTAs run nearly alone at the end of
# a pass. With G ≥ 1 the causal passes run on one program axis, the longest CTAs of G heads first, then the next
# longest (`_causal_tile`); 1 is the 2-D grid's own order, so G = 1 against G = 8 times the order alone; 0 keeps the
# 2-D grid. Causal at B4 H16 N4096 D128 on an H100 (docs, run 5): G = 8 1.829 ms, G = 1 1.835, the 2-D grid 1.855;
# right in all of tools/check_gluon_backward.py's cases (1 to 6 heads: the last group partial).
CAUSAL_GROUP_HEADS = 8


# -------------------------------------------------------------------------------------------------
# Layouts
# -------------------------------------------------------------------------------------------------


@gluon.constexpr_function
def _mma_layout(num_warps, n):
    """The register layout of a wgmma accumulator with `n` columns: warps stacked along M (16 rows a warp,
    so 64 rows a warpgroup), one instruction as wide as the tile (n ≤ 256)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, n, 16])


# -------------------------------------------------------------------------------------------------
# Loads (both the plain kernels and the loader partition use them)
# -------------------------------------------------------------------------------------------------


@gluon.jit
def _load_pair(a_desc, b_desc, a_ring, b_ring, bars, slot, row, pred):
    """Two tiles of the same rows (Q and dO, or K and V) into slot `slot`; its barrier completes when both
    have landed. `pred` False: nothing (past the last tile)."""
    bar = bars.index(slot)
    mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=pred)
    _tma_load(a_desc, [row, 0], bar, a_ring.index(slot), pred=pred)
    _tma_load(b_desc, [row, 0], bar, b_ring.index(slot), pred=pred)


@gluon.jit
def _load_fixed(a_desc, b_desc, a_smem, b_smem, bar, row):
    """The tiles a CTA keeps for its whole loop (K, V for dK/dV; Q, dO for dQ)."""
    mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    _tma_load(a_desc, [row, 0], bar, a_smem)
    _tma_load(b_desc, [row, 0], bar, b_smem)


@gluon.jit
def _loader(a_desc, b_desc, c_desc, d_desc, a_smem, b_smem, c_ring, d_ring, fixed_bar, ready, empty,
            fixed_row, row0, lo, n_tiles, BLOCK: gl.constexpr):
    """The warp-specialised kernels' loader (one warp): the fixed tiles once, then the streamed pairs, each
    slot refilled once the compute partition has handed it back. An mbarrier starts in phase 0 with phase
    "−1" complete, so waiting on parity 1 lets the first pass over the ring through."""
    _load_fixed(a_desc, b_desc, a_smem, b_smem, fixed_bar, fixed_row)
    STAGES: gl.constexpr = c_ring.shape[0]
    for i in range(n_tiles):
        slot = i % STAGES
        mbarrier.wait(empty.index(slot), ((i // STAGES) & 1) ^ 1)
        _load_pair(c_desc, d_desc, c_ring, d_ring, ready, slot, row0 + lo + i * BLOCK, True)


@gluon.jit
def _store_tile(desc, smem, value, row):
    """A register tile to global memory through shared memory (TMA stores whole tiles, swizzled)."""
    smem.store(value.to(desc.dtype))
    fence_async_shared()  # the generic proxy's writes before the async proxy (TMA) reads them
    _tma_store(desc, [row, 0], smem)


# -------------------------------------------------------------------------------------------------
# dK, dV: one CTA per key tile
# -------------------------------------------------------------------------------------------------


@gluon.jit
def _dkdv_tiles(dk, dv, k_smem, v_smem, q_ring, do_ring, ready, empty, Lse, Delta, row0, start_n, lo, i_lo, i_hi,
                n_tiles, qk_scale, MASK: gl.constexpr, ISSUE_LOADS: gl.constexpr, q_desc, do_desc,
                num_warps: gl.constexpr):
    """Query tiles i_lo ≤ i < i_hi (rows lo + i·BLOCK_M) past one key tile: dK/scale and dV accumulated (float32,
    as async wgmma results). The ring's slot and phase follow i, so that a causal pass runs the diagonal's tiles
    (MASK) and the rest as two loops over one ring.

    Per tile, each warpgroup's order of issue: Sᵀ and dPᵀ (both async), then wait for the previous tile's dV
    and dK products (their slot is then free: refill it, or hand it to the loader), for Sᵀ (Pᵀ from it, and
    dV's product issued), for dPᵀ (dSᵀ, and dK's product issued): the exp2 runs while dPᵀ's product does, the
    dSᵀ arithmetic while dV's does. ISSUE_LOADS: the plain kernel, which refills slots itself; else the loader
    partition does, and the slots go back through `empty`."""
    STAGES: gl.constexpr = q_ring.shape[0]
    BLOCK_M: gl.constexpr = q_ring.shape[1]
    D: gl.constexpr = q_ring.shape[2]
    BLOCK_N: gl.constexpr = k_smem.shape[0]
    dtype: gl.constexpr = q_ring.dtype
    s_layout: gl.constexpr = _mma_layout(num_warps, BLOCK_M)  # Sᵀ, dPᵀ: BLOCK_N × BLOCK_M
    acc_layout: gl.constexpr = _mma_layout(num_warps, D)  # dK, dV: BLOCK_N × D
    # Pᵀ and dSᵀ as the A operand of dV's and dK's wgmma, straight from the registers Sᵀ left them in
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    cols = gl.arange(0, BLOCK_M, gl.SliceLayout(0, s_layout))
    zero_s = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout)
    for i in range(i_lo, i_hi):
        slot = i % STAGES
        start_m = lo + i * BLOCK_M
        q_s = q_ring.index(slot)
        do_s = do_ring.index(slot)
        mbarrier.wait(ready.index(slot), (i // STAGES) & 1)
        s_t = warpgroup_mma(k_smem, q_s.permute((1, 0)), zero_s, use_acc=False, is_async=True)
        dp_t = warpgroup_mma(v_smem, do_s.permute((1, 0)), zero_s, use_acc=False, is_async=True)
        lse2 = gl.load(Lse + row0 + start_m + cols) * 1.4426950408889634  # log2 units, as exp2 wants
        delta = gl.load(Delta + row0 + start_m + cols)
        # wgmma groups complete in order: ≤ 2 outstanding means the previous tile's dV and dK are done
        dk, dv = warpgroup_mma_wait(2, deps=(dk, dv))
        if ISSUE_LOADS:
            ahead = i + STAGES - 1  # into the slot the previous tile has just given up
            _load_pair(q_desc, do_desc, q_ring, do_ring, ready, ahead % STAGES, row0 + lo + ahead * BLOCK_M,
                       ahead < n_tiles)
        s_t = warpgroup_mma_wait(1, deps=(s_t,))
        p_t = gl.exp2(s_t * qk_scale - lse2[None, :])
        if MASK:  # the diagonal: key j is seen by query i only if j ≤ i (here: row ≤ column + start_m − start_n)
            rows = gl.arange(0, BLOCK_N, gl.SliceLayout(1, s_layout))
            p_t = gl.where(cols[None, :] + (start_m - start_n) >= rows[:, None], p_t, 0.0)
        dv = warpgroup_mma(gl.convert_layout(p_t.to(dtype), op_layout, assert_trivial=True), do_s, dv, is_async=True)
        dp_t = warpgroup_mma_wait(1, deps=(dp_t,))
        ds_t = p_t * (dp_t - delta[None, :])
        dk = warpgroup_mma(gl.convert_layout(ds_t.to(dtype), op_layout, assert_trivial=True), q_s, dk, is_async=True)
        # the previous tile's slot back to the loader, last: Triton 3.6 puts a barrier of the computing warps
        # before an arrive (needed: one thread arrives for all) and another before the wgmma that follows it
        if not ISSUE_LOADS:
            mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > 0)
    return dk, dv


@gluon.jit
def _dkdv_loop(k_smem, v_smem, q_ring, do_ring, ready, empty, Lse, Delta, row0, start_n, lo, n_tiles,
               qk_scale, CAUSAL: gl.constexpr, ISSUE_LOADS: gl.constexpr, q_desc, do_desc,
               num_warps: gl.constexpr):
    """Every query tile past one key tile; returns the float32 (dK/scale, dV). Causal: the first
    BLOCK_N / BLOCK_M tiles are the diagonal's, masked; a mask only there keeps the other loop's registers free."""
    BLOCK_M: gl.constexpr = q_ring.shape[1]
    D: gl.constexpr = q_ring.shape[2]
    BLOCK_N: gl.constexpr = k_smem.shape[0]
    acc_layout: gl.constexpr = _mma_layout(num_warps, D)
    dk = warpgroup_mma_init(gl.zeros([BLOCK_N, D], gl.float32, acc_layout))
    dv = warpgroup_mma_init(gl.zeros([BLOCK_N, D], gl.float32, acc_layout))
    diagonal = 0
    if CAUSAL:
        diagonal = BLOCK_N // BLOCK_M
        dk, dv = _dkdv_tiles(dk, dv, k_smem, v_smem, q_ring, do_ring, ready, empty, Lse, Delta, row0, start_n, lo,
                             0, diagonal, n_tiles, qk_scale, True, ISSUE_LOADS, q_desc, do_desc, num_warps)
    dk, dv = _dkdv_tiles(dk, dv, k_smem, v_smem, q_ring, do_ring, ready, empty, Lse, Delta, row0, start_n, lo,
                         diagonal, n_tiles, n_tiles, qk_scale, False, ISSUE_LOADS, q_desc, do_desc, num_warps)
    dk, dv = warpgroup_mma_wait(0, deps=(dk, dv))
    return dk, dv


@gluon.jit
def _shared(fixed_desc, ring_desc, STAGES: gl.constexpr):
    """A pass's shared memory: the two tiles a CTA keeps (K, V; or Q, dO) shaped as `fixed_desc`'s, a ring of
    STAGES slots of the two it streams (Q, dO; or K, V) shaped as `ring_desc`'s, the kept pair's barrier and each
    slot's "ready" and "empty" barriers."""
    dtype: gl.constexpr = fixed_desc.dtype
    fixed: gl.constexpr = fixed_desc.block_type.shape
    ring: gl.constexpr = ring_desc.block_type.shape
    a_smem = gl.allocate_shared_memory(dtype, fixed, fixed_desc.layout)
    b_smem = gl.allocate_shared_memory(dtype, fixed, fixed_desc.layout)
    a_ring = gl.allocate_shared_memory(dtype, [STAGES, ring[0], ring[1]], ring_desc.layout)
    b_ring = gl.allocate_shared_memory(dtype, [STAGES, ring[0], ring[1]], ring_desc.layout)
    fixed_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(fixed_bar, count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    return a_smem, b_smem, a_ring, b_ring, fixed_bar, ready, empty


@gluon.jit
def _causal_tile(tiles, GROUP: gl.constexpr):
    """(rank, head) of this CTA on one program axis of `tiles` ranks × heads: the rank-0 CTAs (the longest) of
    GROUP heads first, then their rank-1 CTAs, …; then the next GROUP heads (the last group may hold fewer)."""
    pid = gl.program_id(0)
    heads = gl.num_programs(0) // tiles
    first = (pid // (tiles * GROUP)) * GROUP
    width = gl.minimum(heads - first, GROUP)
    within = pid - first * tiles
    return within // width, first + within % width


@gluon.jit
def _dkdv_setup(q_desc, k_desc, N, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                CAUSAL: gl.constexpr, ORDER_GROUP: gl.constexpr):
    """This CTA's key tile, its first query row and how many query tiles see it (causal: from the diagonal on),
    and its shared memory: K, V, the ring of Q and dO slots, and the barriers."""
    if ORDER_GROUP > 0:  # one program axis, longest first across ORDER_GROUP heads (CAUSAL_GROUP_HEADS)
        rank, head = _causal_tile(N // BLOCK_N, ORDER_GROUP)
        start_n = rank * BLOCK_N  # the first key tile is the longest
        row0 = head * N
    else:
        start_n = gl.program_id(0) * BLOCK_N
        row0 = gl.program_id(1) * N  # the head's first row in the [B·H·N, D] views
    if CAUSAL:
        lo = start_n
    else:
        lo = 0
    n_tiles = (N - lo) // BLOCK_M
    k_smem, v_smem, q_ring, do_ring, kv_bar, ready, empty = _shared(k_desc, q_desc, STAGES)
    return start_n, row0, lo, n_tiles, k_smem, v_smem, q_ring, do_ring, kv_bar, ready, empty


@gluon.jit
def dkdv_kernel(q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, Lse, Delta, N, qk_scale, sm_scale,
                CAUSAL: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr, ORDER_GROUP: gl.constexpr = 0):
    """Plain: every warp computes, and the same warps refill the ring STAGES − 1 tiles ahead."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    start_n, row0, lo, n_tiles, k_smem, v_smem, q_ring, do_ring, kv_bar, ready, empty = _dkdv_setup(
        q_desc, k_desc, N, BLOCK_M, BLOCK_N, STAGES, CAUSAL, ORDER_GROUP)
    _load_fixed(k_desc, v_desc, k_smem, v_smem, kv_bar, row0 + start_n)
    for j in gl.static_range(STAGES - 1):
        _load_pair(q_desc, do_desc, q_ring, do_ring, ready, j, row0 + lo + j * BLOCK_M, j < n_tiles)
    mbarrier.wait(kv_bar, 0)
    dk, dv = _dkdv_loop(k_smem, v_smem, q_ring, do_ring, ready, empty, Lse, Delta, row0, start_n, lo, n_tiles,
                        qk_scale, CAUSAL, True, q_desc, do_desc, num_warps)
    # K and V are no longer read: their shared memory stages the results for the TMA stores
    _store_tile(dk_desc, k_smem, dk * sm_scale, row0 + start_n)
    _store_tile(dv_desc, v_smem, dv, row0 + start_n)
    tma.store_wait(0)


@gluon.jit
def _dkdv_compute(k_smem, v_smem, q_ring, do_ring, kv_bar, ready, empty, Lse, Delta, row0, start_n, lo, n_tiles,
                  qk_scale, CAUSAL: gl.constexpr, q_desc, do_desc, num_warps: gl.constexpr):
    """The warp-specialised kernel's default partition: the loop, slots handed back to the loader."""
    mbarrier.wait(kv_bar, 0)
    return _dkdv_loop(k_smem, v_smem, q_ring, do_ring, ready, empty, Lse, Delta, row0, start_n, lo, n_tiles,
                      qk_scale, CAUSAL, False, q_desc, do_desc, num_warps)


@gluon.jit
def dkdv_ws_kernel(q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, Lse, Delta, N, qk_scale, sm_scale,
                   CAUSAL: gl.constexpr, STAGES: gl.constexpr, LOADER_REGS: gl.constexpr,
                   num_warps: gl.constexpr, ORDER_GROUP: gl.constexpr = 0):
    """Warp-specialised: a one-warp loader partition, the computing warps the default partition."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    start_n, row0, lo, n_tiles, k_smem, v_smem, q_ring, do_ring, kv_bar, ready, empty = _dkdv_setup(
        q_desc, k_desc, N, BLOCK_M, BLOCK_N, STAGES, CAUSAL, ORDER_GROUP)
    dk, dv = gl.warp_specialize([
        (_dkdv_compute, (k_smem, v_smem, q_ring, do_ring, kv_bar, ready, empty, Lse, Delta, row0, start_n, lo,
                         n_tiles, qk_scale, CAUSAL, q_desc, do_desc, num_warps)),
        (_loader, (k_desc, v_desc, q_desc, do_desc, k_smem, v_smem, q_ring, do_ring, kv_bar, ready, empty,
                   row0 + start_n, row0, lo, n_tiles, BLOCK_M)),
    ], [1], [LOADER_REGS])
    _store_tile(dk_desc, k_smem, dk * sm_scale, row0 + start_n)
    _store_tile(dv_desc, v_smem, dv, row0 + start_n)
    tma.store_wait(0)


# -------------------------------------------------------------------------------------------------
# dQ: one CTA per query tile
# -------------------------------------------------------------------------------------------------


@gluon.jit
def _dq_tiles(dq, q_smem, do_smem, k_ring, v_ring, ready, empty, lse2, delta, start_m, i_lo, i_hi, n_tiles,
              qk_scale, MASK: gl.constexpr, ISSUE_LOADS: gl.constexpr, k_desc, v_desc, row0,
              num_warps: gl.constexpr):
    """Key tiles i_lo ≤ i < i_hi past one query tile: dQ/scale accumulated. The order of issue is the dK/dV
    loop's, with one accumulator: S and dP issued, the previous dQ product waited for (its slot refilled or
    handed back), S waited for (P), dP waited for (dS), dQ's product issued."""
    STAGES: gl.constexpr = k_ring.shape[0]
    BLOCK_N: gl.constexpr = k_ring.shape[1]
    D: gl.constexpr = k_ring.shape[2]
    BLOCK_M: gl.constexpr = q_smem.shape[0]
    dtype: gl.constexpr = k_ring.dtype
    s_layout: gl.constexpr = _mma_layout(num_warps, BLOCK_N)
    acc_layout: gl.constexpr = _mma_layout(num_warps, D)
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    for i in range(i_lo, i_hi):
        slot = i % STAGES
        k_s = k_ring.index(slot)
        v_s = v_ring.index(slot)
        mbarrier.wait(ready.index(slot), (i // STAGES) & 1)
        s = warpgroup_mma(q_smem, k_s.permute((1, 0)), zero_s, use_acc=False, is_async=True)
        dp = warpgroup_mma(do_smem, v_s.permute((1, 0)), zero_s, use_acc=False, is_async=True)
        dq = warpgroup_mma_wait(2, deps=(dq,))
        if ISSUE_LOADS:
            ahead = i + STAGES - 1
            _load_pair(k_desc, v_desc, k_ring, v_ring, ready, ahead % STAGES, row0 + ahead * BLOCK_N,
                       ahead < n_tiles)
        s = warpgroup_mma_wait(1, deps=(s,))
        p = gl.exp2(s * qk_scale - lse2[:, None])
        if MASK:  # the diagonal: query row r sees key column c only if c + start_n ≤ r + start_m
            rows = gl.arange(0, BLOCK_M, gl.SliceLayout(1, s_layout))
            cols = gl.arange(0, BLOCK_N, gl.SliceLayout(0, s_layout))
            p = gl.where(rows[:, None] + (start_m - i * BLOCK_N) >= cols[None, :], p, 0.0)
        dp = warpgroup_mma_wait(0, deps=(dp,))
        ds = p * (dp - delta[:, None])
        dq = warpgroup_mma(gl.convert_layout(ds.to(dtype), op_layout, assert_trivial=True), k_s, dq, is_async=True)
        if not ISSUE_LOADS:  # last, as in the dK/dV loop
            mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > 0)
    return dq


@gluon.jit
def _dq_loop(q_smem, do_smem, k_ring, v_ring, ready, empty, lse2, delta, start_m, n_tiles, qk_scale,
             CAUSAL: gl.constexpr, ISSUE_LOADS: gl.constexpr, k_desc, v_desc, row0, num_warps: gl.constexpr):
    """Every key tile one query tile sees; returns the float32 dQ/scale. Causal: the last BLOCK_M / BLOCK_N
    tiles are the diagonal's, masked."""
    BLOCK_N: gl.constexpr = k_ring.shape[1]
    D: gl.constexpr = k_ring.shape[2]
    BLOCK_M: gl.constexpr = q_smem.shape[0]
    acc_layout: gl.constexpr = _mma_layout(num_warps, D)
    dq = warpgroup_mma_init(gl.zeros([BLOCK_M, D], gl.float32, acc_layout))
    if CAUSAL:
        full = n_tiles - BLOCK_M // BLOCK_N
    else:
        full = n_tiles
    dq = _dq_tiles(dq, q_smem, do_smem, k_ring, v_ring, ready, empty, lse2, delta, start_m, 0, full, n_tiles,
                   qk_scale, False, ISSUE_LOADS, k_desc, v_desc, row0, num_warps)
    if CAUSAL:
        dq = _dq_tiles(dq, q_smem, do_smem, k_ring, v_ring, ready, empty, lse2, delta, start_m, full, n_tiles,
                       n_tiles, qk_scale, True, ISSUE_LOADS, k_desc, v_desc, row0, num_warps)
    dq = warpgroup_mma_wait(0, deps=(dq,))
    return dq


@gluon.jit
def _dq_setup(q_desc, k_desc, Lse, Delta, N, CAUSAL: gl.constexpr, STAGES: gl.constexpr, ORDER_GROUP: gl.constexpr,
              num_warps: gl.constexpr):
    """This CTA's query tile (causal: the longest rows first), how many key tiles it sees, its rows' LSE (log2
    units) and δ, and its shared memory."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    if ORDER_GROUP > 0:  # one program axis, longest first across ORDER_GROUP heads (CAUSAL_GROUP_HEADS)
        rank, head = _causal_tile(N // BLOCK_M, ORDER_GROUP)
        start_m = (N // BLOCK_M - 1 - rank) * BLOCK_M  # the last query tile is the longest
        row0 = head * N
    else:
        pid_m = gl.program_id(0)
        if CAUSAL:
            pid_m = gl.num_programs(0) - 1 - pid_m
        start_m = pid_m * BLOCK_M
        row0 = gl.program_id(1) * N
    if CAUSAL:
        n_tiles = (start_m + BLOCK_M) // BLOCK_N
    else:
        n_tiles = N // BLOCK_N
    rows: gl.constexpr = gl.SliceLayout(1, _mma_layout(num_warps, BLOCK_N))
    offs_m = start_m + gl.arange(0, BLOCK_M, rows)
    lse2 = gl.load(Lse + row0 + offs_m) * 1.4426950408889634
    delta = gl.load(Delta + row0 + offs_m)
    q_smem, do_smem, k_ring, v_ring, qdo_bar, ready, empty = _shared(q_desc, k_desc, STAGES)
    return start_m, row0, n_tiles, lse2, delta, q_smem, do_smem, k_ring, v_ring, qdo_bar, ready, empty


@gluon.jit
def dq_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, Lse, Delta, N, qk_scale, sm_scale,
              CAUSAL: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr, ORDER_GROUP: gl.constexpr = 0):
    """Plain, as `dkdv_kernel`."""
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    start_m, row0, n_tiles, lse2, delta, q_smem, do_smem, k_ring, v_ring, qdo_bar, ready, empty = _dq_setup(
        q_desc, k_desc, Lse, Delta, N, CAUSAL, STAGES, ORDER_GROUP, num_warps)
    _load_fixed(q_desc, do_desc, q_smem, do_smem, qdo_bar, row0 + start_m)
    for j in gl.static_range(STAGES - 1):
        _load_pair(k_desc, v_desc, k_ring, v_ring, ready, j, row0 + j * BLOCK_N, j < n_tiles)
    mbarrier.wait(qdo_bar, 0)
    dq = _dq_loop(q_smem, do_smem, k_ring, v_ring, ready, empty, lse2, delta, start_m, n_tiles, qk_scale, CAUSAL,
                  True, k_desc, v_desc, row0, num_warps)
    _store_tile(dq_desc, q_smem, dq * sm_scale, row0 + start_m)
    tma.store_wait(0)


@gluon.jit
def _dq_compute(q_smem, do_smem, k_ring, v_ring, qdo_bar, ready, empty, lse2, delta, start_m, n_tiles, qk_scale,
                CAUSAL: gl.constexpr, k_desc, v_desc, row0, num_warps: gl.constexpr):
    """The warp-specialised dQ kernel's default partition."""
    mbarrier.wait(qdo_bar, 0)
    dq = _dq_loop(q_smem, do_smem, k_ring, v_ring, ready, empty, lse2, delta, start_m, n_tiles, qk_scale, CAUSAL,
                  False, k_desc, v_desc, row0, num_warps)
    return (dq,)  # a partition's results are a tuple


@gluon.jit
def dq_ws_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, Lse, Delta, N, qk_scale, sm_scale,
                 CAUSAL: gl.constexpr, STAGES: gl.constexpr, LOADER_REGS: gl.constexpr, num_warps: gl.constexpr,
                 ORDER_GROUP: gl.constexpr = 0):
    """Warp-specialised, as `dkdv_ws_kernel`."""
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    start_m, row0, n_tiles, lse2, delta, q_smem, do_smem, k_ring, v_ring, qdo_bar, ready, empty = _dq_setup(
        q_desc, k_desc, Lse, Delta, N, CAUSAL, STAGES, ORDER_GROUP, num_warps)
    dq, = gl.warp_specialize([
        (_dq_compute, (q_smem, do_smem, k_ring, v_ring, qdo_bar, ready, empty, lse2, delta, start_m, n_tiles,
                       qk_scale, CAUSAL, k_desc, v_desc, row0, num_warps)),
        (_loader, (q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_ring, v_ring, qdo_bar, ready, empty,
                   row0 + start_m, row0, 0, n_tiles, BLOCK_N)),
    ], [1], [LOADER_REGS])
    _store_tile(dq_desc, q_smem, dq * sm_scale, row0 + start_m)
    tma.store_wait(0)


# -------------------------------------------------------------------------------------------------
# Host side
# -------------------------------------------------------------------------------------------------

_GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


def _descriptor(t2d: torch.Tensor, rows: int):
    """A TMA descriptor over a [rows_total, D] view, one tile = `rows` rows, swizzled as wgmma reads it."""
    D = t2d.shape[1]
    layout = gl.NVMMASharedLayout.get_default_for([rows, D], _GL_DTYPES[t2d.dtype])
    return TensorDescriptor.from_tensor(t2d, [rows, D], layout)


def _passes_ws(ws, causal: bool) -> tuple[bool, bool]:
    """(dK/dV pass warp-specialised, dQ pass warp-specialised) from `ws`: None (this GPU's measured best,
    `WARP_SPECIALISED`), one bool for both passes, or a pair."""
    if ws is None:
        ws = WARP_SPECIALISED[bool(causal)]
    return (bool(ws), bool(ws)) if isinstance(ws, bool) else (bool(ws[0]), bool(ws[1]))


def _launches(q, k, v, do, dq, dk, dv, lse, delta, causal: bool, ws, causal_group=None):
    """[(kernel, grid, args, kwargs)] of the two passes: what `attention_backward` launches, and what
    `compile_for_hopper` compiles. `ws` as `_passes_ws` reads it; `causal_group` (None: CAUSAL_GROUP_HEADS) the
    causal passes' order."""
    dkdv_ws, dq_ws = _passes_ws(ws, causal)
    group = (CAUSAL_GROUP_HEADS if causal_group is None else causal_group) if causal else 0
    B, H, N, D = q.shape

    def grid(tiles):  # one axis, ordered by `_causal_tile`, or tiles × heads
        return (tiles * B * H,) if group else (tiles, B * H)

    flat = [t.view(B * H * N, D) for t in (q, k, v, do, dq, dk, dv)]
    sm_scale = 1 / math.sqrt(D)
    scales = (N, sm_scale * LOG2E, sm_scale)
    bm, bn, stages = DKDV_TILES
    descs = [_descriptor(t, bm if i in (0, 3) else bn) for i, t in enumerate(flat[:4])]  # q, dO by bm; k, v by bn
    out = [_descriptor(t, bn) for t in flat[5:]]
    kw = dict(CAUSAL=bool(causal), STAGES=stages, num_warps=NUM_WARPS, ORDER_GROUP=group)
    if dkdv_ws:
        kw.update(LOADER_REGS=LOADER_REGS, maxnreg=COMPUTE_MAXNREG)
    dkdv = (dkdv_ws_kernel if dkdv_ws else dkdv_kernel, grid(N // bn), (*descs, *out, lse, delta, *scales), kw)
    qm, qn, qstages = DQ_TILES
    qdescs = [_descriptor(t, qm if i in (0, 3) else qn) for i, t in enumerate(flat[:4])]
    kw = dict(CAUSAL=bool(causal), STAGES=qstages, num_warps=NUM_WARPS, ORDER_GROUP=group)
    if dq_ws:
        kw.update(LOADER_REGS=LOADER_REGS, maxnreg=COMPUTE_MAXNREG)
    dqp = (dq_ws_kernel if dq_ws else dq_kernel, grid(N // qm), (*qdescs, _descriptor(flat[4], qm), lse, delta,
                                                                 *scales), kw)
    return [dkdv, dqp]


def unsupported(q, k, v, o, lse, do) -> str | None:
    """Why these kernels cannot take these inputs here (a sentence), or None where they can."""
    if not (q.is_cuda and torch.cuda.get_device_capability(q.device)[0] == 9):
        return "the Gluon backward runs on a Hopper GPU (sm_90: H100, H200) only: it is written in wgmma and TMA"
    B, H, N, D = q.shape
    for name, t in (("q", q), ("k", k), ("v", v), ("o", o), ("do", do)):
        if t.shape != q.shape or not t.is_contiguous() or t.device != q.device:
            return f"{name} must be a contiguous [B, H, N, D] tensor like q, on q's device"
    if q.dtype not in _GL_DTYPES or not k.dtype == v.dtype == do.dtype == q.dtype:
        return "q, k, v, dO must be all bf16 or all fp16"
    if D not in (64, 128):
        return f"the head dim must be 64 or 128, not {D}"
    if N % 128:
        return f"N must be a multiple of 128 (the kernels have no tails), not {N}"
    if lse.shape != (B, H, N) or lse.dtype != torch.float32 or not lse.is_contiguous():
        return "lse must be a contiguous float32 [B, H, N] tensor"
    return None


def attention_backward(q, k, v, o, lse, do, causal: bool = False, ws=None, compiled: list | None = None,
                       causal_group: int | None = None):
    """(dQ, dK, dV) as `attention_backward.attention_backward` returns them (lse: natural-log row LSE, float32),
    for the inputs `unsupported` accepts (ValueError with its sentence otherwise). `ws`: which passes run
    warp-specialised (`_passes_ws`; None: `WARP_SPECIALISED`). `compiled`: a list to append the two launched
    kernels to (their `n_regs`, `n_spills`, `metadata.shared`). `causal_group`: the causal CTAs' order
    (None: `CAUSAL_GROUP_HEADS`)."""
    why = unsupported(q, k, v, o, lse, do)
    if why:
        raise ValueError(why)
    B, H, N, D = q.shape
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))
    delta = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    ab.delta_kernel[(triton.cdiv(N, 64), B * H)](o, do, delta, None, H, N, *o.stride()[:3], *do.stride()[:3], D=D,
                                                 BLOCK_M=64)
    for kernel, grid, args, kwargs in _launches(q, k, v, do, dq, dk, dv, lse, delta, causal, ws, causal_group):
        handle = kernel[grid](*args, **kwargs)
        if compiled is not None:
            compiled.append(handle)
    return dq, dk, dv


# -------------------------------------------------------------------------------------------------
# Compiling for sm_90 without a GPU
# -------------------------------------------------------------------------------------------------


def compile_for_hopper(D: int = 128, causal: bool = False, ws=None, dtype=torch.bfloat16,
                       causal_group: int | None = None) -> list[dict]:
    """Both passes compiled for an H100/H200 (sm_90) on any machine, as a launch with these arguments would
    compile them (`gpucompile.compile_launch`): one dict per kernel, `CompiledInfo.as_dict()` (ok, error,
    registers, spills, shared_bytes, wgmma, ...) and `setmaxnreg`, the register counts the warp-specialised
    kernels' partitions switch to. `registers` is the launch's count: the loader gives some up, the compute
    partition takes them."""
    from ...toolchain import gpucompile

    B, H, N = 1, 1, 256
    q, k, v, do, dq, dk, dv = (torch.empty((B, H, N, D), dtype=dtype) for _ in range(7))
    lse, delta = (torch.empty((B, H, N), dtype=torch.float32) for _ in range(2))
    rows = []
    for kernel, _grid, args, kwargs in _launches(q, k, v, do, dq, dk, dv, lse, delta, causal, ws, causal_group):
        info = gpucompile.compile_launch(kernel, args, kwargs)
        rows.append({**info.as_dict(), "D": D, "causal": causal, "setmaxnreg": sorted(
            {f"{m.group(1)} {m.group(2)}" for m in re.finditer(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)",
                                                               info.ptx)})})
    return rows
