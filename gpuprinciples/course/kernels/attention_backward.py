"""FlashAttention backward: the gradients of softmax(Q Kᵀ/√D) V recomputed tile by tile from O and the LSE.

The forward (`attention_lse`) is lesson 08's kernel that also writes the row log-sum-exp
LSE_i = log Σ_j exp(s_ij), one float32 per query row: with it, any tile of probabilities is
P = exp(S − LSE) again, without the running max/sum. The backward is three kernels, the two-pass
way of FlashAttention-2 (Dao, 2023, Algorithm 2 split in two) and of Triton's tutorial 06:

1. `delta_kernel`: δ_i = Σ_d dO_id · O_id (= Σ_j P_ij dP_ij), one float per row, read by both passes.
2. `dkdv_kernel`: one program per key tile. K and V stay on chip; the query tiles stream past:
   dV += Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − δ), dK += dSᵀ Q. Each program owns its rows of dK and dV,
   so they are accumulated in registers and written once.
3. `dq_kernel`: one program per query tile. Q, dO stay on chip; the key tiles stream past:
   dQ += dS K. Each program owns its rows of dQ.

The second pass recomputes P and dP (two more matmuls, seven in all against five). The alternative
(`Plan(dq=None)`) is one pass with dQ added by every key tile's program into a zeroed float32 buffer,
then converted (`convert_kernel`): no recompute, but float32 read-modify-writes of dQ (N·D per key
tile), sums in no fixed order, and the buffer. FlashAttention-2's CUDA kernel adds with atomics; FA3
with TMA reduces (`cp.reduce.async.bulk`, a tensor descriptor's `atomic_add` in Triton) from a warp
group of their own. Every kernel accumulates in the LSE's dtype: float32, float64 for float64 inputs
(which `torch.autograd.gradcheck` needs).

Tails: tensor descriptors read rows past N as zeros and never write them; the LSE of a query row past
N reads as +inf, so its P is exp(−inf) = 0; key tiles past N are masked in the dQ pass.

    python tools/tune_backward.py    # GPU: each Plan checked, then timed against SDPA flash and cuDNN
"""

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ...machine import runtime

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr):
    """a @ b: tl.dot (float32 results), or for float64 ("fma") multiplies and a sum: Triton 3.6's tl.dot refuses
    float64 (3.9 compiles it for sm_90), and gradcheck needs float64 only on small tiles."""
    if PRECISION == "fma":
        out = tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    else:
        out = tl.dot(a, b, input_precision=PRECISION)
    return out


@triton.jit
def _dot_acc(a, b, acc, PRECISION: tl.constexpr):
    """acc + a @ b, as `_dot`."""
    if PRECISION == "fma":
        acc = acc + tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    else:
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    return acc


# -------------------------------------------------------------------------------------------------
# Forward, with the log-sum-exp
# -------------------------------------------------------------------------------------------------


@triton.jit
def _forward_tiles(acc, l_i, m_i, q, k_desc, v_desc, offs_m, lo, hi, N, qk_scale,
                   BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    """The online softmax over key tiles [lo, hi): lesson 08's loop."""
    for start_n in range(lo, hi, BLOCK_N):
        k = k_desc.load([start_n, 0])
        s = _dot(q, k.T, PRECISION) * qk_scale  # log2 units
        if MASK:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            keep = offs_n[None, :] < N
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            s = tl.where(keep, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([start_n, 0])
        acc = _dot_acc(p.to(v.dtype), v, acc * alpha[:, None], PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def forward_kernel(Q, K, V, Out, Lse, H, N, qk_scale,
                   sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
                   D: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    if CAUSAL:  # the longest rows first
        pid_m = tl.cdiv(N, BLOCK_M) - 1 - pid_m
    start_m = pid_m * BLOCK_M
    q_desc = tl.make_tensor_descriptor(Q + b * sqb + h * sqh, shape=[N, D], strides=[sqn, 1], block_shape=[BLOCK_M, D])
    k_desc = tl.make_tensor_descriptor(K + b * skb + h * skh, shape=[N, D], strides=[skn, 1], block_shape=[BLOCK_N, D])
    v_desc = tl.make_tensor_descriptor(V + b * svb + h * svh, shape=[N, D], strides=[svn, 1], block_shape=[BLOCK_N, D])
    o_desc = tl.make_tensor_descriptor(Out + b * sob + h * soh, shape=[N, D], strides=[son, 1],
                                       block_shape=[BLOCK_M, D])
    offs_m = start_m + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=Lse.dtype.element_ty)  # float64 for float64 inputs
    l_i = tl.zeros([BLOCK_M], dtype=Lse.dtype.element_ty)
    acc = tl.zeros([BLOCK_M, D], dtype=Lse.dtype.element_ty)
    q = q_desc.load([start_m, 0])
    if CAUSAL:
        acc, l_i, m_i = _forward_tiles(acc, l_i, m_i, q, k_desc, v_desc, offs_m, 0, start_m, N, qk_scale,
                                       BLOCK_N, False, True, PRECISION)
        acc, l_i, m_i = _forward_tiles(acc, l_i, m_i, q, k_desc, v_desc, offs_m, start_m,
                                       tl.minimum(start_m + BLOCK_M, N), N, qk_scale, BLOCK_N, True, True, PRECISION)
    else:
        full = N - N % BLOCK_N
        acc, l_i, m_i = _forward_tiles(acc, l_i, m_i, q, k_desc, v_desc, offs_m, 0, full, N, qk_scale,
                                       BLOCK_N, False, False, PRECISION)
        acc, l_i, m_i = _forward_tiles(acc, l_i, m_i, q, k_desc, v_desc, offs_m, full, N, N, qk_scale,
                                       BLOCK_N, True, False, PRECISION)
    o_desc.store([start_m, 0], (acc / l_i[:, None]).to(Out.dtype.element_ty))
    # the LSE in natural-log units, as PyTorch's SDPA keeps it: (m + log2 l) · ln 2
    tl.store(Lse + bh.to(tl.int64) * N + offs_m, (m_i + tl.math.log2(l_i)) * 0.6931471805599453, mask=offs_m < N)


# -------------------------------------------------------------------------------------------------
# Backward
# -------------------------------------------------------------------------------------------------


@triton.jit
def delta_kernel(O, dO, Delta, DQ, H, N, sob, soh, son, sdb, sdh, sdn,  # noqa: E741 - the paper's names
                 D: tl.constexpr, BLOCK_M: tl.constexpr, ZERO_DQ: tl.constexpr = False):
    """δ_i = Σ_d dO_id · O_id in the LSE's precision: the row term of dS = P ∘ (dP − δ), computed once, before
    both passes. ZERO_DQ: also zero the same rows of the float32 dQ buffer the one-pass backward adds into."""
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    rows = offs_m[:, None] < N
    o = tl.load(O + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :], mask=rows, other=0.0)
    do = tl.load(dO + b * sdb + h * sdh + offs_m[:, None] * sdn + offs_d[None, :], mask=rows, other=0.0)
    acc = Delta.dtype.element_ty
    delta = tl.sum(o.to(acc) * do.to(acc), axis=1)
    tl.store(Delta + bh.to(tl.int64) * N + offs_m, delta, mask=offs_m < N)
    if ZERO_DQ:
        dq_rows = DQ + (bh.to(tl.int64) * N + offs_m[:, None]) * D + offs_d[None, :]
        tl.store(dq_rows, tl.zeros([BLOCK_M, D], dtype=DQ.dtype.element_ty), mask=rows)


@triton.jit
def _dkdv_tiles(dk, dv, k, v, q_desc, do_desc, dq_out, Lse, Delta, offs_n, lo, hi, N, qk_scale, sm_scale, shift,
                D: tl.constexpr, BLOCK_M: tl.constexpr, MASK: tl.constexpr, PRECISION: tl.constexpr,
                WARP_SPECIALIZE: tl.constexpr, ONE_PASS: tl.constexpr, DQ_TMA: tl.constexpr,
                ROTATE: tl.constexpr = False):
    """Query tiles [lo, hi) past one key tile, in the transposed frame (rows = keys): Pᵀ, dPᵀ, dSᵀ.
    ONE_PASS: also dQ += dS K for those queries, added into the float32 buffer `dq_out` (a TMA reduce through a
    tensor descriptor where DQ_TMA, else atomic adds through pointers: the interpreter has no TMA reduce).
    ROTATE (lo = 0, hi a multiple of BLOCK_M): start at query row `shift` and wrap around, so that programs
    running together add into different rows of dQ."""
    for it in tl.range(lo, hi, BLOCK_M, warp_specialize=WARP_SPECIALIZE):
        if ROTATE:
            start_m = (it + shift) % hi
        else:
            start_m = it
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = q_desc.load([start_m, 0])
        lse2 = tl.load(Lse + offs_m, mask=offs_m < N, other=float("inf")) * 1.4426950408889634  # past N: P = 0
        s_t = _dot(k, q.T, PRECISION) * qk_scale  # Sᵀ in log2 units
        p_t = tl.math.exp2(s_t - lse2[None, :])  # Pᵀ, recomputed
        if MASK:  # the diagonal: key j is seen by query i only if j ≤ i
            p_t = tl.where(offs_m[None, :] >= offs_n[:, None], p_t, 0.0)
        do = do_desc.load([start_m, 0])
        dv = _dot_acc(p_t.to(do.dtype), do, dv, PRECISION)  # dV += Pᵀ dO
        delta = tl.load(Delta + offs_m, mask=offs_m < N, other=0.0)
        dp_t = _dot(v, do.T, PRECISION)  # dPᵀ = V dOᵀ
        ds_t = (p_t * (dp_t - delta[None, :])).to(q.dtype)  # dSᵀ = Pᵀ ∘ (dPᵀ − δ)
        dk = _dot_acc(ds_t, q, dk, PRECISION)  # dK += dSᵀ Q (scaled once, at the end)
        if ONE_PASS:  # this key tile's share of dQ = dS K (keys past N are zero rows of K: they add nothing)
            dq = _dot(ds_t.T, k, PRECISION) * sm_scale
            if DQ_TMA:
                dq_out.atomic_add([start_m, 0], dq)
            else:
                offs_d = tl.arange(0, D)
                tl.atomic_add(dq_out + offs_m[:, None] * D + offs_d[None, :], dq, mask=offs_m[:, None] < N,
                              sem="relaxed")
    return dk, dv


@triton.jit
def dkdv_kernel(Q, K, V, dO, Lse, Delta, dK, dV, H, N, qk_scale, sm_scale,
                sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sdb, sdh, sdn, N_KEY,
                D: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DQ=None, WARP_SPECIALIZE: tl.constexpr = False,
                ONE_PASS: tl.constexpr = False, DQ_TMA: tl.constexpr = False, ROTATE: tl.constexpr = False,
                ONE_LOOP: tl.constexpr = False):
    """One program per key tile of BLOCK_N rows: dK and dV of those rows, over every query tile that sees them.
    WARP_SPECIALIZE: one loop over the query tiles (causal: the mask on every tile, not only the diagonal's), the
    only kind Triton 3.6-3.9 warp-specialise. ONE_PASS: also dQ, added into DQ (float32 [B, H, N, D], zeroed).
    ROTATE (not causal): each program starts at its own key tile's query rows."""
    tl.static_assert(BLOCK_N % BLOCK_M == 0)
    pid_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    start_n = pid_n * BLOCK_N
    q_desc = tl.make_tensor_descriptor(Q + b * sqb + h * sqh, shape=[N, D], strides=[sqn, 1], block_shape=[BLOCK_M, D])
    do_desc = tl.make_tensor_descriptor(dO + b * sdb + h * sdh, shape=[N, D], strides=[sdn, 1],
                                        block_shape=[BLOCK_M, D])
    k_desc = tl.make_tensor_descriptor(K + b * skb + h * skh, shape=[N, D], strides=[skn, 1], block_shape=[BLOCK_N, D])
    v_desc = tl.make_tensor_descriptor(V + b * svb + h * svh, shape=[N, D], strides=[svn, 1], block_shape=[BLOCK_N, D])
    if ONE_PASS and DQ_TMA:
        dq_out = tl.make_tensor_descriptor(DQ + bh.to(tl.int64) * N * D, shape=[N, D], strides=[D, 1],
                                           block_shape=[BLOCK_M, D])
    elif ONE_PASS:
        dq_out = DQ + bh.to(tl.int64) * N * D
    else:
        dq_out = dK  # not used
    k = k_desc.load([start_n, 0])
    v = v_desc.load([start_n, 0])
    offs_n = start_n + tl.arange(0, BLOCK_N)
    dk = tl.zeros([BLOCK_N, D], dtype=Lse.dtype.element_ty)
    dv = tl.zeros([BLOCK_N, D], dtype=Lse.dtype.element_ty)
    Lse += bh.to(tl.int64) * N
    Delta += bh.to(tl.int64) * N
    if CAUSAL and (WARP_SPECIALIZE or ONE_LOOP):  # queries before start_n see none of these keys; the rest in one
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_desc, do_desc, dq_out, Lse, Delta, offs_n, start_n, N, N, qk_scale,
                             sm_scale, 0, D, BLOCK_M, True, PRECISION, WARP_SPECIALIZE, ONE_PASS, DQ_TMA)
    elif CAUSAL:  # the BLOCK_N queries on the diagonal masked, the ones after it not
        hi = tl.minimum(start_n + BLOCK_N, N)
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_desc, do_desc, dq_out, Lse, Delta, offs_n, start_n, hi, N, qk_scale,
                             sm_scale, 0, D, BLOCK_M, True, PRECISION, False, ONE_PASS, DQ_TMA)
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_desc, do_desc, dq_out, Lse, Delta, offs_n, start_n + BLOCK_N, N, N,
                             qk_scale, sm_scale, 0, D, BLOCK_M, False, PRECISION, False, ONE_PASS, DQ_TMA)
    else:  # ROTATE: this program's first query tile is its own key tile's
        span = tl.cdiv(N, BLOCK_M) * BLOCK_M
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_desc, do_desc, dq_out, Lse, Delta, offs_n, 0, span, N, qk_scale,
                             sm_scale, start_n, D, BLOCK_M, False, PRECISION, WARP_SPECIALIZE, ONE_PASS, DQ_TMA,
                             ROTATE)
    # dK, dV are fresh contiguous [B, H, N, D] tensors
    out = bh.to(tl.int64) * N * D
    dk_desc = tl.make_tensor_descriptor(dK + out, shape=[N, D], strides=[D, 1], block_shape=[BLOCK_N, D])
    dv_desc = tl.make_tensor_descriptor(dV + out, shape=[N, D], strides=[D, 1], block_shape=[BLOCK_N, D])
    dk_desc.store([start_n, 0], (dk * sm_scale).to(dK.dtype.element_ty))
    dv_desc.store([start_n, 0], dv.to(dV.dtype.element_ty))


@triton.jit
def convert_kernel(Src, Dst, total, BLOCK: tl.constexpr):
    """The one-pass backward's float32 dQ buffer to dQ's dtype."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Dst + offs, tl.load(Src + offs, mask=offs < total).to(Dst.dtype.element_ty), mask=offs < total)


@triton.jit
def _dq_tiles(dq, q, do, lse2, delta, k_desc, v_desc, offs_m, lo, hi, N, qk_scale,
              BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
              WARP_SPECIALIZE: tl.constexpr = False):
    """Key tiles [lo, hi) past one query tile: P, dP, dS again, and dQ += dS K."""
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = k_desc.load([start_n, 0])
        v = v_desc.load([start_n, 0])
        s = _dot(q, k.T, PRECISION) * qk_scale
        p = tl.math.exp2(s - lse2[:, None])
        if MASK:  # keys past N (and, on the diagonal, after the query)
            offs_n = start_n + tl.arange(0, BLOCK_N)
            keep = offs_n[None, :] < N
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            p = tl.where(keep, p, 0.0)
        dp = _dot(do, v.T, PRECISION)
        ds = p * (dp - delta[:, None])
        dq = _dot_acc(ds.to(k.dtype), k, dq, PRECISION)
    return dq


@triton.jit
def dq_kernel(Q, K, V, dO, Lse, Delta, dQ, H, N, qk_scale, sm_scale,
              sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sdb, sdh, sdn, N_KEY,
              D: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WARP_SPECIALIZE: tl.constexpr = False,
              ONE_LOOP: tl.constexpr = False):
    """One program per query tile of BLOCK_M rows: dQ of those rows, over every key tile they see.
    WARP_SPECIALIZE: one loop over the key tiles, every tile masked (the only kind Triton 3.6-3.9 specialise)."""
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    if CAUSAL:  # the longest rows first
        pid_m = tl.cdiv(N, BLOCK_M) - 1 - pid_m
    start_m = pid_m * BLOCK_M
    q_desc = tl.make_tensor_descriptor(Q + b * sqb + h * sqh, shape=[N, D], strides=[sqn, 1], block_shape=[BLOCK_M, D])
    do_desc = tl.make_tensor_descriptor(dO + b * sdb + h * sdh, shape=[N, D], strides=[sdn, 1],
                                        block_shape=[BLOCK_M, D])
    k_desc = tl.make_tensor_descriptor(K + b * skb + h * skh, shape=[N, D], strides=[skn, 1], block_shape=[BLOCK_N, D])
    v_desc = tl.make_tensor_descriptor(V + b * svb + h * svh, shape=[N, D], strides=[svn, 1], block_shape=[BLOCK_N, D])
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = q_desc.load([start_m, 0])
    do = do_desc.load([start_m, 0])
    row = bh.to(tl.int64) * N + offs_m
    lse2 = tl.load(Lse + row, mask=offs_m < N, other=0.0) * 1.4426950408889634  # log2 units
    delta = tl.load(Delta + row, mask=offs_m < N, other=0.0)
    dq = tl.zeros([BLOCK_M, D], dtype=Lse.dtype.element_ty)
    if WARP_SPECIALIZE or ONE_LOOP:
        hi = tl.minimum(start_m + BLOCK_M, N) if CAUSAL else N
        dq = _dq_tiles(dq, q, do, lse2, delta, k_desc, v_desc, offs_m, 0, hi, N, qk_scale,
                       BLOCK_N, True, CAUSAL, PRECISION, WARP_SPECIALIZE)
    elif CAUSAL:
        dq = _dq_tiles(dq, q, do, lse2, delta, k_desc, v_desc, offs_m, 0, start_m, N, qk_scale,
                       BLOCK_N, False, True, PRECISION)
        dq = _dq_tiles(dq, q, do, lse2, delta, k_desc, v_desc, offs_m, start_m, tl.minimum(start_m + BLOCK_M, N), N,
                       qk_scale, BLOCK_N, True, True, PRECISION)
    else:
        full = N - N % BLOCK_N
        dq = _dq_tiles(dq, q, do, lse2, delta, k_desc, v_desc, offs_m, 0, full, N, qk_scale,
                       BLOCK_N, False, False, PRECISION)
        dq = _dq_tiles(dq, q, do, lse2, delta, k_desc, v_desc, offs_m, full, N, N, qk_scale,
                       BLOCK_N, True, False, PRECISION)
    dq_desc = tl.make_tensor_descriptor(dQ + bh.to(tl.int64) * N * D, shape=[N, D], strides=[D, 1],
                                        block_shape=[BLOCK_M, D])
    dq_desc.store([start_m, 0], (dq * sm_scale).to(dQ.dtype.element_ty))


# -------------------------------------------------------------------------------------------------
# How to run it: tiles and options per pass
# -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """One way to run the backward. `dkdv`, `dq`: (BLOCK_M, BLOCK_N, num_warps, num_stages) of each pass;
    `dq=None` is the one-pass backward (dQ added atomically by the dK/dV pass into a float32 buffer, then
    converted: FlashAttention-2's CUDA way, and FA3's with a TMA reduce). `*_ws`: the pass's loop warp-specialised
    (Hopper; one loop). `dq_tma`: the one-pass adds are TMA reduces (GPU only) rather than pointer atomics.
    `one_loop`: each pass runs one loop, masking every tile (causal; not causal, the dQ pass's) where the plain
    kernels split off the tiles that need no mask: less code, the shape warp specialisation needs (`*_ws` imply it).
    `maxnreg`: a register cap per thread for the dK/dV pass (None: the compiler's choice). `rotate` (one pass, not
    causal): each key tile's program starts at its own query rows, so programs add into different rows of dQ."""
    dkdv: tuple = (64, 128, 8, 3)
    dq: tuple | None = (128, 64, 8, 3)
    dkdv_ws: bool = False
    dq_ws: bool = False
    dq_tma: bool = False
    maxnreg: int | None = None
    rotate: bool = False
    one_loop: bool = False

    def label(self) -> str:
        parts = ["dkdv {}x{} w{} s{}".format(*self.dkdv) + (" ws" if self.dkdv_ws else "")
                 + (" one loop" if self.one_loop else "")
                 + (f" maxnreg {self.maxnreg}" if self.maxnreg else "")]
        if self.dq is None:
            parts.append("dQ by " + ("TMA reduce" if self.dq_tma else "atomics") + (", rotated" if self.rotate else ""))
        else:
            parts.append("dq {}x{} w{} s{}".format(*self.dq) + (" ws" if self.dq_ws else ""))
        return ", ".join(parts)


# On a GPU for N ≥ 1024: the two-pass backward with Triton's tutorial tiles; dK/dV keeps two BLOCK_N×D float32
# accumulators and its K, V tiles on chip (a wide key tile, a narrow query tile), dQ the other way round.
# (32, 128, 4) and (128, 128, 8) spill at D = 128 (backward.dkdv_tiles). Of the 24 plans tools/tune_backward.py timed
# on the H200 (docs/flash-backward-h200.md, run 2), a 4-stage dQ pass was the fastest causal and not (400 and 349
# TFLOP/s); the one-pass plans (dQ by TMA reduce) reached 340 and 289 at best, the warp-specialised ones 396 and 253
# (several of them returned wrong gradients: Triton 3.6 miscompiles).
GPU_PLAN = Plan(dq=(128, 64, 8, 4))
GPU_CAUSAL_PLAN = GPU_PLAN
SMALL_GPU_PLAN = Plan()  # short sequences
CPU_PLAN = Plan((32, 32, 4, 1), (32, 32, 4, 1))  # the interpreter: few, small tiles
# float32 on a GPU: tiles whose buffers fit in shared memory at D = 128 (the 16-bit plans' do not; "ieee" float32
# products run without tensor cores: a path for correctness, not speed)
FLOAT32_GPU_PLAN = Plan((32, 64, 4, 2), (64, 32, 4, 2))
FLOAT64_PLAN = Plan((32, 32, 4, 1), (32, 32, 4, 1))  # float64 (gradcheck): tiles that fit in shared memory
CPU_BLOCKS = {"BLOCK_M": 32, "BLOCK_N": 32}  # the forward under the interpreter
SMALL_GPU_FORWARD = (64, 64, 4, 3)  # the forward for short sequences, else (128, 64, 8, 3)


def _check(q, k, v):
    B, H, N, D = q.shape
    assert k.shape == v.shape == q.shape, "q, k and v must have the same shape [B, H, N, D]"
    assert D in (16, 32, 64, 128), "head dim must be a power of two from 16 to 128"
    assert q.stride(-1) == k.stride(-1) == v.stride(-1) == 1, "the head dim must be contiguous"
    return B, H, N, D


def _precision(dtype):
    """tl.dot's input precision: bf16/fp16 inputs are exact under "tf32"; float32 asks for IEEE; float64 is
    multiplied without tl.dot (`_dot`)."""
    return {torch.float32: "ieee", torch.float64: "fma"}.get(dtype, "tf32")


def _accumulator(dtype):
    """The LSE's, δ's and the accumulators' dtype: float64 for float64 inputs (gradcheck), float32 otherwise."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def attention_lse(q, k, v, causal: bool = False):
    """(O, LSE): softmax(q kᵀ/√D [+ causal mask]) v for [B, H, N, D] inputs, and the [B, H, N] row log-sum-exp
    of the scaled scores, in natural-log units: float32, float64 for float64 inputs."""
    B, H, N, D = _check(q, k, v)
    o = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, N), dtype=_accumulator(q.dtype), device=q.device)
    if not runtime.HAS_CUDA:
        blocks = CPU_BLOCKS
    else:
        m, n, w, s = (32, 32, 4, 1) if q.dtype == torch.float64 else SMALL_GPU_FORWARD if N < 1024 else (128, 64, 8, 3)
        blocks = {"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": s}
    forward_kernel[(triton.cdiv(N, blocks["BLOCK_M"]), B * H)](
        q, k, v, o, lse, H, N, LOG2E / math.sqrt(D), *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
        *o.stride()[:3], D=D, CAUSAL=bool(causal), PRECISION=_precision(q.dtype), **blocks)
    return o, lse


def _launch(config, **extra):
    m, n, w, s = config
    return {"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": s, **extra}


def default_plan(q, causal: bool = False) -> Plan:
    if q.dtype == torch.float64:
        return FLOAT64_PLAN
    if not runtime.HAS_CUDA:
        return CPU_PLAN
    if q.dtype == torch.float32:
        return FLOAT32_GPU_PLAN
    if q.shape[2] < 1024:
        return SMALL_GPU_PLAN
    return GPU_CAUSAL_PLAN if causal else GPU_PLAN


def attention_backward(q, k, v, o, lse, do, causal: bool = False, plan: Plan | None = None):
    """(dQ, dK, dV) of softmax(q kᵀ/√D) v given its output `o`, its row log-sum-exp `lse` [B, H, N] (natural log;
    float32, float64 for float64 inputs) and the gradient `do` of the output. `plan` fixes how (tiles, one pass or
    two, ...); by default `default_plan(q, causal)`."""
    B, H, N, D = _check(q, k, v)
    assert do.stride(-1) == 1 and do.shape == q.shape, "do must be [B, H, N, D] with a contiguous last dim"
    assert o.shape == q.shape and o.stride(-1) == 1, "o must be [B, H, N, D] with a contiguous last dim"
    assert lse.shape == (B, H, N), "lse must be [B, H, N]"
    assert lse.is_contiguous(), "lse must be contiguous"
    plan = plan or default_plan(q, causal)
    acc = _accumulator(q.dtype)
    assert lse.dtype == acc, f"lse must be {acc} for {q.dtype} inputs"
    dq = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    dk = torch.empty_like(dq)
    dv = torch.empty_like(dq)
    dq32 = torch.empty((B, H, N, D), dtype=acc, device=q.device) if plan.dq is None else None
    delta = torch.empty((B, H, N), dtype=acc, device=q.device)
    delta_kernel[(triton.cdiv(N, 64), B * H)](o, do, delta, dq32, H, N, *o.stride()[:3], *do.stride()[:3], D=D,
                                              BLOCK_M=64, ZERO_DQ=dq32 is not None)
    sm_scale = 1 / math.sqrt(D)
    args = (q, k, v, do, lse, delta)
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], triton.next_power_of_2(N))
    meta = dict(D=D, CAUSAL=bool(causal), PRECISION=_precision(q.dtype))
    scales = (H, N, sm_scale * LOG2E, sm_scale)
    kv = _launch(plan.dkdv, WARP_SPECIALIZE=plan.dkdv_ws, ONE_PASS=dq32 is not None, DQ_TMA=plan.dq_tma, DQ=dq32,
                 ROTATE=plan.rotate and not causal, ONE_LOOP=plan.one_loop)
    if plan.maxnreg:
        kv["maxnreg"] = plan.maxnreg
    dkdv_kernel[(triton.cdiv(N, kv["BLOCK_N"]), B * H)](*args, dk, dv, *scales, *strides, **meta, **kv)
    if dq32 is None:
        qb = _launch(plan.dq, WARP_SPECIALIZE=plan.dq_ws, ONE_LOOP=plan.one_loop)
        dq_kernel[(triton.cdiv(N, qb["BLOCK_M"]), B * H)](*args, dq, *scales, *strides, **meta, **qb)
    else:
        convert_kernel[(triton.cdiv(dq.numel(), 4096),)](dq32, dq, dq.numel(), BLOCK=4096)
    return dq, dk, dv
