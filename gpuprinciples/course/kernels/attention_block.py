"""A decode layer's attention half in one launch: RMSNorm + the q/k/v product, the rotary embedding and cache
write, split-KV attention with its merge, and the output product with the residual.

    x [B, d] -> x + attention(rope(norm(x) · Wqkvᵀ), cache) · Woᵀ          (and rope(k), v written to the cache)

At batch 1 the fused step's attention is short programs that wait on memory: on an H100 leaving the split-KV
kernel and its merge out of the graphed LLAMA_1B step saves 138 µs, for 134 MB of cache that a copy moves in 44
(`tools/tune_decode.py --only 18`). Launched after the q/k/v product, its programs can start loading the cache only
once q exists. Here the programs of one launch take roles instead, in the order they start:

1. q/k/v programs (`decode_step.linear_program`, RMSNorm prologue): tiles of the product into a scratch row,
   each counting itself in when its tile is stored;
2. attention programs, one per (sequence, KV head, split): each loads its first K/V tile of the cache (positions
   before the new token, written by earlier steps) *while the q/k/v programs stream their weights*, then waits
   for all of them, rotates its G query heads and the new key, attends, and stores its split's partial output.
   The split that holds the new position writes the new key and value to the cache (as `rope_attention`). The last
   split of each (sequence, KV head) to finish merges them, for all G heads at once, and counts the KV head in;
3. output programs (`linear_program` again): each loads its first weight tile, waits for every KV head, then
   reads the merged output past L1 and adds the residual.

A program's role is its *ticket*, an atomic count taken first thing, not its program id: a program with ticket t
has started, so every program it waits for (all hold smaller tickets) has started too and runs to its end, and
the spinning never deadlocks whatever order the GPU starts programs in. Under the interpreter, which runs them one
after another, tickets are program order and every wait is already met. The last program to finish sets the
counters back to zero for the next launch (a CUDA graph replays the same `sync` buffer).
"""

import math

import torch
import triton
import triton.language as tl

from ...machine import runtime
from .decode_attention import LOG2E, attend, check_shapes, finish, pdl_options, plan
from .decode_step import count_in, linear_program, linear_tiles, wait_for

# sync: int32 [SYNC_FIELDS + B·Hkv]: the ticket, q/k/v tiles stored, KV heads merged, programs finished, then the
# splits each (sequence, KV head) has finished
TICKET, QKV_DONE, HEADS_DONE, FINISHED, SYNC_FIELDS = 0, 1, 2, 3, 4


@triton.jit
def attention_block_kernel(X, Wqkv, Sqkv, Norm, Wo, So, QKV, Cos, Sin, Pos, K, V, OPart, LsePart, Attn, Y, Sync,
                           M, d_model, qkv_width, attn_width, eps, Hkv, splits, chunk, qk_scale,
                           qkv_programs, attn_programs, programs, m_blocks,
                           sxm, swq, sqkv, swo, sym, scs, skb, skh, sks, svb, svh, svs, spb, sph, sps, slb, slh, sab,
                           sah, SCALED: tl.constexpr, BLOCK_M: tl.constexpr, QKV_N: tl.constexpr,
                           QKV_K: tl.constexpr, QKV_STAGES: tl.constexpr, O_N: tl.constexpr, O_K: tl.constexpr,
                           O_STAGES: tl.constexpr, G: tl.constexpr, BLOCK_G: tl.constexpr, MERGE_G: tl.constexpr,
                           D: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr, PRECISION: tl.constexpr,
                           SLEEP: tl.constexpr, PDL: tl.constexpr = False):
    ticket = tl.atomic_add(Sync + 0, 1, sem="relaxed")
    if ticket < qkv_programs:  # the product's prologue 1: RMSNorm
        linear_program(ticket % m_blocks, ticket // m_blocks, X, Wqkv, Sqkv, Norm, X, QKV, M, qkv_width, d_model, eps,
                       sxm, swq, 0, sqkv, Sync, 0, 1, SCALED, False, BLOCK_M, QKV_N, QKV_K, QKV_STAGES, PDL, False,
                       0, "", 0)
        count_in(Sync + 1, "release")
    elif ticket < qkv_programs + attn_programs:
        attention_program(ticket - qkv_programs, QKV, Cos, Sin, Pos, K, V, OPart, LsePart, Attn, Sync, qkv_programs,
                          Hkv, splits, chunk, qk_scale, sqkv, scs, skb, skh, sks, svb, svh, svs, spb, sph, sps, slb,
                          slh, sab, sah, G, BLOCK_G, MERGE_G, D, BLOCK_N, BLOCK_S, PRECISION, PDL, SLEEP)
    else:
        o = ticket - qkv_programs - attn_programs
        linear_program(o % m_blocks, o // m_blocks, Attn, Wo, So, Norm, X, Y, M, d_model, attn_width, eps, sab, swo,
                       sxm, sym, Sync + 2, M * Hkv, 0, SCALED, True, BLOCK_M, O_N, O_K, O_STAGES, PDL, True,
                       2 if PDL else 0, ".cg", SLEEP)
    if count_in(Sync + 3, "acq_rel") == programs - 1:  # the last to finish: every counter back to zero
        zeros = tl.arange(0, 4)
        tl.store(Sync + zeros, zeros * 0)
        for i in range(0, M * Hkv):
            tl.store(Sync + 4 + i, 0)


@triton.jit
def _rotated(row, heads, offs_d, c, s, D: tl.constexpr, DTYPE: tl.constexpr):
    """Heads `heads` of the q/k/v row (stored by this launch: read past L1), rotated by the position's angles
    (pairs i, i + D/2) and rounded to DTYPE, as rope_and_cache stores them."""
    first_half = offs_d < D // 2
    partner = tl.where(first_half, offs_d + D // 2, offs_d - D // 2)
    x = tl.load(row + heads[:, None] * D + offs_d[None, :], cache_modifier=".cg").to(tl.float32)
    y = tl.load(row + heads[:, None] * D + partner[None, :], cache_modifier=".cg").to(tl.float32)
    return (x * c[None, :] + tl.where(first_half[None, :], -y, y) * s[None, :]).to(DTYPE)


@triton.jit
def attention_program(a, QKV, Cos, Sin, Pos, K, V, OPart, LsePart, Attn, Sync, qkv_programs, Hkv, splits, chunk,
                      qk_scale, sqkv, scs, skb, skh, sks, svb, svh, svs, spb, sph, sps, slb, slh, sab, sah,
                      G: tl.constexpr, BLOCK_G: tl.constexpr, MERGE_G: tl.constexpr, D: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr, PRECISION: tl.constexpr, PDL: tl.constexpr,
                      SLEEP: tl.constexpr):
    """Attention program `a`: split a % splits of (sequence, KV head) a // splits."""
    pid = a // splits
    split = a % splits
    b = (pid // Hkv).to(tl.int64)
    hkv = (pid % Hkv).to(tl.int64)
    pos = tl.load(Pos + b)  # the new token's position; keys [0, pos) are cached, by earlier steps
    start = split * chunk  # a multiple of BLOCK_N
    end = tl.minimum(start + chunk, pos + 1)
    cached_end = tl.minimum(end, pos)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    k_head = K + b * skb + hkv * skh
    v_head = V + b * svb + hkv * svh
    keys = start + offs_n
    live = (keys < cached_end)[:, None]
    k = tl.load(k_head + keys[:, None] * sks + offs_d[None, :], mask=live, other=0.0)  # before q exists
    v = tl.load(v_head + keys[:, None] * svs + offs_d[None, :], mask=live, other=0.0)
    if PDL:
        tl.extra.cuda.gdc_wait()
    wait_for(Sync + 1, qkv_programs, SLEEP)  # q and the new key and value: every q/k/v tile stored
    row = QKV + b * sqkv
    offs_g = tl.arange(0, BLOCK_G)
    rows = offs_g < tl.where(start <= pos, G, 0)  # a split past the new position reads and writes nothing
    heads = hkv * G + offs_g
    c = tl.load(Cos + pos.to(tl.int64) * scs + offs_d % (D // 2))
    s = tl.load(Sin + pos.to(tl.int64) * scs + offs_d % (D // 2))
    q = _rotated(row, tl.where(rows, heads, 0), offs_d, c, s, D, K.dtype.element_ty)
    m_i = tl.full([BLOCK_G], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    if start < cached_end:
        m_i, l_i, acc = attend(q, k, v, keys < cached_end, m_i, l_i, acc, qk_scale, PRECISION)
        for n in range(start + BLOCK_N, cached_end, BLOCK_N):
            keys = n + offs_n
            live = (keys < cached_end)[:, None]
            k = tl.load(k_head + keys[:, None] * sks + offs_d[None, :], mask=live, other=0.0)
            v = tl.load(v_head + keys[:, None] * svs + offs_d[None, :], mask=live, other=0.0)
            m_i, l_i, acc = attend(q, k, v, keys < cached_end, m_i, l_i, acc, qk_scale, PRECISION)
    if (start <= pos) & (pos < end):  # this split holds the new token: its key and value from the row
        kv_head = (Hkv * G + hkv) + tl.zeros([1], tl.int64)
        k_new = tl.reshape(_rotated(row, kv_head, offs_d, c, s, D, K.dtype.element_ty), [D])
        v_new = tl.load(row + (Hkv * G + Hkv + hkv) * D + offs_d, cache_modifier=".cg")
        tl.store(k_head + pos.to(tl.int64) * sks + offs_d, k_new)
        tl.store(v_head + pos.to(tl.int64) * svs + offs_d, v_new)
        score = tl.sum(q.to(tl.float32) * k_new.to(tl.float32)[None, :], 1) * qk_scale
        m_new = tl.maximum(m_i, score)
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(score - m_new)
        acc = acc * alpha[:, None] + p[:, None] * v_new.to(tl.float32)[None, :]
        l_i = l_i * alpha + p
        m_i = m_new
    finish(acc, l_i, m_i, rows, heads, offs_d, b, split, Attn, OPart, LsePart, sab, sah, spb, sph, sps, slb, slh,
           False)
    if count_in(Sync + 4 + pid, "acq_rel") == splits - 1:  # the last split of this KV head: merge, count it in
        tl.debug_barrier()
        _merge(OPart, LsePart, Attn, b, hkv, pos // chunk, spb, sph, sps, slb, slh, sab, sah, G, MERGE_G, D, BLOCK_S)
        count_in(Sync + 2, "release")


@triton.jit
def _merge(OPart, LsePart, Out, b, hkv, last_split, spb, sph, sps, slb, slh, sob, soh, G: tl.constexpr,
           MERGE_G: tl.constexpr, D: tl.constexpr, BLOCK_S: tl.constexpr):
    """out = Σ_s 2^(lse_s - max) · o_s / Σ_s 2^(lse_s - max) over splits 0..last_split, for the G query heads of KV
    head hkv, MERGE_G heads at a time (decode_attention's merge)."""
    offs_g = tl.arange(0, MERGE_G)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    live = (offs_s <= last_split)[None, :]
    for g0 in tl.static_range(0, G, MERGE_G):
        g = g0 + offs_g
        heads = hkv * G + tl.where(g < G, g, 0)  # padding rows read head 0's values, and store nothing
        lse = tl.load(LsePart + b * slb + heads[:, None] * slh + offs_s[None, :], mask=live, other=-float("inf"),
                      cache_modifier=".cg")
        o = tl.load(OPart + b * spb + heads[:, None, None] * sph + offs_s[None, :, None] * sps + offs_d[None, None, :],
                    mask=live[:, :, None], other=0.0, cache_modifier=".cg")
        w = tl.math.exp2(lse - tl.max(lse, 1)[:, None])
        out = tl.sum(o * w[:, :, None], 1) / tl.sum(w, 1)[:, None]
        tl.store(Out + b * sob + heads[:, None] * soh + offs_d[None, :], out.to(Out.dtype.element_ty),
                 mask=(g < G)[:, None])


def merge_heads(G: int, block_s: int, D: int) -> int:
    """Query heads the merge takes at once: as many as G needs (a power of two), while their splits' outputs stay
    within MERGE_ELEMENTS values (64 a thread of 4 warps)."""
    heads = triton.next_power_of_2(G)
    while heads > 1 and heads * block_s * D > MERGE_ELEMENTS:
        heads //= 2
    return heads


MERGE_ELEMENTS = 8192
SPIN_SLEEP_NS = 200  # a waiting program polls its counter about this often (on a GPU)


def new_sync(batch: int, n_kv_heads: int, device) -> torch.Tensor:
    """The zeroed counters one attention block needs (left zero after each launch)."""
    return torch.zeros(SYNC_FIELDS + batch * n_kv_heads, dtype=torch.int32, device=device)


def attention_block(x: torch.Tensor, wqkv: torch.Tensor, qkv_scale: torch.Tensor | None, norm: torch.Tensor,
                    wo: torch.Tensor, o_scale: torch.Tensor | None, cos: torch.Tensor, sin: torch.Tensor,
                    positions: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, n_heads: int,
                    sync: torch.Tensor | None = None, *, eps: float = 1e-5, pdl: bool = False,
                    qkv_config: dict | None = None, o_config: dict | None = None, **launch) -> torch.Tensor:
    """x + decode_attention(rope_and_cache(fused_linear(x, wqkv, norm=norm), ...), ...) · woᵀ in one launch.

    x [B, d]; wqkv [(Hq + 2·Hkv)·D, d] and wo [d, Hq·D] in x's dtype, or 8-bit with their row scales; cos, sin
    [max_seq, D/2]; positions [B] int32 (tokens cached before this one); caches [B, Hkv, max_seq, D], written at
    each position. `sync`: new_sync's counters (a decode step keeps one per layer: no allocation in a CUDA graph).
    `qkv_config`, `o_config`: the products' tiles (default decode_step's); `launch`: decode_attention.plan's."""
    B, d = x.shape
    Hkv, s_max, D = k_cache.shape[1:]
    qkv_width, attn_width = (n_heads + 2 * Hkv) * D, n_heads * D
    assert wqkv.shape == (qkv_width, d) and wo.shape == (d, attn_width), "wqkv [(Hq + 2·Hkv)·D, d], wo [d, Hq·D]"
    assert (qkv_scale is None) == (o_scale is None) == (wqkv.dtype == x.dtype), "8-bit weights need their scales"
    assert x.stride(1) == 1 and wqkv.stride(1) == 1 and wo.stride(1) == 1 and cos.stride(1) == 1
    assert cos.stride() == sin.stride() and v_cache.shape == k_cache.shape
    assert k_cache.stride(3) == 1 == v_cache.stride(3)
    qkv = torch.empty((B, qkv_width), dtype=x.dtype, device=x.device)
    attn = torch.empty((B, n_heads, D), dtype=x.dtype, device=x.device)
    y = torch.empty_like(x)
    G = check_shapes(attn, Hkv, D, positions)
    cfg = plan(attn, Hkv, s_max, descriptors=False, **launch)
    splits = cfg["splits"]
    block_s = triton.next_power_of_2(splits)
    o_part = torch.empty((B, n_heads, splits, D), dtype=torch.float32, device=x.device)
    lse_part = torch.empty((B, n_heads, splits), dtype=torch.float32, device=x.device)
    if sync is None:
        sync = new_sync(B, Hkv, x.device)
    assert sync.dtype == torch.int32 and sync.numel() >= SYNC_FIELDS + B * Hkv
    block_m, qkv_tiles = linear_tiles(x, wqkv, qkv_config)
    _, o_tiles = linear_tiles(attn.view(B, -1), wo, o_config)
    assert qkv_tiles["num_warps"] == o_tiles["num_warps"] == cfg["num_warps"], "one launch: one warp count"
    m_blocks = triton.cdiv(B, block_m)
    qkv_programs = m_blocks * triton.cdiv(qkv_width, qkv_tiles["BLOCK_N"])
    attn_programs = B * Hkv * splits
    programs = qkv_programs + attn_programs + m_blocks * triton.cdiv(d, o_tiles["BLOCK_N"])
    scales = (qkv_scale, o_scale) if qkv_scale is not None else (y, y)
    attention_block_kernel[(programs,)](
        x, wqkv, scales[0], norm, wo, scales[1], qkv, cos, sin, positions, k_cache, v_cache, o_part, lse_part, attn, y,
        sync, B, d, qkv_width, attn_width, eps, Hkv, splits, cfg["chunk"], LOG2E / math.sqrt(D), qkv_programs,
        attn_programs, programs, m_blocks, x.stride(0), wqkv.stride(0), qkv.stride(0), wo.stride(0), y.stride(0),
        cos.stride(0), *k_cache.stride()[:3], *v_cache.stride()[:3], *o_part.stride()[:3], *lse_part.stride()[:2],
        attn.stride(0), attn.stride(1), SCALED=qkv_scale is not None, BLOCK_M=block_m, QKV_N=qkv_tiles["BLOCK_N"],
        QKV_K=qkv_tiles["BLOCK_K"], QKV_STAGES=qkv_tiles["STAGES"], O_N=o_tiles["BLOCK_N"], O_K=o_tiles["BLOCK_K"],
        O_STAGES=o_tiles["STAGES"], G=G, BLOCK_G=max(16, triton.next_power_of_2(G)),
        MERGE_G=merge_heads(G, block_s, D), D=D, BLOCK_N=cfg["block_n"], BLOCK_S=block_s,
        PRECISION="ieee" if x.dtype == torch.float32 else "tf32", SLEEP=0 if runtime.INTERPRETER else SPIN_SLEEP_NS,
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"], **pdl_options(pdl, x))
    return y
