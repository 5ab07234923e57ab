# exercise: fusion.softmax
# function: softmax
# verdict: failed
# says: nan in the wrong places
# says: large
# mutant-of: fusion/softmax_wrong_tail.py
"""No max subtraction: exp overflows to inf on large inputs, and inf / inf is NaN."""
# @@
#      mask = cols < n_cols
# -    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
# -    x = x - tl.max(x, axis=0)
# +    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
# +
#      num = tl.exp(x)
