# exercise: flash.attention
# function: attention
# verdict: passed
# seed: 8
"""A correct FlashAttention-2 forward in the shape of the original Triton one (must pass).

What the grader must allow, and did not: the log-sum-exp of every row is written to a buffer padded to
a multiple of 128 rows, and every K/V tile stores the rows' rescaling factor to a per-row scratch
buffer and reads it back (a workaround the first Triton FlashAttention kernels used). Stored beyond
the output: O(rows × tiles) bytes, never N×N. q, k, v each bring their own strides.
On a GPU the round trip needs barriers around the store: the threads that load a row's
factor are not those that stored it, and without one an H200 read stale factors (19,388 of 217,728 values
wrong at N = 567, bf16); the interpreter, one thread, cannot show that race."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def fwd_kernel(Q, K, V, Out, Lse, Tmp, softmax_scale,
               stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
               stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_om,
               nheads, seqlen, seqlen_rounded,
               IS_CAUSAL: tl.constexpr, BLOCK_HEADDIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_hb = tl.program_id(1)
    off_b = off_hb // nheads
    off_h = off_hb % nheads
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_HEADDIM)
    q_ptrs = Q + off_b * stride_qb + off_h * stride_qh + (offs_m[:, None] * stride_qm + offs_d[None, :])
    k_base = K + off_b * stride_kb + off_h * stride_kh
    v_base = V + off_b * stride_vb + off_h * stride_vh
    t_ptrs = Tmp + off_hb * seqlen_rounded + offs_m  # every row of the padded tile: no mask
    lse_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    acc_o = tl.zeros([BLOCK_M, BLOCK_HEADDIM], dtype=tl.float32)
    q = tl.load(q_ptrs, mask=offs_m[:, None] < seqlen, other=0.0)
    end_n = seqlen if not IS_CAUSAL else tl.minimum((start_m + 1) * BLOCK_M, seqlen)
    for start_n in range(0, end_n, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_base + cols[:, None] * stride_kn + offs_d[None, :], mask=cols[:, None] < seqlen, other=0.0)
        qk = tl.dot(q, tl.trans(k))
        qk += tl.where(cols[None, :] < seqlen, 0, float("-inf"))
        if IS_CAUSAL:
            qk += tl.where(offs_m[:, None] >= cols[None, :], 0, float("-inf"))
        m_ij = tl.maximum(tl.max(qk, 1) * softmax_scale, lse_i)
        p = tl.exp(qk * softmax_scale - m_ij[:, None])
        l_ij = tl.sum(p, 1)
        acc_o_scale = tl.exp(m_i - m_ij)
        tl.debug_barrier()  # every thread has read the last factor before it is overwritten ...
        tl.store(t_ptrs, acc_o_scale)  # the scratch round trip: one float per row per K/V tile
        tl.debug_barrier()  # ... and has stored this one before any thread reads it
        acc_o_scale = tl.load(t_ptrs)
        acc_o = acc_o * acc_o_scale[:, None]
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :], mask=cols[:, None] < seqlen, other=0.0)
        acc_o += tl.dot(p.to(v.dtype), v)
        m_i = m_ij
        l_i_new = tl.exp(lse_i - m_ij) + l_ij
        lse_i = m_ij + tl.log(l_i_new)
    o_scale = tl.exp(m_i - lse_i)
    tl.debug_barrier()
    tl.store(t_ptrs, o_scale)
    tl.debug_barrier()
    o_scale = tl.load(t_ptrs)
    acc_o = acc_o * o_scale[:, None]
    tl.store(Lse + off_hb * seqlen_rounded + offs_m, lse_i)  # padded rows too: the buffer is rounded up
    out_ptrs = Out + off_b * stride_ob + off_h * stride_oh + (offs_m[:, None] * stride_om + offs_d[None, :])
    tl.store(out_ptrs, acc_o.to(Out.dtype.element_ty), mask=offs_m[:, None] < seqlen)


def attention(q, k, v, causal=False):
    batch, nheads, seqlen, d = q.shape
    seqlen_rounded = math.ceil(seqlen / 128) * 128
    lse = torch.empty((batch, nheads, seqlen_rounded), device=q.device, dtype=torch.float32)
    tmp = torch.empty((batch, nheads, seqlen_rounded), device=q.device, dtype=torch.float32)
    o = torch.empty((batch, nheads, seqlen, d), device=q.device, dtype=q.dtype)
    BLOCK_M, BLOCK_N = (128, 64) if q.is_cuda else (64, 64)  # the padding above covers a tile of 128
    grid = (triton.cdiv(seqlen, BLOCK_M), batch * nheads)
    fwd_kernel[grid](q, k, v, o, lse, tmp, 1.0 / math.sqrt(d),
                     q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                     v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                     nheads, seqlen, seqlen_rounded,
                     IS_CAUSAL=bool(causal), BLOCK_HEADDIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                     **({"num_warps": 8, "num_stages": 2} if q.is_cuda else {}))
    return o
