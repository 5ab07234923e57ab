# exercise: decoding.decode_attention
# function: decode_attention
# verdict: failed
# not-says: values wrong
# modes: cpu
# says: loaded elements that must not be read
# says: of k_cache (positions at or past seq_lens[b]
# says: of v_cache (positions at or past
# seed: 10
"""Adversarial: every program loads its whole slice of S_max, then masks the scores (and zeroes V) past the
length: the values are right, but the positions past seq_lens[b] are read."""

import triton
import triton.language as tl

from gpuprinciples.course.kernels.decode_attention import attend, finish, launch, load_queries, plan


@triton.jit
def whole_slice_kernel(Q, K, V, SeqLens, Out, OPart, LsePart, Hkv, chunk, qk_scale,
                       sqb, sqh, skb, skh, sks, svb, svh, svs, sob, soh, spb, sph, sps, slb, slh, S_MAX,
                       G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
                       SINGLE: tl.constexpr, PRECISION: tl.constexpr):
    b, hkv, split, seq_len, start, end, heads, rows, offs_d, q = load_queries(Q, SeqLens, Hkv, chunk, sqb, sqh,
                                                                              G, BLOCK_G, D)
    m_i = tl.full([BLOCK_G], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    for n in range(start, tl.minimum(start + chunk, S_MAX), BLOCK_N):
        pos = n + tl.arange(0, BLOCK_N)
        inside = pos < S_MAX  # the mistake: bounded by S_max, not by seq_len
        k = tl.load(K + b * skb + hkv * skh + pos[:, None] * sks + offs_d[None, :], mask=inside[:, None], other=0.0)
        v = tl.load(V + b * svb + hkv * svh + pos[:, None] * svs + offs_d[None, :], mask=inside[:, None], other=0.0)
        live = pos < seq_len
        m_i, l_i, acc = attend(q, k, tl.where(live[:, None], v, 0.0), live, m_i, l_i, acc, qk_scale, PRECISION)
    finish(acc, l_i, m_i, rows, heads, offs_d, b, split, Out, OPart, LsePart, sob, soh, spb, sph, sps, slb, slh, SINGLE)


def decode_attention(q, k_cache, v_cache, seq_lens):
    Hkv, S = k_cache.shape[1], k_cache.shape[2]
    return launch(whole_slice_kernel, q, seq_lens, Hkv, q.shape[1] // Hkv, (k_cache, v_cache),
                  (*k_cache.stride()[:3], *v_cache.stride()[:3]), plan(q, Hkv, S), after=(S,))
