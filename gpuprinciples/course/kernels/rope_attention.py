"""The fused decode step's attention in one launch: rotary embedding, cache write, split-KV attention and the
merge of the splits.

    qkv [B, (Hq + 2·Hkv)·D] (the q | k | v heads of the new token), cos, sin [max_seq, D/2], positions [B]
    (int32: tokens cached before this one), k_cache, v_cache [B, Hkv, max_seq, D]  ->  out [B, Hq, D]

The unfused step runs three kernels here: `rope_and_cache` (rotate q and k, write k and v at the position),
the split kernel of `decode_attention`, and its merge. At batch 1 each of them moves a few hundred KB at most,
so each costs mostly its start and its drain. This kernel does all three in each program of the split grid:

* every program loads its first K/V tile before anything from the kernel before it (with PDL: while that kernel
  drains), then rotates its G query heads itself (G·D values: cheaper than a launch);
* the program whose split holds the new position attends to the cached keys before it, then to the new key
  and value straight from registers, and writes them to the cache: no program reads the cache at that
  position, so no program waits on another's write;
* the merge is done by the last program of each (sequence, KV head) to finish: each program stores its split's
  output and log-sum-exp, then counts itself in with an atomic add; the one that counts last reads the splits
  back and writes the output, and sets the count back to 0 for the next call (a CUDA graph replays the same
  counter). A barrier and the atomic's release order every thread's stores before the count; the last
  program's acquire, and loads that skip the SM's L1 (`.cg`), make them visible to it.

What it bought, measured (docs/roof-h200.md#one-launch): nothing. With PDL a launch no longer costs its start; the
merge by one program per KV head, four heads one after another, made the step 3-4 % slower at LLAMA_1B, and
without it (`MERGE_IN_KERNEL = False`: decode_attention's merge kernel after) the step is as fast as with three
launches. So the fused step keeps three (`decode_step.one_launch_attention()` switches this one in), and this file
stays as the measured alternative: `tools/tune_decode.py --only 11,12`.
"""

import math

import torch
import triton
import triton.language as tl

from .decode_attention import LOG2E, attend, check_shapes, finish, merge_splits_kernel, pdl_options, plan


@triton.jit
def _rotated(ptrs, half_ptrs, c, s, first_half, DTYPE: tl.constexpr):
    """x·cos + rotate_half(x)·sin for rows of D values (pairs i, i + D/2), rounded to the cache's dtype as the
    unfused step stores them; `half_ptrs` point at each value's partner."""
    x = tl.load(ptrs).to(tl.float32)
    partner = tl.load(half_ptrs).to(tl.float32)
    return (x * c + tl.where(first_half, -partner, partner) * s).to(DTYPE)


@triton.jit
def rope_attention_kernel(QKV, Cos, Sin, Pos, K, V, Out, OPart, LsePart, Count, Hkv, chunk, qk_scale,
                          sxb, scs, skb, skh, sks, svb, svh, svs, sob, soh, spb, sph, sps, slb, slh,
                          G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_S: tl.constexpr, SINGLE: tl.constexpr, PRECISION: tl.constexpr,
                          PDL: tl.constexpr = False, EARLY_TILE: tl.constexpr = True, MERGE: tl.constexpr = True):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    b = (pid // Hkv).to(tl.int64)
    hkv = (pid % Hkv).to(tl.int64)
    if PDL and not EARLY_TILE:
        tl.extra.cuda.gdc_wait()
    # Before the wait (EARLY_TILE: with PDL, while the kernel before drains): the position and this split's first K/V
    # tile. No kernel of the step writes either before this one: positions change between steps, and the cache at
    # positions before the new one was written by earlier steps.
    pos = tl.load(Pos + b)  # the new token's position (int32, as tile indices must be); keys [0, pos) cached
    start = split * chunk  # a multiple of BLOCK_N: no tile straddles two splits
    end = tl.minimum(start + chunk, pos + 1)
    cached_end = tl.minimum(end, pos)
    # pos rows: TMA never reads the new position's row (nor, past them, any: a split past pos loads zeros)
    k_desc = tl.make_tensor_descriptor(K + b * skb + hkv * skh, shape=[tl.maximum(pos, 1), D], strides=[sks, 1],
                                       block_shape=[BLOCK_N, D])
    v_desc = tl.make_tensor_descriptor(V + b * svb + hkv * svh, shape=[tl.maximum(pos, 1), D], strides=[svs, 1],
                                       block_shape=[BLOCK_N, D])
    k = k_desc.load([start, 0])
    v = v_desc.load([start, 0])
    if PDL and EARLY_TILE:  # qkv comes from the kernel before
        tl.extra.cuda.gdc_wait()
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    first_half = offs_d < D // 2
    partner = tl.where(first_half, offs_d + D // 2, offs_d - D // 2)
    c = tl.load(Cos + pos.to(tl.int64) * scs + offs_d % (D // 2))
    s = tl.load(Sin + pos.to(tl.int64) * scs + offs_d % (D // 2))
    heads = hkv * G + offs_g
    rows = offs_g < tl.where(start <= pos, G, 0)  # a split past the new position reads and writes nothing
    row = QKV + b * sxb
    q_ptrs = row + tl.where(rows, heads, 0)[:, None] * D
    q = _rotated(q_ptrs + offs_d[None, :], q_ptrs + partner[None, :], c[None, :], s[None, :], first_half[None, :],
                 K.dtype.element_ty)
    m_i = tl.full([BLOCK_G], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    if start < cached_end:
        m_i, l_i, acc = attend(q, k, v, start + tl.arange(0, BLOCK_N) < cached_end, m_i, l_i, acc, qk_scale,
                               PRECISION)
        for n in range(start + BLOCK_N, cached_end, BLOCK_N):
            k = k_desc.load([n, 0])
            v = v_desc.load([n, 0])
            m_i, l_i, acc = attend(q, k, v, n + tl.arange(0, BLOCK_N) < cached_end, m_i, l_i, acc, qk_scale,
                                   PRECISION)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    if (start <= pos) & (pos < end):  # this split holds the new token: its key and value from registers
        k_ptrs = row + (Hkv * G + hkv) * D
        k_new = _rotated(k_ptrs + offs_d, k_ptrs + partner, c, s, first_half, K.dtype.element_ty)
        v_new = tl.load(row + (Hkv * G + Hkv + hkv) * D + offs_d)
        tl.store(K + b * skb + hkv * skh + pos.to(tl.int64) * sks + offs_d, k_new)
        tl.store(V + b * svb + hkv * svh + pos.to(tl.int64) * svs + offs_d, v_new)
        score = tl.sum(q.to(tl.float32) * k_new.to(tl.float32)[None, :], 1) * qk_scale
        m_new = tl.maximum(m_i, score)
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(score - m_new)
        acc = acc * alpha[:, None] + p[:, None] * v_new.to(tl.float32)[None, :]
        l_i = l_i * alpha + p
        m_i = m_new
    finish(acc, l_i, m_i, rows, heads, offs_d, b, split, Out, OPart, LsePart, sob, soh, spb, sph, sps, slb, slh,
           SINGLE)
    if MERGE and not SINGLE:  # else one split wrote the output, or decode_attention's merge kernel follows
        tl.debug_barrier()  # every thread's stores before the count
        counted = tl.atomic_add(Count + pid, 1, sem="acq_rel")
        if counted == tl.num_programs(1) - 1:  # the last of this (sequence, KV head) to finish: merge
            tl.debug_barrier()
            tl.atomic_xchg(Count + pid, 0)
            _merge(OPart, LsePart, Out, b, hkv, pos, chunk, spb, sph, sps, slb, slh, sob, soh, G, D, BLOCK_S)


@triton.jit
def _merge(OPart, LsePart, Out, b, hkv, pos, chunk, spb, sph, sps, slb, slh, sob, soh, G: tl.constexpr,
           D: tl.constexpr, BLOCK_S: tl.constexpr):
    """out = Σ_s 2^(lse_s - max) · o_s / Σ_s 2^(lse_s - max) over the splits that held keys, for the G query
    heads of KV head hkv (decode_attention's merge, one head after another)."""
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    live = offs_s <= pos // chunk  # the splits up to the one that holds the new token
    for g in tl.static_range(G):
        h = hkv * G + g
        lse = tl.load(LsePart + b * slb + h * slh + offs_s, mask=live, other=-float("inf"), cache_modifier=".cg")
        o = tl.load(OPart + b * spb + h * sph + offs_s[:, None] * sps + offs_d[None, :], mask=live[:, None],
                    other=0.0, cache_modifier=".cg")
        w = tl.math.exp2(lse - tl.max(lse, 0))
        tl.store(Out + b * sob + h * soh + offs_d, (tl.sum(o * w[:, None], 0) / tl.sum(w, 0)).to(Out.dtype.element_ty))


def rope_attention(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                   k_cache: torch.Tensor, v_cache: torch.Tensor, n_heads: int, counts: torch.Tensor | None = None, *,
                   pdl: bool = False, **launch) -> torch.Tensor:
    """`decode_attention(rope_and_cache(qkv, ...), k_cache, v_cache, positions + 1)` in one launch: writes the
    rotated k and v at each sequence's position and returns the attention output [B, Hq, D].

    `counts`: B·Hkv int32 zeros the merge counts splits in (left zero again); a decode step keeps one per
    layer, so a CUDA graph holds no allocation. `launch` fixes the split plan (decode_attention.plan's
    keywords); `pdl` launches with Programmatic Dependent Launch."""
    B = qkv.shape[0]
    Hkv, s_max, D = k_cache.shape[1:]
    assert qkv.shape[1] == (n_heads + 2 * Hkv) * D and qkv.stride(1) == 1, "qkv is [B, (Hq + 2·Hkv)·D]"
    assert cos.stride(1) == 1 and cos.stride() == sin.stride() and cos.shape[1] == D // 2
    assert v_cache.shape == k_cache.shape and k_cache.stride(-1) == v_cache.stride(-1) == 1
    out = torch.empty((B, n_heads, D), dtype=qkv.dtype, device=qkv.device)
    G = check_shapes(out, Hkv, D, positions)
    cfg = plan(out, Hkv, s_max, **launch)
    splits = cfg["splits"]
    if counts is None:
        counts = torch.zeros(B * Hkv, dtype=torch.int32, device=qkv.device)
    assert counts.numel() >= B * Hkv and counts.dtype == torch.int32
    o_part = torch.empty((B, n_heads, splits, D) if splits > 1 else (1, 1, 1, 1), dtype=torch.float32,
                         device=qkv.device)
    lse_part = torch.empty((B, n_heads, splits) if splits > 1 else (1, 1, 1), dtype=torch.float32, device=qkv.device)
    options = pdl_options(pdl, qkv)
    rope_attention_kernel[(B * Hkv, splits)](
        qkv, cos, sin, positions, k_cache, v_cache, out, o_part, lse_part, counts, Hkv, cfg["chunk"],
        LOG2E / math.sqrt(D), qkv.stride(0), cos.stride(0), *k_cache.stride()[:3], *v_cache.stride()[:3],
        out.stride(0), out.stride(1), *o_part.stride()[:3], *lse_part.stride()[:2], G=G,
        BLOCK_G=max(16, triton.next_power_of_2(G)), D=D, BLOCK_N=cfg["block_n"], BLOCK_S=triton.next_power_of_2(splits),
        SINGLE=splits == 1, PRECISION="ieee" if qkv.dtype == torch.float32 else "tf32", EARLY_TILE=EARLY_TILE,
        MERGE=MERGE_IN_KERNEL, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **options)
    if splits > 1 and not MERGE_IN_KERNEL:
        merge_splits_kernel[(B * n_heads,)](o_part, lse_part, positions, out, n_heads, cfg["chunk"],
                                            *o_part.stride()[:3], *lse_part.stride()[:2], out.stride(0), out.stride(1),
                                            D=D, BLOCK_S=triton.next_power_of_2(splits), NEW_TOKEN=1, **options)
    return out


# The forms tools/tune_decode.py --only 12 times (docs/roof-h200.md#one-launch: on an H100 the merge in the kernel
# cost the step 3 % at LLAMA_1B; the early tile changed nothing)
EARLY_TILE = True  # each program's first K/V tile loaded before its PDL wait
MERGE_IN_KERNEL = True  # the splits merged by the last program of each KV head, else by decode_attention's merge
