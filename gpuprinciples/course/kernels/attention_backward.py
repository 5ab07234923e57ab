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
is one pass with dQ accumulated by `tl.atomic_add` from every key tile's program: no recompute, but
float32 atomics on dQ (N·D per key tile in read-modify-write traffic), non-deterministic sums, and a
float32 dQ buffer to convert. FlashAttention-2's CUDA kernel does that; FA3 too, with dQ in a
separate warpgroup.

Tails: tensor descriptors read rows past N as zeros and never write them; the LSE of a query row past
N reads as +inf, so its P is exp(−inf) = 0; key tiles past N are masked in the dQ pass.

    python -m gpuprinciples.course.kernels.attention_backward           # GPU: check, then time against SDPA
    python -m gpuprinciples.course.kernels.attention_backward --sweep   # GPU: each tile configuration
"""

import math

import torch
import triton
import triton.language as tl

from ...machine import runtime

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


# -------------------------------------------------------------------------------------------------
# Forward, with the log-sum-exp
# -------------------------------------------------------------------------------------------------


@triton.jit
def _forward_tiles(acc, l_i, m_i, q, k_desc, v_desc, offs_m, lo, hi, N, qk_scale,
                   BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    """The online softmax over key tiles [lo, hi): lesson 08's loop."""
    for start_n in range(lo, hi, BLOCK_N):
        k = k_desc.load([start_n, 0])
        s = tl.dot(q, k.T, input_precision=PRECISION) * qk_scale  # log2 units
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
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
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
    o_desc = tl.make_tensor_descriptor(Out + b * sob + h * soh, shape=[N, D], strides=[son, 1], block_shape=[BLOCK_M, D])
    offs_m = start_m + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
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
def delta_kernel(O, dO, Delta, H, N, sob, soh, son, sdb, sdh, sdn, D: tl.constexpr, BLOCK_M: tl.constexpr):
    """δ_i = Σ_d dO_id · O_id in float32: the row term of dS = P ∘ (dP − δ), computed once, before both passes."""
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    rows = offs_m[:, None] < N
    o = tl.load(O + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :], mask=rows, other=0.0)
    do = tl.load(dO + b * sdb + h * sdh + offs_m[:, None] * sdn + offs_d[None, :], mask=rows, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(Delta + bh.to(tl.int64) * N + offs_m, delta, mask=offs_m < N)


@triton.jit
def _dkdv_tiles(dk, dv, k, v, q_desc, do_desc, Lse, Delta, offs_n, lo, hi, N, qk_scale,
                BLOCK_M: tl.constexpr, MASK: tl.constexpr, PRECISION: tl.constexpr):
    """Query tiles [lo, hi) past one key tile, in the transposed frame (rows = keys): Pᵀ, dPᵀ, dSᵀ."""
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = q_desc.load([start_m, 0])
        lse2 = tl.load(Lse + offs_m, mask=offs_m < N, other=float("inf")) * 1.4426950408889634  # past N: P = 0
        s_t = tl.dot(k, q.T, input_precision=PRECISION) * qk_scale  # Sᵀ in log2 units
        p_t = tl.math.exp2(s_t - lse2[None, :])  # Pᵀ, recomputed
        if MASK:  # the diagonal: key j is seen by query i only if j ≤ i
            p_t = tl.where(offs_m[None, :] >= offs_n[:, None], p_t, 0.0)
        do = do_desc.load([start_m, 0])
        dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=PRECISION)  # dV += Pᵀ dO
        delta = tl.load(Delta + offs_m, mask=offs_m < N, other=0.0)
        dp_t = tl.dot(v, do.T, input_precision=PRECISION)  # dPᵀ = V dOᵀ
        ds_t = p_t * (dp_t - delta[None, :])  # dSᵀ = Pᵀ ∘ (dPᵀ − δ)
        dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision=PRECISION)  # dK += dSᵀ Q (scaled once, at the end)
    return dk, dv


@triton.jit
def dkdv_kernel(Q, K, V, dO, Lse, Delta, dK, dV, H, N, qk_scale, sm_scale,
                sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sdb, sdh, sdn, N_KEY,
                D: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program per key tile of BLOCK_N rows: dK and dV of those rows, over every query tile that sees them."""
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
    k = k_desc.load([start_n, 0])
    v = v_desc.load([start_n, 0])
    offs_n = start_n + tl.arange(0, BLOCK_N)
    dk = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    Lse += bh.to(tl.int64) * N
    Delta += bh.to(tl.int64) * N
    if CAUSAL:
        # queries before start_n see none of these keys; the BLOCK_N queries on the diagonal need the mask
        hi = tl.minimum(start_n + BLOCK_N, N)
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_desc, do_desc, Lse, Delta, offs_n, start_n, hi, N, qk_scale,
                             BLOCK_M, True, PRECISION)
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_desc, do_desc, Lse, Delta, offs_n, start_n + BLOCK_N, N, N,
                             qk_scale, BLOCK_M, False, PRECISION)
    else:
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_desc, do_desc, Lse, Delta, offs_n, 0, N, N, qk_scale,
                             BLOCK_M, False, PRECISION)
    # dK, dV are fresh contiguous [B, H, N, D] tensors
    out = bh.to(tl.int64) * N * D
    dk_desc = tl.make_tensor_descriptor(dK + out, shape=[N, D], strides=[D, 1], block_shape=[BLOCK_N, D])
    dv_desc = tl.make_tensor_descriptor(dV + out, shape=[N, D], strides=[D, 1], block_shape=[BLOCK_N, D])
    dk_desc.store([start_n, 0], (dk * sm_scale).to(dK.dtype.element_ty))
    dv_desc.store([start_n, 0], dv.to(dV.dtype.element_ty))


@triton.jit
def _dq_tiles(dq, q, do, lse2, delta, k_desc, v_desc, offs_m, lo, hi, N, qk_scale,
              BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    """Key tiles [lo, hi) past one query tile: P, dP, dS again, and dQ += dS K."""
    for start_n in range(lo, hi, BLOCK_N):
        k = k_desc.load([start_n, 0])
        v = v_desc.load([start_n, 0])
        s = tl.dot(q, k.T, input_precision=PRECISION) * qk_scale
        p = tl.math.exp2(s - lse2[:, None])
        if MASK:  # keys past N (and, on the diagonal, after the query)
            offs_n = start_n + tl.arange(0, BLOCK_N)
            keep = offs_n[None, :] < N
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, v.T, input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=PRECISION)
    return dq


@triton.jit
def dq_kernel(Q, K, V, dO, Lse, Delta, dQ, H, N, qk_scale, sm_scale,
              sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sdb, sdh, sdn, N_KEY,
              D: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program per query tile of BLOCK_M rows: dQ of those rows, over every key tile they see."""
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
    dq = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    if CAUSAL:
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
# Tile configurations
# -------------------------------------------------------------------------------------------------

# (BLOCK_M, BLOCK_N, num_warps, num_stages). The dK/dV program holds two BLOCK_N×D float32 accumulators
# and K, V tiles: a wide key tile and a narrow query tile (Triton's tutorial: 64 queries × 128 keys); the
# dQ program the other way round.
# Few, for the autotuner's compile time; (32, 128, 4) and (128, 128, 8) spill at D = 128 (backward.dkdv_tiles).
DKDV_GPU_CONFIGS = [(64, 128, 8, 3), (64, 128, 8, 2), (64, 64, 4, 3)]
DQ_GPU_CONFIGS = [(128, 64, 8, 3), (128, 64, 8, 2), (64, 64, 4, 3)]


def _configs(rows):
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in rows]


dkdv_kernel_tuned = triton.autotune(_configs(DKDV_GPU_CONFIGS), key=["N_KEY", "D", "CAUSAL"])(dkdv_kernel)
dq_kernel_tuned = triton.autotune(_configs(DQ_GPU_CONFIGS), key=["N_KEY", "D", "CAUSAL"])(dq_kernel)

CPU_BLOCKS = {"BLOCK_M": 32, "BLOCK_N": 32}  # the interpreter: few, small tiles
SMALL_GPU = {"dkdv": (64, 128, 8, 3), "dq": (128, 64, 8, 3), "forward": (64, 64, 4, 3)}  # short sequences: no tuning


def _check(q, k, v):
    B, H, N, D = q.shape
    assert k.shape == v.shape == q.shape, "q, k and v must have the same shape [B, H, N, D]"
    assert D in (16, 32, 64, 128), "head dim must be a power of two from 16 to 128"
    assert q.stride(-1) == k.stride(-1) == v.stride(-1) == 1, "the head dim must be contiguous"
    return B, H, N, D


def _precision(dtype):
    return "ieee" if dtype == torch.float32 else "tf32"


def attention_lse(q, k, v, causal: bool = False):
    """(O, LSE): softmax(q kᵀ/√D [+ causal mask]) v for [B, H, N, D] inputs, and the float32 [B, H, N] row
    log-sum-exp of the scaled scores, in natural-log units."""
    B, H, N, D = _check(q, k, v)
    o = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    if runtime.HAS_CUDA:
        m, n, w, s = SMALL_GPU["forward"] if N < 1024 else (128, 64, 8, 3)
        blocks = {"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": s}
    else:
        blocks = CPU_BLOCKS
    forward_kernel[(triton.cdiv(N, blocks["BLOCK_M"]), B * H)](
        q, k, v, o, lse, H, N, LOG2E / math.sqrt(D), *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
        *o.stride()[:3], D=D, CAUSAL=bool(causal), PRECISION=_precision(q.dtype), **blocks)
    return o, lse


def _blocks(config):
    m, n, w, s = config
    return {"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": s}


def attention_backward(q, k, v, o, lse, do, causal: bool = False, configs: dict | None = None):
    """(dQ, dK, dV) of softmax(q kᵀ/√D) v given its output `o`, its float32 row log-sum-exp `lse` [B, H, N]
    (natural log) and the gradient `do` of the output. `configs` fixes {"dkdv": (BLOCK_M, BLOCK_N, warps,
    stages), "dq": (...)}; otherwise autotuned on a GPU for N ≥ 1024, fixed below that and on a CPU."""
    B, H, N, D = _check(q, k, v)
    assert do.stride(-1) == 1 and do.shape == q.shape, "do must be [B, H, N, D] with a contiguous last dim"
    assert o.shape == q.shape and o.stride(-1) == 1, "o must be [B, H, N, D] with a contiguous last dim"
    assert lse.shape == (B, H, N), "lse must be [B, H, N]"
    assert lse.is_contiguous(), "lse must be contiguous"
    delta = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    delta_kernel[(triton.cdiv(N, 64), B * H)](o, do, delta, H, N, *o.stride()[:3], *do.stride()[:3], D=D, BLOCK_M=64)
    dq = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    dk = torch.empty_like(dq)
    dv = torch.empty_like(dq)
    sm_scale = 1 / math.sqrt(D)
    args = (q, k, v, do, lse, delta)
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], triton.next_power_of_2(N))
    meta = dict(D=D, CAUSAL=bool(causal), PRECISION=_precision(q.dtype))
    scales = (H, N, sm_scale * LOG2E, sm_scale)
    if configs is None and runtime.HAS_CUDA and N >= 1024:
        dkdv_kernel_tuned[lambda c: (triton.cdiv(N, c["BLOCK_N"]), B * H)](*args, dk, dv, *scales, *strides, **meta)
        dq_kernel_tuned[lambda c: (triton.cdiv(N, c["BLOCK_M"]), B * H)](*args, dq, *scales, *strides, **meta)
        return dq, dk, dv
    if configs is None:
        configs = SMALL_GPU if runtime.HAS_CUDA else {"dkdv": (32, 32, 4, 1), "dq": (32, 32, 4, 1)}
    kv, qb = _blocks(configs["dkdv"]), _blocks(configs["dq"])
    dkdv_kernel[(triton.cdiv(N, kv["BLOCK_N"]), B * H)](*args, dk, dv, *scales, *strides, **meta, **kv)
    dq_kernel[(triton.cdiv(N, qb["BLOCK_M"]), B * H)](*args, dq, *scales, *strides, **meta, **qb)
    return dq, dk, dv



# -------------------------------------------------------------------------------------------------
# A standalone check and sweep (GPU)
# -------------------------------------------------------------------------------------------------


def _main(argv=None) -> None:  # pragma: no cover - needs a GPU
    import argparse

    from triton.testing import do_bench

    from .attention import sdpa

    parser = argparse.ArgumentParser(description="check and time the FlashAttention backward on a GPU")
    parser.add_argument("--shape", default="4,16,4096,128", help="B,H,N,D")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--sweep", action="store_true", help="time each dK/dV and dQ configuration on its own")
    a = parser.parse_args(argv)
    assert torch.cuda.is_available(), "this check needs a CUDA GPU"
    B, H, N, D = map(int, a.shape.split(","))
    dtype = getattr(torch, a.dtype)
    print(f"{torch.cuda.get_device_name()}, triton {triton.__version__}, torch {torch.__version__}; "
          f"B={B} H={H} N={N} D={D} {a.dtype}; backward counted as 2.5x the forward's FLOPs")
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(B, H, N, D, generator=gen, device="cuda", dtype=dtype) for _ in range(4))
    for causal in (False, True):
        fwd_flops = 4 * B * H * N * N * D // (2 if causal else 1)
        bwd_flops = 2.5 * fwd_flops
        o, lse = attention_lse(q, k, v, causal)
        ref = sdpa("FLASH_ATTENTION")
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        grads = torch.autograd.grad(ref(*leaves, causal), leaves, do)
        mine = attention_backward(q, k, v, o, lse, do, causal)
        errs = [(m.float() - g.float()).abs().max().item() for m, g in zip(mine, grads)]
        scale = [g.float().abs().max().item() for g in grads]
        print(f"causal={causal}: max |ours - sdpa flash| dq {errs[0]:.2e} dk {errs[1]:.2e} dv {errs[2]:.2e} "
              f"(max |grad| {max(scale):.2e})")

        def rate(fn, flops=bwd_flops):
            ms = do_bench(fn, warmup=25, rep=200)
            return ms, flops / ms / 1e9

        rows = [("ours, autotuned", lambda: attention_backward(q, k, v, o, lse, do, causal))]
        for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
            try:
                leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
                out = sdpa(name)(*leaves, causal)
                rows.append((f"sdpa {name.split('_')[0].lower()} backward",
                             lambda out=out, leaves=leaves: torch.autograd.grad(out, leaves, do, retain_graph=True)))
                fms, ftf = rate(lambda name=name: sdpa(name)(q, k, v, causal), fwd_flops)
                print(f"  sdpa {name.split('_')[0].lower()} forward: {fms:.3f} ms, {ftf:.0f} TFLOP/s")
            except RuntimeError as exc:
                print(f"  {name}: unavailable ({str(exc).splitlines()[0][:80]})")
        fms, ftf = rate(lambda: attention_lse(q, k, v, causal), fwd_flops)
        print(f"  ours forward (with LSE): {fms:.3f} ms, {ftf:.0f} TFLOP/s")
        result = {}
        for name, fn in rows:
            ms, tf = rate(fn)
            result[name] = tf
            print(f"  {name:>22}: {ms:8.3f} ms  {tf:6.0f} TFLOP/s")
        ours = result["ours, autotuned"]
        for name, tf in result.items():
            if name != "ours, autotuned":
                print(f"  ours / {name}: {ours / tf:.2f}x")
        for kern in (dkdv_kernel_tuned, dq_kernel_tuned):
            print(f"  autotuner picked {getattr(kern, 'best_config', None)}")
        delta = torch.empty((B, H, N), dtype=torch.float32, device="cuda")
        dq, dk, dv = (torch.empty_like(q) for _ in range(3))
        strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], triton.next_power_of_2(N))
        meta = dict(D=D, CAUSAL=causal, PRECISION=_precision(dtype))
        scales = (H, N, LOG2E / math.sqrt(D), 1 / math.sqrt(D))
        if a.sweep:  # each pass alone, at the rate of the products it runs (dK/dV 4, dQ 3, of 2·N²·D each)
            for cfg in DKDV_GPU_CONFIGS:
                try:
                    ms, tf = rate(lambda: dkdv_kernel[(triton.cdiv(N, cfg[1]), B * H)](
                        q, k, v, do, lse, delta, dk, dv, *scales, *strides, **meta, **_blocks(cfg)), bwd_flops * 4 / 5)
                    print(f"  dkdv {cfg}: {ms:.3f} ms, {tf:.0f} TFLOP/s of its 4 products")
                except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory
                    print(f"  dkdv {cfg}: failed ({type(exc).__name__}: {str(exc)[:80]})")
            for cfg in DQ_GPU_CONFIGS:
                try:
                    ms, tf = rate(lambda: dq_kernel[(triton.cdiv(N, cfg[0]), B * H)](
                        q, k, v, do, lse, delta, dq, *scales, *strides, **meta, **_blocks(cfg)), bwd_flops * 3 / 5)
                    print(f"  dq   {cfg}: {ms:.3f} ms, {tf:.0f} TFLOP/s of its 3 products")
                except Exception as exc:  # noqa: BLE001
                    print(f"  dq   {cfg}: failed ({type(exc).__name__}: {str(exc)[:80]})")


if __name__ == "__main__":  # pragma: no cover
    _main()
