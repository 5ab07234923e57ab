"""Right: an autograd.Function whose backward checks, as launch code copied from libraries does, that dO is on the
GPU (and falls back to nothing else). Autograd runs a backward with no torch function mode on, so the grader's
placement watch was off there: on a CPU `do.is_cuda` was False, the assert raised on every case, and a right answer
that a GPU passes failed. The watch now follows the learner's backward too (placement.modes_in_backward)."""
# exercise: backward.attention_function
# function: attention
# verdict: passed
import torch
from _function import SavesForBackward, backward_into


class FlashAttention(SavesForBackward):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        assert q.is_cuda and k.is_cuda and v.is_cuda, "FlashAttention runs on the GPU"
        return SavesForBackward.forward(ctx, q, k, v, causal)

    @staticmethod
    def backward(ctx, do):
        assert do.is_cuda and do.device.type == "cuda", f"dO must be on the GPU, not {do.device}"
        q, k, v, o, lse = ctx.saved_tensors
        delta = torch.empty(lse.shape, dtype=torch.float32, device=do.device)
        return (*backward_into(q, k, v, o, lse, do.contiguous(), ctx.causal, delta), None)


def attention(q, k, v, causal=False):
    return FlashAttention.apply(q, k, v, causal)
