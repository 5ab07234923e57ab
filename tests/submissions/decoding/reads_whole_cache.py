"""Adversarial: every program loads its whole slice of S_max, then masks the scores (and zeroes V) past the
length: the values are right, but the positions past seq_lens[b] are read."""

import triton
import triton.language as tl

from gpuprinciples.kernels.decode_attention import finish, launch, plan


@triton.jit
def whole_slice_kernel(Q, K, V, SeqLens, Out, OPart, LsePart, Hkv, chunk, qk_scale,
                       sqb, sqh, skb, skh, sks, svb, svh, svs, sob, soh, spb, sph, sps, slb, slh, S_MAX,
                       G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
                       SINGLE: tl.constexpr, PRECISION: tl.constexpr):
    pid, split = tl.program_id(0), tl.program_id(1)
    b, hkv = pid // Hkv, pid % Hkv
    seq_len = tl.load(SeqLens + b)
    start = split * chunk
    offs_g, offs_d = tl.arange(0, BLOCK_G), tl.arange(0, D)
    heads = hkv * G + offs_g
    rows = offs_g < tl.where(start < seq_len, G, 0)
    q = tl.load(Q + b * sqb + heads[:, None] * sqh + offs_d[None, :], mask=rows[:, None], other=0.0)
    m_i = tl.full([BLOCK_G], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    for n in range(start, tl.minimum(start + chunk, S_MAX), BLOCK_N):
        pos = n + tl.arange(0, BLOCK_N)
        inside = pos < S_MAX  # the mistake: bounded by S_max, not by seq_len
        k = tl.load(K + b * skb + hkv * skh + pos[:, None] * sks + offs_d[None, :], mask=inside[:, None], other=0.0)
        v = tl.load(V + b * svb + hkv * svh + pos[:, None] * svs + offs_d[None, :], mask=inside[:, None], other=0.0)
        live = pos < seq_len
        v = tl.where(live[:, None], v, 0.0)
        s = tl.where(live[None, :], tl.dot(q, k.T, input_precision=PRECISION) * qk_scale, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    finish(acc, l_i, m_i, rows, heads, offs_d, b, split, Out, OPart, LsePart, sob, soh, spb, sph, sps, slb, slh, SINGLE)


def decode_attention(q, k_cache, v_cache, seq_lens):
    Hkv, S = k_cache.shape[1], k_cache.shape[2]
    return launch(whole_slice_kernel, q, seq_lens, Hkv, q.shape[1] // Hkv, (k_cache, v_cache),
                  (*k_cache.stride()[:3], *v_cache.stride()[:3]), plan(q, Hkv, S), after=(S,))
