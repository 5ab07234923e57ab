# exercise: flash.attention
# function: attention
# verdict: failed
# not-says: values wrong
# modes: cpu
# says: read the same element of k or v 2 times
# seed: 8
# mutant-of: flash/good_pointers.py
"""Adversarial: a two-pass softmax that reads every K tile twice per query tile (correct values)."""
# @@
#          hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)
# +    # pass 1: the row maximum and sum over all keys (reads K once) ...
# +    for start_n in range(0, hi, BLOCK_N):
# +        keys = start_n + offs_n
# +        k = tl.load(K + b * skb + h * skh + keys[:, None] * skn + offs_d[None, :], mask=keys[:, None] < N, other=0.0)
# +        s = tl.dot(q, tl.trans(k)) * scale
# +        valid = keys[None, :] < N
# +        if CAUSAL:
# +            valid = valid & (keys[None, :] <= offs_m[:, None])
# +        s = tl.where(valid, s, -float("inf"))
# +        m_new = tl.maximum(m_i, tl.max(s, axis=1))
# +        l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(s - m_new[:, None]), axis=1)
# +        m_i = m_new
# +    # ... pass 2: P·V with the final maximum (reads K again, and V)
#      for start_n in range(0, hi, BLOCK_N):
# @@
#          s = tl.where(valid, s, -float("inf"))
# -        m_new = tl.maximum(m_i, tl.max(s, axis=1))
# -        p = tl.exp(s - m_new[:, None])
# -        alpha = tl.exp(m_i - m_new)
# -        l_i = l_i * alpha + tl.sum(p, axis=1)
# -        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
# -        m_i = m_new
# +        p = tl.exp(s - m_i[:, None])
# +        acc = acc + tl.dot(p.to(v.dtype), v)
#      tl.store(Out + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :],
