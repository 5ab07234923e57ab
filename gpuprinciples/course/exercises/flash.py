"""Lesson 08, FlashAttention: attention without the N×N matrix in memory.

The exercises:

* `flash.score_gib`: predict the memory of the score matrix (a number);
* `flash.merge`: merge two partial softmax statistics (max, sum): the heart of the online softmax;
* `flash.attention`: a blocked attention forward in Triton, graded on correctness against float64
  and, under the interpreter, on what it moves: it may store only the output and per-row vectors
  (a log-sum-exp, scratch per K/V tile: O(rows × tiles), never N×N), may load K and V at most once
  per program (one program per query tile), and the total it loads must stay within the
  FlashAttention bound for tiles of 16 or more query rows. q, k and v arrive with strides of their
  own (k and v may be views of one packed tensor).
* `flash.attention_tiles`, `flash.attention_tails`, `flash.attention_causal`: the same kernel checked
  on the way there, a stage at a time (no masks needed; partial tiles; the causal mask), each with
  its own cases and the same requirements.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ...machine import runtime
from ...measure import counters
from ..kernels.attention import attention_float64, naive_attention, sdpa
from ..kit import (
    Case,
    FunctionExercise,
    LaunchesTriton,
    MaxLaunches,
    NoTorchCompute,
    Regime,
    Requirement,
    Timing,
    ValueExercise,
    compare_tensors,
    dtype_plan,
    output_problems,
    regime_specs,
)
from ..kit.compare import _fmt_bytes

# -------------------------------------------------------------------------------------------------
# flash.score_gib: predict before measuring
# -------------------------------------------------------------------------------------------------

SCORE_GIB = ValueExercise(
    id="flash.score_gib",
    title="How big is the score matrix?",
    question=("Naive attention computes S = Q Kᵀ for every (batch, head) and writes it to memory. For "
              "B=4, H=16, N=4096 in bfloat16, how many GiB does S take?"),
    expected=lambda: 4 * 16 * 4096 * 4096 * 2 / 2**30,
    rel_tol=0.02,
    hints=("S has one entry per (query, key) pair: N × N per head, for B·H heads.",
           "bfloat16 is 2 bytes; 1 GiB is 2**30 bytes."),
)

# -------------------------------------------------------------------------------------------------
# flash.merge: the online-softmax step
# -------------------------------------------------------------------------------------------------


def _merge_reference(m1, s1, m2, s2):
    m = torch.maximum(m1, m2)
    base = torch.where(torch.isinf(m) & (m < 0), torch.zeros_like(m), m)  # both parts empty: nothing to rescale
    return m, s1 * torch.exp(m1 - base) + s2 * torch.exp(m2 - base)


def _merge_part(gen, rows: int, kind: str):
    """(max, sum) of `rows` random partial rows, as an online softmax would hold them."""
    if kind == "normal":
        m = torch.randn(rows, generator=gen, dtype=torch.float64) * 3
    elif kind == "large":  # exp(m) overflows float64: only differences of maxima may be exponentiated
        m = (torch.rand(rows, generator=gen, dtype=torch.float64) * 2 - 1) * 2e3
    else:
        raise ValueError(kind)
    s = 1 + torch.rand(rows, generator=gen, dtype=torch.float64) * 50  # a sum of exp(x - m) with one term 1
    return m, s


def _empty(part, gen, fraction: float):
    """Some rows saw only masked scores (a causal tile above the diagonal): max -inf, sum 0."""
    m, s = part
    hit = torch.rand(m.shape, generator=gen) < fraction
    return m.masked_fill(hit, -math.inf), s.masked_fill(hit, 0.0), hit


def _merge_cases(gen: torch.Generator, mode: str) -> list[Case]:
    cases = []
    for label, rows, kind, empty_left, empty_both in [
        ("5 rows", 5, "normal", 0.0, False),
        ("97 rows", 97, "normal", 0.0, False),
        ("large maxima (exp(m) overflows)", 64, "large", 0.0, False),
        ("one part empty (-inf, 0)", 50, "normal", 0.4, False),
        ("both parts empty in some rows", 40, "normal", 0.3, True),
    ]:
        m1, s1 = _merge_part(gen, rows, kind)
        m2, s2 = _merge_part(gen, rows, kind)
        if empty_left:
            m1, s1, hit = _empty((m1, s1), gen, empty_left)
            if empty_both:
                m2, s2 = m2.masked_fill(hit, -math.inf), s2.masked_fill(hit, 0.0)
        cases.append(Case(label, (m1, s1, m2, s2)))
    return cases


def _compare_merge(got, want, case) -> list[str]:
    if not isinstance(got, (list, tuple)) or len(got) != 2:
        return [f"returned {type(got).__name__}; expected a pair (m, s) of tensors (case {case.label})"]
    reasons = []
    for name, g, w in zip(("m", "s"), got, want):
        for why in compare_tensors(g, w, case):
            reasons.append(f"{name}: {why}")
    return reasons


MERGE = FunctionExercise(
    id="flash.merge",
    title="Merge two partial softmax statistics",
    signature=("merge(m1, s1, m2, s2) -> (m, s)  # float64 tensors [R]: m = row max, s = sum of exp(x - m); "
               "an empty part is (m=-inf, s=0)"),
    cases=_merge_cases,
    reference=_merge_reference,
    compare=_compare_merge,
    solution="gpuprinciples.course.exercises.flash:merge",
    hints=("The new maximum is the larger of the two: m = max(m1, m2).",
           "Each sum was taken relative to its own maximum: s1 counts exp(x - m1). Relative to m, that is "
           "s1 · exp(m1 - m).",
           "Never exponentiate m itself (exp(2000) overflows); only differences m1 - m, which are ≤ 0.",
           "A row where both parts are empty has m = -inf, and -inf - (-inf) is NaN: the answer there is "
           "(m=-inf, s=0). torch.where helps."),
)


def merge(m1, s1, m2, s2):
    """The package's solution of `flash.merge`."""
    m = torch.maximum(m1, m2)
    safe = torch.where(m == -math.inf, torch.zeros_like(m), m)
    return m, s1 * torch.exp(m1 - safe) + s2 * torch.exp(m2 - safe)


# -------------------------------------------------------------------------------------------------
# flash.attention, and the three stages that lead to it
# -------------------------------------------------------------------------------------------------

BLOCK_M_MIN = 16  # the smallest query tile the load budget allows for
BLOCK_N_MIN = 16  # the smallest K/V tile a per-row scratch vector may be kept for
ROW_PAD = 256  # per-row vectors (log-sum-exp, scratch) may be padded to a query tile of up to this many rows


def _shape(case: Case):
    return tuple(case.args[0].shape)  # B, H, N, D


def _size(case: Case, elements: int) -> int:
    return elements * case.args[0].element_size()


def naive_bytes(case: Case) -> dict:
    """What PyTorch's `softmax((q @ kᵀ) * scale) @ v` moves on top of Q, K, V and O: S written, read and
    written again scaled, read by the softmax, P written and read back for P·V (N×N per head each)."""
    B, H, N, D = _shape(case)
    matrix = _size(case, B * H * N * N)
    return {"stores": 3 * matrix, "loads": 3 * matrix}


def row_vector_bytes(case: Case) -> int:
    """Per-row vectors a FlashAttention-2 kernel may keep in memory: a log-sum-exp (8 bytes) per row and a
    float32 scratch value per row for each K/V tile of ≥ 16 keys, rows padded to a tile of ≤ 256. That is
    O(rows × tiles), N/4 bytes per row at most: an N×N matrix of scores (4N bytes per row in float32,
    2N in bf16) does not fit in it."""
    B, H, N, D = _shape(case)
    rows = B * H * ROW_PAD * math.ceil(N / ROW_PAD)
    return rows * (8 + 4 * math.ceil(N / BLOCK_N_MIN))


class _Counted(Requirement):
    modes = ("cpu",)  # bytes are counted under the interpreter only


class StoresOnlyOutput(_Counted):
    """Stored bytes ≤ the output + per-row vectors (`row_vector_bytes`)."""

    def describe(self) -> str:
        return "stores only the output and per-row vectors (log-sum-exp, scratch): no N×N matrix in memory"

    def evaluate(self, counts, case):
        B, H, N, D = _shape(case)
        allowed = _size(case, B * H * N * D) + row_vector_bytes(case)
        stored = counts["store_bytes"]
        if stored > allowed:
            return (f"stored {_fmt_bytes(stored)} in case {case.label}, where the output and per-row vectors "
                    f"(a log-sum-exp, a scratch value per K/V tile) are at most {_fmt_bytes(allowed)}: something "
                    f"else went to memory (the scores?). The naive way stores "
                    f"{_fmt_bytes(naive_bytes(case)['stores'])} of S and P on top of the output")
        return None


class LoadsWithinFlashBound(_Counted):
    """Loaded bytes (plus PyTorch copies and fills) ≤ Q + an O-sized buffer + ceil(N/16)·(K + V) + per-row
    vectors read back: each query tile of ≥ 16 rows may read all of K and V once."""

    def describe(self) -> str:
        return f"loads at most Q + O + ⌈N/{BLOCK_M_MIN}⌉·(K + V): K and V once per query tile"

    def evaluate(self, counts, case):
        B, H, N, D = _shape(case)
        head = _size(case, B * H * N * D)
        allowed = 2 * head + math.ceil(N / BLOCK_M_MIN) * 2 * head + row_vector_bytes(case)
        moved = counts["load_bytes"] + counts["torch_bytes"]
        if moved > allowed:
            return (f"loaded {_fmt_bytes(counts['load_bytes'])}"
                    + (f" (+ {_fmt_bytes(counts['torch_bytes'])} of PyTorch copies)" if counts["torch_bytes"] else "")
                    + f" in case {case.label}; at most {_fmt_bytes(allowed)} allowed (Q, O, and K and V once for "
                    f"each query tile of {BLOCK_M_MIN} rows). Are K and V read more than once per tile, or the "
                    f"scores read back? The naive way reads {_fmt_bytes(naive_bytes(case)['loads'])} of S and P")
        return None


class NoScoreMatrix(Requirement):
    """No tensor of N×N elements or more is created (checked where N×N exceeds the output, so the
    output itself cannot trip it)."""

    def describe(self) -> str:
        return "allocates no N×N tensor"

    def evaluate(self, counts, case):
        B, H, N, D = _shape(case)
        if N * N <= B * H * N * D + B * H * N:
            return None  # the output is as big as one score matrix here: nothing to tell apart
        if counts["largest_new_numel"] >= N * N:
            return (f"a tensor of {counts['largest_new_numel']:,} elements was created in case {case.label} "
                    f"(N×N = {N * N:,}): that is a score matrix, which FlashAttention never materialises")
        return None


# How q, k and v arrive. Each is [B, H, N, D] with the last dim contiguous; the rest varies, and q, k and v
# need not share strides: a kernel must take each tensor's own. Row strides stay multiples of 16 bytes
# (what a tensor descriptor needs, and what real projections produce).
LAYOUTS = {
    "normal": "q, k, v contiguous",
    "large": "contiguous, scores of std 64",
    "strided": "q, k, v each a [B, N, H, D] tensor seen as [B, H, N, D]",
    "packed_kv": "q contiguous; k and v two views of one [B, N, 2, H, D] tensor",
    "mixed": "q a [B, N, H, D] view, k contiguous, v rows padded to D + 8",
}


def _attention_values(gen, shape, kind, dtype):
    B, H, N, D = shape
    if kind == "strided":  # [B, N, H, D] seen as [B, H, N, D]: how a projection's output arrives
        return tuple(torch.randn(B, N, H, D, generator=gen).to(dtype).transpose(1, 2) for _ in range(3))
    if kind == "packed_kv":  # one projection for K and V: k and v share a storage and its strides
        q = torch.randn(shape, generator=gen).to(dtype)
        kv = torch.randn(B, N, 2, H, D, generator=gen).to(dtype)
        return q, kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
    if kind == "mixed":  # three stride sets
        q = torch.randn(B, N, H, D, generator=gen).to(dtype).transpose(1, 2)
        k = torch.randn(shape, generator=gen).to(dtype)
        v = torch.randn(B, H, N, D + 8, generator=gen).to(dtype)[..., :D]
        return q, k, v
    q, k, v = (torch.randn(shape, generator=gen) for _ in range(3))
    if kind == "large":  # scores of std 64: exp overflows unless the running maximum is subtracted
        q, k = q * 8, k * 8
    return q.to(dtype), k.to(dtype), v.to(dtype)


def _odd(low: int, high: int):
    """A sequence length drawn from [low, high) that no tile size of 16 or more divides."""
    def draw(gen) -> int:
        n = int(torch.randint(low, high, (1,), generator=gen))
        return n + 1 if n % 16 == 0 else n
    return draw


# per (dtype, kind): (rtol, atol). float32 scores of std 64 carry ~1e-5 of rounding from the inputs
# alone (the float64 reference sees the same inputs exactly), hence the looser large-logit tolerance.
ATTENTION_TOLERANCES = {
    (torch.float32, "normal"): (1e-5, 1e-5),
    (torch.float32, "large"): (1e-4, 1e-4),
    (torch.float16, "normal"): (2e-3, 2e-3),
    (torch.float16, "large"): (4e-3, 4e-3),
    (torch.bfloat16, "normal"): (1.6e-2, 1.6e-2),
    (torch.bfloat16, "large"): (2.4e-2, 2.4e-2),
}

# Each exercise's cases, per mode: (B, H, N, D, causal, layout), N a number or drawn by _odd. On a CPU they
# stay small (the interpreter runs tl.dot as NumPy, tile by tile), yet N > B·H·D where an N×N tensor must
# be told apart from the output; float32 there (and the second shape once in bf16 and fp16), bf16 and fp16 in
# turn on a GPU.
F, T = False, True
ATTENTION_SPECS = {
    # stage 1: the loop itself. No mask is needed: N is a multiple of every tile up to 128
    "flash.attention_tiles": {
        "cpu": [(1, 1, 128, 32, F, "normal"), (1, 2, 256, 64, F, "normal"), (1, 1, 128, 128, F, "large"),
                (2, 1, 256, 32, F, "normal")],
        "gpu": [(1, 2, 128, 64, F, "normal"), (2, 3, 512, 64, F, "normal"), (1, 4, 1024, 128, F, "large"),
                (2, 2, 256, 32, F, "normal")],
    },
    # stage 2: partial tiles. N is not a multiple of any tile: masked loads, -inf for keys past N
    "flash.attention_tails": {
        "cpu": [(1, 1, 1, 32, F, "normal"), (1, 1, _odd(3, 15), 64, F, "normal"),
                (1, 2, _odd(130, 180), 64, F, "normal"), (2, 1, _odd(70, 140), 32, F, "large"),
                (1, 1, 128, 64, F, "normal")],
        "gpu": [(1, 1, 1, 32, F, "normal"), (1, 2, _odd(3, 40), 64, F, "normal"),
                (2, 3, _odd(300, 700), 64, F, "normal"), (1, 4, _odd(500, 1000), 128, F, "large"),
                (2, 2, 512, 128, F, "normal")],
    },
    # stage 3: causal, with and without partial tiles
    "flash.attention_causal": {
        "cpu": [(1, 1, 1, 32, T, "normal"), (1, 1, _odd(3, 15), 64, T, "normal"), (1, 2, 128, 64, T, "normal"),
                (2, 1, _odd(70, 140), 32, T, "normal"), (1, 1, _odd(140, 200), 128, T, "large")],
        "gpu": [(1, 1, 1, 32, T, "normal"), (1, 2, _odd(3, 40), 64, T, "normal"), (2, 2, 512, 64, T, "normal"),
                (2, 2, _odd(500, 1000), 128, T, "normal"), (2, 2, _odd(200, 400), 32, T, "large")],
    },
    # everything at once, and q, k, v in layouts of their own: two batches of them, so a kernel that steps from
    # one batch to the next by H × the head stride (true only of a contiguous [B, H, N, D]) is wrong
    "flash.attention": {
        "cpu": [(1, 1, 1, 32, F, "normal"), (1, 1, _odd(3, 15), 64, T, "normal"),
                (1, 2, _odd(130, 180), 64, F, "normal"), (2, 1, _odd(70, 140), 32, T, "normal"),
                (1, 1, _odd(140, 200), 128, T, "large"), (1, 2, _odd(70, 150), 32, F, "large"),
                (2, 2, _odd(40, 100), 32, T, "strided"), (2, 2, _odd(70, 150), 32, F, "packed_kv"),
                (2, 1, _odd(70, 120), 64, T, "mixed"), (1, 1, 128, 64, F, "normal")],
        "gpu": [(1, 1, 1, 32, F, "normal"), (1, 2, _odd(3, 40), 64, T, "normal"),
                (2, 3, _odd(300, 700), 64, F, "normal"), (2, 2, _odd(500, 1000), 128, T, "normal"),
                (1, 4, _odd(500, 1000), 128, F, "large"), (2, 2, _odd(200, 400), 32, T, "large"),
                (2, 3, _odd(200, 400), 64, T, "strided"), (2, 2, _odd(200, 400), 64, F, "packed_kv"),
                (1, 3, _odd(200, 400), 128, T, "mixed"), (2, 2, 512, 128, F, "normal")],
    },
}


# The regime an H200's cases reach (N up to 1000): a sequence over several key tiles, past one tile of 512 that
# would hold a whole short one. On a CPU: one small case just past it (stage 1's N a multiple of 128).
LONG = "a sequence past one tile of 512 keys"
ATTENTION_REGIMES = {
    "flash.attention_tiles": (Regime(LONG, lambda gen: (1, 1, 640, 32, F, "normal")),),
    "flash.attention_tails": (Regime(LONG, lambda gen: (1, 1, _odd(520, 600)(gen), 32, F, "normal")),),
    "flash.attention_causal": (Regime(LONG, lambda gen: (1, 1, _odd(520, 600)(gen), 32, T, "normal")),),
    "flash.attention": (Regime(LONG, lambda gen: (1, 1, _odd(520, 600)(gen), 32, T, "normal")),),
}


def _cases_for(exercise_id: str):
    def cases(gen: torch.Generator, mode: str) -> list[Case]:
        found = []
        plan = [(spec, dtype, "") for spec, dtype in dtype_plan(ATTENTION_SPECS[exercise_id][mode], mode)]
        plan += [(spec, torch.float32, f" ({words})")
                 for spec, words in regime_specs(ATTENTION_REGIMES[exercise_id], gen, mode)]
        for (B, H, N, D, causal, kind), dtype, words in plan:
            N = N(gen) if callable(N) else N
            args = _attention_values(gen, (B, H, N, D), kind, dtype)
            decoy = _attention_values(gen, (B, H, N, D), kind, dtype)
            label = (f"B={B} H={H} N={N} D={D} {'causal' if causal else 'full'} {kind} "
                     f"{str(dtype).replace('torch.', '')}{words}")
            found.append(Case(label, args, {"causal": causal}, decoy=decoy))
        return found
    cases.__name__ = f"cases_{exercise_id.split('.')[1]}"
    return cases


_attention_cases = _cases_for("flash.attention")


def _kind(case: Case) -> str:
    return "large" if " large " in case.label else "normal"


def _extent(t: torch.Tensor) -> torch.Tensor:
    """A 1-D view of every element from `t`'s first to its last: where a strided view's loads can land."""
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) + 1 if t.numel() else 0
    return t.as_strided((last,), (1,), t.storage_offset())


def _attention_run(fn, args, kwargs):
    """Run in the grading child. Under the interpreter the loads are traced as well, to count how many
    times each program reads each element of K and V."""
    if not runtime.INTERPRETER:
        out = fn(*args, **kwargs)
        return {"out": out, "device": getattr(getattr(out, "device", None), "type", None), "kv_reads": None}
    with counters.record(trace=True, torch_ops=False) as rec:
        out = fn(*args, **kwargs)
    q, k, v = args
    most = 0
    for t in (k, v):
        for program, ops in counters.touched(rec, _extent(t)).items():
            loads = ops["load"]
            if loads.size:
                most = max(most, int(np.bincount(loads).max()))
    del rec
    return {"out": out, "device": getattr(getattr(out, "device", None), "type", None), "kv_reads": most}


def _close(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float, where: str) -> list[str]:
    g, e = got.double(), want.double()
    bad_values = ~torch.isfinite(g)
    if bool(bad_values.any()):
        return [f"{int(bad_values.sum()):,} NaN or Inf values in the output{where}, where the reference is finite: "
                f"exp overflowed? Subtract the running row maximum before exponentiating"]
    err = (g - e).abs()
    bad = err > atol + rtol * e.abs()
    if bool(bad.any()):
        first = tuple(int(i) for i in torch.nonzero(bad)[0])
        return [f"{int(bad.sum()):,} of {e.numel():,} values wrong{where}; first at index {first}: got "
                f"{g[first].item():.6g}, expected {e[first].item():.6g} (max error {err.max().item():.3g}, "
                f"tolerance rtol={rtol:g}, atol={atol:g})"]
    return []


def _compare_attention(got, want, case) -> list[str]:
    where = f" (case {case.label})"
    q = case.args[0]
    out, device, kv_reads = got["out"], got["device"], got["kv_reads"]
    problems = output_problems(out, device, want, q.dtype, where)
    if problems:
        return problems
    reasons = _close(out, want, *ATTENTION_TOLERANCES[(q.dtype, _kind(case))], where)
    if reasons and any(k in case.label for k in (" packed_kv ", " mixed ", " strided ")):
        k, v = case.args[1], case.args[2]
        reasons.append(f"here q, k and v have strides of their own (q {tuple(q.stride())}, k {tuple(k.stride())}, "
                       f"v {tuple(v.stride())}): pass and use each tensor's strides")
    if kv_reads is not None and kv_reads > 1:
        reasons.append(f"one program read the same element of K or V {kv_reads} times{where}: each query tile "
                       f"should stream K and V past its Q tile once (keep the Q tile, not the K/V tile, fixed)")
    return reasons


def _naive(q, k, v, causal=False):
    return naive_attention(q, k, v, causal)


def _sdpa_flash(q, k, v, causal=False):
    return sdpa("FLASH_ATTENTION")(q, k, v, causal)


def _sdpa_cudnn(q, k, v, causal=False):
    return sdpa("CUDNN_ATTENTION")(q, k, v, causal)


def _timing_inputs(gen, device):
    shape = (4, 16, 4096, 128)
    q, k, v = (torch.randn(shape, generator=gen, device=device, dtype=torch.bfloat16) for _ in range(3))
    return q, k, v, False


SIGNATURE = ("attention(q, k, v, causal=False) -> Tensor  # q, k, v: [B, H, N, D], last dim contiguous, "
             "each with strides of its own; D in {32, 64, 128}; scale 1/sqrt(D); float32, bf16 or fp16 (a GPU "
             "grades bf16/fp16)")
REQUIREMENTS = (LaunchesTriton(), MaxLaunches(1), NoTorchCompute(), NoScoreMatrix(), StoresOnlyOutput(),
                LoadsWithinFlashBound())
KV_ONCE = ((("cpu",), "each program reads each element of K and V at most once"),)
HINTS = (
    "One program per (query tile, batch·head): grid = (cdiv(N, BLOCK_M), B * H). Load the Q tile once.",
    "Loop over K/V tiles of BLOCK_N rows: s = tl.dot(q, k.T) * scale, then the online softmax: "
    "m_new = max(m, rowmax(s)); p = exp(s - m_new); alpha = exp(m - m_new); l = l·alpha + rowsum(p); "
    "acc = acc·alpha + p @ v; m = m_new. Divide acc by l once at the end.",
    "Keys past N (the last, partial tile) must get score -inf, not 0: a zero-padded key still counts in l.",
    "Causal: query i sees keys j ≤ i. Tiles entirely left of the diagonal need no mask, tiles right of "
    "it need no work at all: stop the loop at the end of the query tile.",
    "Strides: the base of head (b, h) is ptr + b·stride(0) + h·stride(1); rows are stride(2) apart. q, k "
    "and v may each have other strides (k and v can be two views of one packed tensor): pass all of them.",
    "On a GPU: exp2 with log2(e) folded into the scale, BLOCK_M=128, BLOCK_N=64, num_stages 3-4, and "
    "tl.make_tensor_descriptor for the tile loads. On Hopper, one K/V loop written as tl.range(lo, hi, BLOCK_N, "
    "warp_specialize=True) with num_warps=4, num_stages=2 and 128×128 tiles gives the loads a warp of their own "
    "(Triton refuses it in a kernel with a second loop).",
)


def _attention_exercise(exercise_id: str, title: str, stage: str, hints: tuple, timing: Timing | None = None):
    return FunctionExercise(
        id=exercise_id, title=title, signature=SIGNATURE + stage, cases=_cases_for(exercise_id),
        reference=attention_float64, run=_attention_run, compare=_compare_attention, requirements=REQUIREMENTS,
        judges=KV_ONCE, timing=timing, timeout_s=180.0, solution="gpuprinciples.course.kernels.attention:attention",
        hints=hints)


ATTENTION_TILES = _attention_exercise(
    "flash.attention_tiles", "FlashAttention, step 1: the tiled loop (N a multiple of the tile, not causal)",
    "; here causal=False and N is a multiple of 128", HINTS[:2] + HINTS[4:5])
ATTENTION_TAILS = _attention_exercise(
    "flash.attention_tails", "FlashAttention, step 2: partial tiles (any N, not causal)",
    "; here causal=False, N any length", HINTS[2:3] + HINTS[:2])
ATTENTION_CAUSAL = _attention_exercise(
    "flash.attention_causal", "FlashAttention, step 3: the causal mask", "; here causal=True, N any length",
    HINTS[3:4] + HINTS[2:3])
ATTENTION = _attention_exercise(
    "flash.attention", "FlashAttention forward in Triton", "", HINTS,
    timing=Timing(
        inputs=_timing_inputs,
        baselines={"naive": _naive, "sdpa_flash": _sdpa_flash, "sdpa_cudnn": _sdpa_cudnn},
        min_bytes=lambda args: 4 * args[0].numel() * args[0].element_size(),  # Q, K, V read, O written
        flops=lambda args: 4 * args[0].shape[0] * args[0].shape[1] * args[0].shape[2] ** 2 * args[0].shape[3]
        // (2 if args[3] else 1),
        min_speedup={"naive": 2.0},
        min_bandwidth_fraction=None,
    ))

EXERCISES = (SCORE_GIB, MERGE, ATTENTION_TILES, ATTENTION_TAILS, ATTENTION_CAUSAL, ATTENTION)
