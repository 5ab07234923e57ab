# exercise: decoding.decode_attention
# function: decode_attention
# verdict: failed
# not-says: values wrong
# modes: cpu
# says: loaded elements that must not be read
# says: of v_cache (positions at or past seq_lens[b]
# seed: 10
# ruff: noqa: E501  (a hunk line is the code line and three characters)
# mutant-of: decoding/ignores_seq_lens.py
"""Adversarial (issue 27, item 6): over-reads V. K is loaded only below seq_lens[b], V at every position of the
cache, and what it loads past the length is zeroed afterwards, so every value is right: the report must lead with
the over-read, not call the values wrong."""
# @@
#  @triton.jit
# -def full_cache_kernel(Q, K, V, Out, Hkv, S, scale, sqb, sqh, skb, skh, sks, svb, svh, svs, sob, soh,
# -                      G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr, BN: tl.constexpr):
# +def over_read_kernel(Q, K, V, Out, Lens, Hkv, S, scale, sqb, sqh, skb, skh, sks, svb, svh, svs, sob, soh,
# +                     G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr, BN: tl.constexpr):
#      pid = tl.program_id(0)
# @@
#      acc = tl.zeros([BG, D], tl.float32)
# +    n = tl.load(Lens + b)
#      for start in range(0, S, BN):
#          t = start + tl.arange(0, BN)
# -        ok = t < S
# -        k = tl.load(K + b * skb + kv * skh + t[:, None] * sks + d[None, :], mask=ok[:, None], other=0.0)
# -        v = tl.load(V + b * svb + kv * svh + t[:, None] * svs + d[None, :], mask=ok[:, None], other=0.0)
# -        s = tl.where(ok[None, :], tl.dot(q, tl.trans(k)) * scale, -float("inf"))
# +        live = t < n
# +        k = tl.load(K + b * skb + kv * skh + t[:, None] * sks + d[None, :], mask=live[:, None], other=0.0)
# +        v = tl.load(V + b * svb + kv * svh + t[:, None] * svs + d[None, :], mask=(t < S)[:, None])  # past n too
# +        v = tl.where(live[:, None], v, 0.0)  # ...but nothing past n is used
# +        s = tl.where(live[None, :], tl.dot(q, tl.trans(k)) * scale, -float("inf"))
#          m_new = tl.maximum(m, tl.max(s, 1))
# @@
#      out = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
# -    full_cache_kernel[(B * Hkv,)](q, k_cache, v_cache, out, Hkv, S, 1 / math.sqrt(D), q.stride(0), q.stride(1),
# -                                  *k_cache.stride()[:3], *v_cache.stride()[:3], out.stride(0), out.stride(1),
# -                                  G=Hq // Hkv, BG=max(16, triton.next_power_of_2(Hq // Hkv)), D=D, BN=32)
# +    over_read_kernel[(B * Hkv,)](q, k_cache, v_cache, out, seq_lens, Hkv, S, 1 / math.sqrt(D), q.stride(0),
# +                                 q.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3], out.stride(0),
# +                                 out.stride(1), G=Hq // Hkv, BG=max(16, triton.next_power_of_2(Hq // Hkv)), D=D, BN=32)
#      return out
