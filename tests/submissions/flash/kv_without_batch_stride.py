# exercise: flash.attention
# function: attention
# verdict: failed
# says: values wrong
# seed: 8
"""Wrong: K and V are found at (batch × heads + head) × the head stride, skipping the batch stride, which holds only
for a contiguous [B, H, N, D]. Q and O use all their strides. Every case with K and V in another layout had one
batch, so the CPU passed it where the H200's two-batch packed K/V case fails it; the CPU's strided and packed
cases now have two batches."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def flash_kernel(Q, K, V, Out, H, N, scale,
                 sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
                 D: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqn + offs_d[None, :],
                mask=offs_m[:, None] < N, other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    hi = N
    if CAUSAL:  # keys after the last query of this tile are all masked: skip them
        hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)
    for start_n in range(0, hi, BLOCK_N):
        keys = start_n + offs_n
        k = tl.load(K + bh * skh + keys[:, None] * skn + offs_d[None, :], mask=keys[:, None] < N, other=0.0)
        v = tl.load(V + bh * svh + keys[:, None] * svn + offs_d[None, :], mask=keys[:, None] < N, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        valid = keys[None, :] < N
        if CAUSAL:
            valid = valid & (keys[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :],
             (acc / l_i[:, None]).to(Out.dtype.element_ty),
             mask=offs_m[:, None] < N)


def attention(q, k, v, causal=False):
    B, H, N, D = q.shape
    o = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    BLOCK_M, BLOCK_N = 32, 32
    flash_kernel[(triton.cdiv(N, BLOCK_M), B * H)](
        q, k, v, o, H, N, 1.0 / math.sqrt(D),
        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
        D=D, CAUSAL=bool(causal), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return o
