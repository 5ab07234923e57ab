# exercise: flash.attention
# function: attention
# verdict: failed
# says: bfloat16
# cpu-says: does not compile for an h100/h200
# gpu-says: does not compile for this gpu
# says: same dtype
# says: p.to(v.dtype)
# seed: 8
# mutant-of: flash/good_pointers.py
"""FlashAttention with P·V as tl.dot(p, v): p is float32, v is the input's dtype. Right in float32 (the
interpreter's cases); a GPU's compiler refuses it in bf16 and fp16, so a CPU must fail it too."""
# @@
#          l_i = l_i * alpha + tl.sum(p, axis=1)
# -        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
# +        acc = acc * alpha[:, None] + tl.dot(p, v)
#          m_i = m_new
