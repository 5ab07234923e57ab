"""A right backward (plain loops, every tile masked): it must pass. A CPU only: on a GPU these plain tiles are
timed, and slower than the 0.8× of SDPA flash the exercise asks there (the package's reference is graded there)."""
# exercise: backward.attention_backward
# function: attention_backward
# modes: cpu
# verdict: passed
from _kernels import backward


def attention_backward(q, k, v, o, lse, do, causal=False):
    return backward(q, k, v, o, lse, do, causal)
