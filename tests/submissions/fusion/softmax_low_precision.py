# exercise: fusion.softmax
# function: softmax
# verdict: failed
# says: values wrong
# says: tolerance
# mutant-of: fusion/softmax_wrong_tail.py
"""Computes exp in bfloat16: fine for a picture, not float32's answer."""
# @@
#      mask = cols < n_cols
# -    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
# -    x = x - tl.max(x, axis=0)
# +    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
# +    x = (x - tl.max(x, axis=0)).to(tl.bfloat16).to(tl.float32)
#      num = tl.exp(x)
