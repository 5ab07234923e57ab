# exercise: fusion.cos_cos
# function: cos_cos
# graded-by: test_launch_paths.py
"""Right: cos(cos(x)) whose block size comes from @triton.heuristics (a power of two from the size,
capped), and whose `EVEN` flag drops the mask when the block divides n."""
import torch
import triton
import triton.language as tl


@triton.heuristics({"BLOCK": lambda args: min(4096, triton.next_power_of_2(args["n"])),
                    "EVEN": lambda args: args["n"] % min(4096, triton.next_power_of_2(args["n"])) == 0})
@triton.jit
def cos_cos_heuristic(src, dst, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(dst + at, tl.cos(tl.cos(tl.load(src + at).to(tl.float32))))
    else:
        inside = at < n
        tl.store(dst + at, tl.cos(tl.cos(tl.load(src + at, mask=inside).to(tl.float32))), mask=inside)


def cos_cos(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    cos_cos_heuristic[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
    return y
