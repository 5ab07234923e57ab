# verdict: failed: k >= 16
# exercise: decoding.paged_decode_attention
"""Wrong on a GPU: a paged decode attention whose P·V is always tl.dot(p, v), with K = the page size. On the
GPU's float16 page-8 case the compiler refuses it ("Input shapes should have M >= 1, N >= 1 and K >= 16"),
as production serving kernels have been refused; a CPU's page-8 case is float32, which the compiler accepts,
so only compiling the GPU's own cases (the compile pass) makes a CPU fail it too."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def page_loop_kernel(Q, KP, VP, Table, Lens, Out, Hkv, scale, sqb, sqh, skp, skh, sks, svp, svh, svs, stb, sob, soh,
                     G: tl.constexpr, BG: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr):
    pid = tl.program_id(0)
    b, kv = pid // Hkv, pid % Hkv
    n = tl.load(Lens + b)
    g, d, r = tl.arange(0, BG), tl.arange(0, D), tl.arange(0, PAGE)
    heads = kv * G + g
    q = tl.load(Q + b * sqb + heads[:, None] * sqh + d[None, :], mask=(g < G)[:, None], other=0.0)
    m = tl.full([BG], -float("inf"), tl.float32)
    l_run = tl.zeros([BG], tl.float32)
    acc = tl.zeros([BG, D], tl.float32)
    for j in range(0, tl.cdiv(n, PAGE)):
        page = tl.load(Table + b * stb + j).to(tl.int64)
        ok = j * PAGE + r < n
        k = tl.load(KP + page * skp + kv * skh + r[:, None] * sks + d[None, :], mask=ok[:, None], other=0.0)
        v = tl.load(VP + page * svp + kv * svh + r[:, None] * svs + d[None, :], mask=ok[:, None], other=0.0)
        s = tl.where(ok[None, :], tl.dot(q, tl.trans(k)) * scale, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)
        l_run = l_run * alpha + tl.sum(p, 1)
        pv = tl.dot(p.to(v.dtype), v)
        acc = acc * alpha[:, None] + pv
        m = m_new
    tl.store(Out + b * sob + heads[:, None] * soh + d[None, :], (acc / l_run[:, None]).to(Out.dtype.element_ty),
             mask=(g < G)[:, None])


def paged_decode_attention(q, k_pages, v_pages, block_table, seq_lens):
    B, Hq, D = q.shape
    Hkv, page = k_pages.shape[1], k_pages.shape[2]
    out = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
    page_loop_kernel[(B * Hkv,)](q, k_pages, v_pages, block_table, seq_lens, out, Hkv, 1 / math.sqrt(D), q.stride(0),
                                 q.stride(1), *k_pages.stride()[:3], *v_pages.stride()[:3], block_table.stride(0),
                                 out.stride(0), out.stride(1), G=Hq // Hkv,
                                 BG=max(16, triton.next_power_of_2(Hq // Hkv)), D=D, PAGE=page)
    return out
