"""The forward was causal, the backward lets every query see every key: wrong in the causal cases only."""
# exercise: backward.attention_backward
# function: attention_backward
# verdict: failed
# says: the backward must apply the same mask as the forward
from _kernels import backward


def attention_backward(q, k, v, o, lse, do, causal=False):
    return backward(q, k, v, o, lse, do, causal, mask_causal=False)
