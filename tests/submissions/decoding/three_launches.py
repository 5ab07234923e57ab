# exercise: decoding.decode_attention
# function: decode_attention
# verdict: failed
# says: 3 triton launches
# says: at most 2 allowed
# seed: 10
"""Adversarial: the package's split-KV kernel and merge, then a third launch that copies the result into
another buffer: right values, one launch too many."""

import torch
import triton
import triton.language as tl

from gpuprinciples.course.kernels.decode_attention import decode_attention as two_launches


@triton.jit
def copy_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)


def decode_attention(q, k_cache, v_cache, seq_lens):
    out = two_launches(q, k_cache, v_cache, seq_lens, splits=3)
    final = torch.empty_like(out)
    copy_kernel[(triton.cdiv(out.numel(), 1024),)](out, final, out.numel(), BLOCK=1024)
    return final
