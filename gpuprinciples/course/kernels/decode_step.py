"""The kernels of a fused small-batch decode step: a matrix-vector product with the layer's small operators
folded into it, and the rotary embedding with the KV-cache write.

A graphed decode step of `decoder.Decoder` in plain PyTorch launches about 46 kernels per layer: four
matmuls, one attention (two launches), and some forty elementwise operators and reductions (RMSNorm is
eight of them, the rotary embedding of q and k twenty, the residual adds, SwiGLU, the cache writes). At
batch 1 each of those moves a few KB, but each still costs a launch slot on the GPU and a drain, about
a microsecond even inside a CUDA graph. This file folds them into the matmuls:

    y = epilogue(W · prologue(x))      W [N, K] in bf16 (or int8 / fp8 with one scale per output row)

* prologue: nothing, RMSNorm (x · rsqrt(mean(x²) + eps) · g: the product takes x · g and is scaled by the
  rsqrt after its loop, which sums x² as it reads x), or SwiGLU (x is [M, 2K]: silu(x[:, :K]) · x[:, K:]);
* epilogue: the per-row scale of 8-bit weights, and a residual (y + r).

`fused_linear` runs it: one program per BLOCK_N output rows (and BLOCK_M rows of x), walking K in tiles of
BLOCK_K, without `tl.dot`: at M = 1 the product is a matrix-vector product, one multiply-add per weight
loaded, and the only thing that matters is how many weight bytes are in flight (enough programs, large
enough tiles). With M = 1 it accumulates the products elementwise and sums them once at the end.

`rope_and_cache` is one launch per layer for what the PyTorch step does in ~22: rotate q and k by the
position's angles, write k and v into the static cache at position seq_lens[b], and return q.

Five launches per layer in all, besides attention's two: 7 instead of ~46. `one_launch_attention()` goes further:
`kernels/rope_attention.py` does the rotary embedding, the cache write and the attention with its merge in one
launch, 5 a layer (not the default: measured slower on an H200, `ONE_LAUNCH_ATTENTION`).

The step's two ends are kernels too (`FUSED_ENDS`): `embed_and_lengths` (the token's embedding row and the cache's
length with it) and `greedy_next` (the argmax over the vocabulary in two passes, the token written, the length
counted), three launches where PyTorch's indexing, add, argmax, copy and add take five.

PDL (Programmatic Dependent Launch, sm_90+), on by default (`with pdl(False):` for a step without it): both
kernels (and the fused step's attention) launch with `launch_pdl=True`, so each starts while the kernel before it
drains: fused_linear loads its first weight tile (weights: no kernel of the step writes them) before
`gdc_wait()`, and reads x and the residual only after it (the residual first, so that its latency hides behind
the weights'). The rotary kernel and the attention's kernels read the position, the angles and the lengths before
their wait: those were written by a kernel that ended before the one they wait on began. (Two weight tiles, at
LLAMA_1B's shapes all of a program's weights, made the step 2 % slower on an H200: docs/roof-h200.md.) Every
program waits, so a kernel's end still implies its predecessors' ends. A kernel lets the next one launch after its
weight loop, or, for a grid of one wave (`EARLY_TRIGGER`), right after its wait. Under the interpreter the PDL form
of each kernel runs with the waits doing nothing: the same values.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from .decode_attention import _sm_count
from .decode_attention import pdl_options as _pdl_options

NO_PROLOGUE, RMSNORM, SWIGLU = 0, 1, 2


@triton.jit
def fused_linear_kernel(X, W, Scale, Norm, Res, Y, M, N, K, eps, sxm, swn, srm, sym,
                        PROLOGUE: tl.constexpr, SCALED: tl.constexpr, RESIDUAL: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr,
                        PDL: tl.constexpr = False, EARLY_TRIGGER: tl.constexpr = False):
    pid_m = tl.program_id(0)  # fastest: the programs that share a weight tile run side by side (L2)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    live_m = offs_m < M
    live_n = offs_n < N
    out_mask = live_m[:, None] & live_n[None, :]
    x_rows = X + offs_m[:, None].to(tl.int64) * sxm
    w_rows = W + offs_n[:, None].to(tl.int64) * swn
    if PDL:  # started early: the first weight tile (no kernel of the step writes weights) while the last drains
        first_k = offs_k < K
        w_first = tl.load(w_rows + offs_k[None, :], mask=live_n[:, None] & first_k[None, :], other=0.0)
        tl.extra.cuda.gdc_wait()  # every program waits, so this kernel's end implies its predecessors' ends
        if EARLY_TRIGGER:  # the next kernel may start its early part as soon as every program of this one runs
            tl.extra.cuda.gdc_launch_dependents()
    if RESIDUAL:  # loaded before the loop, so that its latency hides behind the weights'
        res = tl.load(Res + offs_m[:, None].to(tl.int64) * srm + offs_n[None, :], mask=out_mask, other=0.0)
    squares = tl.zeros([BLOCK_M, BLOCK_K], tl.float32)  # RMSNorm: x² summed in the loop, which reads x anyway
    if BLOCK_M == 1:
        acc = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)  # products summed once, after the loop
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    if PDL:
        acc, squares = _multiply_add(acc, squares, w_first.to(tl.float32), x_rows, offs_k, first_k, live_m, K, Norm,
                                     PROLOGUE, BLOCK_M)
    for k0 in tl.range(PDL * BLOCK_K, K, BLOCK_K, num_stages=STAGES):  # with PDL, from the second tile
        ks = k0 + offs_k
        live_k = ks < K
        w = tl.load(w_rows + ks[None, :], mask=live_n[:, None] & live_k[None, :], other=0.0).to(tl.float32)
        acc, squares = _multiply_add(acc, squares, w, x_rows, ks, live_k, live_m, K, Norm, PROLOGUE, BLOCK_M)
    if PDL and not EARLY_TRIGGER:  # every weight is read: the next kernel may start its own early part
        tl.extra.cuda.gdc_launch_dependents()
    if BLOCK_M == 1:
        acc = tl.sum(acc, 1)[None, :]
    if PROLOGUE == 1:  # W · (x ⊙ g) · rstd: the row's rsqrt(mean(x²) + eps) is a scale on its output
        acc = acc * tl.math.rsqrt(tl.sum(squares, 1) / K + eps)[:, None]
    if SCALED:
        acc = acc * tl.load(Scale + offs_n, mask=live_n, other=0.0)[None, :]
    if RESIDUAL:
        acc += res.to(tl.float32)
    tl.store(Y + offs_m[:, None].to(tl.int64) * sym + offs_n[None, :], acc.to(Y.dtype.element_ty), mask=out_mask)


@triton.jit
def _multiply_add(acc, squares, w, x_rows, ks, live_k, live_m, K, Norm, PROLOGUE: tl.constexpr,
                  BLOCK_M: tl.constexpr):
    """(acc plus the products of weight tile w [BLOCK_N, BLOCK_K] (fp32) with prologue(x) at columns ks (live_k:
    those < K), squares plus x² for RMSNorm, whose prologue here is x · g: its rsqrt is applied after the loop)."""
    x_mask = live_m[:, None] & live_k[None, :]
    if PROLOGUE == 2:  # SwiGLU: x holds gate | up, each K wide
        gate = tl.load(x_rows + ks[None, :], mask=x_mask, other=0.0).to(tl.float32)
        up = tl.load(x_rows + K + ks[None, :], mask=x_mask, other=0.0).to(tl.float32)
        x = gate * tl.sigmoid(gate) * up
    else:
        x = tl.load(x_rows + ks[None, :], mask=x_mask, other=0.0).to(tl.float32)
        if PROLOGUE == 1:
            squares += x * x
            x = x * tl.load(Norm + ks, mask=live_k, other=0.0).to(tl.float32)[None, :]
    if BLOCK_M == 1:
        acc += w * x  # [BLOCK_N, BLOCK_K] · [1, BLOCK_K]
    else:
        acc += tl.sum(x[:, None, :] * w[None, :, :], 2)
    return acc, squares


# -------------------------------------------------------------------------------------------------
# Tiles
# -------------------------------------------------------------------------------------------------


def tiles(block_n: int, block_k: int, stages: int, num_warps: int = 4) -> dict:
    """A config of `fused_linear`'s tiles: BLOCK_N weight rows a program, BLOCK_K columns a step, STAGES deep."""
    return {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": num_warps, "STAGES": stages}


# Under the interpreter every tile is a NumPy call: few, large ones.
CPU_CONFIG = tiles(64, 128, 1)
# Tuned tiles per weight shape, (N, K, bytes per weight) -> config, for the GPU they were tuned on
# (tools/tune_decode.py prints the table); shapes not listed get `gpu_config`'s rule. LLAMA_1B's five
# weights on an H200: int8 from docs/decoding-h200.md, run 2 (the graphed step 1.064 -> 0.994 ms); bf16 retuned
# with PDL on (docs/roof-h200.md#twelfth-pass: four rows a program, not two, took the graphed step from 0.908 to
# 0.845 ms; not measured on an H100).
_TUNED_TILES = {  # (BLOCK_N, BLOCK_K, STAGES), 4 warps each
    (3072, 2048, 2): (4, 1024, 1), (3072, 2048, 1): (4, 512, 3),
    (2048, 2048, 2): (4, 1024, 1), (2048, 2048, 1): (2, 2048, 3),
    (16384, 2048, 2): (4, 1024, 1), (16384, 2048, 1): (8, 512, 3),
    (2048, 8192, 2): (4, 2048, 3), (2048, 8192, 1): (4, 1024, 3),
    (128256, 2048, 2): (4, 1024, 1), (128256, 2048, 1): (32, 256, 3),
}
TUNED: dict[tuple[int, int, int], dict] = {shape: tiles(*tile) for shape, tile in _TUNED_TILES.items()}
PROGRAMS_PER_SM = 4  # the rule's aim: about this many programs per SM, for enough weight bytes in flight
TILE_BYTES = 16384  # and a weight tile of about this many bytes per program and step of the loop
MAX_TILE_ELEMENTS = 8192  # fp32 products a program holds (BLOCK_M · BLOCK_N · BLOCK_K, 4 warps): 64 per thread

def gpu_config(n: int, k: int, weight_bytes: int, sms: int) -> dict:
    """The untuned rule: BLOCK_N rows (a power of two from 1 to 32) for about PROGRAMS_PER_SM programs per
    SM, and BLOCK_K for a weight tile of about TILE_BYTES (and at most MAX_TILE_ELEMENTS products)."""
    block_n = 1
    while block_n < 32 and n // (2 * block_n) >= PROGRAMS_PER_SM * sms:
        block_n *= 2
    block_k = max(64, min(triton.next_power_of_2(k), TILE_BYTES // (block_n * weight_bytes),
                          MAX_TILE_ELEMENTS // block_n))
    return tiles(block_n, block_k, 3)


def config_for(x: torch.Tensor, w: torch.Tensor) -> dict:
    n, k = w.shape
    if not x.is_cuda:
        return dict(CPU_CONFIG)
    tuned = TUNED.get((n, k, w.element_size()))
    return dict(tuned) if tuned else gpu_config(n, k, w.element_size(), _sm_count(x.device))


# -------------------------------------------------------------------------------------------------
# Launch
# -------------------------------------------------------------------------------------------------

# The switch (issue 31), on: on an H200 (tools/tune_decode.py --only 9, docs/roof-h200.md#pdl) the graphed fused step
# of LLAMA_1B took 0.972 ms with it against 1.114 without (55 % -> 63 % of copy), LLAMA_8B's 4.516 against 4.703
# (78 % -> 81 %), the logits bit for bit the same. Before Hopper, and with a Triton without PDL, it does nothing.
PDL = True
# The fused step's attention as one launch (kernels/rope_attention.py: rotary embedding, cache write, split-KV
# attention and the merge), where off it is three: rope_and_cache, decode_attention's split kernel and its merge.
# Off: on an H200 one launch made the graphed step 4 % slower at LLAMA_1B, 2 % at LLAMA_8B; on an H100 the merge in
# the kernel was that cost, and without it the step was as fast as with three launches (docs/roof-h200.md#one-launch).
ONE_LAUNCH_ATTENTION = False
# With PDL, fused_linear lets the next kernel launch as soon as each of its own programs has passed its wait (all of
# them running), not after their weight loops, when its grid has at most EARLY_TRIGGER programs per SM (one wave;
# None: never): the next kernel's programs then take SMs as this one's leave, and start their first tile. On an
# H100 (docs/roof-h200.md#sixth-pass) the graphed step of LLAMA_8B, whose matrices run in a wave of long programs,
# took 5.606 ms with it against 5.715; LLAMA_1B's gate | up product (62 short programs per SM) and head, with it,
# made that step 2.5 % slower, and the rule leaves them out (1.131 against 1.134 ms).
EARLY_TRIGGER = 8
# The step's two ends as Triton kernels launched with PDL (embed_and_lengths, greedy_next: three launches), where
# off they are PyTorch's indexing, add, argmax, copy and add (five launches, each without PDL). On an H100 the
# graphed step of LLAMA_1B took 1.096 ms with them against 1.143, LLAMA_8B's 5.664 against 5.708
# (docs/roof-h200.md#sixth-pass; an earlier profile of the step on an H200 gave PyTorch's other kernels 47 µs).
FUSED_ENDS = True


@contextlib.contextmanager
def switched(name: str, value):
    """One of this module's switches (PDL, ONE_LAUNCH_ATTENTION, EARLY_TRIGGER, FUSED_ENDS) set to `value` inside the
    block."""
    saved = globals()[name]
    globals()[name] = value
    try:
        yield
    finally:
        globals()[name] = saved


def pdl(on: bool = True):
    """Launch fused_linear, rope_and_cache and (through the fused step) the attention kernels with Programmatic
    Dependent Launch inside the block (a CUDA graph captured inside keeps it)."""
    return switched("PDL", on)


def one_launch_attention(on: bool = True):
    """Inside the block the fused step attends with rope_attention (one launch) if `on`, else with rope_and_cache
    and decode_attention (three)."""
    return switched("ONE_LAUNCH_ATTENTION", on)


def pdl_options(x: torch.Tensor) -> dict:
    """The launch's PDL arguments, from the switch (decode_attention.pdl_options)."""
    return _pdl_options(PDL, x)


def fused_linear(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor | None = None, *,
                 norm: torch.Tensor | None = None, eps: float = 1e-5, swiglu: bool = False,
                 residual: torch.Tensor | None = None, config: dict | None = None) -> torch.Tensor:
    """epilogue(prologue(x) · (w · scale)ᵀ) -> [M, N] in x's dtype.

    x [M, K] (or [M, 2K] with swiglu=True: silu of its first half times its second), w [N, K] in x's dtype,
    or int8 / float8_e4m3fn with `scale` [N] float32; norm [K]: RMSNorm of x (with `eps`) scaled by it first;
    residual [M, N]: added to the product. `config` fixes the tiles (BLOCK_N, BLOCK_K, num_warps, STAGES)."""
    assert not (swiglu and norm is not None), "one prologue: RMSNorm or SwiGLU"
    M = x.shape[0]
    N, K = w.shape
    assert x.shape[1] == (2 * K if swiglu else K), f"x is [M, {'2K' if swiglu else 'K'}] for w {tuple(w.shape)}"
    assert x.stride(1) == 1 and w.stride(1) == 1, "rows of x and w contiguous"
    assert (scale is None) == (w.dtype == x.dtype), "8-bit weights need their scales; bf16 ones none"
    cfg = dict(config or config_for(x, w))
    block_m = min(triton.next_power_of_2(M), 4)
    block_k = cfg.pop("BLOCK_K")
    while block_m * cfg["BLOCK_N"] * block_k > MAX_TILE_ELEMENTS * cfg["num_warps"] // 4 and block_k > 16:
        block_k //= 2  # a larger M holds more products per weight tile
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if residual is not None:
        assert residual.shape == (M, N) and residual.stride(1) == 1
    prologue = SWIGLU if swiglu else RMSNORM if norm is not None else NO_PROLOGUE
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, cfg["BLOCK_N"]))
    options = pdl_options(x)
    if early_trigger(x, grid, bool(options)):
        options["EARLY_TRIGGER"] = True
    fused_linear_kernel[grid](
        x, w, scale if scale is not None else y, norm if norm is not None else y,
        residual if residual is not None else y, y, M, N, K, eps, x.stride(0), w.stride(0),
        residual.stride(0) if residual is not None else 0, y.stride(0), PROLOGUE=prologue,
        SCALED=scale is not None, RESIDUAL=residual is not None, BLOCK_M=block_m, BLOCK_K=block_k, **cfg,
        **options)
    return y


def early_trigger(x: torch.Tensor, grid: tuple, pdl: bool) -> bool:
    """Whether fused_linear's launch on this grid, with PDL (`pdl`: its pdl_options are on), lets the next kernel
    start after its wait (EARLY_TRIGGER; under the interpreter, whose SMs are not real, every PDL launch does: the
    same values either way)."""
    if EARLY_TRIGGER is None or not pdl:
        return False
    return not x.is_cuda or grid[0] * grid[1] <= EARLY_TRIGGER * _sm_count(x.device)


# -------------------------------------------------------------------------------------------------
# Rotary embedding and the cache write
# -------------------------------------------------------------------------------------------------


@triton.jit
def rope_cache_kernel(QKV, Cos, Sin, Pos, Q, KC, VC, Hq, Hkv, sxb, scs, sqb, sqh, skb, skh, sks, svb, svh, svs,
                      HALF: tl.constexpr, PDL: tl.constexpr = False):
    """Program (b, head) of the fused q | k | v row: q and k heads rotated by position pos = Pos[b]'s
    angles (pairs i, i + HALF), q's written to Q, k's and v's to the caches at pos."""
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    pos = tl.load(Pos + b).to(tl.int64)  # before the wait: see decode_attention.load_queries
    offs = tl.arange(0, HALF)
    c = tl.load(Cos + pos * scs + offs)  # (v's programs too: a few hundred bytes, unused)
    s = tl.load(Sin + pos * scs + offs)
    if PDL:  # the q | k | v row comes from the kernel before
        tl.extra.cuda.gdc_wait()
    src = QKV + b * sxb + h * (2 * HALF)
    x1 = tl.load(src + offs).to(tl.float32)
    x2 = tl.load(src + HALF + offs).to(tl.float32)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    if h < Hq + Hkv:  # q or k: rotate
        x1, x2 = x1 * c - x2 * s, x2 * c + x1 * s
    if h < Hq:
        dst = Q + b * sqb + h * sqh
    elif h < Hq + Hkv:
        dst = KC + b * skb + (h - Hq) * skh + pos * sks
    else:
        dst = VC + b * svb + (h - Hq - Hkv) * svh + pos * svs
    tl.store(dst + offs, x1.to(Q.dtype.element_ty))
    tl.store(dst + HALF + offs, x2.to(Q.dtype.element_ty))


def rope_and_cache(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                   k_cache: torch.Tensor, v_cache: torch.Tensor, n_heads: int) -> torch.Tensor:
    """qkv [B, (Hq + 2·Hkv)·D] (q | k | v heads), cos and sin [max_seq, D/2] float32, positions [B] int32;
    caches [B, Hkv, max_seq, D]. Writes rope(k) and v at each sequence's position; returns rope(q) [B, Hq, D]."""
    B = qkv.shape[0]
    Hkv, D = k_cache.shape[1], k_cache.shape[3]
    assert qkv.shape[1] == (n_heads + 2 * Hkv) * D and qkv.stride(1) == 1 and D == triton.next_power_of_2(D)
    assert cos.stride(1) == 1 and cos.stride() == sin.stride() and k_cache.stride(3) == v_cache.stride(3) == 1
    q = torch.empty((B, n_heads, D), dtype=qkv.dtype, device=qkv.device)
    rope_cache_kernel[(B, n_heads + 2 * Hkv)](
        qkv, cos, sin, positions, q, k_cache, v_cache, n_heads, Hkv, qkv.stride(0), cos.stride(0), q.stride(0),
        q.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3], HALF=D // 2, num_warps=1, **pdl_options(qkv))
    return q


# -------------------------------------------------------------------------------------------------
# The step's two ends: the token's embedding, and the greedy choice of the next token
# -------------------------------------------------------------------------------------------------


@triton.jit
def embed_kernel(Embed, Tokens, SeqLens, X, Lengths, D, sem, sxb, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    """Program (b, j): columns [j·BLOCK, (j+1)·BLOCK) of X[b] = Embed[Tokens[b]]; program (b, 0) also writes
    Lengths[b] = SeqLens[b] + 1 (the cache's length with the new token)."""
    b = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    if PDL:  # the token comes from the step before
        tl.extra.cuda.gdc_wait()
    token = tl.load(Tokens + b).to(tl.int64)
    cols = j * BLOCK + tl.arange(0, BLOCK)
    row = tl.load(Embed + token * sem + cols, mask=cols < D)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(X + b * sxb + cols, row, mask=cols < D)
    if j == 0:
        tl.store(Lengths + b, tl.load(SeqLens + b) + 1)


def embed_and_lengths(embed: torch.Tensor, tokens: torch.Tensor, seq_lens: torch.Tensor):
    """(embed[tokens], seq_lens + 1) in one launch: x [B, D] in embed's dtype, lengths [B] int32."""
    B, D = tokens.shape[0], embed.shape[1]
    assert embed.stride(1) == 1 and seq_lens.dtype == torch.int32
    x = torch.empty((B, D), dtype=embed.dtype, device=embed.device)
    lengths = torch.empty_like(seq_lens)
    block = min(triton.next_power_of_2(D), 1024)
    embed_kernel[(B, triton.cdiv(D, block))](embed, tokens, seq_lens, x, lengths, D, embed.stride(0), x.stride(0),
                                             BLOCK=block, num_warps=4, **pdl_options(embed))
    return x, lengths


@triton.jit
def argmax_part_kernel(Logits, Values, Indices, V, slb, spb, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    """Program (b, p): the largest of Logits[b, p·BLOCK : (p+1)·BLOCK] and its first index."""
    b = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1)
    if PDL:  # the logits come from the kernel before
        tl.extra.cuda.gdc_wait()
    cols = p * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(Logits + b * slb + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    best, at = tl.max(x, 0, return_indices=True, return_indices_tie_break_left=True)
    tl.store(Values + b * spb + p, best)
    tl.store(Indices + b * spb + p, p * BLOCK + at)


@triton.jit
def argmax_finish_kernel(Values, Indices, Tokens, SeqLens, parts, spb, BLOCK_P: tl.constexpr,
                         PDL: tl.constexpr = False):
    """Program b: the largest of the parts' values (the first index among equals) -> Tokens[b]; SeqLens[b] += 1."""
    b = tl.program_id(0).to(tl.int64)
    if PDL:
        tl.extra.cuda.gdc_wait()
    offs = tl.arange(0, BLOCK_P)
    values = tl.load(Values + b * spb + offs, mask=offs < parts, other=-float("inf"))
    indices = tl.load(Indices + b * spb + offs, mask=offs < parts, other=2**31 - 1)
    if PDL:  # in a loop of eager steps, the next step's embedding may launch
        tl.extra.cuda.gdc_launch_dependents()
    best = tl.max(values, 0)
    tl.store(Tokens + b, tl.min(tl.where(values == best, indices, 2**31 - 1), 0).to(tl.int64))
    tl.store(SeqLens + b, tl.load(SeqLens + b) + 1)


ARGMAX_BLOCK = 1024  # logits a program of the first pass reads: 126 programs a sequence for a 128,256 vocabulary


def greedy_next(logits: torch.Tensor, tokens: torch.Tensor, seq_lens: torch.Tensor) -> None:
    """tokens[b] = argmax(logits[b]) (the first index among equal largest, as torch.argmax), seq_lens += 1, in two
    launches: the largest of each block of the vocabulary, then of the blocks."""
    B, V = logits.shape
    assert logits.stride(1) == 1 and tokens.dtype == torch.int64 and seq_lens.dtype == torch.int32
    parts = triton.cdiv(V, ARGMAX_BLOCK)
    values = torch.empty((B, parts), dtype=torch.float32, device=logits.device)
    indices = torch.empty((B, parts), dtype=torch.int32, device=logits.device)
    options = pdl_options(logits)
    argmax_part_kernel[(B, parts)](logits, values, indices, V, logits.stride(0), values.stride(0),
                                   BLOCK=ARGMAX_BLOCK, num_warps=4, **options)
    argmax_finish_kernel[(B,)](values, indices, tokens, seq_lens, parts, values.stride(0),
                               BLOCK_P=triton.next_power_of_2(parts), num_warps=4, **options)


# -------------------------------------------------------------------------------------------------
# Timing helpers (GPU)
# -------------------------------------------------------------------------------------------------


def capture(fn):
    """fn() captured once as a CUDA graph (after two warm-up calls on a side stream, where Triton compiles);
    returns the graph's replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def copies(nbytes: int, reps: int, device="cuda"):
    """reps device-to-device copies of distinct buffers, each moving `nbytes` (half read, half written), as one
    CUDA graph: the rate a stream of kernels of that size can reach, launch gaps included."""
    pairs = [(torch.empty(max(nbytes // 4, 1), dtype=torch.int16, device=device),
              torch.empty(max(nbytes // 4, 1), dtype=torch.int16, device=device)) for _ in range(reps)]
    return capture(lambda: [dst.copy_(src) for src, dst in pairs])
