# exercise: decoding.decode_attention
# function: decode_attention
# verdict: failed
# says: bfloat16
# cpu-says: does not compile for an h100/h200
# gpu-says: does not compile for this gpu
# says: same dtype
# says: p.to(v.dtype)
# seed: 10
# mutant-of: decoding/good_pointers.py
"""Split-KV decode attention with P·V as tl.dot(p, v): p is float32, v the cache's dtype. Right in float32
(the interpreter's cases); a GPU's compiler refuses it in bf16 and fp16, so a CPU must fail it too."""
# @@
#          l_run = l_run * alpha + tl.sum(p, 1)
# -        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
# +        acc = acc * alpha[:, None] + tl.dot(p, v)
#          m = m_new
