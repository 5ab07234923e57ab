# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: no triton kernel was launched
# says: pytorch operators did work
# says: cos ×2
"""PyTorch does the work."""


def cos_cos(x):
    return x.cos().cos()
