"""Right values, but P goes to memory, N×N per head, as the math path keeps it: what FlashAttention exists to avoid."""
# exercise: backward.attention_backward
# function: attention_backward
# verdict: failed
# says: that is a score matrix
# cpu-says: something n×n went to memory
from _kernels import backward


def attention_backward(q, k, v, o, lse, do, causal=False):
    return backward(q, k, v, o, lse, do, causal, store_p=True)
