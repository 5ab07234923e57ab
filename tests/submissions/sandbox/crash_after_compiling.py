# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: crashed (signal sigsegv)
# not-says: the grader itself failed
"""A right kernel whose process dies at a later case, as an illegal memory access kills it on a GPU, after the
first cases compiled. The grader then asked the dead child for its compile pass (Triton's interpreter only) and
reported its own BrokenPipeError as "a bug in gpuprinciples" beside the crash."""
import os
import signal

import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask))), mask=mask)


def cos_cos(x):
    if x.numel() > 50_000:  # the cases before this one ran (and compiled for the GPU)
        os.kill(os.getpid(), signal.SIGSEGV)
    y = torch.empty_like(x)
    k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
