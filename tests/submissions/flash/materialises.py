# exercise: flash.attention
# function: attention
# verdict: failed
# modes: cpu
# says: score matrix
# says: something else went to memory
# says: 2 triton launches
# seed: 8
"""Adversarial: two Triton kernels with the N×N score matrix in memory between them (correct values)."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def scores_kernel(Q, K, S, N, scale, D: tl.constexpr, CAUSAL: tl.constexpr, BLOCK: tl.constexpr):
    head = tl.program_id(1)  # one BLOCK×BLOCK tile of one head's S per program
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + head * N * D + rows[:, None] * D + offs_d[None, :], mask=rows[:, None] < N, other=0.0)
    for start in range(0, N, BLOCK):
        keys = start + tl.arange(0, BLOCK)
        k = tl.load(K + head * N * D + keys[:, None] * D + offs_d[None, :], mask=keys[:, None] < N, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        if CAUSAL:
            s = tl.where(keys[None, :] <= rows[:, None], s, -float("inf"))
        tl.store(S + head * N * N + rows[:, None] * N + keys[None, :], s,
                 mask=(rows[:, None] < N) & (keys[None, :] < N))


@triton.jit
def softmax_pv_kernel(S, V, Out, N, D: tl.constexpr, BLOCK: tl.constexpr, BLOCK_N: tl.constexpr):
    head = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keys = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    s = tl.load(S + head * N * N + rows[:, None] * N + keys[None, :], mask=(rows[:, None] < N) & (keys[None, :] < N),
                other=-float("inf"))
    s = tl.where(rows[:, None] < N, s, 0.0)  # padded rows: keep them finite
    p = tl.exp(s - tl.max(s, axis=1)[:, None])
    p = p / tl.sum(p, axis=1)[:, None]
    v = tl.load(V + head * N * D + keys[:, None] * D + offs_d[None, :], mask=keys[:, None] < N, other=0.0)
    o = tl.dot(p.to(v.dtype), v)
    tl.store(Out + head * N * D + rows[:, None] * D + offs_d[None, :], o.to(Out.dtype.element_ty),
             mask=rows[:, None] < N)


def attention(q, k, v, causal=False):
    B, H, N, D = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    s = torch.empty((B * H, N, N), dtype=torch.float32, device=q.device)
    o = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    BLOCK = 32
    grid = (triton.cdiv(N, BLOCK), B * H)
    scores_kernel[grid](q, k, s, N, 1.0 / math.sqrt(D), D=D, CAUSAL=causal, BLOCK=BLOCK)
    softmax_pv_kernel[grid](s, v, o, N, D=D, BLOCK=BLOCK, BLOCK_N=max(triton.next_power_of_2(N), 16))
    return o
