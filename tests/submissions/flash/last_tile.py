# exercise: flash.attention
# function: attention
# verdict: failed
# says: values wrong (
# says: full
# seed: 8
# mutant-of: flash/good_pointers.py
"""Adversarial: keys past N in the last, partial tile are not masked (their zero scores count)."""
# @@
#          s = tl.dot(q, tl.trans(k)) * scale
# -        valid = keys[None, :] < N
# -        if CAUSAL:
# -            valid = valid & (keys[None, :] <= offs_m[:, None])
# -        s = tl.where(valid, s, -float("inf"))
# +        if CAUSAL:  # forgets the keys past N: they were loaded as zeros, so their score is 0, not -inf
# +            s = tl.where(keys[None, :] <= offs_m[:, None], s, -float("inf"))
#          m_new = tl.maximum(m_i, tl.max(s, axis=1))
