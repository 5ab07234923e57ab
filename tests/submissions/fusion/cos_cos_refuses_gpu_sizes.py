"""Wrong on a GPU, and it passed on a CPU: a right kernel behind host code that refuses inputs past a million
elements, a size only the GPU's cases reach (the GPU raises on them). The compile pass runs the host code on the
GPU's cases; it dropped any error that was not the compiler's, so the pass counted the small cases' compiles and
passed. A GPU case on which the code raised before launching now fails the requirement."""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# cpu-says: before launching any kernel
# gpu-says: too large for this kernel
import torch
import triton
from _kernels import cos_cos_kernel


def cos_cos(x):
    if x.numel() > 1 << 20:
        raise ValueError("input too large for this kernel")
    y = torch.empty_like(x)
    cos_cos_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
