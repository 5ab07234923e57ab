# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: raised on
# says: valueerror
# says: block size must divide n
"""Raises on every call."""


def cos_cos(x):
    raise ValueError("block size must divide n")
