# exercise: decoding.decode_attention
# function: decode_attention
# verdict: failed
# cpu-says: positions at or past seq_lens[b]
# says: values wrong (
# seed: 10
"""Adversarial: attends over the whole cache, S_max positions, whatever seq_lens says (one launch)."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def full_cache_kernel(Q, K, V, Out, Hkv, S, scale, sqb, sqh, skb, skh, sks, svb, svh, svs, sob, soh,
                      G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    b, kv = pid // Hkv, pid % Hkv
    g, d = tl.arange(0, BG), tl.arange(0, D)
    heads = kv * G + g
    rows = g < G
    q = tl.load(Q + b * sqb + heads[:, None] * sqh + d[None, :], mask=rows[:, None], other=0.0)
    m = tl.full([BG], -float("inf"), tl.float32)
    l_run = tl.zeros([BG], tl.float32)
    acc = tl.zeros([BG, D], tl.float32)
    for start in range(0, S, BN):
        t = start + tl.arange(0, BN)
        ok = t < S
        k = tl.load(K + b * skb + kv * skh + t[:, None] * sks + d[None, :], mask=ok[:, None], other=0.0)
        v = tl.load(V + b * svb + kv * svh + t[:, None] * svs + d[None, :], mask=ok[:, None], other=0.0)
        s = tl.where(ok[None, :], tl.dot(q, tl.trans(k)) * scale, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)
        l_run = l_run * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    tl.store(Out + b * sob + heads[:, None] * soh + d[None, :], (acc / l_run[:, None]).to(Out.dtype.element_ty),
             mask=rows[:, None])


def decode_attention(q, k_cache, v_cache, seq_lens):
    B, Hq, D = q.shape
    Hkv, S = k_cache.shape[1], k_cache.shape[2]
    out = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
    full_cache_kernel[(B * Hkv,)](q, k_cache, v_cache, out, Hkv, S, 1 / math.sqrt(D), q.stride(0), q.stride(1),
                                  *k_cache.stride()[:3], *v_cache.stride()[:3], out.stride(0), out.stride(1),
                                  G=Hq // Hkv, BG=max(16, triton.next_power_of_2(Hq // Hkv)), D=D, BN=32)
    return out
