"""Decode attention: one new query token per sequence against its KV cache, split over the keys.

    q [B, Hq, D], k_cache and v_cache [B, Hkv, S_max, D], seq_lens [B] (int32, on the device)

Sequence b attends to positions [0, seq_lens[b]) of its cache; query head h reads KV head
h // (Hq / Hkv) (grouped-query attention: Hq = Hkv is multi-head, Hkv = 1 multi-query).

A decode step has one query row per head, so lesson 08's grid (one program per query tile) would be
B·Hq programs that each read a whole KV head, G = Hq / Hkv times over per KV head, and too few of them
to fill a GPU when the batch is small. Split-KV ("flash decoding", Dao et al. 2023) instead runs:

1. one program per (sequence, KV head, split of the keys): it loads the G query heads that share the
   KV head as one tile (padded to 16 rows, the smallest `tl.dot`), streams its slice of K and V past
   them once with the online softmax, and writes per query head the split's normalised output and its
   log-sum-exp (fp32). Every live K/V byte is read once in all, whatever G is;
2. one program per (sequence, query head) that merges the live splits with weights 2^(lse - max lse):
   lesson 08's merge of two partial softmaxes, over n of them.

With one split (a long batch already fills the GPU) step 1 writes the output itself: one launch.
K and V tiles come through tensor descriptors whose row count is the sequence's own length, so rows
past it are neither read (TMA, and the interpreter, fill them with zeros) nor used (score -inf). A
program builds its descriptors on the device, which a short split (batch 1 from a few thousand
positions: a few tiles each) does not amortise: there masked pointer loads are faster (`plan`,
`DESCRIPTOR_MIN_TILES`).

    python -m gpuprinciples.course.kernels.decode_attention        # GPU: check, then time against SDPA
"""

import math

import torch
import triton
import triton.language as tl

from ...toolchain import compat

LOG2E = 1.4426950408889634


@triton.jit
def split_kv_kernel(Q, K, V, SeqLens, Out, OPart, LsePart, Hkv, chunk, qk_scale,
                    sqb, sqh, skb, skh, sks, svb, svh, svs, sob, soh, spb, sph, sps, slb, slh,
                    G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
                    SINGLE: tl.constexpr, PRECISION: tl.constexpr, PDL: tl.constexpr = False,
                    DESCRIPTORS: tl.constexpr = True):
    # launched early (decode_step.pdl): q and this step's key come from the kernel before (load_queries waits)
    b, hkv, split, seq_len, start, end, heads, rows, offs_d, q = load_queries(Q, SeqLens, Hkv, chunk, sqb, sqh,
                                                                              G, BLOCK_G, D, PDL)
    if DESCRIPTORS:
        k_desc = tl.make_tensor_descriptor(K + b * skb + hkv * skh, shape=[seq_len, D], strides=[sks, 1],
                                           block_shape=[BLOCK_N, D])
        v_desc = tl.make_tensor_descriptor(V + b * svb + hkv * svh, shape=[seq_len, D], strides=[svs, 1],
                                           block_shape=[BLOCK_N, D])
    else:  # plain loads: no descriptor to build on the device, which a short split may not amortise
        k_head = K + b * skb + hkv * skh  # scalar bases, offsets per tile: a tile of 64-bit pointers held
        v_head = V + b * svb + hkv * svh  # across the loop would take most of a thread's registers
    m_i = tl.full([BLOCK_G], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    for n in range(start, end, BLOCK_N):
        if DESCRIPTORS:
            k = k_desc.load([n, 0])  # rows past seq_len: zeros, never read from memory
            v = v_desc.load([n, 0])
        else:
            keys = n + tl.arange(0, BLOCK_N)
            live = (keys < end)[:, None]
            k = tl.load(k_head + keys[:, None] * sks + offs_d[None, :], mask=live, other=0.0)
            v = tl.load(v_head + keys[:, None] * svs + offs_d[None, :], mask=live, other=0.0)
        m_i, l_i, acc = attend(q, k, v, n + tl.arange(0, BLOCK_N) < end, m_i, l_i, acc, qk_scale, PRECISION)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    finish(acc, l_i, m_i, rows, heads, offs_d, b, split, Out, OPart, LsePart, sob, soh, spb, sph, sps, slb, slh, SINGLE)


@triton.jit
def load_queries(Q, SeqLens, Hkv, chunk, sqb, sqh, G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr,
                 WAIT: tl.constexpr = False):
    """This program's (sequence b, KV head, split), its positions [start, end), and the tile of the G query
    heads that read the KV head (rows ≥ G, and every row of a split past the sequence's end, masked). WAIT: the
    PDL wait, after the length's load and before q's. So with PDL the lengths must come from a kernel that ended
    before the one launched just before this began (in the fused step: the step's first kernel, or the step before)."""
    pid = tl.program_id(0)
    split = tl.program_id(1)
    b = (pid // Hkv).to(tl.int64)
    hkv = (pid % Hkv).to(tl.int64)
    seq_len = tl.load(SeqLens + b)
    if WAIT:
        tl.extra.cuda.gdc_wait()
    start = split * chunk  # chunk is a multiple of BLOCK_N: no tile straddles two splits
    end = tl.minimum(start + chunk, seq_len)
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    heads = hkv * G + offs_g
    rows = offs_g < tl.where(start < seq_len, G, 0)  # a split past this sequence's end reads and writes nothing
    q = tl.load(Q + b * sqb + heads[:, None] * sqh + offs_d[None, :], mask=rows[:, None], other=0.0)
    return b, hkv, split, seq_len, start, end, heads, rows, offs_d, q


@triton.jit
def attend(q, k, v, valid, m_i, l_i, acc, qk_scale, PRECISION: tl.constexpr):
    """One tile of the online softmax (lesson 08): scores of the `valid` positions, the running max and sum
    rescaled, acc += p · v. Scores are in log2 units (qk_scale holds log2(e) / √D)."""
    s = tl.dot(q, k.T, input_precision=PRECISION) * qk_scale
    s = tl.where(valid[None, :], s, -float("inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
    return m_new, l_i * alpha + tl.sum(p, 1), acc


@triton.jit
def finish(acc, l_i, m_i, rows, heads, offs_d, b, split, Out, OPart, LsePart, sob, soh, spb, sph, sps, slb, slh,
           SINGLE: tl.constexpr):
    """Store a split's result: the output itself when it is the only split, else its normalised output
    and log-sum-exp (log2 units) for the merge."""
    l_i = tl.where(l_i > 0, l_i, 1.0)  # a dead split (no keys) stores nothing: keep its arithmetic quiet
    if SINGLE:
        tl.store(Out + b * sob + heads[:, None] * soh + offs_d[None, :],
                 (acc / l_i[:, None]).to(Out.dtype.element_ty), mask=rows[:, None])
    else:
        tl.store(OPart + b * spb + heads[:, None] * sph + split * sps + offs_d[None, :], acc / l_i[:, None],
                 mask=rows[:, None])
        tl.store(LsePart + b * slb + heads * slh + split, m_i + tl.math.log2(l_i), mask=rows)


@triton.jit
def merge_splits_kernel(OPart, LsePart, SeqLens, Out, Hq, chunk, spb, sph, sps, slb, slh, sob, soh,
                        D: tl.constexpr, BLOCK_S: tl.constexpr, PDL: tl.constexpr = False, NEW_TOKEN: tl.constexpr = 0):
    """out[b, h] = Σ_s 2^(lse_s - max) · o_s / Σ_s 2^(lse_s - max), over the splits that held keys (NEW_TOKEN = 1:
    SeqLens holds the new token's positions, one less than the lengths; with PDL read before the wait, as in
    load_queries)."""
    pid = tl.program_id(0)
    b = (pid // Hq).to(tl.int64)
    h = (pid % Hq).to(tl.int64)
    n_live = (tl.load(SeqLens + b) + NEW_TOKEN + chunk - 1) // chunk  # (tl.cdiv is a jit call: slow in the interpreter)
    if PDL:
        tl.extra.cuda.gdc_wait()
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    live = offs_s < n_live
    lse = tl.load(LsePart + b * slb + h * slh + offs_s, mask=live, other=-float("inf"))
    o = tl.load(OPart + b * spb + h * sph + offs_s[:, None] * sps + offs_d[None, :], mask=live[:, None], other=0.0)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    w = tl.math.exp2(lse - tl.max(lse, 0))  # dead splits: 2^-inf = 0
    out = tl.sum(o * w[:, None], 0) / tl.sum(w, 0)
    tl.store(Out + b * sob + h * soh + offs_d, out.to(Out.dtype.element_ty))


# -------------------------------------------------------------------------------------------------
# Launch parameters
# -------------------------------------------------------------------------------------------------

# Under the interpreter: few, large tiles (each is a NumPy call), and splits small enough that the CPU
# cases have several of them (the second launch is exercised).
CPU_PLAN = {"block_n": 64, "chunk": 128, "num_warps": 4, "num_stages": 1}
# On a GPU, from tools/tune_decode.py on an H200 (2026-12-03; docs/decoding-h200.md#attention): 64-key tiles and
# 4 warps; 2 stages at D = 128 (3 stages hold 96 KB of K/V tiles per program, and fewer programs fit an SM; 266
# against 271 µs at the long context), 3 at D ≤ 64 (14.4 against 15.6 µs at LLAMA_1B's batch 1); and
# floor(GPU_WAVES · SMs / (B · Hkv)) splits, each at least GPU_MIN_BLOCKS tiles long: 8 at the long context (259 µs;
# 9 took 266, 16 267), one at batch 64 × 1024 positions (48 µs, where two took 54-57). Splits of 2 tiles, not 4,
# at batch 1 from 4096 positions: the graphed LLAMA_8B step 0.4 % faster on an H100 (docs/roof-h200.md#sixth-pass).
GPU_BLOCK_N, GPU_WARPS, GPU_WAVES, GPU_MIN_BLOCKS, GPU_MAX_SPLITS = 64, 4, 4, 2, 64
# K and V tiles through tensor descriptors for splits of at least DESCRIPTOR_MIN_TILES tiles, plain loads for shorter
# ones. A program builds its descriptors on the device, a fixed cost that a long split amortises and a short one
# does not (docs/roof-h200.md#fifth-pass and #sixth-pass, an H100: the long context's 64-tile splits as fast either
# way; batch 1 from 4096 positions, 2-4 tile splits, 13.7 against 15.8 µs at D 64, 19.1 against 20.2 at D 128; the
# graphed step 2.5 % faster at LLAMA_1B, 1.0 % at LLAMA_8B).
DESCRIPTOR_MIN_TILES = 16


def gpu_stages(head_dim: int) -> int:
    return 3 if head_dim <= 64 else 2


def split_count(batch: int, n_kv_heads: int, blocks: int, sms: int) -> int:
    """Splits per (sequence, KV head): about GPU_WAVES programs per SM in all, rounded down (a partial extra
    wave of programs costs more than it brings), at least 1, each split at least GPU_MIN_BLOCKS tiles."""
    return max(1, min((GPU_WAVES * sms) // (batch * n_kv_heads), GPU_MAX_SPLITS, blocks // GPU_MIN_BLOCKS))


_sm_counts: dict[int, int] = {}


def _sm_count(device: torch.device) -> int:
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _sm_counts:
        _sm_counts[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _sm_counts[index]


def plan(q: torch.Tensor, n_kv_heads: int, s_max: int, splits: int | None = None, block_n: int | None = None,
         num_warps: int | None = None, num_stages: int | None = None, tiles: dict | None = None,
         descriptors: bool | None = None) -> dict:
    """Tile size, keys per split and the number of splits, from shapes only (no look at seq_lens, which
    live on the device: reading them would stall the host and break CUDA-graph capture), and whether the
    contiguous kernel loads K and V through tensor descriptors. `tiles` replaces the GPU's default block_n,
    num_warps and num_stages (the paged kernel has its own)."""
    B, _, D = q.shape
    if q.is_cuda:
        tiles = tiles or {"block_n": GPU_BLOCK_N, "num_warps": GPU_WARPS, "num_stages": gpu_stages(D)}
        block_n = block_n or tiles["block_n"]
        blocks = triton.cdiv(s_max, block_n)
        if splits is None:
            splits = split_count(B, n_kv_heads, blocks, _sm_count(q.device))
        chunk = triton.cdiv(blocks, min(splits, blocks)) * block_n
        warps, stages = num_warps or tiles["num_warps"], num_stages or tiles["num_stages"]
    else:
        block_n = block_n or CPU_PLAN["block_n"]
        blocks = triton.cdiv(s_max, block_n)
        per_split = triton.cdiv(blocks, splits) if splits else max(CPU_PLAN["chunk"] // block_n, 1)
        chunk = per_split * block_n
        warps, stages = num_warps or CPU_PLAN["num_warps"], num_stages or CPU_PLAN["num_stages"]
    return {"block_n": block_n, "chunk": chunk, "splits": triton.cdiv(s_max, chunk), "num_warps": warps,
            "num_stages": stages, "descriptors": descriptors if descriptors is not None else
            not q.is_cuda or chunk // block_n >= DESCRIPTOR_MIN_TILES}


def check_shapes(q, n_kv_heads: int, head_dim: int, seq_lens) -> int:
    """G, the query heads per KV head, after checking what the kernels assume."""
    B, Hq, D = q.shape
    assert D == head_dim and D in (16, 32, 64, 128, 256), "head dim must match the cache and be a power of two ≥ 16"
    assert Hq % n_kv_heads == 0, "the query heads must be a multiple of the KV heads"
    assert q.stride(-1) == 1, "q's head dim must be contiguous"
    assert seq_lens.shape == (B,) and seq_lens.dtype == torch.int32, "seq_lens: one int32 length per sequence"
    return Hq // n_kv_heads


def pdl_options(on: bool, x: torch.Tensor) -> dict:
    """A launch's Programmatic Dependent Launch arguments (decode_step.pdl): the kernel's PDL form and
    `launch_pdl`, when `on` and the GPU has PDL (sm_90+), or under the interpreter (where the waits do nothing)."""
    on = on and compat.has_pdl() and (not x.is_cuda or torch.cuda.get_device_capability(x.device)[0] >= 9)
    return {"PDL": True, "launch_pdl": True} if on else {}


def launch(kernel, q, seq_lens, n_kv_heads: int, G: int, tensors: tuple, strides: tuple, cfg: dict,
           after: tuple = (), pdl: bool = False, extra: dict | None = None) -> torch.Tensor:
    """Run a split kernel (contiguous or paged: `tensors` and their `strides` differ, `after` are its
    further arguments, `extra` its own keyword arguments) and, with more than one split, the merge; both with PDL
    when `pdl` (pdl_options)."""
    options = pdl_options(pdl, q)
    B, Hq, D = q.shape
    out = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
    splits = cfg["splits"]
    o_part = torch.empty((B, Hq, splits, D) if splits > 1 else (1, 1, 1, 1), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((B, Hq, splits) if splits > 1 else (1, 1, 1), dtype=torch.float32, device=q.device)
    kernel[(B * n_kv_heads, splits)](
        q, *tensors, seq_lens, out, o_part, lse_part, n_kv_heads, cfg["chunk"], LOG2E / math.sqrt(D),
        q.stride(0), q.stride(1), *strides, out.stride(0), out.stride(1), *o_part.stride()[:3], *lse_part.stride()[:2],
        *after, G=G, BLOCK_G=max(16, triton.next_power_of_2(G)), D=D, BLOCK_N=cfg["block_n"], SINGLE=splits == 1,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32", num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"], **options, **(extra or {}))
    if splits > 1:
        merge_splits_kernel[(B * Hq,)](o_part, lse_part, seq_lens, out, Hq, cfg["chunk"], *o_part.stride()[:3],
                                       *lse_part.stride()[:2], out.stride(0), out.stride(1), D=D,
                                       BLOCK_S=triton.next_power_of_2(splits), **options)
    return out


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, seq_lens: torch.Tensor, *,
                     splits: int | None = None, block_n: int | None = None, num_warps: int | None = None,
                     num_stages: int | None = None, descriptors: bool | None = None, pdl: bool = False
                     ) -> torch.Tensor:
    """softmax(q · k[:len]ᵀ / √D) · v[:len] per sequence and query head, for one new token.

    The keyword arguments fix the launch parameters instead of the defaults (`plan`); `pdl` launches both kernels
    with Programmatic Dependent Launch (the fused decode step's switch, decode_step.pdl)."""
    _, Hkv, s_max, D = k_cache.shape
    assert v_cache.shape == k_cache.shape and k_cache.stride(-1) == v_cache.stride(-1) == 1
    G = check_shapes(q, Hkv, D, seq_lens)
    cfg = plan(q, Hkv, s_max, splits, block_n, num_warps, num_stages, descriptors=descriptors)
    return launch(split_kv_kernel, q, seq_lens, Hkv, G, (k_cache, v_cache),
                  (*k_cache.stride()[:3], *v_cache.stride()[:3]), cfg, pdl=pdl,
                  extra={"DESCRIPTORS": cfg["descriptors"]})


# -------------------------------------------------------------------------------------------------
# Baselines and a standalone check-and-time (GPU)
# -------------------------------------------------------------------------------------------------


def naive_decode_attention(q, k_cache, v_cache, seq_lens):
    """PyTorch, one sequence at a time, in q's dtype (reads seq_lens on the host: a sync per call)."""
    B, Hq, D = q.shape
    Hkv = k_cache.shape[1]
    out = torch.empty_like(q)
    for b, n in enumerate(seq_lens.tolist()):
        k = k_cache[b, :, :n].repeat_interleave(Hq // Hkv, 0)
        v = v_cache[b, :, :n].repeat_interleave(Hq // Hkv, 0)
        s = (q[b, :, None, :] @ k.transpose(-1, -2)).float() / math.sqrt(D)
        out[b] = (torch.softmax(s, -1).to(v.dtype) @ v)[:, 0]
    return out


def sdpa_decode(backend_name: str | None, packed: bool = True):
    """SDPA over the first `length` positions of every cache (all sequences the same length here).

    packed=True sees the G query heads of a KV head as G query rows of one head, [B, Hkv, G, D] against
    [B, Hkv, L, D]: each KV head is read once, by every backend. packed=False passes q as [B, Hq, 1, D]
    with enable_gqa=True, which only some backends take."""
    def attend(q, k, v):
        B, Hq, D = q.shape
        if packed:
            return torch.nn.functional.scaled_dot_product_attention(q.view(B, k.shape[1], Hq // k.shape[1], D), k, v)
        return torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=True)

    def run(q, k_cache, v_cache, length: int):
        from contextlib import nullcontext

        from torch.nn.attention import SDPBackend, sdpa_kernel
        k, v = k_cache[:, :, :length], v_cache[:, :, :length]
        with sdpa_kernel(getattr(SDPBackend, backend_name)) if backend_name else nullcontext():  # None: PyTorch picks
            return attend(q, k, v).reshape(q.shape)

    run.__name__ = run.__qualname__ = f"sdpa_{(backend_name or 'default').lower()}{'' if packed else '_gqa'}"
    return run


def _main(argv=None) -> None:  # pragma: no cover - needs a GPU
    import argparse

    from ...measure import calibrate, timing
    parser = argparse.ArgumentParser(description="check and time the decode-attention kernel on a GPU")
    parser.add_argument("--shape", default="8,32,8,32768,128", help="B,Hq,Hkv,S,D")
    a = parser.parse_args(argv)
    B, Hq, Hkv, S, D = map(int, a.shape.split(","))
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(B, Hq, D, generator=gen, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, Hkv, S, D, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lens = torch.full((B,), S, dtype=torch.int32, device="cuda")
    want = naive_decode_attention(q.double(), k.double(), v.double(), lens)
    print(f"max |error| vs float64: {(decode_attention(q, k, v, lens).double() - want).abs().max().item():.2e}, "
          f"plan {plan(q, Hkv, S)}")
    fns = {"triton": lambda q, k, v: decode_attention(q, k, v, lens)}
    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"):
        fns[name.lower()] = (lambda fn: lambda q, k, v: fn(q, k, v, S))(sdpa_decode(name))
    least = (2 * k.numel() + 2 * q.numel()) * 2
    result = timing.compare(fns, args=(q, k, v), device="cuda", budget_s=2.0)
    copy = calibrate.ceilings().copy_bandwidth
    for name, t in result.timings.items():
        print(f"{name:>22}: {t.median * 1e6:8.1f} µs  {least / t.median / 1e12:5.2f} TB/s  "
              f"{least / t.median / copy:4.0%} of copy")


if __name__ == "__main__":  # pragma: no cover
    _main()
