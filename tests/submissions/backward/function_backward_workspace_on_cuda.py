"""Right: the backward makes its δ buffer with `device="cuda"`, as code written for a one-GPU machine does. A GPU
machine puts it in the GPU's memory; on a CPU the placement watch lets the CPU's memory stand in for it, but the
watch was off in the backward (autograd runs it with no torch function mode on), so PyTorch raised "Torch not
compiled with CUDA enabled" there and a right answer failed."""
# exercise: backward.attention_function
# function: attention
# verdict: passed
import torch
from _function import SavesForBackward, backward_into


class FlashAttention(SavesForBackward):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        delta = torch.empty(lse.shape, dtype=torch.float32, device="cuda")
        return (*backward_into(q, k, v, o, lse, do.contiguous(), ctx.causal, delta), None)


def attention(q, k, v, causal=False):
    return FlashAttention.apply(q, k, v, causal)
