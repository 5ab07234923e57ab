# exercise: fusion.bias_gelu
# function: bias_gelu
# verdict: failed
# says: 2 triton launches per call
"""Unfused: x + bias goes to memory, and a second kernel reads it back for the GELU."""
import torch
import triton
import triton.language as tl


@triton.jit
def add_bias(x_ptr, b_ptr, t_ptr, M, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    tl.store(t_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + offs % N, mask=mask), mask=mask)


@triton.jit
def gelu(t_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(t_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)


def bias_gelu(x, bias):
    t, y = torch.empty_like(x), torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    add_bias[grid](x, bias, t, x.shape[0], x.shape[1], BLOCK=1024)
    gelu[grid](t, y, x.numel(), BLOCK=1024)
    return y
