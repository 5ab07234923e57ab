# exercise: fusion.softmax
# function: softmax
# verdict: failed
# says: changed its input
"""Writes the answer over x (and returns a fresh copy): the caller's x is destroyed."""
from gpuprinciples.course.kernels.softmax import softmax as _fused


def softmax(x):
    y = _fused(x)
    x.copy_(y)
    return y
