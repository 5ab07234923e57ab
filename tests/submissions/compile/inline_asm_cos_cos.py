# exercise: fusion.cos_cos
# function: cos_cos
# graded-by: test_gpucompile.py
"""Right on a GPU, beyond the interpreter: passes the result through a line of inline PTX (a move),
which only a GPU can run. The report must say it is the interpreter's limit, not the learner's mistake."""
import torch
import triton
import triton.language as tl


@triton.jit
def cos_cos_asm(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    v = tl.cos(tl.cos(tl.load(src + at, mask=inside).to(tl.float32)))
    v = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [v], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(dst + at, v, mask=inside)


def cos_cos(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    cos_cos_asm[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
