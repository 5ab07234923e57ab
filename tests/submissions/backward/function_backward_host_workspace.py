"""Wrong on a GPU: the backward makes its δ buffer without `device=`, so on a GPU machine it is in the CPU's memory
and the first launch handed it is refused ("Pointer argument ... cannot be accessed from Triton (cpu tensor?)").
On a CPU the placement watch, which refuses that launch in a forward, was off in the backward (autograd runs it with
no torch function mode on), and this passed."""
# exercise: backward.attention_function
# function: attention
# verdict: failed
# says: cannot be accessed from triton
import torch
from _function import SavesForBackward, backward_into


class FlashAttention(SavesForBackward):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        delta = torch.empty(lse.shape, dtype=torch.float32)  # the mistake: no device=
        return (*backward_into(q, k, v, o, lse, do.contiguous(), ctx.causal, delta), None)


def attention(q, k, v, causal=False):
    return FlashAttention.apply(q, k, v, causal)
