# exercise: flash.attention
# function: attention
# verdict: failed
# says: values wrong (
# says: packed_kv
# says: strides of their own
# seed: 8
# mutant-of: flash/good_pointers.py
"""Adversarial: a right kernel, launched with q's strides for k and v too (one stride set for all three)."""
# @@
#          q, k, v, o, H, N, 1.0 / math.sqrt(D),
# -        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
# +        *q.stride()[:3], *q.stride()[:3], *q.stride()[:3], *o.stride()[:3],  # assumes k and v are laid out as q
#          D=D, CAUSAL=bool(causal), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
