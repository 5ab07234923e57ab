# exercise: decoding.decode_attention
# function: decode_attention
# verdict: failed
# cpu-says: a context past one tile of 1024 positions
# says: values wrong (
# seed: 10
# ruff: noqa: E501  (a hunk line is the code line and three characters)
# mutant-of: decoding/ignores_seq_lens.py
"""Adversarial: right only for short contexts. The loop over K/V tiles stops at a fixed CONTEXT = 512 positions
(the longest cache its author tried) instead of the cache's S_max: a CPU whose contexts stayed under 512 passed it;
an H200's cases reach 6000 positions."""
# @@
#  @triton.jit
# -def full_cache_kernel(Q, K, V, Out, Hkv, S, scale, sqb, sqh, skb, skh, sks, svb, svh, svs, sob, soh,
# -                      G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr, BN: tl.constexpr):
# +def short_context_kernel(Q, K, V, Out, Lens, Hkv, S, scale, sqb, sqh, skb, skh, sks, svb, svh, svs, sob, soh,
# +                         G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr, BN: tl.constexpr, CONTEXT: tl.constexpr):
#      pid = tl.program_id(0)
# @@
#      acc = tl.zeros([BG, D], tl.float32)
# -    for start in range(0, S, BN):
# +    n = tl.load(Lens + b)
# +    for start in range(0, CONTEXT, BN):  # BUG: S, not a fixed CONTEXT
#          t = start + tl.arange(0, BN)
# -        ok = t < S
# -        k = tl.load(K + b * skb + kv * skh + t[:, None] * sks + d[None, :], mask=ok[:, None], other=0.0)
# -        v = tl.load(V + b * svb + kv * svh + t[:, None] * svs + d[None, :], mask=ok[:, None], other=0.0)
# -        s = tl.where(ok[None, :], tl.dot(q, tl.trans(k)) * scale, -float("inf"))
# +        live = t < n
# +        k = tl.load(K + b * skb + kv * skh + t[:, None] * sks + d[None, :], mask=live[:, None], other=0.0)
# +        v = tl.load(V + b * svb + kv * svh + t[:, None] * svs + d[None, :], mask=live[:, None], other=0.0)
# +        s = tl.where(live[None, :], tl.dot(q, tl.trans(k)) * scale, -float("inf"))
#          m_new = tl.maximum(m, tl.max(s, 1))
# @@
#      out = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
# -    full_cache_kernel[(B * Hkv,)](q, k_cache, v_cache, out, Hkv, S, 1 / math.sqrt(D), q.stride(0), q.stride(1),
# -                                  *k_cache.stride()[:3], *v_cache.stride()[:3], out.stride(0), out.stride(1),
# -                                  G=Hq // Hkv, BG=max(16, triton.next_power_of_2(Hq // Hkv)), D=D, BN=32)
# +    short_context_kernel[(B * Hkv,)](q, k_cache, v_cache, out, seq_lens, Hkv, S, 1 / math.sqrt(D), q.stride(0),
# +                                     q.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3], out.stride(0),
# +                                     out.stride(1), G=Hq // Hkv, BG=max(16, triton.next_power_of_2(Hq // Hkv)), D=D,
# +                                     BN=32, CONTEXT=512)
#      return out
