"""dS = P ∘ dP without the row term δ = rowsum(dO ∘ O): dQ and dK are wrong (dV, which needs no dS, is right)."""
# exercise: backward.attention_backward
# function: attention_backward
# verdict: failed
# says: values wrong
from _kernels import backward


def attention_backward(q, k, v, o, lse, do, causal=False):
    return backward(q, k, v, o, lse, do, causal, use_delta=False)
