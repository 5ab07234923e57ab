"""Right: the one-pass backward, FlashAttention-2's CUDA way (the package's kernel with `Plan(dq=None)`): the dK/dV
programs add their share of dQ into a float32 buffer with `tl.atomic_add`, tile after tile, and a last kernel casts
it. A CPU counted every atomic add as bytes stored (dQ once per key tile) and failed it as "something N×N went to
memory"; what it keeps in memory is dQ, dK, dV, their float32 sum and per-row vectors, so it passes on both.
Graded on a CPU only: on a GPU whether this plan meets the speed bar is not its point."""
# exercise: backward.attention_backward
# function: attention_backward
# verdict: passed
# modes: cpu
from gpuprinciples.course.kernels.attention_backward import Plan
from gpuprinciples.course.kernels.attention_backward import attention_backward as package_backward

ONE_PASS = Plan(dkdv=(32, 32, 4, 1), dq=None)


def attention_backward(q, k, v, o, lse, do, causal=False):
    return package_backward(q, k, v, o, lse, do, causal, plan=ONE_PASS)
