"""Shared by this folder's `backward.attention_function` submissions: `SavesForBackward`, an autograd.Function
whose forward is the package's with its LSE (a learner's own `attention_lse`) and saves what the backward needs, and
_kernels.py's right backward launched on a δ buffer the caller makes (where that buffer lives, and how the caller
gets dO ready, is what those submissions' backwards are about)."""

import math

import torch
import triton
from _kernels import LOG2E, _delta, _dkdv, _dq

from gpuprinciples.course.kernels.attention_backward import attention_lse


def backward_into(q, k, v, o, lse, do, causal, delta):
    """(dq, dk, dv) with δ written into `delta` (float32 [B, H, N]); q, k, v any layout, o and do contiguous."""
    B, H, N, D = q.shape
    q, k, v = (t if t.is_contiguous() else t.contiguous() for t in (q, k, v))
    block = 32
    _delta[(triton.cdiv(N, block), B * H)](o, do, delta, N, D=D, BLOCK=block)
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))
    scales = (N, LOG2E / math.sqrt(D), 1 / math.sqrt(D))
    flags = dict(D=D, CAUSAL=bool(causal), USE_DELTA=True, BLOCK=block)
    _dkdv[(triton.cdiv(N, block), B * H)](q, k, v, do, lse, delta, delta, dk, dv, *scales, STORE_P=False, **flags)
    _dq[(triton.cdiv(N, block), B * H)](q, k, v, do, lse, delta, dq, *scales, SCALE_DQ=True, **flags)
    return dq, dk, dv


class SavesForBackward(torch.autograd.Function):
    """The forward of every submission here: O, with q, k, v, O and the LSE saved. Each submission writes the
    backward."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        o, lse = attention_lse(q, k, v, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o
