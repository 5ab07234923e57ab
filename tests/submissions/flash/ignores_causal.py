# exercise: flash.attention
# function: attention
# verdict: failed
# says: values wrong (
# says: causal
# seed: 8
# mutant-of: flash/good_pointers.py
"""Adversarial: always attends to every key, whatever `causal` says."""
# @@
#          *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
# -        D=D, CAUSAL=bool(causal), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
# +        D=D, CAUSAL=False, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
#      return o
