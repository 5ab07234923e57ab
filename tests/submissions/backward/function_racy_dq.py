"""Wrong on a GPU: the one-pass backward (FlashAttention-2's CUDA way), with each key tile's program adding its share
of dQ into a float32 buffer by a plain load and store where tl.atomic_add is needed. On a GPU the programs of one
launch run together and their read-modify-writes of the same rows of dQ race: additions are lost (an H100 got dQ
wrong in 7 of 8 cases). The interpreter runs the programs one after another, so every addition lands and the values
are right on a CPU; the accesses are not: two programs of one launch load and store the same bytes of dQ with
nothing ordering them (races.py), refused in words."""
# exercise: backward.attention_function
# function: attention
# verdict: failed
# gpu-says: dq:
# cpu-says: nothing orders them
# cpu-says: memory under `dq`
import math

import torch
import triton
import triton.language as tl
from _function import SavesForBackward
from _kernels import _p_ds, _rows


@triton.jit
def _delta_zero(O, dO, Delta, DQ, N, D: tl.constexpr, BLOCK: tl.constexpr):  # noqa: E741 - the paper's names
    bh = tl.program_id(1).to(tl.int64)
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs = bh * N * D + rows[:, None] * D + tl.arange(0, D)[None, :]
    o = tl.load(O + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    do = tl.load(dO + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    tl.store(Delta + bh * N + rows, tl.sum(o * do, axis=1), mask=rows < N)
    tl.store(DQ + offs, tl.zeros([BLOCK, D], tl.float32), mask=rows[:, None] < N)


@triton.jit
def _one_pass(Q, K, V, dO, Lse, Delta, DQ, dK, dV, N, qk_scale, sm_scale, D: tl.constexpr, CAUSAL: tl.constexpr,
              BLOCK: tl.constexpr):
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
        p, ds = _p_ds(q, k, v, do, lse, delta, DQ, bh, offs_m, offs_n, N, qk_scale, CAUSAL, True, False)
        dv += tl.dot(tl.trans(p).to(do.dtype), do)
        dk += tl.dot(tl.trans(ds).to(q.dtype), q)
        # dQ += dS K for these queries: a plain read-modify-write (the mistake: tl.atomic_add is needed)
        dq_ptrs = DQ + bh * N * D + offs_m[:, None] * D + tl.arange(0, D)[None, :]
        dq = tl.load(dq_ptrs, mask=offs_m[:, None] < N, other=0.0)
        tl.store(dq_ptrs, dq + tl.dot(ds.to(k.dtype), k) * sm_scale, mask=offs_m[:, None] < N)
    offs = bh * N * D + offs_n[:, None] * D + tl.arange(0, D)[None, :]
    tl.store(dK + offs, (dk * sm_scale).to(dK.dtype.element_ty), mask=offs_n[:, None] < N)
    tl.store(dV + offs, dv.to(dV.dtype.element_ty), mask=offs_n[:, None] < N)


@triton.jit
def _convert(Src, Dst, total, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Dst + offs, tl.load(Src + offs, mask=offs < total).to(Dst.dtype.element_ty), mask=offs < total)


def _backward(q, k, v, o, lse, do, causal=False):
    B, H, N, D = q.shape
    q, k, v = (t if t.is_contiguous() else t.contiguous() for t in (q, k, v))
    block = 32
    delta = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    dq32 = torch.empty((B, H, N, D), dtype=torch.float32, device=q.device)
    _delta_zero[(triton.cdiv(N, block), B * H)](o, do, delta, dq32, N, D=D, BLOCK=block)
    dq, dk, dv = (torch.empty((B, H, N, D), dtype=q.dtype, device=q.device) for _ in range(3))
    scales = (N, 1.4426950408889634 / math.sqrt(D), 1 / math.sqrt(D))
    _one_pass[(triton.cdiv(N, block), B * H)](q, k, v, do, lse, delta, dq32, dk, dv, *scales, D=D, CAUSAL=bool(causal),
                                              BLOCK=block)
    _convert[(triton.cdiv(dq.numel(), 1024),)](dq32, dq, dq.numel(), BLOCK=1024)
    return dq, dk, dv


class FlashAttention(SavesForBackward):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        return (*_backward(q, k, v, o, lse, do.contiguous(), ctx.causal), None)


def attention(q, k, v, causal=False):
    return FlashAttention.apply(q, k, v, causal)
