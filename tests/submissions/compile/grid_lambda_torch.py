# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: pytorch operators did work that the kernel must do: cos ×2
"""Wrong: the answer is computed by PyTorch inside the launch's grid callable, which Triton calls during
the launch; the kernel only copies it. The grid callable is the learner's code: its PyTorch work counts."""
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, tl.load(src + at, mask=inside), mask=inside)


def cos_cos(x):
    y = torch.empty_like(x)
    answer = torch.empty_like(x)

    def grid(meta):
        answer.copy_(torch.cos(torch.cos(x)))
        return (triton.cdiv(x.numel(), meta["BLOCK"]),)

    copy_kernel[grid](answer, y, x.numel(), BLOCK=1024)
    return y
