# exercise: decoding.decode_attention
# function: decode_attention
# verdict: failed
# not-says: values wrong
# modes: cpu
# says: × over
# says: once per kv head, not once per query head
# seed: 10
"""Adversarial: one program per (sequence, query head, split), each loading the K/V head it reads: correct
values, but every KV head is read once per query head that shares it (G times over)."""

import triton
import triton.language as tl

from gpuprinciples.course.kernels.decode_attention import attend, finish, launch, plan


@triton.jit
def per_head_kernel(Q, K, V, SeqLens, Out, OPart, LsePart, Hq, chunk, qk_scale,
                    sqb, sqh, skb, skh, sks, svb, svh, svs, sob, soh, spb, sph, sps, slb, slh, GROUP,
                    G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
                    SINGLE: tl.constexpr, PRECISION: tl.constexpr):
    pid, split = tl.program_id(0), tl.program_id(1)
    b, h = pid // Hq, pid % Hq
    hkv = h // GROUP
    seq_len = tl.load(SeqLens + b)
    start = split * chunk
    end = tl.minimum(start + chunk, seq_len)
    offs_g, offs_d = tl.arange(0, BLOCK_G), tl.arange(0, D)
    heads = h + offs_g
    rows = offs_g < tl.where(start < seq_len, 1, 0)  # one query head per program
    q = tl.load(Q + b * sqb + heads[:, None] * sqh + offs_d[None, :], mask=rows[:, None], other=0.0)
    m_i = tl.full([BLOCK_G], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    for n in range(start, end, BLOCK_N):
        pos = n + tl.arange(0, BLOCK_N)
        ok = pos < end
        k = tl.load(K + b * skb + hkv * skh + pos[:, None] * sks + offs_d[None, :], mask=ok[:, None], other=0.0)
        v = tl.load(V + b * svb + hkv * svh + pos[:, None] * svs + offs_d[None, :], mask=ok[:, None], other=0.0)
        m_i, l_i, acc = attend(q, k, v, ok, m_i, l_i, acc, qk_scale, PRECISION)
    finish(acc, l_i, m_i, rows, heads, offs_d, b, split, Out, OPart, LsePart, sob, soh, spb, sph, sps, slb, slh, SINGLE)


def decode_attention(q, k_cache, v_cache, seq_lens):
    Hq, Hkv, S = q.shape[1], k_cache.shape[1], k_cache.shape[2]
    # the grid's "KV heads" are the query heads, one head per program
    return launch(per_head_kernel, q, seq_lens, Hq, 1, (k_cache, v_cache),
                  (*k_cache.stride()[:3], *v_cache.stride()[:3]), plan(q, Hq, S), after=(Hq // Hkv,))
