# exercise: decoding.paged_decode_attention
# function: paged_decode_attention
# verdict: passed
# modes: cpu
# seed: 10
"""A correct paged decode attention with a different design (must pass): one program per (sequence, KV head),
no splits, one page per step of the loop, the page number read once per page. A page of fewer than 16
positions is too short a K for tl.dot on Hopper (Triton 3.6's compiler refuses it), so P·V is then a sum."""

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
        if PAGE >= 16:
            pv = tl.dot(p.to(v.dtype), v)
        else:
            pv = tl.sum(p[:, :, None] * v[None, :, :].to(tl.float32), 1)
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
