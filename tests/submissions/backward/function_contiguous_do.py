"""Right: the lesson's Function around a backward whose kernels take o and dO contiguous (as attention_backward's
signature promises them): dO is made contiguous where it arrives strided (a model that joins its heads after
attention hands it over as a [B, N, H, D] tensor seen as [B, H, N, D]). The copy moves bytes, computes nothing."""
# exercise: backward.attention_function
# function: attention
# verdict: passed
import torch
from _function import SavesForBackward, backward_into


class FlashAttention(SavesForBackward):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        do = do if do.is_contiguous() else do.contiguous()
        delta = torch.empty_like(lse)
        return (*backward_into(q, k, v, o, lse, do, ctx.causal, delta), None)


def attention(q, k, v, causal=False):
    return FlashAttention.apply(q, k, v, causal)
