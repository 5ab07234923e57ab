"""One FlashAttention backward with switches, shared by the submissions of this folder: each wrong one turns one
switch the wrong way (the right one, `right.py`, none). Plain loops, every tile masked: small, not fast."""

import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _delta(O, dO, Delta, N, D: tl.constexpr, BLOCK: tl.constexpr):  # noqa: E741 - the paper's names
    bh = tl.program_id(1).to(tl.int64)
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs = bh * N * D + rows[:, None] * D + tl.arange(0, D)[None, :]
    o = tl.load(O + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    do = tl.load(dO + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    tl.store(Delta + bh * N + rows, tl.sum(o * do, axis=1), mask=rows < N)


@triton.jit
def _rows(X, bh, offs, N, D: tl.constexpr):
    """Rows `offs` of one head of a contiguous [B, H, N, D] tensor (zeros past N)."""
    return tl.load(X + bh * N * D + offs[:, None] * D + tl.arange(0, D)[None, :], mask=offs[:, None] < N, other=0.0)


@triton.jit
def _p_ds(q, k, v, do, lse, delta, P, bh, offs_m, offs_n, N, qk_scale, CAUSAL: tl.constexpr,
          USE_DELTA: tl.constexpr, STORE_P: tl.constexpr):
    """P and dS of one (query tile, key tile), from tiles already on the chip."""
    p = tl.math.exp2(tl.dot(q, k.T) * qk_scale - lse[:, None])
    keep = (offs_m[:, None] < N) & (offs_n[None, :] < N)
    if CAUSAL:
        keep = keep & (offs_m[:, None] >= offs_n[None, :])
    p = tl.where(keep, p, 0.0)
    if STORE_P:  # the mistake: P to memory, N×N per head
        tl.store(P + bh * N * N + offs_m[:, None] * N + offs_n[None, :], p,
                 mask=(offs_m[:, None] < N) & (offs_n[None, :] < N))
    dp = tl.dot(do, v.T)
    if USE_DELTA:
        ds = p * (dp - delta[:, None])
    else:  # the mistake: the softmax's Jacobian without its row term
        ds = p * dp
    return p, ds


@triton.jit
def _dkdv(Q, K, V, dO, Lse, Delta, P, dK, dV, N, qk_scale, sm_scale, D: tl.constexpr, CAUSAL: tl.constexpr,
          USE_DELTA: tl.constexpr, STORE_P: tl.constexpr, BLOCK: tl.constexpr):
    bh = tl.program_id(1).to(tl.int64)
    offs_n = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    k, v = _rows(K, bh, offs_n, N, D), _rows(V, bh, offs_n, N, D)
    dk = tl.zeros([BLOCK, D], tl.float32)
    dv = tl.zeros([BLOCK, D], tl.float32)
    for start_m in range(0, N, BLOCK):
        offs_m = start_m + tl.arange(0, BLOCK)
        q, do = _rows(Q, bh, offs_m, N, D), _rows(dO, bh, offs_m, N, D)
        lse = tl.load(Lse + bh * N + offs_m, mask=offs_m < N, other=float("inf")) * 1.4426950408889634
        delta = tl.load(Delta + bh * N + offs_m, mask=offs_m < N, other=0.0)
        p, ds = _p_ds(q, k, v, do, lse, delta, P, bh, offs_m, offs_n, N, qk_scale, CAUSAL, USE_DELTA, STORE_P)
        dv += tl.dot(tl.trans(p).to(do.dtype), do)
        dk += tl.dot(tl.trans(ds).to(q.dtype), q)
    offs = bh * N * D + offs_n[:, None] * D + tl.arange(0, D)[None, :]
    tl.store(dK + offs, (dk * sm_scale).to(dK.dtype.element_ty), mask=offs_n[:, None] < N)
    tl.store(dV + offs, dv.to(dV.dtype.element_ty), mask=offs_n[:, None] < N)


@triton.jit
def _dq(Q, K, V, dO, Lse, Delta, dQ, N, qk_scale, sm_scale, D: tl.constexpr, CAUSAL: tl.constexpr,
        USE_DELTA: tl.constexpr, SCALE_DQ: tl.constexpr, BLOCK: tl.constexpr):
    bh = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    q, do = _rows(Q, bh, offs_m, N, D), _rows(dO, bh, offs_m, N, D)
    lse = tl.load(Lse + bh * N + offs_m, mask=offs_m < N, other=float("inf")) * 1.4426950408889634
    delta = tl.load(Delta + bh * N + offs_m, mask=offs_m < N, other=0.0)
    dq = tl.zeros([BLOCK, D], tl.float32)
    for start_n in range(0, N, BLOCK):
        offs_n = start_n + tl.arange(0, BLOCK)
        k, v = _rows(K, bh, offs_n, N, D), _rows(V, bh, offs_n, N, D)
        p, ds = _p_ds(q, k, v, do, lse, delta, Q, bh, offs_m, offs_n, N, qk_scale, CAUSAL, USE_DELTA, False)
        dq += tl.dot(ds.to(k.dtype), k)
    if SCALE_DQ:
        dq = dq * sm_scale
    offs = bh * N * D + offs_m[:, None] * D + tl.arange(0, D)[None, :]
    tl.store(dQ + offs, dq.to(dQ.dtype.element_ty), mask=offs_m[:, None] < N)


def backward(q, k, v, o, lse, do, causal=False, *, use_delta=True, scale_dq=True, mask_causal=True,
             store_p=False):
    """(dq, dk, dv) for contiguous q, k, v (the cases' strided layouts are copied first: PyTorch moves bytes,
    computes nothing)."""
    B, H, N, D = q.shape
    q, k, v = (t if t.is_contiguous() else t.contiguous() for t in (q, k, v))
    block = 32
    delta = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    _delta[(triton.cdiv(N, block), B * H)](o, do, delta, N, D=D, BLOCK=block)
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))
    p = torch.empty((B, H, N, N), dtype=torch.float32, device=q.device) if store_p else delta
    scales = (N, LOG2E / math.sqrt(D), 1 / math.sqrt(D))
    flags = dict(D=D, CAUSAL=bool(causal and mask_causal), USE_DELTA=use_delta, BLOCK=block)
    _dkdv[(triton.cdiv(N, block), B * H)](q, k, v, do, lse, delta, p, dk, dv, *scales, STORE_P=store_p, **flags)
    _dq[(triton.cdiv(N, block), B * H)](q, k, v, do, lse, delta, dq, *scales, SCALE_DQ=scale_dq, **flags)
    return dq, dk, dv
