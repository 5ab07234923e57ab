# exercise: flash.attention
# function: attention
# verdict: failed
# says: values wrong (
# seed: 8
# mutant-of: flash/good_pointers.py
"""Adversarial: scales the scores by 1/D instead of 1/sqrt(D)."""
# @@
#
# -import math
#
# @@
#      flash_kernel[(triton.cdiv(N, BLOCK_M), B * H)](
# -        q, k, v, o, H, N, 1.0 / math.sqrt(D),
# +        q, k, v, o, H, N, 1.0 / D,
#          *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
