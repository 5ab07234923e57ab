# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: returned its input
"""Returns x itself."""


def cos_cos(x):
    return x
