# exercise: fusion.cos_cos
# function: cos_cos
# graded-by: test_launch_paths.py
"""Right: cos(cos(x)) with @triton.autotune over several configurations, keyed on the size. The
grader's warm-up call tunes (on a GPU it times each configuration; under the interpreter it compiles
each for an H100/H200 and takes the first a GPU would run); the graded call is one launch."""
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 2048}, num_warps=8), triton.Config({"BLOCK": 1024}, num_warps=4),
                          triton.Config({"BLOCK": 512}, num_warps=4, num_stages=2)], key=["n"])
@triton.jit
def cos_cos_tuned(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    v = tl.load(src + at, mask=inside).to(tl.float32)
    tl.store(dst + at, tl.cos(tl.cos(v)), mask=inside)


def cos_cos(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    cos_cos_tuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
    return y
