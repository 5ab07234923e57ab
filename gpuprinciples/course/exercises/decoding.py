"""Lesson 10, decoding: the KV cache, and inference as a memory-bound problem.

* `decoding.kv_cache_bytes`: the size of a KV cache with grouped-query attention (a function, exact);
* `decoding.context_for_memory`: the longest context a server can give each of its sequences beside a model's
  weights (a decision from a config and a memory budget; each slip fails with what it forgot);
* `decoding.batch_for_budget`: from a measured batch sweep, the batch that serves the most within a latency
  promise (a decision; each wrong answer says what it gets wrong);
* `decoding.ridge_batch`: the batch at which a decode step's matmuls stop being memory-bound (a number);
* `decoding.decode_attention`: split-KV decode attention in Triton over a contiguous cache;
* `decoding.paged_decode_attention`: the same over a paged cache and its block table.

The two kernels are graded, under the interpreter, element by element on what they load (a traced
run: `base.LiveLoads`): no K/V position at or past a sequence's length and no page the block table
does not point to may be read, each live K/V element once in all (once per KV head, not once per
query head), within 1.1×. On a GPU they are timed against PyTorch's SDPA backends on a long context.
"""

from __future__ import annotations

import math

import torch

from ..kit import (
    TOLERANCES,
    Case,
    FunctionExercise,
    LaunchesTriton,
    LiveLoads,
    MaxLaunches,
    NoTorchCompute,
    Regime,
    Requirement,
    Timing,
    ValueExercise,
    dtype_plan,
    judge_live_loads,
    output_problems,
    regime_specs,
    traced_run,
)
from ..kit.compare import _fmt_bytes
from ..lab.decoder import LLAMA_1B, LLAMA_8B, DecoderConfig
from .flash import _close as flash_close

# -------------------------------------------------------------------------------------------------
# decoding.kv_cache_bytes
# -------------------------------------------------------------------------------------------------


def _kv_reference(config: DecoderConfig, batch: int, seq_len: int, dtype: torch.dtype) -> int:
    """Counted tensor by tensor: a K and a V of [batch, n_kv_heads, seq_len, head_dim] per layer."""
    one = torch.empty(0, dtype=dtype).element_size() * batch * config.n_kv_heads * seq_len * config.head_dim
    return sum(one for _layer in range(config.n_layers) for _kv in ("K", "V"))


def _random_config(gen: torch.Generator) -> DecoderConfig:
    def pick(options):
        return options[int(torch.randint(0, len(options), (1,), generator=gen))]
    n_heads = pick([8, 12, 16, 24, 32, 40, 64])
    n_kv = pick([d for d in range(1, n_heads + 1) if n_heads % d == 0])
    head_dim = pick([64, 80, 96, 128, 256])
    d_model = pick([n_heads * head_dim, 2048, 3072])  # not always heads × head dim (Gemma's is not)
    return DecoderConfig(vocab=pick([32_000, 50_304, 128_256]), d_model=d_model,
                         n_layers=int(torch.randint(2, 96, (1,), generator=gen)), n_heads=n_heads, n_kv_heads=n_kv,
                         head_dim=head_dim, ffn=4 * d_model)


def _kv_cases(gen: torch.Generator, mode: str) -> list[Case]:
    from dataclasses import replace
    cases = [Case("LLAMA_1B shape, 1 × 4096, bf16", (LLAMA_1B, 1, 4096, torch.bfloat16)),
             Case("LLAMA_1B as multi-head (32 KV heads), 8 × 8192, bf16",
                  (replace(LLAMA_1B, n_kv_heads=32), 8, 8192, torch.bfloat16)),
             Case("LLAMA_1B as multi-query (1 KV head), 64 × 2048, fp16",
                  (replace(LLAMA_1B, n_kv_heads=1), 64, 2048, torch.float16))]
    for dtype in (torch.float32, torch.float8_e4m3fn, torch.bfloat16):
        config = _random_config(gen)
        batch = int(torch.randint(1, 257, (1,), generator=gen))
        seq = int(torch.randint(1, 131_073, (1,), generator=gen))
        cases.append(Case(f"random: {config.n_layers} layers, {config.n_heads} heads / {config.n_kv_heads} KV heads of "
                          f"{config.head_dim}, d_model {config.d_model}, {batch} × {seq}, {str(dtype)[6:]}",
                          (config, batch, seq, dtype)))
    return cases


def _compare_kv(got, want: int, case: Case) -> list[str]:
    where = f" (case {case.label})"
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return [f"returned {got if isinstance(got, str) else type(got).__name__}; expected a number of bytes{where}"]
    if got == want:
        return []
    config, batch, seq, dtype = case.args
    ratio = got / want if want else float("inf")
    why = {1 / config.n_layers: "for one layer: every layer keeps its own K and V",
           0.5: "for K or V alone: the cache holds both",
           config.n_heads / config.n_kv_heads: "with every query head: only the KV heads are cached (GQA)",
           1 / batch: "for one sequence: each sequence has its own cache",
           4 / torch.empty(0, dtype=dtype).element_size(): "at 4 bytes per element: use the dtype's size"}
    hint = next((words for r, words in why.items() if r != 1 and math.isclose(ratio, r, rel_tol=1e-9)), None)
    return [f"answered {got:,.0f} bytes, expected {want:,}{where}" + (f": that is the size {hint}" if hint else "")]


KV_CACHE_BYTES = FunctionExercise(
    id="decoding.kv_cache_bytes",
    title="How big is the KV cache?",
    signature=("kv_cache_bytes(config: DecoderConfig, batch: int, seq_len: int, dtype: torch.dtype) -> int  "
               "# bytes of K and V for every layer, sequence, position and KV head; exact"),
    cases=_kv_cases,
    reference=_kv_reference,
    compare=_compare_kv,
    solution="gpuprinciples.course.lab.decoder:kv_cache_bytes",
    hints=("Per layer the cache holds two tensors, K and V, each [batch, n_kv_heads, seq_len, head_dim].",
           "Grouped-query attention: only config.n_kv_heads heads are cached, not config.n_heads; and the head "
           "dim is config.head_dim, which need not be d_model / n_heads.",
           "dtype.itemsize is the bytes per element (2 for bf16, 1 for float8_e4m3fn)."),
)

# -------------------------------------------------------------------------------------------------
# decoding.context_for_memory: a decision from a model's config and a memory budget
# -------------------------------------------------------------------------------------------------

SERVE_MODEL = LLAMA_8B  # the package's Llama 3 8B shape: 32 layers, 8 KV heads of 128
SERVE_BATCH = 64  # sequences held at once, all with the same context
H200_MEMORY = 141e9  # bytes, NVIDIA's H200 datasheet
MEMORY_SHARE = 0.9  # what the server lets itself use; the rest is for activations and the allocator
PAGE = 16  # positions per page of the cache, allocated whole (vLLM's default block size)


def longest_context(kv_per_position: float, weights: float, memory: float = H200_MEMORY * MEMORY_SHARE,
                    batch: int = SERVE_BATCH, page: int | None = PAGE) -> int:
    """The longest context every one of `batch` sequences can have once the weights are in memory."""
    positions = int((memory - weights) // (batch * kv_per_position))
    return positions // page * page if page else positions


def _serve_kv_per_position(dtype=torch.bfloat16) -> int:
    return _kv_reference(SERVE_MODEL, 1, 1, dtype)


def _serve_weights() -> int:
    return 2 * SERVE_MODEL.n_params()  # bf16


def _context_for_memory() -> int:
    return longest_context(_serve_kv_per_position(), _serve_weights())


def _context_mistakes() -> dict[str, tuple[int, int]]:
    """What each slip forgot → the answers it gives, in whole pages and not."""
    kv, weights, m = _serve_kv_per_position(), _serve_weights(), SERVE_MODEL

    def both(*args, **kwargs) -> tuple[int, int]:  # rounded down to whole pages, and not
        return longest_context(*args, **kwargs), longest_context(*args, page=None, **kwargs)
    return {
        "caches every query head: only the KV heads are cached (GQA), "
        f"{m.n_kv_heads} of {m.n_heads}": both(kv * m.n_heads / m.n_kv_heads, weights),
        "counts K or V alone: each position keeps both": both(kv / 2, weights),
        f"counts one layer: each of the {m.n_layers} keeps its own K and V": both(kv / m.n_layers, weights),
        "counts 4 bytes an element: the cache is bf16, 2": both(kv * 2, weights),
        "leaves no room for the weights: they stay in memory beside the cache": both(kv, 0),
        f"uses all {H200_MEMORY / 1e9:.0f} GB: the server keeps {1 - MEMORY_SHARE:.0%} for activations and the "
        "allocator": both(kv, weights, memory=H200_MEMORY),
        "reads the datasheet's GB as GiB: its 141 GB are 10⁹ bytes each":
            both(kv, weights, memory=141 * 2**30 * MEMORY_SHARE),
        f"is for one sequence: {SERVE_BATCH} share the memory": both(kv, weights, batch=1),
    }


def _compare_context(got, want: int) -> list[str]:
    """A wrong context fails with the slip that gives it, or with what it costs: memory over, or context unused."""
    if isinstance(got, bool) or not isinstance(got, (int, float)) or got != int(got) or got <= 0:
        return [f"answered {got!r}: the answer is a number of positions per sequence"]
    got = int(got)
    if got == want:
        return []
    slips = [why for why, values in _context_mistakes().items() if got in values]
    if slips:
        return [f"{got:,} positions: that answer {slips[0]}"]
    if got % PAGE:
        return [f"{got:,} positions are {got / PAGE:.2f} pages: the cache is allocated in whole pages of {PAGE}, "
                "so a sequence gets a multiple of 16 positions (round down: a page more would not fit)"]
    kv, weights = _serve_kv_per_position(), _serve_weights()
    used = weights + SERVE_BATCH * got * kv
    budget = H200_MEMORY * MEMORY_SHARE
    if got > want:
        return [f"{SERVE_BATCH} sequences of {got:,} positions need {used / 1e9:.2f} GB with the weights, over the "
                f"{budget / 1e9:.2f} GB the server may use ({MEMORY_SHARE:.0%} of {H200_MEMORY / 1e9:.0f} GB)"]
    return [f"{SERVE_BATCH} sequences of {got:,} positions use {used / 1e9:.2f} GB of the {budget / 1e9:.2f} GB the "
            f"server may use: {(budget - used) / 1e9:.2f} GB left idle is context a user could have had"]


CONTEXT_FOR_MEMORY = ValueExercise(
    id="decoding.context_for_memory",
    title="Decide: the longest context a server can give every sequence",
    question=(f"A server runs decoding.SERVE_MODEL (LLAMA_8B: read its layers, KV heads and head dim) with bf16 "
              f"weights (2 bytes × LLAMA_8B.n_params()) and a bf16 KV cache on one H200 ({H200_MEMORY / 1e9:.0f} GB, "
              f"its datasheet), of which it uses {MEMORY_SHARE:.0%}. It holds {SERVE_BATCH} sequences at once, all "
              f"with the same context, and allocates the cache in whole pages of {PAGE} positions. What is the "
              "longest context, in positions, every sequence can have?"),
    expected=_context_for_memory,
    compare=_compare_context,
    hints=("Memory for the caches = the share the server uses − the weights' bytes.",
           f"One position of one sequence costs kv_cache_bytes(LLAMA_8B, 1, 1, torch.bfloat16); {SERVE_BATCH} "
           f"sequences at a position cost {SERVE_BATCH} times that. Round the positions down to whole pages."),
)

# -------------------------------------------------------------------------------------------------
# Predictions
# -------------------------------------------------------------------------------------------------

H200_DATASHEET_BANDWIDTH = 4.8e12  # bytes/s, NVIDIA's H200 page (specs.SPECS["H200"])
H200_DATASHEET_BF16 = 989.4e12  # dense bf16 FLOP/s, same page


# decoding.batch_for_budget: a decision from a measured curve. LLAMA_1B's graphed decode step, PyTorch's kernels,
# 1024 positions cached per sequence: the batch sweep of docs/decoding-h200.md, run 2 (one NVIDIA H200, torch
# 2.11.0+cu130, Triton 3.6.0, 2026-12-03, `tools/tune_decode.py --budget 200`), median seconds per step.
RECORDED_SWEEP = {1: 2.579e-3, 4: 2.797e-3, 16: 3.104e-3, 64: 3.508e-3, 128: 4.391e-3, 256: 5.643e-3}
STEP_BUDGET_S = 4e-3  # the promise: every user gets a token at least every 4 ms (250 tokens/s)


def _batch_for_budget() -> int:
    return max(b for b, seconds in RECORDED_SWEEP.items() if seconds <= STEP_BUDGET_S)


def _tokens(batch: int) -> str:
    return f"{batch / RECORDED_SWEEP[batch]:,.0f} tokens/s"


def _compare_batch(got, want: int) -> list[str]:
    """A wrong batch fails with what it gets wrong: the promise, or the throughput left on the table."""
    if isinstance(got, bool) or not isinstance(got, (int, float)) or got != int(got):
        return [f"answered {got!r}: the answer is a batch size, one of the measured ones {list(RECORDED_SWEEP)}"]
    got = int(got)
    if got not in RECORDED_SWEEP:
        return [f"batch {got} was not measured: between two measured batches the step's time is not known, so "
                f"choose one of {list(RECORDED_SWEEP)}"]
    step = RECORDED_SWEEP[got]
    if step > STEP_BUDGET_S:
        return [f"batch {got}'s step takes {step * 1e3:.3f} ms: each user gets {1 / step:.0f} tokens/s, under the "
                f"promised {1 / STEP_BUDGET_S:.0f}. It serves {_tokens(got)} in all, but the promise caps the step's "
                f"time, not the total: among the batches whose step fits in {STEP_BUDGET_S * 1e3:.0f} ms, take the "
                "largest"]
    if got < want:
        return [f"batch {got} keeps the promise ({step * 1e3:.3f} ms a step), and so does batch {want} "
                f"({RECORDED_SWEEP[want] * 1e3:.3f} ms), which serves {_tokens(want)} against {_tokens(got)}. The step "
                f"grows far more slowly than the batch ({RECORDED_SWEEP[1] * 1e3:.3f} ms at batch 1): the weights are "
                "read once per step for every sequence, so a larger batch costs little time until the caches weigh"]
    return []


BATCH_FOR_BUDGET = ValueExercise(
    id="decoding.batch_for_budget",
    title="Decide: the batch that serves the most within a latency promise",
    question=("A service decodes LLAMA_1B with the graphed step (PyTorch's kernels), 1024 positions cached per "
              "sequence, and promises every user at least 250 tokens/s: a step of at most 4 ms. From the step times "
              "measured on the course's H200 (decoding.RECORDED_SWEEP, seconds by batch), which batch serves the most "
              "tokens per second in all while keeping the promise?"),
    expected=_batch_for_budget,
    compare=_compare_batch,
    hints=("A step gives one token to every sequence of the batch: each user gets 1 / step tokens per second, "
           "the service batch / step.",
           "The promise is a bound on the step's time. Which measured batches meet it, and which of those serves the "
           "most?"),
)

RIDGE_BATCH = ValueExercise(
    id="decoding.ridge_batch",
    prediction=True,
    title="Predict: the batch at which decoding turns compute-bound",
    question=("A decode step multiplies activations x [B, K] by a bf16 weight W [K, N]: 2·B·K·N FLOPs. Count only "
              "the weight's 2·K·N bytes (the activations, B·(K + N) elements, are small while B ≪ K, N). From the "
              "H200's datasheet (989.4 dense bf16 TFLOP/s, 4.8 TB/s): above which batch size B is this matmul "
              "compute-bound?"),
    expected=lambda: H200_DATASHEET_BF16 / H200_DATASHEET_BANDWIDTH,
    rel_tol=0.05,
    hints=("Arithmetic intensity = FLOPs / bytes = 2·B·K·N / (2·K·N).",
           "A kernel is compute-bound once its intensity passes the ridge point, FLOP/s ÷ bytes/s."),
)

# -------------------------------------------------------------------------------------------------
# Decode attention: cases
# -------------------------------------------------------------------------------------------------


def _odd(gen: torch.Generator, low: int, high: int) -> int:
    n = int(torch.randint(low, high, (1,), generator=gen))
    return n + 1 if n % 16 == 0 else n


def _lengths(gen: torch.Generator, batch: int, s_max: int) -> torch.Tensor:
    """One sequence fills the cache; one (of three or more) ends on a tile edge; the rest anywhere."""
    lens = torch.randint(1, s_max + 1, (batch,), generator=gen)
    lens[0] = s_max
    if batch >= 3:
        lens[2] = min(s_max, 64)
    return lens.to(torch.int32)[torch.randperm(batch, generator=gen)]


def _stale(x: torch.Tensor, lens: torch.Tensor, kind: str, gen: torch.Generator) -> torch.Tensor:
    """Fill positions past each length as a reused buffer holds them: large leftovers, or NaN."""
    B, H, S, D = x.shape
    dead = torch.arange(S)[None, :] >= lens[:, None].long()  # [B, S]
    junk = torch.full_like(x, float("nan")) if kind == "nan" else 30 * torch.randn(x.shape, generator=gen).to(x.dtype)
    return torch.where(dead[:, None, :, None], junk, x)


def _decode_values(gen, spec, dtype):
    """(q, k_cache, v_cache, seq_lens) for one spec, in the spec's layout."""
    B, Hq, Hkv, S, D, kind, layout = spec
    scale = 8.0 if kind == "large" else 1.0  # scores of std 64: exp overflows unless maxima are subtracted
    lens = _lengths(gen, B, S)
    if layout == "fused-q":  # q is a slice of a fused q/k/v projection's output: heads not contiguous
        q = (torch.randn(B, Hq + 2 * Hkv, D, generator=gen) * scale).to(dtype)[:, :Hq]
    else:
        q = (torch.randn(B, Hq, D, generator=gen) * scale).to(dtype)
    if layout == "window":  # a window of a static cache allocated for more positions
        big = torch.randn(2, B, Hkv, S + 37, D, generator=gen).to(dtype)
        k, v = big[0, :, :, :S], big[1, :, :, :S]
        k[:] = k * scale
    elif layout == "stacked":  # K and V halves of one buffer [B, Hkv, 2, S, D]
        both = torch.randn(B, Hkv, 2, S, D, generator=gen).to(dtype)
        k, v = both[:, :, 0], both[:, :, 1]
        k[:] = k * scale
    else:
        k = (torch.randn(B, Hkv, S, D, generator=gen) * scale).to(dtype)
        v = torch.randn(B, Hkv, S, D, generator=gen).to(dtype)
    stale = "nan" if kind == "nan" else "large"
    k[:] = _stale(k, lens, stale, gen)
    v[:] = _stale(v, lens, stale, gen)
    return q, k, v, lens


def _decode_specs(gen: torch.Generator, mode: str) -> list[tuple]:
    # (B, Hq, Hkv, S_max, D, kind, layout); S_max odd, so no tile size divides it
    if mode == "cpu":
        return [(1, 1, 1, 1, 32, "normal", "plain"),
                (3, 8, 2, _odd(gen, 100, 200), 32, "normal", "plain"),  # G = 4
                (2, 8, 1, _odd(gen, 150, 260), 64, "normal", "plain"),  # multi-query
                (2, 4, 4, _odd(gen, 60, 130), 64, "large", "plain"),  # multi-head, large scores
                (2, 6, 2, _odd(gen, 80, 160), 32, "nan", "window"),  # G = 3; NaN past the lengths
                (3, 8, 2, _odd(gen, 40, 100), 128, "normal", "fused-q"),
                (2, 4, 1, _odd(gen, 300, 400), 32, "large", "stacked")]
    return [(1, 1, 1, 1, 64, "normal", "plain"),
            (4, 32, 8, _odd(gen, 1000, 3000), 128, "normal", "plain"),
            (3, 16, 2, _odd(gen, 2000, 5000), 64, "large", "plain"),
            (2, 8, 8, _odd(gen, 500, 1500), 128, "normal", "plain"),
            (5, 12, 4, _odd(gen, 300, 900), 64, "nan", "window"),
            (3, 32, 4, _odd(gen, 500, 2000), 128, "normal", "fused-q"),
            (2, 8, 1, _odd(gen, 3000, 6000), 128, "large", "stacked")]


# The regime an H200's cases reach (S_max up to 6000): a context past any one tile a kernel might load it in, and
# past several split-KV chunks. On a CPU: one small case just past 1024 positions, its longest sequence filling it.
LONG_CONTEXT = "a context past one tile of 1024 positions"
DECODE_REGIMES = (Regime(LONG_CONTEXT, lambda gen: (2, 2, 1, _odd(gen, 1030, 1100), 32, "normal", "plain")),)
PAGED_REGIMES = (Regime(LONG_CONTEXT, lambda gen: (2, 2, 1, _odd(gen, 1030, 1100), 32, "normal", "plain", 16)),)


def _label(spec, dtype, lens, extra: str = "") -> str:
    B, Hq, Hkv, S, D, kind, layout = spec
    return (f"B={B} Hq={Hq} Hkv={Hkv} S_max={S} D={D} {kind} {layout}{extra} {str(dtype)[6:]}, "
            f"seq_lens {lens.tolist() if B <= 5 else lens.tolist()[:5] + ['…']}")


def _decode_cases(gen: torch.Generator, mode: str) -> list[Case]:
    cases = []
    plan = [(spec, dtype, "") for spec, dtype in dtype_plan(_decode_specs(gen, mode), mode)]
    plan += [(spec, torch.float32, f" ({words})") for spec, words in regime_specs(DECODE_REGIMES, gen, mode)]
    for spec, dtype, words in plan:
        args = _decode_values(gen, spec, dtype)
        cases.append(Case(_label(spec, dtype, args[3], words), args, decoy=_decode_values(gen, spec, dtype)))
    return cases


def attention_reference(q, k_cache, v_cache, seq_lens) -> torch.Tensor:
    """float64 softmax(q · kᵀ / √D) · v over each sequence's first seq_lens[b] positions, query head h
    reading KV head h // (Hq / Hkv)."""
    B, Hq, D = q.shape
    Hkv = k_cache.shape[1]
    out = torch.empty(B, Hq, D, dtype=torch.float64, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        k, v = k_cache[b, :, :n].double(), v_cache[b, :, :n].double()
        s = q[b].double().reshape(Hkv, Hq // Hkv, D) @ k.transpose(-1, -2) / math.sqrt(D)  # [Hkv, G, n]
        out[b] = (torch.softmax(s, dim=-1) @ v).reshape(Hq, D)
    return out


def _live_positions(args) -> torch.Tensor:
    """1 at every (b, h, t, d) with t < seq_lens[b] of a contiguous cache, 0 elsewhere."""
    k, lens = args[1], args[3]
    B, H, S, D = k.shape
    live = torch.arange(S)[None, :] < lens.cpu()[:, None].long()
    return live[:, None, :, None].expand(B, H, S, D).to(torch.int64)


DECODE_REGIONS = (
    LiveLoads(1, "k_cache", _live_positions, 1.1, what="positions at or past seq_lens[b]",
              once="once in all: once per KV head, not once per query head"),
    LiveLoads(2, "v_cache", _live_positions, 1.1, what="positions at or past seq_lens[b]",
              once="once in all: once per KV head, not once per query head"),
)

# per (dtype, kind): (rtol, atol); float32 scores of std 64 carry ~1e-5 of rounding from the inputs alone
DECODE_TOLERANCES = {(torch.float32, "large"): (1e-4, 1e-4), (torch.bfloat16, "large"): (2.4e-2, 2.4e-2),
                     (torch.float16, "large"): (4e-3, 4e-3)}


def _compare_kernel(regions):
    def compare(got, want, case: Case) -> list[str]:
        where = f" (case {case.label})"
        q = case.args[0]
        out, device, loads = got["out"], got["device"], got["loads"]
        problems = output_problems(out, device, want, q.dtype, where, shape_note=" ([B, Hq, D], like q)",
                                   dtype_note="q's dtype")
        if problems:
            return problems
        kind = case.label.split()[5]
        rtol, atol = DECODE_TOLERANCES.get((q.dtype, kind), TOLERANCES[q.dtype])
        reasons = _close(out, want, rtol, atol, where)
        if loads is not None:
            reasons += judge_live_loads(regions, loads, case)
        return reasons
    return compare


def _close(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float, where: str) -> list[str]:
    """Lesson 08's value check, after a NaN/Inf check that names this lesson's likely cause."""
    bad = ~torch.isfinite(got.double())
    if bool(bad.any()):
        return [f"{int(bad.sum()):,} NaN or Inf values in the output{where}, where the reference is finite: a "
                "position at or past seq_lens[b] was used (it may hold NaN), or exp of an unsubtracted maximum"]
    return flash_close(got, want, rtol, atol, where)


class TrafficWithin(Requirement):
    """Everything moved (loads, stores, PyTorch copies) ≤ 1.1 × (live K/V + q + output + lengths and table)
    plus, per 16 positions of the cache, one split's worth: its query heads read, its partial result
    (D + 2 floats per head) written and read back. The per-element rules are LiveLoads'; this one bounds
    what else a kernel may send to memory."""

    modes = ("cpu",)

    def __init__(self, minimum):
        self.minimum = minimum

    def describe(self) -> str:
        return "moves at most 1.1 × (live K/V + q + output) + a split-KV partial per 16 cache positions"

    def evaluate(self, counts, case):
        q = case.args[0]
        B, Hq, D = q.shape
        s_max = _s_max(case.args)
        least = self.minimum(case.args)
        allowed = 1.1 * least + math.ceil(s_max / 16) * B * Hq * (q.element_size() * D + 2 * 4 * (D + 2))
        moved = counts["load_bytes"] + counts["store_bytes"] + counts["torch_bytes"]
        if moved > allowed:
            return (f"moved {_fmt_bytes(moved)} in case {case.label}, where at most {_fmt_bytes(allowed)} is allowed "
                    f"({_fmt_bytes(least)} is the least: live K and V once, q, the output): loads "
                    f"{_fmt_bytes(counts['load_bytes'])}, stores {_fmt_bytes(counts['store_bytes'])}"
                    + (f", PyTorch copies {_fmt_bytes(counts['torch_bytes'])}" if counts["torch_bytes"] else ""))
        return None


def _s_max(args) -> int:
    return args[1].shape[2] if args[1].dim() == 4 and len(args) == 4 else args[3].shape[1] * args[1].shape[2]


def decode_min_bytes(args) -> int:
    q, k, _, lens = args
    live = int(lens.sum()) * k.shape[1] * k.shape[3] * k.element_size()
    return 2 * live + 2 * q.numel() * q.element_size() + lens.numel() * 4


def _sdpa_baseline(backend: str | None, packed: bool = True):
    """SDPA over the whole (full) timing cache: `backend` forced (None: PyTorch picks), q packed as G query rows
    per KV head, or passed with enable_gqa=True (kernels.decode_attention.sdpa_decode)."""
    def run(q, k_cache, v_cache, seq_lens):
        from ..kernels.decode_attention import sdpa_decode
        return sdpa_decode(backend, packed)(q, k_cache, v_cache, k_cache.shape[2])  # the timing input's caches are full
    run.__name__ = run.__qualname__ = f"sdpa_{(backend or 'default').lower()}{'' if packed else '_gqa'}"
    return run


LONG_CONTEXT = {"B": 8, "Hq": 32, "Hkv": 8, "S": 32768, "D": 128}  # 1 GiB of K and V in bf16


def decode_timing_inputs(gen, device):
    c = LONG_CONTEXT
    q = torch.randn(c["B"], c["Hq"], c["D"], generator=gen, device=device, dtype=torch.bfloat16)
    k, v = (torch.randn(c["B"], c["Hkv"], c["S"], c["D"], generator=gen, device=device, dtype=torch.bfloat16)
            for _ in range(2))
    return q, k, v, torch.full((c["B"],), c["S"], dtype=torch.int32, device=device)


def _ragged_timing_inputs(gen, device):
    """The long-context shapes with each sequence's own length, spread evenly over (0, S] (1/16, 3/16, … 15/16 of
    it for 8 sequences): what a server's batch looks like. A static-cache implementation reads all S positions of
    each (SDPA with a mask); half are live. The lengths are the same in every variant of the timed inputs (only
    the values change between rounds), so the bytes a round must move are the same too."""
    q, k, v, _ = decode_timing_inputs(gen, device)
    B, S = k.shape[0], k.shape[2]
    lens = torch.tensor([S * (2 * b + 1) // (2 * B) for b in range(B)], dtype=torch.int32, device=device)
    return q, k, v, lens


def _masked_sdpa(q, k_cache, v_cache, seq_lens):
    """SDPA over the whole cache with a mask for each sequence's live positions (the packed GQA form)."""
    B, Hq, D = q.shape
    Hkv, S = k_cache.shape[1], k_cache.shape[2]
    mask = (torch.arange(S, device=q.device)[None, :] < seq_lens[:, None])[:, None, None, :]
    out = torch.nn.functional.scaled_dot_product_attention(q.view(B, Hkv, Hq // Hkv, D), k_cache, v_cache,
                                                           attn_mask=mask)
    return out.reshape(B, Hq, D)


SIGNATURE_NOTE = ("one new query per sequence; query head h reads KV head h // (Hq // Hkv); position t of sequence b "
                  "is live when t < seq_lens[b] (int32 [B], on the device, ≥ 1): nothing else may be read; plan "
                  "the launch from shapes, not from seq_lens' values; at most two launches; the head dim is "
                  "contiguous, D in {32, 64, 128}; float32, bf16 or fp16 (a GPU grades bf16/fp16); returns "
                  "[B, Hq, D] in q's dtype")

DECODE_HINTS = (
    "One program per (sequence, KV head, split of the positions): grid (B * Hkv, n_splits). It loads the G = Hq // Hkv "
    "query heads of that KV head together, as the rows of a [16, D] tile (rows ≥ G masked), so each K/V tile is "
    "read once for all of them.",
    "Each program runs lesson 08's online softmax over its positions [split · chunk, min((split + 1) · chunk, len)). "
    "Make chunk a multiple of BLOCK_N, so no tile straddles two splits (a straddling tile is read twice).",
    "Load the length with tl.load(seq_lens + b); mask the loads with pos < len (or give a tensor descriptor the shape "
    "[len, D]: rows past it are not read), and give masked scores -inf.",
    "Each split writes, per query head, acc / l and its log-sum-exp m + log2(l) to float32 buffers "
    "[B, Hq, n_splits, …]. A second kernel, one program per (sequence, query head), merges the splits that held "
    "positions (cdiv(len, chunk) of them) with weights 2^(lse - max lse): the merge of lesson 08.",
    "n_splits: enough programs to fill the GPU (a few per SM) while each split still has several tiles; from "
    "S_max and the shapes, never from seq_lens' values (a .item() waits for the GPU and cannot be captured in a "
    "CUDA graph).",
)

DECODE_ATTENTION = FunctionExercise(
    id="decoding.decode_attention",
    title="Split-KV decode attention in Triton",
    signature="decode_attention(q [B, Hq, D], k_cache [B, Hkv, S_max, D], v_cache, seq_lens [B]) -> [B, Hq, D]  # "
              + SIGNATURE_NOTE,
    cases=_decode_cases,
    reference=attention_reference,
    run=traced_run(DECODE_REGIONS),
    compare=_compare_kernel(DECODE_REGIONS),
    requirements=(LaunchesTriton(), MaxLaunches(2), NoTorchCompute(), TrafficWithin(decode_min_bytes)),
    judges=((("cpu",), "no K/V position at or past seq_lens[b] loaded; each live K/V element loaded once in all, once "
             "per KV head (≤ 1.1×; counted element by element)"),),
    timing=Timing(
        inputs=decode_timing_inputs,
        # the two fastest forms on an H200 (tools/tune_decode.py, 2026-12-03; docs/decoding-h200.md): FlashAttention
        # with the G query heads of a KV head packed as G query rows (97 % of copy), and enable_gqa=True with
        # PyTorch's choice of backend (cuDNN there: 99 %, a copy's speed). Both read each KV head once.
        baselines={"sdpa flash": _sdpa_baseline("FLASH_ATTENTION"), "sdpa, enable_gqa": _sdpa_baseline(None, False)},
        min_bytes=decode_min_bytes,
        flops=lambda args: 4 * args[0].shape[0] * args[0].shape[1] * args[1].shape[2] * args[0].shape[2],
        # the package's kernel: 0.99x and 1.01x of them, 97 % of copy (same run); a kernel that loads K/V once per
        # query head loads them G = 4 times over (tools/tune_decode.py grades one, tests/submissions/decoding/)
        min_speedup={"sdpa flash": 0.9, "sdpa, enable_gqa": 0.9},
        min_bandwidth_fraction=0.85,
        # ragged: the package's kernel 84 % of copy, 4.3x the masked SDPA; a kernel that reads every position moves
        # twice the live bytes (under 50 %); SDPA at a copy's speed over the whole cache would still be 1.7x slower
        also=(Timing(label="ragged lengths", inputs=_ragged_timing_inputs,
                     baselines={"sdpa + mask, whole cache": _masked_sdpa}, min_bytes=decode_min_bytes,
                     min_speedup={"sdpa + mask, whole cache": 1.3}, min_bandwidth_fraction=0.7),),
    ),
    timeout_s=240.0,
    solution="gpuprinciples.course.kernels.decode_attention:decode_attention",
    hints=DECODE_HINTS,
)

# -------------------------------------------------------------------------------------------------
# Paged decode attention
# -------------------------------------------------------------------------------------------------


def _paged_values(gen, spec, dtype):
    """(q, k_pages, v_pages, block_table, seq_lens): the cache of `_decode_values` cut into pages, the pages
    shuffled into a pool with spare pages (stale data) that no live table entry points to."""
    B, Hq, Hkv, S, D, kind, layout, page = spec
    q, k, v, lens = _decode_values(gen, (B, Hq, Hkv, S, D, kind, "fused-q" if layout == "fused-q" else "plain"), dtype)
    per_seq = math.ceil(S / page)
    pad = per_seq * page - S
    k = torch.nn.functional.pad(k.float(), (0, 0, 0, pad), value=float("nan") if kind == "nan" else 1e3).to(dtype)
    v = torch.nn.functional.pad(v.float(), (0, 0, 0, pad), value=float("nan") if kind == "nan" else 1e3).to(dtype)
    spare = max(3, B)
    n_pages = B * per_seq + spare
    order = torch.randperm(n_pages, generator=gen)
    table = order[:B * per_seq].view(B, per_seq).to(torch.int32)
    # table entries past a sequence's last page point at other pages, as a reused table would
    for b in range(B):
        used = math.ceil(int(lens[b]) / page)
        table[b, used:] = order[torch.randint(0, n_pages, (per_seq - used,), generator=gen)].to(torch.int32)
    if layout == "stacked":  # K and V halves of one pool [2, P, Hkv, PAGE, D], as vLLM allocates them
        pool = 30 * torch.randn(2, n_pages, Hkv, page, D, generator=gen).to(dtype)
        k_pages, v_pages = pool[0], pool[1]
    else:
        k_pages = 30 * torch.randn(n_pages, Hkv, page, D, generator=gen).to(dtype)
        v_pages = 30 * torch.randn(n_pages, Hkv, page, D, generator=gen).to(dtype)
    pages = order[:B * per_seq]
    k_pages[pages] = k.view(B, Hkv, per_seq, page, D).transpose(1, 2).reshape(-1, Hkv, page, D)
    v_pages[pages] = v.view(B, Hkv, per_seq, page, D).transpose(1, 2).reshape(-1, Hkv, page, D)
    return q, k_pages, v_pages, table, lens


def _paged_specs(gen, mode) -> list[tuple]:
    # (B, Hq, Hkv, S_max, D, kind, layout, page size)
    if mode == "cpu":
        return [(1, 1, 1, 1, 32, "normal", "plain", 16),
                (3, 8, 2, _odd(gen, 100, 200), 32, "normal", "plain", 16),
                (2, 8, 1, _odd(gen, 150, 260), 64, "large", "plain", 32),
                (3, 4, 4, _odd(gen, 60, 130), 32, "nan", "plain", 8),
                (2, 6, 2, _odd(gen, 80, 160), 64, "normal", "fused-q", 64),
                (2, 4, 2, _odd(gen, 200, 300), 32, "large", "stacked", 16)]
    return [(1, 1, 1, 1, 64, "normal", "plain", 16),
            (4, 32, 8, _odd(gen, 1000, 3000), 128, "normal", "plain", 16),
            (3, 16, 2, _odd(gen, 2000, 5000), 64, "large", "plain", 64),
            (5, 12, 4, _odd(gen, 300, 900), 64, "nan", "plain", 8),
            (3, 32, 4, _odd(gen, 500, 2000), 128, "normal", "fused-q", 32),
            (2, 8, 1, _odd(gen, 3000, 6000), 128, "large", "stacked", 16)]


def _paged_cases(gen: torch.Generator, mode: str) -> list[Case]:
    cases = []
    plan = [(spec, dtype, "") for spec, dtype in dtype_plan(_paged_specs(gen, mode), mode)]
    plan += [(spec, torch.float32, f" ({words})") for spec, words in regime_specs(PAGED_REGIMES, gen, mode)]
    for spec, dtype, words in plan:
        args = _paged_values(gen, spec, dtype)
        cases.append(Case(_label(spec[:7], dtype, args[4], f" page={spec[7]}{words}"), args,
                          decoy=_paged_values(gen, spec, dtype)))
    return cases


def _paged_as_contiguous(q, k_pages, v_pages, block_table, seq_lens):
    from ..kernels.paged_attention import gather_pages
    s_max = block_table.shape[1] * k_pages.shape[2]
    return q, gather_pages(k_pages, block_table, s_max), gather_pages(v_pages, block_table, s_max), seq_lens


def _paged_reference(q, k_pages, v_pages, block_table, seq_lens) -> torch.Tensor:
    return attention_reference(*_paged_as_contiguous(q, k_pages, v_pages, block_table, seq_lens))


def _live_page_rows(args) -> torch.Tensor:
    """1 at (page, h, row, d) for each live position's page and row (summed: shared pages count twice)."""
    pages, table, lens = args[1], args[3], args[4].cpu().long()
    P, H, page, D = pages.shape
    need = torch.zeros(P, page, dtype=torch.int64)
    for b in range(table.shape[0]):
        t = torch.arange(int(lens[b]))
        need.index_put_((table[b].cpu().long()[t // page], t % page), torch.ones_like(t), accumulate=True)
    return need[:, None, :, None].expand(P, H, page, D).contiguous()


def _live_table_entries(args) -> torch.Tensor:
    table, page, lens = args[3], args[1].shape[2], args[4].cpu().long()
    return (torch.arange(table.shape[1])[None, :] < (lens[:, None] + page - 1) // page).to(torch.int64)


PAGED_REGIONS = (
    LiveLoads(1, "k_pages", _live_page_rows, 1.1, what="pages the block table does not point to, or rows of a "
              "sequence's last page at or past its length", once="once in all: once per KV head, not per query head"),
    LiveLoads(2, "v_pages", _live_page_rows, 1.1, what="pages the block table does not point to, or rows of a "
              "sequence's last page at or past its length", once="once in all: once per KV head, not per query head"),
    LiveLoads(3, "block_table", _live_table_entries, None, what="entries past a sequence's last page"),
)


def paged_min_bytes(args) -> int:
    q, pages, _, table, lens = args
    live = int(lens.sum()) * pages.shape[1] * pages.shape[3] * pages.element_size()
    used = int(((lens.long() + pages.shape[2] - 1) // pages.shape[2]).sum())
    return 2 * live + 2 * q.numel() * q.element_size() + lens.numel() * 4 + used * 4


def gather_then_sdpa(q, k_pages, v_pages, block_table, seq_lens):
    """Without a paged kernel: copy the pages into a contiguous cache, then SDPA (the timing input's
    sequences are all full)."""
    from ..kernels.decode_attention import sdpa_decode
    _, k, v, _ = _paged_as_contiguous(q, k_pages, v_pages, block_table, seq_lens)
    return sdpa_decode("FLASH_ATTENTION")(q, k, v, k.shape[2])


PAGED_TIMING_PAGE = 16  # vLLM's default block size


def paged_timing_inputs(gen, device):
    c, page = LONG_CONTEXT, PAGED_TIMING_PAGE
    per_seq = c["S"] // page
    n_pages = c["B"] * per_seq + 64
    q = torch.randn(c["B"], c["Hq"], c["D"], generator=gen, device=device, dtype=torch.bfloat16)
    k_pages, v_pages = (torch.randn(n_pages, c["Hkv"], page, c["D"], generator=gen, device=device,
                                    dtype=torch.bfloat16) for _ in range(2))
    table = torch.randperm(n_pages, generator=gen, device=device)[:c["B"] * per_seq].view(c["B"], per_seq)
    return q, k_pages, v_pages, table.to(torch.int32), torch.full((c["B"],), c["S"], dtype=torch.int32, device=device)


PAGED_DECODE_ATTENTION = FunctionExercise(
    id="decoding.paged_decode_attention",
    title="Decode attention over a paged KV cache",
    signature=("paged_decode_attention(q [B, Hq, D], k_pages [P, Hkv, PAGE, D], v_pages, block_table [B, max_pages] "
               "int32, seq_lens [B]) -> [B, Hq, D]  # position t of sequence b is row t % PAGE of page "
               "block_table[b, t // PAGE]; PAGE a power of two from 8 to 64; entries past a sequence's last page "
               "point anywhere and must not be read; otherwise as decoding.decode_attention: " + SIGNATURE_NOTE),
    cases=_paged_cases,
    reference=_paged_reference,
    run=traced_run(PAGED_REGIONS),
    compare=_compare_kernel(PAGED_REGIONS),
    requirements=(LaunchesTriton(), MaxLaunches(2), NoTorchCompute(), TrafficWithin(paged_min_bytes)),
    judges=((("cpu",), "only the rows of live positions in the pages the block table points to loaded, and no table "
             "entry past a sequence's last page; each live K/V element once in all (≤ 1.1×; counted element by "
             "element)"),),
    timing=Timing(
        inputs=paged_timing_inputs,
        baselines={"gather + sdpa flash": gather_then_sdpa},
        min_bytes=paged_min_bytes,
        flops=lambda args: 4 * args[0].shape[0] * args[0].shape[1] * args[3].shape[1] * args[1].shape[2]
        * args[0].shape[2],
        # the package's kernel: 86 % of copy, 7.7x (tools/tune_decode.py on an H200, 2026-12-03); a gather at a copy's
        # speed would still move the cache three times: about 2.6x
        min_speedup={"gather + sdpa flash": 2.0},
        min_bandwidth_fraction=0.75,
    ),
    timeout_s=240.0,
    solution="gpuprinciples.course.kernels.paged_attention:paged_decode_attention",
    hints=DECODE_HINTS[:2] + (
        "A tile of BLOCK_N positions spans several pages: per position, page = tl.load(block_table + b · stride + "
        "pos // PAGE, mask=pos < end) and row = pos % PAGE; the K row's address is k_pages + page · stride(0) + "
        "kv_head · stride(1) + row · stride(2) + d.",
        "Mask the block-table load as well as the K/V loads: entries past the last page point at other sequences' "
        "pages.",
    ) + DECODE_HINTS[3:],
)

EXERCISES = (KV_CACHE_BYTES, CONTEXT_FOR_MEMORY, RIDGE_BATCH, BATCH_FOR_BUDGET, DECODE_ATTENTION,
             PAGED_DECODE_ATTENTION)
