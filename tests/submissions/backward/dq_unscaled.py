"""dQ = dS·K without the softmax scale 1/√D: dQ is √D times too large, dK and dV are right."""
# exercise: backward.attention_backward
# function: attention_backward
# verdict: failed
# says: dq:
from _kernels import backward


def attention_backward(q, k, v, o, lse, do, causal=False):
    return backward(q, k, v, o, lse, do, causal, scale_dq=False)
