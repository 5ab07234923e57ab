# exercise: decoding.decode_attention
# function: decode_attention
# verdict: passed
# modes: cpu
# seed: 10
"""A correct split-KV decode attention written with plain pointers and masks, its own merge (must pass)."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def partial_kernel(Q, K, V, Lens, OP, LP, Hkv, chunk, scale, sqb, sqh, skb, skh, sks, svb, svh, svs,
                   spb, sph, sps, slb, slh, G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr, BN: tl.constexpr):
    pid, split = tl.program_id(0), tl.program_id(1)
    b, kv = pid // Hkv, pid % Hkv
    n = tl.load(Lens + b)
    lo = split * chunk
    hi = tl.minimum(lo + chunk, n)
    g = tl.arange(0, BG)
    d = tl.arange(0, D)
    heads = kv * G + g
    rows = g < G
    q = tl.load(Q + b * sqb + heads[:, None] * sqh + d[None, :], mask=rows[:, None] & (lo < n), other=0.0)
    m = tl.full([BG], -float("inf"), tl.float32)
    l_run = tl.zeros([BG], tl.float32)
    acc = tl.zeros([BG, D], tl.float32)
    for start in range(lo, hi, BN):
        t = start + tl.arange(0, BN)
        ok = t < hi
        k = tl.load(K + b * skb + kv * skh + t[:, None] * sks + d[None, :], mask=ok[:, None], other=0.0)
        v = tl.load(V + b * svb + kv * svh + t[:, None] * svs + d[None, :], mask=ok[:, None], other=0.0)
        s = tl.where(ok[None, :], tl.dot(q, tl.trans(k)) * scale, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)
        l_run = l_run * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    keep = rows & (lo < n)
    safe = tl.where(l_run > 0, l_run, 1.0)
    tl.store(OP + b * spb + heads[:, None] * sph + split * sps + d[None, :], acc / safe[:, None], mask=keep[:, None])
    tl.store(LP + b * slb + heads * slh + split, m + tl.log(safe), mask=keep)


@triton.jit
def combine_kernel(OP, LP, Lens, Out, Hq, chunk, spb, sph, sps, slb, slh, sob, soh, D: tl.constexpr, BS: tl.constexpr):
    pid = tl.program_id(0)
    b, h = pid // Hq, pid % Hq
    live = tl.arange(0, BS) < tl.cdiv(tl.load(Lens + b), chunk)
    d = tl.arange(0, D)
    lse = tl.load(LP + b * slb + h * slh + tl.arange(0, BS), mask=live, other=-float("inf"))
    o = tl.load(OP + b * spb + h * sph + tl.arange(0, BS)[:, None] * sps + d[None, :], mask=live[:, None], other=0.0)
    w = tl.exp(lse - tl.max(lse, 0))
    tl.store(Out + b * sob + h * soh + d, (tl.sum(o * w[:, None], 0) / tl.sum(w, 0)).to(Out.dtype.element_ty))


def decode_attention(q, k_cache, v_cache, seq_lens):
    B, Hq, D = q.shape
    Hkv, S = k_cache.shape[1], k_cache.shape[2]
    block, chunk = 16, 48  # three tiles per split
    splits = triton.cdiv(S, chunk)
    op = torch.empty((B, Hq, splits, D), dtype=torch.float32, device=q.device)
    lp = torch.empty((B, Hq, splits), dtype=torch.float32, device=q.device)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    partial_kernel[(B * Hkv, splits)](q, k_cache, v_cache, seq_lens, op, lp, Hkv, chunk, 1 / math.sqrt(D),
                                      q.stride(0), q.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3],
                                      *op.stride()[:3], *lp.stride()[:2], G=Hq // Hkv,
                                      BG=max(16, triton.next_power_of_2(Hq // Hkv)), D=D, BN=block)
    combine_kernel[(B * Hq,)](op, lp, seq_lens, out, Hq, chunk, *op.stride()[:3], *lp.stride()[:2], out.stride(0),
                              out.stride(1), D=D, BS=triton.next_power_of_2(splits))
    return out
