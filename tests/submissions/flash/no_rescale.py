# exercise: flash.attention
# function: attention
# verdict: failed
# says: nan or inf values
# says: subtract the running row maximum
# says: large
# seed: 8
# mutant-of: flash/good_pointers.py
"""Adversarial: the softmax without the running maximum (exp of raw scores overflows on large logits)."""
# @@
#                  mask=offs_m[:, None] < N, other=0.0)
# -    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
# +    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)  # noqa: F841 (unused by no_rescale.py)
#      l_i = tl.zeros([BLOCK_M], tl.float32)
# @@
#          s = tl.where(valid, s, -float("inf"))
# -        m_new = tl.maximum(m_i, tl.max(s, axis=1))
# -        p = tl.exp(s - m_new[:, None])
# -        alpha = tl.exp(m_i - m_new)
# -        l_i = l_i * alpha + tl.sum(p, axis=1)
# -        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
# -        m_i = m_new
# +        p = tl.exp(s)  # no running maximum: exp overflows on large scores
# +        l_i = l_i + tl.sum(p, axis=1)
# +        acc = acc + tl.dot(p.to(v.dtype), v)
#      tl.store(Out + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :],
