# exercise: fusion.softmax
# function: softmax
# verdict: failed
# says: values wrong
# says: row stride
# mutant-of: fusion/softmax_wrong_tail.py
"""Assumes rows are packed: row * n_cols, wrong when x is a column slice of a wider tensor."""
# @@
#      mask = cols < n_cols
# -    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
# +    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
#      x = x - tl.max(x, axis=0)
