"""Lesson 12, FlashAttention backward: recompute instead of remember.

The exercises:

* `backward.saved_mib` (a prediction): what FlashAttention keeps for the backward (O and the LSE) at the
  lesson's shape, against the N×N probabilities the math path keeps;
* `backward.matmuls`: how many N×N×D matrix products the two-pass backward does (the recompute included);
* `backward.attention_lse`: lesson 08's forward that also returns the row log-sum-exp;
* `backward.attention_backward(q, k, v, o, lse, do, causal) -> (dq, dk, dv)` in Triton, against float64
  autograd per tensor; under the interpreter: no N×N tensor, stores only the gradients and per-row vectors,
  loads within FlashAttention-2's IO model of the backward;
* `backward.attention_function`: an `autograd.Function` joining the two; graded through `torch.autograd.grad`,
  with what its forward saves for the backward counted;
* `backward.dkdv_tiles` (a decision): the dK/dV kernel's tiles at D = 128, from its compiled registers.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

import torch

from ...machine import runtime
from ...measure import counters
from ...toolchain.compiling import HOPPER_PROPERTIES
from ..kit import (
    Case,
    FunctionExercise,
    LaunchesTriton,
    MaxLaunches,
    NoTorchCompute,
    Requirement,
    Timing,
    ValueExercise,
    dtype_plan,
    output_problems,
)
from ..kit.compare import _fmt_bytes
from .flash import ATTENTION_TOLERANCES, BLOCK_M_MIN, NoScoreMatrix, _attention_values, _kind, _odd, row_vector_bytes

SHAPE = (4, 16, 4096, 128)  # the lesson's (and the GPU timing's) B, H, N, D


# -------------------------------------------------------------------------------------------------
# Predict, count
# -------------------------------------------------------------------------------------------------

def _saved_mib() -> float:
    B, H, N, D = SHAPE
    return (B * H * N * D * 2 + B * H * N * 4) / 2**20  # O in bf16 and a float32 LSE per row


SAVED_MIB = ValueExercise(
    id="backward.saved_mib",
    prediction=True,
    title="Predict: what FlashAttention keeps for the backward",
    question=(f"B={SHAPE[0]}, H={SHAPE[1]}, N={SHAPE[2]}, D={SHAPE[3]} in bfloat16. Besides Q, K and V, "
              "FlashAttention's forward keeps its output O (bf16) and one float32 log-sum-exp per query row for the "
              "backward. How many MiB is that?"),
    expected=_saved_mib,
    rel_tol=0.02,
    hints=("O has the shape of Q: B·H·N·D elements of 2 bytes.",
           "The LSE is B·H·N float32 values; 1 MiB = 2**20 bytes."),
)

MATMULS = ValueExercise(
    id="backward.matmuls",
    title="Count: the two-pass backward's matrix products",
    question=("The forward does two N×N×D products per head (S = Q·Kᵀ, O = P·V). The two-pass backward recomputes "
              "what it needs in each pass: the dK/dV pass (S, then dV, dP, dK) and the dQ pass (S, dP, then dQ). How "
              "many N×N×D products does it do in all?"),
    expected=lambda: 7,
    rel_tol=0.0,
    hints=("The gradients alone need five: S (to get P back), dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q.",
           "The dQ pass cannot reuse the dK/dV pass's P and dP (they never went to memory): it computes S and dP "
           "again."),
)


# -------------------------------------------------------------------------------------------------
# Cases, references, tolerances
# -------------------------------------------------------------------------------------------------

F, T = False, True
# (B, H, N, D, causal, layout); N a number or drawn by _odd (no tile of 16 or more divides it). Small on a CPU
# (the interpreter), with N > B·H·D in some, where an N×N tensor is told apart from the outputs; the strided
# layout ([B, N, H, D] seen as [B, H, N, D]) in two batches, where the batch stride is not H × the head stride.
SPECS = {
    "cpu": [(1, 1, _odd(3, 15), 32, F, "normal"), (1, 1, _odd(40, 60), 64, T, "normal"),
            (1, 2, _odd(130, 170), 32, F, "normal"), (1, 1, _odd(140, 180), 32, T, "normal"),
            (2, 1, _odd(60, 90), 64, T, "large"), (2, 2, _odd(40, 80), 32, F, "strided"),
            (1, 1, 128, 128, T, "normal")],
    "gpu": [(1, 2, _odd(3, 40), 64, F, "normal"), (2, 2, _odd(200, 400), 64, T, "normal"),
            (2, 3, _odd(300, 700), 128, F, "normal"), (2, 2, _odd(500, 1000), 128, T, "normal"),
            (1, 4, _odd(500, 1000), 64, T, "large"), (2, 3, _odd(200, 400), 128, F, "strided"),
            (2, 2, 1024, 128, T, "normal"), (1, 2, 1536, 64, F, "normal")],
}


def _scores_float64(q, k, causal: bool):
    s = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), -math.inf)
    return s


def attention_float64(q, k, v, causal: bool = False):
    """(O, LSE) in float64: the grader's reference forward."""
    s = _scores_float64(q, k, causal)
    return torch.softmax(s, dim=-1) @ v.double(), torch.logsumexp(s, dim=-1)


def stored_o_gradients(q, k, v, do, exact, causal: bool = False, o_stored=None):
    """(dQ, dK, dV) in float64 as a backward gets them that takes δ = rowsum(dO ∘ O) from O as the forward stored
    it, rounded to the inputs' dtype (`o_stored`, by default the exact O rounded), where `exact` took it from the
    exact O. Every FlashAttention backward does so: O is all it has. dS gains P ∘ (δ − δ'), a constant per row times
    P, so dQ and dK move by (that)·K and (that)ᵀ·Q; dV does not move. Where P is large and dS small (the first keys
    of a causal row), this is most of a right bf16 kernel's error: a grade accepts anything between the two."""
    p = torch.softmax(_scores_float64(q, k, causal), dim=-1)
    o = p @ v.double()
    stored = (o_stored if o_stored is not None else o.to(q.dtype)).double()
    shift = p * (do.double() * (o - stored)).sum(-1)[..., None] / math.sqrt(q.shape[-1])
    return exact[0] + shift @ k.double(), exact[1] + shift.transpose(-2, -1) @ q.double(), exact[2]


def gradients_float64(q, k, v, o, lse, do, causal: bool = False):
    """(dQ, dK, dV) by float64 autograd of softmax(q kᵀ/√D) v; `o` and `lse` are not used."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    out, _ = attention_float64(q, k, v, causal)
    return torch.autograd.grad(out, (q, k, v), do.double())


def _label(B, H, N, D, causal, kind, dtype):
    return f"B={B} H={H} N={N} D={D} {'causal' if causal else 'full'} {kind} {str(dtype).replace('torch.', '')}"


def _forward_cases(gen: torch.Generator, mode: str) -> list[Case]:
    found = []
    for (B, H, N, D, causal, kind), dtype in dtype_plan(SPECS[mode], mode):
        N = N(gen) if callable(N) else N
        found.append(Case(_label(B, H, N, D, causal, kind, dtype), _attention_values(gen, (B, H, N, D), kind, dtype),
                          {"causal": causal}, decoy=_attention_values(gen, (B, H, N, D), kind, dtype)))
    return found


def _backward_args(gen, shape, kind, dtype, causal):
    """q, k, v (in the layout `kind` says), the forward's O (in the inputs' dtype) and LSE (float32, [B, H, N]),
    and dO (contiguous)."""
    q, k, v = _attention_values(gen, shape, kind, dtype)
    o, lse = attention_float64(q, k, v, causal)
    do = torch.randn(shape, generator=gen).to(dtype)
    return q, k, v, o.to(dtype), lse.float().contiguous(), do


def _backward_cases(gen: torch.Generator, mode: str) -> list[Case]:
    found = []
    for (B, H, N, D, causal, kind), dtype in dtype_plan(SPECS[mode], mode):
        N = N(gen) if callable(N) else N
        found.append(Case(_label(B, H, N, D, causal, kind, dtype),
                          _backward_args(gen, (B, H, N, D), kind, dtype, causal), {"causal": causal},
                          decoy=_backward_args(gen, (B, H, N, D), kind, dtype, causal)))
    return found


def _as_strided_rows(do: torch.Tensor) -> torch.Tensor:
    """The same values as a [B, N, H, D] tensor seen as [B, H, N, D]: the gradient that reaches attention's output
    through `o.transpose(1, 2).reshape(B, N, H·D)` (how a model joins its heads, lesson 12's TinyLM), last dim
    contiguous, the rest not."""
    return do.transpose(1, 2).contiguous().transpose(1, 2)


def _function_cases(gen: torch.Generator, mode: str) -> list[Case]:
    """q, k, v and the output's gradient dO; the grader's run calls the function and autograd.grad. In the strided
    cases dO arrives strided too, as from a model that joins its heads after attention (autograd hands a custom
    Function's backward the gradient as it is): a backward whose kernels assume a contiguous dO is wrong there."""
    found = []
    for case in _backward_cases(gen, mode):
        q, k, v, o, lse, do = case.args
        q2, k2, v2, _, _, ddo = case.decoy
        if " strided " in case.label:
            do, ddo = _as_strided_rows(do), _as_strided_rows(ddo)
        found.append(Case(case.label, (q, k, v, do), case.kwargs, decoy=(q2, k2, v2, ddo)))
    return found


# per (dtype, kind): (rtol, atol as a fraction of the reference tensor's RMS). A gradient is a sum over N rows of
# products of rounded values, so its error grows with its own size: the atol scales with it. The bf16/fp16 inputs
# are exact in float64; a fast kernel rounds P and dS to them before each tl.dot. With scores of std 64 ("large")
# P is nearly one-hot and a row of dS sums to zero from few large terms: a float64 emulation of exactly that
# rounding (B=1 H=4 N=884 D=64 causal, bf16) is 0.136·RMS off in dQ, past the normal bf16 atol; an H200 run of the
# package's kernel was 0.13·RMS off there. Hence 3× the atol for them. In float32 (graded on a CPU) the same
# near-one-hot rows make the order of the sums show: right kernels with 64-row tiles, or dQ added atomically tile by
# tile, were up to 6.4e-4·RMS off in dQ (6 of 60 draws past the old 3e-4); a wrong one is off by O(RMS).
GRAD_TOLERANCES = {
    (torch.float32, "normal"): (1e-4, 1e-4),
    (torch.float32, "large"): (1e-4, 3e-3),
    (torch.float16, "normal"): (1e-2, 2e-2),
    (torch.float16, "large"): (1e-2, 6e-2),
    (torch.bfloat16, "normal"): (5e-2, 1e-1),
    (torch.bfloat16, "large"): (5e-2, 3e-1),
}
# (rtol, atol) in natural-log units: float32 sums of exp, whatever the inputs' dtype (a score of 155 carries ~1e-5)
LSE_TOLERANCE = {torch.float32: (1e-6, 1e-5), torch.float16: (1e-6, 1e-4), torch.bfloat16: (1e-6, 1e-4)}


def _close(name: str, got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float, where: str,
           also=None) -> list[str]:
    """Problems of `got` against `want` (or, elementwise, anything between `want` and `also`)."""
    g, e = got.double(), want.double()
    bad_values = ~torch.isfinite(g)
    if bool(bad_values.any()):
        return [f"{name}: {int(bad_values.sum()):,} NaN or Inf values{where}, where the reference is finite: "
                "exp overflowed? P = exp(S − LSE) is at most 1 for the rows a query sees"]
    if also is None:
        err = (g - e).abs()
    else:
        a = also.double()
        err = torch.clamp(torch.maximum(g - torch.maximum(e, a), torch.minimum(e, a) - g), min=0)
    bad = err > atol + rtol * e.abs()
    if bool(bad.any()):
        first = tuple(int(i) for i in torch.nonzero(bad)[0])
        return [f"{name}: {int(bad.sum()):,} of {e.numel():,} values wrong{where}; first at index {first}: got "
                f"{g[first].item():.6g}, expected {e[first].item():.6g} (max error {err.max().item():.3g}, "
                f"tolerance rtol={rtol:g}, atol={atol:.3g})"]
    return []


def _grad_reasons(outs, want, case, names=("dq", "dk", "dv"), o_stored=None) -> list[str]:
    where = f" (case {case.label})"
    q, k, v, do = case.args[0], case.args[1], case.args[2], case.args[-1]
    rtol, atol = GRAD_TOLERANCES[(q.dtype, _kind(case))]
    also = stored_o_gradients(q, k, v, do, want, case.kwargs["causal"], o_stored)
    reasons = []
    for name, got, exp, other in zip(names, outs, want, also):
        reasons += _close(name, got, exp, rtol, atol * float(exp.double().pow(2).mean().sqrt()), where, other)
    if reasons and "causal" in case.label and all("values wrong" in r for r in reasons):
        reasons.append("if only causal cases are wrong: the backward must apply the same mask as the forward, P is 0 "
                       "where key j > query i, and so are dP's and dS's entries there")
    return reasons


def _tensors_back(got, count: int, what: str, where: str) -> list | str:
    """The outputs a run sent back, or why not."""
    out, device = got["out"], got["device"]
    if not isinstance(out, (list, tuple)) or len(out) != count:
        return f"returned {out if isinstance(out, str) else type(out).__name__}; expected a tuple {what}{where}"
    return [(o, d) for o, d in zip(out, device)]


def _run_tuple(fn, args, kwargs):
    """Run in the grading child: the outputs, and the device each came back on."""
    out = fn(*args, **kwargs)
    items = list(out) if isinstance(out, (list, tuple)) else out
    devices = [getattr(getattr(t, "device", None), "type", None) for t in items] if isinstance(items, list) else None
    return {"out": items, "device": devices}


# -------------------------------------------------------------------------------------------------
# backward.attention_lse
# -------------------------------------------------------------------------------------------------


def _compare_lse(got, want, case) -> list[str]:
    where = f" (case {case.label})"
    q = case.args[0]
    B, H, N, D = q.shape
    back = _tensors_back(got, 2, "(o, lse)", where)
    if isinstance(back, str):
        return [back]
    (o, o_dev), (lse, lse_dev) = back
    problems = output_problems(o, o_dev, want[0], q.dtype, f" for o{where}")
    problems += output_problems(lse, lse_dev, want[1], torch.float32, f" for lse{where}",
                                dtype_note="the LSE is float32, whatever the inputs' dtype")
    if problems:
        return problems
    reasons = _close("o", o, want[0], *ATTENTION_TOLERANCES[(q.dtype, _kind(case))], where)
    reasons += _close("lse", lse, want[1], *LSE_TOLERANCE[q.dtype], where)
    if reasons and len(reasons) == 1 and reasons[0].startswith("lse"):
        reasons.append("o is right and the LSE is not: LSE_i = m_i + log(l_i) in natural-log units (with exp2 and "
                       "scores in log2 units: (m_i + log2 l_i)·ln 2)")
    return reasons


class StoresOnly(Requirement):
    """The memory the kernels wrote (distinct bytes, however often each was written: dQ added atomically tile by
    tile counts once) ≤ `outputs` tensors of Q's size, `accumulators` float32 ones (dQ summed in float32 before it
    is cast, FlashAttention-2's way) and per-row vectors (flash.row_vector_bytes, twice: the LSE or δ, and
    scratch)."""

    modes = ("cpu",)  # bytes are counted under the interpreter only

    def __init__(self, outputs: int, what: str, accumulators: int = 0):
        self.outputs, self.what, self.accumulators = outputs, what, accumulators

    def describe(self) -> str:
        return f"stores only {self.what} and per-row vectors: no N×N matrix in memory"

    def evaluate(self, counts, case):
        q = case.args[0]
        allowed = ((self.outputs * q.element_size() + self.accumulators * 4) * q.numel()
                   + 2 * row_vector_bytes(case))
        written = counts.get("store_footprint_bytes")
        written = counts["store_bytes"] if written is None else written
        if written > allowed:
            B, H, N, D = q.shape
            extra = f" (with {self.accumulators} float32 sum{'s' * (self.accumulators > 1)} of Q's shape)" \
                if self.accumulators else ""
            return (f"wrote {_fmt_bytes(written)} of memory in case {case.label}, where {self.what}{extra} and "
                    f"per-row vectors are at most {_fmt_bytes(allowed)}: something N×N went to memory (P or dS?); "
                    f"one N×N matrix per head is {_fmt_bytes(B * H * N * N * q.element_size())} here")
        return None


def backward_load_budget(case: Case) -> int:
    """FlashAttention-2's IO model of the backward, with tiles of ≥ 16 rows: δ reads O and dO once; the dK/dV
    pass reads K and V once and Q, dO once per key tile; the dQ pass reads Q, dO once and K, V once per query
    tile; both read the per-row LSE and δ per tile (row_vector_bytes each)."""
    q = case.args[0]
    head = q.numel() * q.element_size()
    tiles = math.ceil(q.shape[2] / BLOCK_M_MIN)
    return 2 * head + 2 * (2 * head + tiles * 2 * head) + 4 * row_vector_bytes(case)


class LoadsWithinBackwardBound(Requirement):
    modes = ("cpu",)

    def describe(self) -> str:
        return (f"loads at most (6 + 4·⌈N/{BLOCK_M_MIN}⌉) × the bytes of Q: O and dO once for δ; each pass its own "
                f"pair once, the other pair once per tile of {BLOCK_M_MIN} rows")

    def evaluate(self, counts, case):
        allowed = backward_load_budget(case)
        moved = counts["load_bytes"] + counts["torch_bytes"]
        if moved > allowed:
            return (f"loaded {_fmt_bytes(counts['load_bytes'])}"
                    + (f" (+ {_fmt_bytes(counts['torch_bytes'])} of PyTorch copies)" if counts["torch_bytes"] else "")
                    + f" in case {case.label}; at most {_fmt_bytes(allowed)} allowed: K and V once per query tile of "
                    f"{BLOCK_M_MIN} rows or more, Q and dO once per key tile. Is something N×N read back, or are "
                    "the tiles smaller than 16 rows?")
        return None


LSE_SIGNATURE = ("attention_lse(q, k, v, causal=False) -> (o, lse)  # q, k, v: [B, H, N, D]; o like q; lse: float32 "
                 "[B, H, N], natural log of Σ_j exp(q_i·k_j/√D) over the keys row i sees")

ATTENTION_LSE = FunctionExercise(
    id="backward.attention_lse",
    title="FlashAttention forward that keeps the row log-sum-exp",
    signature=LSE_SIGNATURE,
    cases=_forward_cases,
    reference=attention_float64,
    run=_run_tuple,
    compare=_compare_lse,
    requirements=(LaunchesTriton(), MaxLaunches(1), NoTorchCompute(), NoScoreMatrix(),
                  StoresOnly(1, "the output, the LSE")),
    timeout_s=180.0,
    solution="gpuprinciples.course.kernels.attention_backward:attention_lse",
    hints=("Lesson 08's kernel holds m (the running max, log2 units with exp2) and l (the running sum) per row at "
           "the end of its loop: LSE = (m + log2 l)·ln 2.",
           "Store it with a mask (rows past N) into a float32 [B, H, N] tensor: row bh·N + i.",
           "Causal rows see keys j ≤ i only: the same LSE the backward will need for the same mask."),
)


# -------------------------------------------------------------------------------------------------
# backward.attention_backward
# -------------------------------------------------------------------------------------------------


def _compare_backward(got, want, case) -> list[str]:
    where = f" (case {case.label})"
    q = case.args[0]
    back = _tensors_back(got, 3, "(dq, dk, dv)", where)
    if isinstance(back, str):
        return [back]
    problems = []
    for name, (t, dev), exp in zip(("dq", "dk", "dv"), back, want):
        problems += output_problems(t, dev, exp, q.dtype, f" for {name}{where}")
    return problems or _grad_reasons([t for t, _ in back], want, case, o_stored=case.args[3])


BACKWARD_SIGNATURE = ("attention_backward(q, k, v, o, lse, do, causal=False) -> (dq, dk, dv)  # [B, H, N, D] each, "
                      "q, k, v with strides of their own; o and do contiguous; lse float32 [B, H, N] (natural log); "
                      "scale 1/√D")
BACKWARD_HINTS = (
    "First δ_i = Σ_d dO_id·O_id, one float per row (a small kernel): dS = P∘(dP − δ) needs it in both passes.",
    "dK/dV: one program per key tile. Load K, V once; for each query tile: Sᵀ = K·Qᵀ·scale, Pᵀ = exp(Sᵀ − LSE), "
    "dV += Pᵀ·dO, dPᵀ = V·dOᵀ, dSᵀ = Pᵀ∘(dPᵀ − δ), dK += dSᵀ·Q. Multiply dK by the scale once at the end.",
    "dQ: one program per query tile. Load Q, dO, LSE, δ once; for each key tile: S, P, dP = dO·Vᵀ, dS, "
    "dQ += dS·K. Then dQ·scale.",
    "Causal: the dK/dV program of key tile [n, n+BN) starts at query n (earlier queries do not see these keys); "
    "the dQ program stops at the end of its query tile; mask P on the diagonal tiles.",
    "Tails: a query row past N must give P = 0 (load its LSE as +inf); keys past N: mask P in the dQ pass.",
    "On a GPU: exp2 with log2(e) folded into the scale (and LSE·log2 e), bf16 operands to every tl.dot, "
    "64 queries × 128 keys for dK/dV and 128 × 64 for dQ, 8 warps.",
)

def _timing_inputs(gen, device, causal=False):
    """The lesson's shape in bf16: q, k, v, dO drawn here, O and LSE from the package's forward."""
    from ..kernels.attention_backward import attention_lse
    q, k, v, do = (torch.randn(SHAPE, generator=gen, device=device, dtype=torch.bfloat16) for _ in range(4))
    # only timed on a GPU: a CPU reads shapes (roofline, bytes), and the interpreter would take hours
    if device == "cpu":
        return q, k, v, torch.empty_like(q), torch.empty(SHAPE[:3], device=device), do, causal
    o, lse = attention_lse(q, k, v, causal)
    return q, k, v, o, lse, do, causal


def sdpa_backward(backend_name: str):
    """The backward of F.scaled_dot_product_attention on one backend, alone: its forward runs once per input buffer
    (on copies, so that the grader refilling the buffers between calls does not touch autograd's saved tensors),
    and every call after that is one `torch.autograd.grad` of the kept graph."""
    from ..kernels.attention import sdpa
    forward = sdpa(backend_name)
    kept: dict = {}

    def run(q, k, v, o, lse, do, causal=False):
        key = (q.data_ptr(), tuple(q.shape), bool(causal))
        if key not in kept:
            kept.clear()
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            kept[key] = (leaves, forward(*leaves, causal))
        leaves, out = kept[key]
        return torch.autograd.grad(out, leaves, do, retain_graph=True)

    run.__name__ = run.__qualname__ = f"{forward.__name__}_backward"
    return run


def backward_flops(args) -> int:
    """2.5 × the forward's 4·B·H·N²·D (five N×N×D products against two; the recompute not counted), half causal."""
    B, H, N, D = args[0].shape
    return 10 * B * H * N * N * D // (2 if args[6] else 1)


def _timing(causal: bool, label: str = "") -> Timing:
    return Timing(
        inputs=lambda gen, device: _timing_inputs(gen, device, causal),
        baselines={"sdpa_flash": sdpa_backward("FLASH_ATTENTION"), "sdpa_cudnn": sdpa_backward("CUDNN_ATTENTION")},
        min_bytes=lambda args: 8 * args[0].numel() * args[0].element_size(),  # Q K V O dO read, dQ dK dV written
        flops=backward_flops,
        min_speedup={"sdpa_flash": 0.8},  # a learner's bar; the package's reaches more (docs/flash-backward-h200.md)
        label=label)


ATTENTION_BACKWARD = FunctionExercise(
    id="backward.attention_backward",
    title="FlashAttention backward in Triton",
    signature=BACKWARD_SIGNATURE,
    cases=_backward_cases,
    reference=gradients_float64,
    run=_run_tuple,
    compare=_compare_backward,
    requirements=(LaunchesTriton(), MaxLaunches(4), NoTorchCompute(), NoScoreMatrix(),
                  StoresOnly(3, "dQ, dK, dV", accumulators=1),
                  LoadsWithinBackwardBound()),
    timing=replace(_timing(False), also=(_timing(True, "causal"),)),
    timeout_s=240.0,
    solution="gpuprinciples.course.kernels.attention_backward:attention_backward",
    # how far it goes on an H100/H200: the same two passes in Gluon (wgmma, TMA, a loader warp)
    further={"gluon_hopper": "gpuprinciples.course.kernels.attention_backward_gluon:attention_backward"},
    hints=BACKWARD_HINTS,
)


# -------------------------------------------------------------------------------------------------
# backward.attention_function
# -------------------------------------------------------------------------------------------------


def _run_function(fn, args, kwargs):
    """Run in the grading child: out = fn(q, k, v, causal) on leaves that require grad, then
    torch.autograd.grad(out, (q, k, v), dO), the backward under the grader's torch function modes (the placement
    watch carries them into a custom Function's backward: placement.modes_in_backward). What the forward saved for
    the backward is counted."""
    q, k, v, do = args
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]  # views of the inputs: nothing copied
    with counters.record(saved=True, torch_ops=False) as rec:
        out = fn(*leaves, **kwargs)
    saved = rec.saved_bytes
    if type(out) is not torch.Tensor:
        return {"out": [out], "device": [None], "saved": saved, "grad_fn": None}
    grad_fn = type(out.grad_fn).__name__ if out.grad_fn is not None else None
    grads = torch.autograd.grad(out, leaves, do, allow_unused=True) if out.requires_grad else (None, None, None)
    items = [out.detach(), *grads]
    return {"out": items, "device": [getattr(getattr(t, "device", None), "type", None) for t in items],
            "saved": saved, "grad_fn": grad_fn}


def _function_reference(q, k, v, do, causal=False):
    o, _ = attention_float64(q, k, v, causal)
    return (o, *gradients_float64(q, k, v, None, None, do, causal))


def saved_budget(case: Case) -> int:
    """q, k, v (saved as they are: their storages) + O + a float32 LSE per row, padded to tiles of ≤ 256."""
    q, k, v, _ = case.args
    storages = sum(t.untyped_storage().nbytes() for t in (q, k, v))
    return storages + q.numel() * q.element_size() + row_vector_bytes(case)


def _compare_function(got, want, case) -> list[str]:
    where = f" (case {case.label})"
    q = case.args[0]
    out, device = got["out"], got["device"]
    problems = output_problems(out[0], device[0], want[0], q.dtype, f" for the output{where}")
    if problems:
        return problems
    if got["grad_fn"] is None:
        return [f"the output does not require grad{where}: return the output of YourFunction.apply(q, k, v, causal), "
                "so that autograd calls its backward"]
    if any(g is None for g in out[1:]):
        return [f"autograd found no gradient for q, k or v{where}: backward must return (dq, dk, dv, None) — one "
                "value per input of forward, None for causal"]
    for name, t, dev, exp in zip(("dq", "dk", "dv"), out[1:], device[1:], want[1:]):
        problems += output_problems(t, dev, exp, q.dtype, f" for {name}{where}")
    if problems:
        return problems
    reasons = (_close("output", out[0], want[0], *ATTENTION_TOLERANCES[(q.dtype, _kind(case))], where)
               + _grad_reasons(out[1:], want[1:], case))
    do = case.args[3]
    if reasons and not do.is_contiguous() and not reasons[0].startswith("output"):
        reasons.append(f"if only the strided cases' gradients are wrong: there dO arrives strided too, "
                       f"{tuple(do.stride())}, as it does from a model that joins the heads after attention "
                       "(o.transpose(1, 2).reshape(...)): make it contiguous in backward where it is not "
                       "(do.contiguous()), or pass its strides to your kernels")
    if got["saved"] is not None and got["saved"] > saved_budget(case):
        reasons.append(f"the forward saved {_fmt_bytes(got['saved'])} for the backward{where}, where q, k, v, O and "
                       f"one LSE per row are {_fmt_bytes(saved_budget(case))}: keep O and the LSE "
                       "(ctx.save_for_backward), recompute P in the backward")
    return reasons


ATTENTION_FUNCTION = FunctionExercise(
    id="backward.attention_function",
    title="An autograd.Function: FlashAttention forward and backward, joined",
    signature=("attention(q, k, v, causal=False) -> Tensor  # differentiable: returns YourFunction.apply(q, k, v, "
               "causal) (in a notebook: autograd_function(forward, backward).apply(...)); its forward runs "
               "attention_lse and saves (q, k, v, o, lse), its backward runs attention_backward"),
    cases=_function_cases,
    reference=_function_reference,
    run=_run_function,
    compare=_compare_function,
    requirements=(LaunchesTriton(), MaxLaunches(5), NoTorchCompute(), NoScoreMatrix()),
    judges=((("cpu", "gpu"), "what the forward saves: q, k, v, O and one LSE per row"),),
    timeout_s=240.0,
    solution="gpuprinciples.course.exercises.backward:attention",
    hints=("class FlashAttention(torch.autograd.Function): forward(ctx, q, k, v, causal) runs your attention_lse, "
           "ctx.save_for_backward(q, k, v, o, lse), ctx.causal = causal, returns o.",
           "backward(ctx, do): do may arrive non-contiguous (a transpose upstream): do.contiguous() only when it "
           "is not; return (dq, dk, dv, None).",
           "attention = lambda q, k, v, causal=False: FlashAttention.apply(q, k, v, causal)"),
)


_FUNCTIONS: dict = {}


def autograd_function(forward, backward) -> type:
    """The torch.autograd.Function subclass whose static methods are `forward(ctx, ...)` and `backward(ctx, ...)`,
    made once per pair: what a notebook writes as two functions, since the grader ships a notebook's functions by
    their source and Python cannot read back the source of a class defined in a notebook."""
    key = (forward, backward)
    if key not in _FUNCTIONS:
        _FUNCTIONS[key] = type(f"{forward.__name__}_function", (torch.autograd.Function,),
                               {"forward": staticmethod(forward), "backward": staticmethod(backward)})
    return _FUNCTIONS[key]


class FlashAttention(torch.autograd.Function):
    """The package's solution of `backward.attention_function`."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        from ..kernels.attention_backward import attention_lse
        o, lse = attention_lse(q, k, v, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o

    @staticmethod
    def backward(ctx, do):
        from ..kernels.attention_backward import attention_backward
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(q, k, v, o, lse, do if do.stride(-1) == 1 else do.contiguous(), ctx.causal)
        return dq, dk, dv, None


def attention(q, k, v, causal=False):
    """The package's solution of `backward.attention_function`."""
    return FlashAttention.apply(q, k, v, causal)


# -------------------------------------------------------------------------------------------------
# backward.dkdv_tiles: a decision from the compiled kernel
# -------------------------------------------------------------------------------------------------

TILE_CHOICES = ((32, 64, 4), (32, 128, 4), (64, 64, 4), (64, 128, 4), (64, 128, 8), (128, 128, 8))


@lru_cache(maxsize=None)
def compile_dkdv(block_m: int, block_n: int, num_warps: int, causal: bool = False):
    """The package's dK/dV kernel compiled for an H100/H200 as it is launched at D = 128 in bf16, 3 stages (strides
    multiples of 16, as PyTorch's tensors have them): its CompiledInfo (registers, spills, shared_bytes, ...)."""
    from ...toolchain import gpucompile
    from ..kernels.attention_backward import dkdv_kernel
    B, H, N, D = 1, 1, 256, 128
    q, k, v, do, dk, dv = (torch.empty(B, H, N, D, dtype=torch.bfloat16, device=runtime.DEVICE) for _ in range(6))
    lse, delta = (torch.empty(B, H, N, device=runtime.DEVICE) for _ in range(2))
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], N)
    return gpucompile.compile_launch(
        dkdv_kernel, (q, k, v, do, lse, delta, dk, dv, H, N, 0.1, 0.1, *strides),
        dict(D=D, CAUSAL=causal, PRECISION="tf32", BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
             num_stages=3))


def _tiles_of(got):
    if isinstance(got, (tuple, list)) and len(got) == 3 and all(isinstance(x, int) for x in got):
        return tuple(got)
    return None


def _fits(choice) -> bool:
    info = compile_dkdv(*choice)
    return bool(info.ok and not info.spills and info.shared_bytes is not None
                and info.shared_bytes <= HOPPER_PROPERTIES["max_shared_mem"])


def _best_tiles():
    """Of the choices that compile without spilling, the largest key tile (Q and dO are read once per key tile),
    then the largest query tile (fewer loop steps)."""
    fitting = [c for c in TILE_CHOICES if _fits(c)]
    return max(fitting, key=lambda c: (c[1], c[0])) if fitting else None


def _compare_tiles(got, best) -> list[str]:
    choice = _tiles_of(got)
    if choice is None or choice not in TILE_CHOICES:
        return [f"answered {got!r}: choose one (BLOCK_M, BLOCK_N, num_warps) of {list(TILE_CHOICES)}"]
    m, n, w = choice
    info = compile_dkdv(*choice)
    if not info.ok:
        return [f"{choice}: {info.error}"]
    if info.spills:
        acc = 2 * n * 128 // (w * 32)
        return [f"{choice}: {info.spills} words per thread spilled to local memory ({info.registers} registers per "
                f"thread). dK and dV alone are 2·{n}·128 float32 / ({w}·32 threads) = {acc} registers per thread, "
                f"and Pᵀ, dPᵀ, dSᵀ ({n}×{m}) come on top, of the 255 a thread may have"]
    if choice != best:
        return [f"{choice}: it fits ({info.registers} registers, {info.shared_bytes:,} bytes of shared memory, no "
                f"spills), but {best} fits too with a key tile of {best[1]}: Q and dO are read once per key tile, "
                f"⌈N/{n}⌉ times against ⌈N/{best[1]}⌉"]
    return []


DKDV_TILES = ValueExercise(
    id="backward.dkdv_tiles",
    title="Decide: the dK/dV kernel's tiles, from its registers",
    question=("The dK/dV kernel at D = 128 in bf16, 3 stages, for an H100/H200. Of the launches (BLOCK_M, BLOCK_N, "
              f"num_warps) in {list(TILE_CHOICES)}, which has the largest key tile BLOCK_N (then the largest "
              "BLOCK_M) and compiles without spilling registers? Compile them (backward.compile_dkdv) and read "
              "registers, spills and shared_bytes."),
    expected=_best_tiles,
    compare=_compare_tiles,
    hints=("Each program keeps dK and dV, BLOCK_N×128 float32 each, in registers for its whole loop.",
           "A thread has at most 255 registers; more warps share the accumulators.",
           "gpuprinciples.course.exercises.backward.compile_dkdv(64, 128, 8) returns the compiled kernel's facts."),
)

EXERCISES = (SAVED_MIB, MATMULS, ATTENTION_LSE, ATTENTION_BACKWARD, ATTENTION_FUNCTION, DKDV_TILES)
