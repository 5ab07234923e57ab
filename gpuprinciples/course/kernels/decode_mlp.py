"""The decode step's MLP in one launch: RMSNorm, the gate/up product, SwiGLU and the down product, the partial
down products summed by atomic adds (issue 31's experiment: one launch a layer fewer than fused_linear's two).

    out = x + W2 · (silu(W1 · n) ⊙ (W3 · n)),   n = RMSNorm(x) · g

Program (m, p) owns BLOCK_I of the intermediate columns: it reads their gate and up rows of W13 [2I, D], makes
their BLOCK_I SwiGLU values, then reads the same rows of W2ᵀ [I, D] (the down weight stored transposed, so a
program's rows are contiguous) and adds its share of every output to `Out` with `tl.atomic_add` (float32). Out must
hold zeros before; program 0 adds the residual x. The order of the adds is not fixed: the sum is float32, its
rounding order varies from run to run.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def mlp_kernel(X, Norm, W13, W2T, Out, Clear, D, I, eps, sxm, som, scm,
               BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, STAGES: tl.constexpr,
               CLEAR: tl.constexpr, PDL: tl.constexpr = False):
    m = tl.program_id(0).to(tl.int64)  # fastest: the rows of a batch share each weight tile (L2)
    p = tl.program_id(1)
    rows = p * BLOCK_I + tl.arange(0, BLOCK_I)
    live = rows < I
    offs_k = tl.arange(0, BLOCK_K)
    gate_rows = W13 + rows[:, None].to(tl.int64) * D
    up_rows = W13 + (I + rows[:, None]).to(tl.int64) * D
    if PDL:  # weights before the wait: no kernel of the step writes them
        first = live[:, None] & (offs_k[None, :] < D)
        gate_first = tl.load(gate_rows + offs_k[None, :], mask=first, other=0.0)
        up_first = tl.load(up_rows + offs_k[None, :], mask=first, other=0.0)
        tl.extra.cuda.gdc_wait()
    x_row = X + m * sxm
    squares = tl.zeros([BLOCK_K], tl.float32)
    for k0 in range(0, D, BLOCK_K):
        xk = tl.load(x_row + k0 + offs_k, mask=k0 + offs_k < D, other=0.0).to(tl.float32)
        squares += xk * xk
    rstd = tl.math.rsqrt(tl.sum(squares, 0) / D + eps)
    gate = tl.zeros([BLOCK_I, BLOCK_K], tl.float32)
    up = tl.zeros([BLOCK_I, BLOCK_K], tl.float32)
    if PDL:
        n = tl.load(x_row + offs_k, mask=offs_k < D, other=0.0).to(tl.float32) * rstd
        n = n * tl.load(Norm + offs_k, mask=offs_k < D, other=0.0).to(tl.float32)
        gate += gate_first.to(tl.float32) * n[None, :]
        up += up_first.to(tl.float32) * n[None, :]
    for k0 in tl.range(PDL * BLOCK_K, D, BLOCK_K, num_stages=STAGES):
        ks = k0 + offs_k
        live_k = ks < D
        n = tl.load(x_row + ks, mask=live_k, other=0.0).to(tl.float32) * rstd
        n = n * tl.load(Norm + ks, mask=live_k, other=0.0).to(tl.float32)
        mask = live[:, None] & live_k[None, :]
        gate += tl.load(gate_rows + ks[None, :], mask=mask, other=0.0).to(tl.float32) * n[None, :]
        up += tl.load(up_rows + ks[None, :], mask=mask, other=0.0).to(tl.float32) * n[None, :]
    # rounded as the two-launch step rounds its gate | up row (to the weights' dtype)
    g = tl.sum(gate, 1).to(W13.dtype.element_ty).to(tl.float32)
    u = tl.sum(up, 1).to(W13.dtype.element_ty).to(tl.float32)
    h = g * tl.sigmoid(g) * u
    offs_d = tl.arange(0, BLOCK_D)
    down_rows = W2T + rows[:, None].to(tl.int64) * D
    for d0 in tl.range(0, D, BLOCK_D, num_stages=STAGES):
        ds = d0 + offs_d
        live_d = ds < D
        w = tl.load(down_rows + ds[None, :], mask=live[:, None] & live_d[None, :], other=0.0).to(tl.float32)
        part = tl.sum(w * h[:, None], 0)
        if p == 0:  # the residual, once
            part += tl.load(x_row + ds, mask=live_d, other=0.0).to(tl.float32)
        tl.atomic_add(Out + m * som + ds, part, mask=live_d, sem="relaxed")
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    if CLEAR:  # the next layer's output buffer: zeros before its MLP adds to it (read by nothing after the wait)
        if p == 0:
            for d0 in range(0, D, BLOCK_D):
                ds = d0 + offs_d
                tl.store(Clear + m * scm + ds, tl.zeros([BLOCK_D], tl.float32), mask=ds < D)


@triton.jit
def merged_output_kernel(OPart, LsePart, SeqLens, WoT, Res, Out, Clear, Hq, chunk, Dm, spb, sph, sps, slb, slh, srm,
                         som, scm, D: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_N: tl.constexpr,
                         CLEAR: tl.constexpr, PDL: tl.constexpr = False):
    """Program (b, h, c): query head h's splits merged (as decode_attention's merge), times rows [h·D, (h+1)·D) of
    Woᵀ at columns [c·BLOCK_N, (c+1)·BLOCK_N), added atomically to Out[b]; head 0 adds the residual Res[b]."""
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    c = tl.program_id(2)
    offs_d = tl.arange(0, D)
    offs_n = c * BLOCK_N + tl.arange(0, BLOCK_N)
    live_n = offs_n < Dm
    w = tl.load(WoT + (h * D + offs_d)[:, None] * Dm + offs_n[None, :], mask=live_n[None, :], other=0.0)
    if PDL:  # the weight tile before the wait
        tl.extra.cuda.gdc_wait()
    n_live = (tl.load(SeqLens + b) + chunk - 1) // chunk
    offs_s = tl.arange(0, BLOCK_S)
    live = offs_s < n_live
    lse = tl.load(LsePart + b * slb + h * slh + offs_s, mask=live, other=-float("inf"))
    o = tl.load(OPart + b * spb + h * sph + offs_s[:, None] * sps + offs_d[None, :], mask=live[:, None], other=0.0)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    weights = tl.math.exp2(lse - tl.max(lse, 0))
    # rounded as the three-launch step stores the attention's output (to the weights' dtype)
    attn = (tl.sum(o * weights[:, None], 0) / tl.sum(weights, 0)).to(WoT.dtype.element_ty).to(tl.float32)
    part = tl.sum(w.to(tl.float32) * attn[:, None], 0)
    if h == 0:
        part += tl.load(Res + b * srm + offs_n, mask=live_n, other=0.0).to(tl.float32)
    tl.atomic_add(Out + b * som + offs_n, part, mask=live_n, sem="relaxed")
    if CLEAR:
        if h == 0:
            tl.store(Clear + b * scm + offs_n, tl.zeros([BLOCK_N], tl.float32), mask=live_n)


OUTPUT_BLOCK_N = 256


def merged_output(o_part: torch.Tensor, lse_part: torch.Tensor, chunk: int, lengths: torch.Tensor,
                  wot: torch.Tensor, residual: torch.Tensor, out: torch.Tensor, clear: torch.Tensor | None = None, *,
                  pdl: dict | None = None) -> torch.Tensor:
    """out += residual + merge(splits) · Wo, in one launch: o_part [B, Hq, S, D], lse_part [B, Hq, S] and `chunk`
    (keys per split) from decode_attention(unmerged=True), `lengths` [B] the keys each sequence attends to, wot [Hq·D,
    Dm] (Wo transposed), residual [B, Dm], out [B, Dm] float32 holding zeros; `clear` zeroed after. Returns out."""
    B, Hq, S, D = o_part.shape
    Dm = wot.shape[1]
    assert wot.shape == (Hq * D, Dm) and wot.is_contiguous() and o_part.stride(3) == 1
    assert out.shape == residual.shape == (B, Dm) and out.dtype == torch.float32 and residual.stride(1) == 1
    block_n = OUTPUT_BLOCK_N if o_part.is_cuda else 256
    grid = (B, Hq, triton.cdiv(Dm, block_n))
    merged_output_kernel[grid](o_part, lse_part, lengths, wot, residual, out, clear if clear is not None else out,
                               Hq, chunk, Dm, *o_part.stride()[:3], *lse_part.stride()[:2], residual.stride(0),
                               out.stride(0), clear.stride(0) if clear is not None else 0, D=D,
                               BLOCK_S=triton.next_power_of_2(S), BLOCK_N=block_n, CLEAR=clear is not None,
                               num_warps=4, **(pdl or {}))
    return out


CPU_CONFIG = {"BLOCK_I": 16, "BLOCK_K": 256, "BLOCK_D": 256, "num_warps": 4, "STAGES": 1}
GPU_CONFIG = {"BLOCK_I": 16, "BLOCK_K": 256, "BLOCK_D": 256, "num_warps": 4, "STAGES": 3}
CONFIG: dict | None = None  # set by tools/tune_decode.py's sweep; None: the defaults above


def fused_mlp(x: torch.Tensor, norm: torch.Tensor, w13: torch.Tensor, w2t: torch.Tensor, out: torch.Tensor,
              clear: torch.Tensor | None = None, *, eps: float = 1e-5, pdl: dict | None = None) -> torch.Tensor:
    """out += x + W2 · SwiGLU(W13 · RMSNorm(x) · norm), in one launch: x [M, D], w13 [2I, D] (gate rows, then up
    rows), w2t [I, D] (the down weight transposed), out [M, D] float32 holding zeros. `clear` [M, D] float32 is
    zeroed after (the next call's out). Returns out."""
    M, D = x.shape
    I = w2t.shape[0]
    assert w13.shape == (2 * I, D) and w2t.shape == (I, D) and out.shape == (M, D) and out.dtype == torch.float32
    assert x.stride(1) == 1 and w13.is_contiguous() and w2t.is_contiguous() and out.stride(1) == 1
    cfg = dict(CONFIG or (GPU_CONFIG if x.is_cuda else CPU_CONFIG))
    grid = (M, triton.cdiv(I, cfg["BLOCK_I"]))
    mlp_kernel[grid](x, norm, w13, w2t, out, clear if clear is not None else out, D, I, eps, x.stride(0),
                     out.stride(0), clear.stride(0) if clear is not None else 0, CLEAR=clear is not None, **cfg,
                     **(pdl or {}))
    return out
