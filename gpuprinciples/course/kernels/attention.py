"""FlashAttention forward: softmax(Q Kᵀ / √D) V without the N×N score matrix ever leaving the chip.

One program per (query tile, batch·head). It loads its BLOCK_M rows of Q once, then streams the
K and V tiles past them, keeping a running row maximum `m`, row sum `l` and an unnormalised output
`acc` in registers (the online softmax). It reads Q and writes O once, and reads K and V once per
query tile; those re-reads come mostly from L2 while neighbouring programs share a head (`l2_sweep`
measures it). Ideas from Triton's tutorial 06 (fused attention) and FlashAttention-2:

* exp2 with log2(e) folded into the softmax scale (one multiply saved per score);
* causal attention split into an off-diagonal loop with no masking at all and a diagonal loop
  that masks, so most tiles pay nothing for the mask;
* tensor descriptors (`tl.make_tensor_descriptor`) per (batch, head): rows past N are read as
  zeros and never written, so N needs not be a multiple of the tile size (TMA on Hopper).
* warp specialisation (`tl.range(..., warp_specialize=True)`, num_warps=4): where N is a multiple of the tile
  and there is no causal mask, the kernel has one K/V loop, and the compiler splits it into a producer that
  issues the TMA loads ahead and two computing warpgroups of 64 query rows each (12 warps in all; Triton 3.6-3.9
  refuse it in a kernel with a second loop). On an H200 it took the timed case from 474 to 539 TFLOP/s;
* K's and V's descriptors made once by the wrapper, over [B·H·N, D] (`host_desc`), not by every program;
* persistent (`attention_persistent`, the default where it applies: not causal, contiguous, N a multiple of
  128): one program per SM walks the (query tile, head) work items with descriptors made once, so no program
  start, descriptor set-up or Q load sits outside the pipeline per tile. On an H200: 599 TFLOP/s, 0.90× cuDNN's
  kernel, where the per-tile grid ran at 549 in the same sweep (docs/roof-h200.md, 2026-12-04).

    python -m gpuprinciples.course.kernels.attention          # GPU: check, then time against SDPA
    python -m gpuprinciples.course.kernels.attention --sweep  # GPU: TFLOP/s of each tile configuration
    python -m gpuprinciples.course.kernels.attention --l2     # GPU: where the K/V re-reads come from
"""

import math

import torch
import triton
import triton.language as tl

from ...machine import runtime

LOG2E = 1.4426950408889634


@triton.jit
def _attend(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, lo, hi, N, qk_scale,
            BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
            WARP_SPECIALIZE: tl.constexpr = False):
    """Stream the K/V tiles with rows [lo, hi) past the Q tile, updating (acc, l, m). WARP_SPECIALIZE: the
    compiler gives the TMA loads their own warps, which run ahead while the others compute (Hopper and later).
    row0: the head's first row in the descriptors (0 when they are the head's own)."""
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = k_desc.load([row0 + start_n, 0])
        qk = tl.dot(q, k.T, input_precision=PRECISION)
        if MASK:  # only the tiles on the diagonal or past the end pay for this
            s = qk * qk_scale  # scores in log2 units
            offs_n = start_n + offs_n0
            keep = offs_n[None, :] < N
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            s = tl.where(keep, s, -float("inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.math.exp2(s - m_new[:, None])
        else:  # scale and subtract in one fused multiply-add per score
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)  # rescales what was summed under the old maximum
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([row0 + start_n, 0])
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attention_kernel(Q, K, V, Out, H, N, qk_scale,
                     sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son, N_KEY,
                     D: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEADS_INNER: tl.constexpr = False,
                     EVEN_N: tl.constexpr = False, WARP_SPECIALIZE: tl.constexpr = False,
                     HOST_DESC: tl.constexpr = False):
    # EVEN_N: the wrapper vouches that N is a multiple of BLOCK_N. WARP_SPECIALIZE: then (not causal) the one
    # K/V loop is warp-specialised: a producer warp issues the TMA loads ahead while 4 warps compute.
    # HOST_DESC: K and V are tensor descriptors the wrapper made over [B·H·N, D] (contiguous, EVEN_N): no program
    # builds its own.
    # N_KEY (N rounded up to a power of two) is only the autotuner's key: one tuning per size class.
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    if HEADS_INNER:  # (l2_sweep only) neighbouring programs on different heads: their K and V compete for L2
        bh = tl.program_id(0)
        pid_m = tl.program_id(1)
    else:  # neighbouring programs are query tiles of one head: they re-read the same K and V
        pid_m = tl.program_id(0)
        bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    if CAUSAL:  # the longest rows first: the last query tiles have the most keys to visit
        pid_m = tl.cdiv(N, BLOCK_M) - 1 - pid_m
    start_m = pid_m * BLOCK_M

    # Q and O through descriptors of the program's own: warp specialisation splits their tiles between its two
    # computing warpgroups (64 rows each), which a descriptor made by the wrapper (its tile fixed) does not allow
    q_desc = tl.make_tensor_descriptor(Q + b * sqb + h * sqh, shape=[N, D], strides=[sqn, 1],
                                       block_shape=[BLOCK_M, D])
    o_desc = tl.make_tensor_descriptor(Out + b * sob + h * soh, shape=[N, D], strides=[son, 1],
                                       block_shape=[BLOCK_M, D])
    if HOST_DESC:
        k_desc, v_desc = K, V
        row0 = bh * N  # this head's first row of the [B·H·N, D] views
    else:
        k_desc = tl.make_tensor_descriptor(K + b * skb + h * skh, shape=[N, D], strides=[skn, 1],
                                           block_shape=[BLOCK_N, D])
        v_desc = tl.make_tensor_descriptor(V + b * svb + h * svh, shape=[N, D], strides=[svn, 1],
                                           block_shape=[BLOCK_N, D])
        row0 = 0

    offs_m = start_m + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    q = q_desc.load([start_m, 0])  # stays on chip for the whole loop

    if CAUSAL:
        # keys [0, start_m) are before every query of this tile: no mask at all
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, 0, start_m, N, qk_scale,
                                BLOCK_N, False, True, PRECISION)
        # the diagonal tile(s): mask keys after the query (and past N)
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, start_m,
                                tl.minimum(start_m + BLOCK_M, N), N, qk_scale, BLOCK_N, True, True, PRECISION)
    elif EVEN_N:  # N a multiple of BLOCK_N: one loop, the only one warp specialisation accepts (Triton 3.6-3.9)
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, 0, N, N, qk_scale,
                                BLOCK_N, False, False, PRECISION, WARP_SPECIALIZE)
    else:
        full = N - N % BLOCK_N
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, 0, full, N, qk_scale,
                                BLOCK_N, False, False, PRECISION)
        # the last, partial K/V tile: mask the rows past N (the descriptor read them as zeros)
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, full, N, N, qk_scale,
                                BLOCK_N, True, False, PRECISION)

    o_desc.store([start_m, 0], (acc / l_i[:, None]).to(q.dtype))  # rows past N are dropped


@triton.jit
def attention_persistent_kernel(Q, K, V, Out, N, qk_scale, TILES,
                                D: tl.constexpr, PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                WARP_SPECIALIZE: tl.constexpr = False, OUTER: tl.constexpr = False):
    """Not causal, contiguous q, k, v, o, N a multiple of the tiles: one program per SM walks the (query tile, head)
    work items (tile, tile + programs, ...) with descriptors made once, over [B·H·N, D]: no program start per tile.
    OUTER: `warp_specialize` on the loop over work items instead of the loop over keys (Triton 3.9 compiles the two
    alike for sm_90; on an H200 they ran at 0.964 and 0.969 ms, tools/tune_roof.py)."""
    rows = TILES // tl.cdiv(N, BLOCK_M) * N
    q_desc = tl.make_tensor_descriptor(Q, shape=[rows, D], strides=[D, 1], block_shape=[BLOCK_M, D])
    o_desc = tl.make_tensor_descriptor(Out, shape=[rows, D], strides=[D, 1], block_shape=[BLOCK_M, D])
    k_desc = tl.make_tensor_descriptor(K, shape=[rows, D], strides=[D, 1], block_shape=[BLOCK_N, D])
    v_desc = tl.make_tensor_descriptor(V, shape=[rows, D], strides=[D, 1], block_shape=[BLOCK_N, D])
    per_head = tl.cdiv(N, BLOCK_M)
    for tile in tl.range(tl.program_id(0), TILES, tl.num_programs(0), warp_specialize=WARP_SPECIALIZE and OUTER):
        row0 = tile // per_head * N
        start_m = tile % per_head * BLOCK_M
        offs_m = start_m + tl.arange(0, BLOCK_M)
        m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
        q = q_desc.load([row0 + start_m, 0])
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, 0, N, N, qk_scale,
                                BLOCK_N, False, False, PRECISION, WARP_SPECIALIZE and not OUTER)
        o_desc.store([row0 + start_m, 0], (acc / l_i[:, None]).to(q.dtype))


def _set_blocks(nargs: dict) -> None:
    """Autotuner pre-hook: the wrapper's K and V descriptors (HOST_DESC) take the configuration's tile."""
    for name in ("K", "V"):
        if hasattr(nargs[name], "block_shape"):
            nargs[name].block_shape = [nargs["BLOCK_N"], nargs["D"]]


# On a GPU the tile shape is tuned once per (size class, head dim, causal, N a multiple of the tile, dtype).
# Configurations whose buffers do not fit in shared memory are skipped by the autotuner. Measured on an H200
# (tools/tune_roof.py, docs/roof-h200.md, Triton 3.6): the warp-specialised 128×128 tiles (num_warps=4) and 2
# stages ran at 539 TFLOP/s where the best without reached 474. Warp-specialised 128×64 tiles with 3 or 4 stages
# returned NaNs there (a compiler fault): only 2-stage ones are listed; 64×64 ones ran at 246.
GPU_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "WARP_SPECIALIZE": ws}, num_stages=s, num_warps=w,
                  pre_hook=_set_blocks)
    for bm, bn, s, w, ws in [(128, 128, 2, 4, True), (128, 64, 2, 4, True),
                             (128, 128, 3, 8, False), (128, 64, 4, 8, False), (128, 64, 3, 4, False),
                             (64, 64, 3, 4, False)]
]
EVEN_UNIT = 128  # every GPU configuration's BLOCK_N divides it: N % EVEN_UNIT == 0 makes EVEN_N true for all
assert all(EVEN_UNIT % c.kwargs["BLOCK_N"] == 0 for c in GPU_CONFIGS)
attention_kernel_tuned = triton.autotune(GPU_CONFIGS, key=["N_KEY", "D", "CAUSAL", "EVEN_N", "HOST_DESC"])(
    attention_kernel)

HOST_DESCRIPTORS = True  # the default where they fit (`attention`'s host_desc): 1.002 ms against 1.012, H200
# the default where it fits: `attention_persistent` (not causal, contiguous, 2-byte, D <= 128); on an H200 0.964 ms
# against the per-tile grid's 1.002 (tools/tune_roof.py, 2026-12-04)
PERSISTENT = True
CPU_BLOCKS = {"BLOCK_M": 32, "BLOCK_N": 32}  # the interpreter: small tiles, few of them
SMALL_GPU_BLOCKS = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}  # short sequences: no tuning


def _host_descriptors(k: torch.Tensor, v: torch.Tensor, block_n: int = 1) -> list:
    """Tensor descriptors over the [B·H·N, D] views of k and v (contiguous), tiles of `block_n` rows (the
    autotuner's pre-hook sets them per configuration)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    B, H, N, D = k.shape
    return [TensorDescriptor.from_tensor(t.view(B * H * N, D), [block_n, D]) for t in (k, v)]


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              blocks: dict | None = None, heads_inner: bool = False, host_desc: bool | None = None) -> torch.Tensor:
    """softmax(q kᵀ / √D [+ causal mask]) v for q, k, v of shape [B, H, N, D] (last dim contiguous,
    each with strides of its own).

    `blocks` fixes the tile configuration (BLOCK_M, BLOCK_N, optionally num_warps/num_stages/WARP_SPECIALIZE)
    instead of the default: autotuned on a GPU for N ≥ 1024, fixed otherwise. `heads_inner` orders the
    programs head by head instead of tile by tile (never autotuned): the same work, for `l2_sweep`.
    `host_desc`: the wrapper makes K's and V's tensor descriptors once, over [B·H·N, D], instead of every program
    making its own; by default where it can (a GPU, contiguous k and v, N a multiple of every tile).
    """
    B, H, N, D = q.shape
    assert k.shape == v.shape == q.shape, "q, k and v must have the same shape [B, H, N, D]"
    assert D in (16, 32, 64, 128, 256), "head dim must be a power of two from 16 to 256"
    assert q.stride(-1) == k.stride(-1) == v.stride(-1) == 1, "the head dim must be contiguous"
    o = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    fits = k.is_contiguous() and v.is_contiguous() and N % EVEN_UNIT == 0 and not heads_inner
    if host_desc is None:
        host_desc = fits and runtime.HAS_CUDA and HOST_DESCRIPTORS
    assert fits or not host_desc, "host descriptors need contiguous k and v and N a multiple of 128"
    kv = _host_descriptors(k, v, (blocks or {}).get("BLOCK_N", 1)) if host_desc else (k, v)
    args = (q, *kv, o, H, N, LOG2E / math.sqrt(D), *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
            *o.stride()[:3], triton.next_power_of_2(N))
    meta = dict(D=D, CAUSAL=bool(causal), PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
                HOST_DESC=host_desc)
    if (PERSISTENT and blocks is None and runtime.HAS_CUDA and N >= 1024 and not causal and fits and D <= 128
            and q.is_contiguous() and q.element_size() == 2):
        return attention_persistent(q, k, v)
    if blocks is None and runtime.HAS_CUDA and N >= 1024 and not heads_inner:
        grid = lambda cfg: (triton.cdiv(N, cfg["BLOCK_M"]), B * H)  # noqa: E731
        attention_kernel_tuned[grid](*args, **meta, EVEN_N=N % EVEN_UNIT == 0)
        return o
    if blocks is None:
        blocks = SMALL_GPU_BLOCKS if runtime.HAS_CUDA else CPU_BLOCKS
        _set_blocks({"K": kv[0], "V": kv[1], "D": D, **blocks})
    grid = (triton.cdiv(N, blocks["BLOCK_M"]), B * H)
    attention_kernel[grid[::-1] if heads_inner else grid](*args, **meta, **blocks, HEADS_INNER=heads_inner,
                                                          EVEN_N=N % blocks["BLOCK_N"] == 0)
    return o


PERSISTENT_BLOCKS = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 2, "WARP_SPECIALIZE": True,
                     "OUTER": True}


def attention_persistent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocks: dict | None = None,
                         programs: int | None = None) -> torch.Tensor:
    """`attention` (not causal) by `attention_persistent_kernel`: contiguous q, k, v, N a multiple of the tiles;
    `programs` (default: one per SM) walk the B·H·N/BLOCK_M work items."""
    B, H, N, D = q.shape
    blocks = dict(blocks or (PERSISTENT_BLOCKS if runtime.HAS_CUDA else CPU_BLOCKS))
    assert all(t.is_contiguous() for t in (q, k, v)) and k.shape == v.shape == q.shape, "contiguous, equal shapes"
    assert N % blocks["BLOCK_M"] == 0 and N % blocks["BLOCK_N"] == 0, "N must be a multiple of the tiles"
    o = torch.empty_like(q)
    tiles = B * H * (N // blocks["BLOCK_M"])
    if programs is None:
        programs = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 4
    attention_persistent_kernel[(min(programs, tiles),)](
        q, k, v, o, N, LOG2E / math.sqrt(D), tiles, D=D,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32", **blocks)
    return o


def hbm_bytes_without_cache(B: int, H: int, N: int, D: int, block_m: int, element_size: int) -> int:
    """What one forward would move if no re-read hit a cache: Q read and O written once, K and V read
    once per query tile. Per head 4·N·D·(1 + ⌈N/BLOCK_M⌉) bytes in bf16; FLOP per byte ≈ BLOCK_M."""
    head = N * D * element_size
    return B * H * (2 * head + triton.cdiv(N, block_m) * 2 * head)


def l2_sweep(q, k, v, block_ms=(64, 128), budget_s: float = 1.0) -> list[dict]:  # pragma: no cover - GPU
    """Time the kernel (not causal) for each query tile, with its programs in two orders: tile by tile
    (the default: programs running together share one head's K and V, which stay in L2) and head by head
    (programs running together are on different heads: every head's K and V compete for L2). The L2 is
    flushed before each call. `needed` is the bandwidth HBM would have had to deliver if every K/V
    re-read had come from it."""
    from ...measure import timing
    B, H, N, D = q.shape
    fns = {}
    for bm in block_ms:
        blocks = {"BLOCK_M": bm, "BLOCK_N": min(bm, 64), "num_warps": 4 if bm <= 64 else 8, "num_stages": 3}
        for inner in (False, True):
            fns[(bm, inner)] = (lambda q, k, v, blocks=blocks, inner=inner:
                                attention(q, k, v, blocks=blocks, heads_inner=inner))
    named = {f"BLOCK_M={bm} {'head by head' if inner else 'tile by tile'}": fn for (bm, inner), fn in fns.items()}
    comparison = timing.compare(named, args=(q, k, v), device="cuda", budget_s=budget_s)
    rows = []
    for (bm, inner), name in zip(fns, named):
        seconds = comparison.timings[name].median
        moved = hbm_bytes_without_cache(B, H, N, D, bm, q.element_size())
        rows.append({"block_m": bm, "order": "head by head" if inner else "tile by tile", "seconds": seconds,
                     "tflops": 4 * B * H * N * N * D / seconds / 1e12, "bytes_without_cache": moved,
                     "needed": moved / seconds})
    return rows


# -------------------------------------------------------------------------------------------------
# Baselines and a standalone check-and-time (GPU)
# -------------------------------------------------------------------------------------------------


def attention_float64(q, k, v, causal: bool = False):
    """The grader's reference: float64 softmax(q kᵀ/√D) v, one batch at a time (the timing input's
    scores are 8 GiB in float64)."""
    outs = []
    for b in range(q.shape[0]):
        qb, kb, vb = q[b].double(), k[b].double(), v[b].double()
        s = qb @ kb.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            n = q.shape[-2]
            s.masked_fill_(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), -math.inf)
        outs.append(torch.softmax(s, dim=-1) @ vb)
        del s
    return torch.stack(outs)


def naive_attention(q, k, v, causal: bool = False):
    """The textbook way: the N×N scores and probabilities go to memory and come back."""
    s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def sdpa(backend_name: str):
    """F.scaled_dot_product_attention restricted to one backend ("FLASH_ATTENTION", "CUDNN_ATTENTION", ...)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = getattr(SDPBackend, backend_name)

    def run(q, k, v, causal: bool = False):
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    run.__name__ = run.__qualname__ = f"sdpa_{backend_name.lower()}"
    return run


def _main(argv=None) -> None:  # pragma: no cover - needs a GPU
    import argparse

    from triton.testing import do_bench

    parser = argparse.ArgumentParser(description="check and time the FlashAttention kernel on a GPU")
    parser.add_argument("--shape", default="4,16,4096,128", help="B,H,N,D")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--sweep", action="store_true", help="time every configuration in GPU_CONFIGS")
    parser.add_argument("--l2", action="store_true", help="the K/V re-reads: query tiles and program order (l2_sweep)")
    a = parser.parse_args(argv)
    assert torch.cuda.is_available(), "this check needs a CUDA GPU"
    B, H, N, D = map(int, a.shape.split(","))
    dtype = getattr(torch, a.dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, generator=gen, device="cuda", dtype=dtype) for _ in range(3))
    flops = 4 * B * H * N * N * D // (2 if a.causal else 1)
    print(f"{torch.cuda.get_device_name()}, triton {triton.__version__}, torch {torch.__version__}; "
          f"B={B} H={H} N={N} D={D} {a.dtype} causal={a.causal}")

    ref = attention_float64(q, k, v, a.causal)
    out = attention(q, k, v, a.causal)
    err = (out.double() - ref).abs().max().item()
    print(f"max |error| vs float64: ours {err:.2e}", end="")
    for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
        try:
            print(f", {name.lower()} {(sdpa(name)(q, k, v, a.causal).double() - ref).abs().max().item():.2e}",
                  end="")
        except RuntimeError as exc:
            print(f", {name.lower()} unavailable ({str(exc).splitlines()[0][:60]})", end="")
    print()
    assert err < 2e-2, "the kernel is wrong at this size"
    del ref

    def tflops(fn):
        ms = do_bench(lambda: fn(q, k, v, a.causal), warmup=50, rep=300)
        return ms, flops / ms / 1e9

    if a.l2:
        from ...measure.calibrate import ceilings
        copy = ceilings().copy_bandwidth
        print(f"copy bandwidth measured here: {copy / 1e12:.2f} TB/s")
        for row in l2_sweep(q, k, v):
            print(f"  BLOCK_M={row['block_m']:>3}, {row['order']:>12}: {row['seconds'] * 1e3:6.3f} ms, "
                  f"{row['tflops']:4.0f} TFLOP/s; without a cache {row['bytes_without_cache'] / 1e9:5.2f} GB, "
                  f"{row['needed'] / 1e12:5.2f} TB/s needed ({row['needed'] / copy:4.2f}× copy)")
    if a.sweep:
        for cfg in GPU_CONFIGS:
            blocks = dict(cfg.kwargs, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
            try:
                ms, tf = tflops(lambda q, k, v, c: attention(q, k, v, c, blocks=blocks))
                print(f"  {blocks}: {ms:.3f} ms, {tf:.0f} TFLOP/s")
            except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory
                print(f"  {blocks}: failed ({type(exc).__name__})")
    rows = [("ours (triton)", attention), ("naive", naive_attention),
            ("sdpa flash", sdpa("FLASH_ATTENTION")), ("sdpa cudnn", sdpa("CUDNN_ATTENTION"))]
    for name, fn in rows:
        try:
            ms, tf = tflops(fn)
            print(f"{name:>14}: {ms:8.3f} ms  {tf:6.0f} TFLOP/s")
        except RuntimeError as exc:
            print(f"{name:>14}: unavailable ({str(exc).splitlines()[0][:80]})")
    best = attention_kernel_tuned.best_config if hasattr(attention_kernel_tuned, "best_config") else None
    if best is not None:
        print(f"autotuner picked {best}")


if __name__ == "__main__":  # pragma: no cover
    _main()
