# exercise: fusion.softmax
# function: softmax
# verdict: failed
# says: nan in the wrong places
# says: special
# mutant-of: fusion/softmax_wrong_tail.py
"""Treats NaN as -inf (drops it): torch.softmax makes the whole row NaN."""
# @@
#      mask = cols < n_cols
# -    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
# +    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
# +    x = tl.where(x != x, -float("inf"), x)
#      x = x - tl.max(x, axis=0)
