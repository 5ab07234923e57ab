"""Exercises declared as data.

An exercise says what a learner must write and how it is judged; the grader (`grading.py`)
does the judging. Nothing here runs learner code.

Two kinds:

* `FunctionExercise`: the learner writes a function. The grader draws `Case`s (fresh inputs with
  a secret seed), computes the `reference` in its own process, runs the learner function in a child
  process under the counters, compares, checks the `requirements`, and on a GPU times it against
  the `Timing` baselines.
* `ValueExercise`: the learner computes a number or picks an answer (a prediction, an arithmetic
  intensity, a bound). Graded in the notebook's own process: nothing of the learner's runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One trial: the arguments the learner function is called with.

    `args` are built in the grader's process on the CPU and moved to the grading device in the
    child. `decoy` has the same shapes and other values: it is called first (warm-up, autotuning,
    and a function that caches its last answer then returns the wrong one).
    """

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    decoy: tuple | None = None


# A GPU grades some kernels in bf16 or fp16 where a CPU's cases are float32 (the interpreter's speed, and
# float32's tight tolerance). A kernel a GPU's compiler refuses in those dtypes (`tl.dot` of float32 by
# bf16, `tl.cos` on bf16) would then pass on a CPU and fail on a GPU. So a CPU grades a few small cases in
# the GPU's dtypes too, and their launches are compiled for sm_90 like every other ("One verdict everywhere").
GPU_HALF_DTYPES = (torch.bfloat16, torch.float16)


def dtype_plan(specs: Sequence, mode: str) -> list[tuple[Any, torch.dtype]]:
    """Each case spec with its dtype: float32 on a CPU, bf16 and fp16 in turn on a GPU; on a CPU the second
    spec (a small one) once more in each of the GPU's dtypes (GPU_HALF_DTYPES), so that its launches are
    compiled for sm_90 as a GPU compiles them."""
    if mode == "cpu":
        return [(spec, torch.float32) for spec in specs] + [(specs[1], dtype) for dtype in GPU_HALF_DTYPES]
    return [(spec, GPU_HALF_DTYPES[i % len(GPU_HALF_DTYPES)]) for i, spec in enumerate(specs)]


# ---------------------------------------------------------------------------------------------
# Size regimes. A kernel right only while its grid fits the SMs, while K fits one tile, or while the context is
# short would pass a CPU whose cases are all small and fail a GPU's. So an exercise states, as data, the regimes
# its GPU cases (and timed inputs, whose outputs are checked) reach, and a CPU grades one case of each, at the
# smallest size that reaches it ("One verdict everywhere").
# ---------------------------------------------------------------------------------------------

H200_SMS = 132


@dataclass(frozen=True)
class Regime:
    words: str  # what the case reaches, appended to its label
    spec: Callable[[torch.Generator], Any]  # the exercise's own case spec, drawn at the smallest size that reaches it


def regime_specs(regimes: Sequence[Regime], gen: torch.Generator, mode: str) -> list[tuple[Any, str]]:
    """(spec, words) of each regime a CPU grades besides its small cases; none on a GPU (its cases reach them).
    Sizes come from a generator of their own, seeded from `gen`'s seed: `gen` does not advance, so the other
    cases of a seed stay what they were (the adversarial tests' fixed seeds)."""
    if mode != "cpu":
        return []
    own = torch.Generator().manual_seed((gen.initial_seed() * 31 + 27) % 2**62)
    return [(r.spec(own), r.words) for r in regimes]


# ---------------------------------------------------------------------------------------------
# Tolerances: per output dtype. float32 is held to 1e-5 (the contract says no looser than 1e-4).
# ---------------------------------------------------------------------------------------------

TOLERANCES: dict[torch.dtype, tuple[float, float]] = {  # dtype -> (rtol, atol)
    torch.float64: (1e-9, 1e-12),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}


# ---------------------------------------------------------------------------------------------
# Requirements: what the counters must show. Each returns None when met, else a sentence.
# `counts` is the dict a `counters.Recording` turns into (see counters.py for the keys).
# ---------------------------------------------------------------------------------------------


class Requirement:
    """A rule about how the answer was computed, judged from the counters of one case."""

    #: checked only in these modes ("cpu" = under the Triton interpreter, "gpu")
    modes: tuple[str, ...] = ("cpu", "gpu")

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def evaluate(self, counts: dict, case: Case) -> str | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def evaluate_part(self, counts: dict, case: Case) -> str | None:
        """On a machine outside `modes`: a failure judged from what this machine does count (a part of
        the requirement, enough to fail it), else None. One verdict: whatever fails here fails there."""
        return None


@dataclass(frozen=True)
class LaunchesTriton(Requirement):
    """At least one Triton kernel must run: the point of the exercise is to write one."""

    def describe(self) -> str:
        return "launches a Triton kernel"

    def evaluate(self, counts, case):
        if counts["triton_launches"] == 0:
            return "no Triton kernel was launched: the work must be done in a @triton.jit kernel"
        return None


@dataclass(frozen=True)
class CompilesForGPU(Requirement):
    """Every kernel launched compiles, as launched, for an H100/H200: under the interpreter the grader
    compiles each one for sm_90 (gpucompile.py), so a CPU pass means a GPU accepts the code too. Every
    exercise that asks for a Triton launch gets this one (FunctionExercise adds it)."""

    no_evidence = "no Triton kernel was compiled"

    def describe(self) -> str:
        return "compiles for an H100/H200 GPU (sm_90)"

    def has_evidence(self, counts) -> bool:
        return bool(counts.get("compiled"))

    def evaluate_error(self, error: str, case) -> str | None:
        """A case whose launch the compiler refused raised (on a GPU, Triton's CompilationError; on a CPU, the
        sm_90 compile's refusal): it fails this requirement on both machines, not only the case."""
        return error if "does not compile for" in error else None

    def evaluate(self, counts, case):
        refused = [c for c in counts.get("compiled") or () if not c["ok"]]
        if refused:
            return refused[0]["error"] + (f" ({len(refused) - 1} more kernel(s) refused)" if len(refused) > 1 else "")
        return None


@dataclass(frozen=True)
class WritesEveryOutput(Requirement):
    """Every element of the returned tensor was written by a Triton store during the call itself.
    Work done anywhere else (PyTorch with the counters switched off, NumPy, another process, a thread,
    an answer kept from an earlier call) would have to reach the result some other way; the store
    addresses say it did not. Counted under the interpreter, where every store is seen; every function
    exercise with LaunchesTriton gets it (FunctionExercise adds it)."""

    modes: tuple[str, ...] = ("cpu",)
    no_evidence = "the stores were not tracked"

    def describe(self) -> str:
        return "every output element written by its kernel in the call"

    def has_evidence(self, counts) -> bool:
        return "output_unwritten" in counts

    def evaluate(self, counts, case):
        missing = counts.get("output_unwritten")
        if missing:
            return (f"{missing:,} of the {counts['output_elements']:,} output elements were not written by a Triton "
                    f"store in this call (case {case.label}): every element of the result must come from your "
                    "kernel, not from PyTorch, NumPy, another process or an earlier call")
        changed = counts.get("output_changed")
        if changed:
            return (f"{changed:,} of the {counts['output_elements']:,} output elements hold other values than your "
                    f"kernel stored there (case {case.label}): something changed them after the kernel ran; return "
                    "what your kernel wrote")
        lazy = counts.get("returned_not_plain")
        if lazy:
            return (f"returned a {lazy[0]}, not a plain torch.Tensor (case {case.label}): a tensor subclass or lazy "
                    "value computes its elements outside the call; return the tensor your kernel wrote")
        return None


@dataclass(frozen=True)
class UsesTensorCores(Requirement):
    """Every launched kernel that multiplies bf16/fp16 tiles with tl.dot does it on Hopper's tensor cores:
    its PTX holds `wgmma` (read from the kernel compiled for an H100/H200, or from the GPU's own). At
    least one launched kernel must have such a tl.dot."""

    def describe(self) -> str:
        return "its bf16/fp16 tl.dot runs on tensor cores (wgmma)"

    def evaluate(self, counts, case):
        from ..gpucompile import LOW_PRECISION_DOTS
        compiled = [c for c in counts.get("compiled") or () if c["ok"]]
        low = [c for c in compiled if set(c["dots"]) & set(LOW_PRECISION_DOTS)]
        if not low:
            seen = sorted({d for c in compiled for d in c["dots"]})
            return (f"no kernel multiplied bf16 or fp16 tiles with tl.dot in case {case.label}"
                    + (f" (its tl.dot operands were {', '.join(seen)})" if seen else "")
                    + ": tensor cores run bf16/fp16 matrix products; load the tiles in bf16 and tl.dot them")
        slow = [c for c in low if not c["wgmma"]]
        if slow:
            c = slow[0]
            return (f"kernel `{c['kernel']}`'s tl.dot did not become Hopper's wgmma (num_warps={c['num_warps']}; "
                    f"{c['signature']}): wgmma needs a warpgroup, num_warps a multiple of 4, and tiles of at least "
                    "64 rows (BLOCK_M ≥ 64); smaller tiles run on the older, slower mma instructions")
        return None


@dataclass(frozen=True)
class MaxLaunches(Requirement):
    """At most `n` Triton launches per call (fusion means one)."""

    n: int = 1

    def describe(self) -> str:
        return f"at most {self.n} kernel launch{'es' if self.n != 1 else ''}"

    def evaluate(self, counts, case):
        k = counts["triton_launches"]
        if k > self.n:
            names = ", ".join(counts.get("kernel_names", [])) or "?"
            return (f"{k} Triton launches per call ({names}); at most {self.n} allowed: "
                    f"every extra launch sends the data back to memory and reads it again")
        return None


@dataclass(frozen=True)
class NoTorchCompute(Requirement):
    """No PyTorch operator may do the arithmetic: allocations and views only."""

    def describe(self) -> str:
        return "no PyTorch compute (allocations and views only)"

    def evaluate(self, counts, case):
        ops = counts["torch_compute_ops"]
        if ops:
            listed = ", ".join(f"{name} ×{n}" for name, n in sorted(ops.items()))
            return f"PyTorch operators did work that the kernel must do: {listed}"
        return None


def memory_bytes(counts: dict) -> int:
    """Bytes moved (Triton loads and stores, PyTorch copies), less re-reads of inputs an exercise
    names as cached (BytesWithin.cached): those reach memory once."""
    return (counts["load_bytes"] + counts["store_bytes"] + counts["torch_bytes"]
            - (counts.get("cached_reread_bytes") or 0))


@dataclass(frozen=True)
class BytesWithin(Requirement):
    """Bytes moved (Triton loads + stores, plus any PyTorch copies) ≤ factor × the minimum.

    `minimum(case)` is the fewest bytes a correct kernel must move: every input element read
    once and every output element written once. Counted under the interpreter only, where each
    masked-on lane of each load and store is seen.

    `cached(args)` names small inputs that every program reads (a layer norm's weight and bias): a
    GPU's L2 cache serves their re-reads, so memory sees each of their bytes once and so does this
    count. Re-reading anything else counts every time.
    """

    minimum: Callable[[Case], int]
    factor: float = 1.1
    modes: tuple[str, ...] = ("cpu",)
    cached: Callable[[tuple], tuple] | None = None

    def describe(self) -> str:
        return f"moves at most {self.factor:g} × the minimum bytes"

    def evaluate(self, counts, case):
        moved = memory_bytes(counts)
        least = self.minimum(case)
        if moved > self.factor * least:
            return (f"moved {_fmt_bytes(moved)} where {_fmt_bytes(least)} is the minimum "
                    f"({moved / least:.2f}×, at most {self.factor:g}× allowed) in case {case.label}: "
                    f"loads {_fmt_bytes(counts['load_bytes'])}, stores {_fmt_bytes(counts['store_bytes'])}"
                    + (f", PyTorch copies {_fmt_bytes(counts['torch_bytes'])}" if counts["torch_bytes"] else "")
                    + (f", less {_fmt_bytes(counts['cached_reread_bytes'])} of cached re-reads"
                       if counts.get("cached_reread_bytes") else ""))
        return self._reads_the_input(counts, case)

    def evaluate_part(self, counts, case):
        """On a GPU the loads and stores are not counted, PyTorch's copies are (the dispatcher sees them on
        both machines): a kernel reads every input byte and writes every output byte at least once, so
        copies beyond (factor − 1) × the minimum alone take the bytes past the budget, as on a CPU."""
        least = self.minimum(case)
        copied = counts.get("torch_bytes") or 0
        if copied > (self.factor - 1) * least:
            return (f"PyTorch copies {_fmt_bytes(copied)} in case {case.label}, on top of what the kernel moves "
                    f"(at least the minimum, {_fmt_bytes(least)}): more than the {self.factor:g}× budget "
                    "allows; a copy of an input (x.contiguous() of a strided view, a .to() or .clone()) moves "
                    "it through memory twice: read it where it is, with its strides, in the kernel")
        return None

    def _reads_the_input(self, counts, case):
        # at least the input: a kernel that reads less did not do the work (NumPy or hidden PyTorch did)
        need, read = counts.get("input_bytes"), counts.get("input_load_bytes")
        if need and read is not None and read < need:
            return (f"the Triton kernel read {_fmt_bytes(read)} of the {_fmt_bytes(need)} of input in case "
                    f"{case.label}: the work was done outside the kernel; every input element must pass "
                    f"through it")
        return None


@dataclass(frozen=True)
class NoTensorOf(Requirement):
    """No tensor of `numel(case)` elements or more may be created while the function runs."""

    numel: Callable[[Case], int]
    what: str = "N×N"

    def describe(self) -> str:
        return f"allocates no {self.what} tensor"

    def evaluate(self, counts, case):
        largest = counts["largest_new_numel"]
        if largest >= self.numel(case):
            return (f"a tensor of {largest:,} elements was created in case {case.label}: "
                    f"that is an {self.what} intermediate, which this exercise must avoid")
        return None


@dataclass(frozen=True)
class LiveLoads:
    """Which elements of one input a kernel may load, and how often, judged element by element.

    `live(args)` gives, for input `args[arg]`, a tensor of its shape: how many times each element is
    needed (0: it must never be read: a position past a sequence's length, a page no table entry points
    to; 1: once; 2: by two readers, a page two sequences share). Judged over the input's whole storage,
    so an element of the buffer outside the view is never live. Three rules, each a sentence:

    * nothing is loaded where nothing is needed;
    * the loads of live elements total at most `factor` × what is needed (None: no bound);
    * every live element is loaded at least once: a kernel that does the work reads it.

    Per-element loads need a traced run (`counters.record(trace=True)`, the interpreter only), so this
    is not a `Requirement` (those see the counters' totals): an exercise's `run` calls `traced_run` in
    the grading child, and its `compare` calls `judge_live_loads` in the grader.
    """

    arg: int
    name: str
    live: Callable[[tuple], torch.Tensor]
    factor: float | None = 1.1
    what: str = "elements that are not live"  # what a forbidden read touched, in words
    once: str = "once"  # how often a live element should be read, in words
    modes: tuple[str, ...] = ("cpu",)

    def describe(self) -> str:
        bound = f", each live element {self.once} (at most {self.factor:g}× in all)" if self.factor else ""
        return f"loads of {self.name}: none of {self.what}{bound}"


def traced_run(regions: Sequence[LiveLoads]):
    """An exercise `run` (called in the grading child) that also counts, under the interpreter, the loads
    of every element of the inputs `regions` name: {"out", "device", "loads": {arg: int64 tensor over
    the input's storage, keyed by str(arg)} or None on a GPU}."""
    def run(fn, args, kwargs):
        from .. import counters, runtime
        if not runtime.INTERPRETER:
            out = fn(*args, **kwargs)
            return {"out": out, "device": getattr(getattr(out, "device", None), "type", None), "loads": None}
        with counters.record(trace=True, torch_ops=False) as rec:
            out = fn(*args, **kwargs)
        loads = {str(r.arg): torch.from_numpy(counters.load_counts(rec, args[r.arg])) for r in regions}
        del rec
        # which inputs share a buffer here, in the child (the trip from the grader may have copied them apart)
        loads["storage"] = [args[r.arg].untyped_storage().data_ptr() for r in regions]
        return {"out": out, "device": getattr(getattr(out, "device", None), "type", None), "loads": loads}
    return run


def _storage_view(t: torch.Tensor, values: torch.Tensor, fill=0) -> torch.Tensor:
    """A flat tensor as long as t's storage (in elements), holding `values` (t's shape) where t's
    elements sit and `fill` elsewhere."""
    n = t.untyped_storage().nbytes() // t.element_size()
    flat = torch.full((n,), fill, dtype=values.dtype)
    flat.as_strided(t.shape, t.stride(), t.storage_offset()).copy_(values)
    return flat


class LoadReason(str):
    """A reason about what a kernel read (a `LiveLoads` rule), not about the values it returned: a `compare`
    may return it beside value reasons, and the case's values still count as right (judge.judge_case)."""


def judge_live_loads(regions: Sequence[LiveLoads], loads: dict, case: Case) -> list[str]:
    """At most one sentence per rule for this case, from the per-element load counts a `traced_run` sent
    back. Inputs that shared a storage where the kernel ran (K and V halves of one buffer) are judged
    together: what either may read is live there."""
    by_storage: dict[int, list[LiveLoads]] = {}
    for r, storage in zip(regions, loads["storage"]):
        by_storage.setdefault(storage, []).append(r)
    stray, missing, over = [], [], []
    for group in by_storage.values():
        counts = loads[str(group[0].arg)].to(torch.int64)
        needed = sum(_storage_view(case.args[r.arg], r.live(case.args).to(torch.int64)) for r in group)
        name = " / ".join(r.name for r in group)

        def index(e: int) -> str:
            """Storage element e as an index of the tensor it belongs to."""
            for r in group:
                t = case.args[r.arg]
                flat = int(_storage_view(t, torch.arange(t.numel()).view(t.shape), fill=-1)[e])
                if flat >= 0:
                    return f"{r.name}{list(_unravel(flat, tuple(t.shape)))}"
            return f"element {e} of the buffer under {name}, outside the tensor"

        bad = (counts > 0) & (needed == 0)
        if bool(bad.any()):
            stray.append(f"{int(bad.sum()):,} of {name} ({group[0].what}; the first at "
                         f"{index(int(torch.nonzero(bad)[0]))})")
        skipped = (needed > 0) & (counts == 0)
        if bool(skipped.any()):
            missing.append(f"{int(skipped.sum()):,} of {name} (the first at {index(int(torch.nonzero(skipped)[0]))})")
        factor, live = group[0].factor, needed > 0
        live_loads, need = int(counts[live].sum()), int(needed.sum())
        if factor is not None and need and live_loads > factor * need:
            most = int((counts[live] / needed[live]).max())
            size = case.args[group[0].arg].element_size()
            over.append((f"of {name} {live_loads / need:.2f}× over ({live_loads * size:,} bytes where {need * size:,} "
                         f"are needed, one element up to {most} times; at most {factor:g}× allowed)", group[0].once))
    reasons = []
    if stray:
        reasons.append(f"loaded elements that must not be read in case {case.label}: " + "; ".join(stray))
    if missing:
        reasons.append(f"live elements never loaded by a Triton kernel in case {case.label}: " + "; ".join(missing)
                       + ". The work was done outside the kernel, or part of the input was skipped")
    if over:
        reasons.append("loaded the live elements " + "; ".join(words for words, _ in over) + f" in case {case.label}: "
                       f"read each live element {over[0][1]}")
    return [LoadReason(r) for r in reasons]


# ---------------------------------------------------------------------------------------------
# Timing on a GPU
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """How to time a solution on a GPU, and what it must reach there.

    `inputs(generator, device)` makes large inputs directly on the device. The learner's
    function and each baseline are timed interleaved in one run (timing.py).
    """

    inputs: Callable[[torch.Generator, str], tuple]
    baselines: dict[str, Callable]
    min_bytes: Callable[[tuple], int]
    flops: Callable[[tuple], int] = lambda args: 0
    # baseline name -> the lower end of the speedup's interval must reach this
    min_speedup: dict[str, float] = field(default_factory=dict)
    # achieved bandwidth (min_bytes / median time) over the measured copy ceiling
    min_bandwidth_fraction: float | None = None
    # False for overhead-bound code: no L2 flush and no GPU hold before each call, so the host's
    # dispatching is in the time (timing.py)
    flush: bool = True
    # more timed inputs, each judged on its own (a ragged shape beside a square one); `label` names one
    label: str = ""
    also: tuple["Timing", ...] = ()

    def each(self) -> list["Timing"]:
        """This timing and every one in `also`, in order."""
        return [self, *self.also]

    def __post_init__(self):
        compiled_names = [name for name, fn in self.baselines.items() if getattr(fn, "is_compiled", False)]
        if compiled_names and not self.flush:
            raise ValueError(f"baseline {compiled_names[0]!r} is torch.compile'd, so it cannot be timed with "
                             "flush=False: the counters it would run under make torch.compile fall back to eager")


def compiled(fn: Callable) -> Callable:
    """`torch.compile(fn)`, compiled on first call: importing torch._dynamo costs seconds, and only
    a timing run on a GPU needs it."""
    cache: list[Callable] = []

    def call(*args, **kwargs):
        if not cache:
            cache.append(torch.compile(fn))
        return cache[0](*args, **kwargs)

    call.__name__ = call.__qualname__ = f"compiled_{fn.__name__}"
    call.is_compiled = True
    return call


# ---------------------------------------------------------------------------------------------
# The two kinds of exercise
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionExercise:
    id: str
    title: str
    signature: str
    cases: Callable[[torch.Generator, str], list[Case]]  # (generator, mode) -> cases
    reference: Callable[..., Any]  # computed in the grader's process, on the CPU
    requirements: tuple[Requirement, ...] = ()
    timing: Timing | None = None
    # compare(got, expected, case) -> reasons; default: `compare_tensors` on one output
    compare: Callable[[Any, Any, Case], list[str]] | None = None
    # run(fn, args, kwargs) in the child, returning what is compared; default fn(*args, **kwargs)
    run: Callable | None = None
    # the inputs are read-only for the learner; set False where the exercise mutates them
    inputs_read_only: bool = True
    # `run` starts distributed ranks (distributed.run_ranks): the child forks a clean zygote for them first
    forks_ranks: bool = False
    timeout_s: float = 120.0
    hints: tuple[str, ...] = ()
    # "module:function" of the package's reference solution (tests and `gpuprinciples bench` use it)
    solution: str | None = None
    # what `compare` judges beyond correctness, in words, for the exercise table: (modes, words)
    judges: tuple[tuple[tuple[str, ...], str], ...] = ()
    kind: str = "function"

    def __post_init__(self):
        # One verdict everywhere: an exercise that asks for a Triton kernel also asks that a GPU accept it,
        # and that its kernels wrote every element of what the learner's function returned (its own `run` or not)
        kinds = [type(r) for r in self.requirements]
        if LaunchesTriton in kinds:
            implied = [r for r in (CompilesForGPU(), WritesEveryOutput()) if type(r) not in kinds]
            at = kinds.index(LaunchesTriton) + 1
            object.__setattr__(self, "requirements", (*self.requirements[:at], *implied, *self.requirements[at:]))


@dataclass(frozen=True)
class ValueExercise:
    id: str
    title: str
    question: str
    expected: Callable[[], Any]  # computed when checked (it may use this machine's ceilings)
    rel_tol: float = 0.02
    # compare(answer, expected) -> reasons; default: a number within rel_tol, or equality
    compare: Callable[[Any, Any], list[str]] | None = None
    hints: tuple[str, ...] = ()
    kind: str = "value"
    prediction: bool = False  # asked before a measurement shows the answer: check() grades the first answer given


Exercise = FunctionExercise | ValueExercise


# ---------------------------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------------------------


def compare_tensors(got: Any, expected: torch.Tensor, case: Case | None = None,
                    dtype: torch.dtype | None = None) -> list[str]:
    """Type, shape, dtype, NaN/Inf positions and values, each failure a sentence.

    `expected` may be computed in higher precision; `dtype` is the dtype the learner must return
    (default: `expected.dtype`). The tolerance is the one of `dtype`.
    """
    where = f" (case {case.label})" if case is not None else ""
    dtype = dtype or expected.dtype
    if type(got) is not torch.Tensor:
        return [f"returned a {type(got).__module__}.{type(got).__qualname__}, not a torch.Tensor{where}"]
    if tuple(got.shape) != tuple(expected.shape):
        return [f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}{where}"]
    if got.dtype != dtype:
        return [f"dtype {got.dtype}, expected {dtype}{where}"]
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-5))
    g = got.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    g_nan, e_nan = torch.isnan(g), torch.isnan(e)
    if not torch.equal(g_nan, e_nan):
        extra = int((g_nan & ~e_nan).sum())
        missing = int((e_nan & ~g_nan).sum())
        return [f"NaN in the wrong places{where}: {extra} unexpected NaN, {missing} expected NaN missing"]
    g_inf = torch.isinf(g)
    e_inf = torch.isinf(e)
    if not torch.equal(g_inf, e_inf) or not torch.equal(g[g_inf], e[e_inf]):
        return [f"±Inf in the wrong places{where}"]
    finite = ~(e_nan | e_inf)
    err = (g[finite] - e[finite]).abs()
    bound = atol + rtol * e[finite].abs()
    bad = err > bound
    if bool(bad.any()):
        n_bad = int(bad.sum())
        flat_bad = torch.nonzero(bad.flatten()).flatten()
        first = int(flat_bad[0])
        gi = g[finite].flatten()[first].item()
        ei = e[finite].flatten()[first].item()
        index = _unravel(int(torch.nonzero(finite.flatten()).flatten()[first]), tuple(e.shape))
        return [f"{n_bad:,} of {finite.sum().item():,} values wrong{where}; first at index {index}: "
                f"got {gi:.6g}, expected {ei:.6g} (max error {err.max().item():.3g}, "
                f"tolerance rtol={rtol:g}, atol={atol:g} for {dtype})"]
    return []


def output_problems(out, device: str, want: torch.Tensor, dtype: torch.dtype, where: str, *,
                    shape_note: str = "", dtype_note: str = "the inputs' dtype") -> list[str]:
    """For an exercise whose `run` sends back its output with the device it was on: the first of not a
    plain tensor (`out` may be the child's description of what came back), another device, another
    shape, another dtype; [] when none."""
    from .. import runtime
    if type(out) is not torch.Tensor:
        return [f"returned {out if isinstance(out, str) else type(out).__name__}, not a torch.Tensor{where}"]
    if device != runtime.DEVICE:
        return [f"returned a tensor on {device}, expected it on {runtime.DEVICE}{where}"]
    if tuple(out.shape) != tuple(want.shape):
        return [f"shape {tuple(out.shape)}, expected {tuple(want.shape)}{shape_note}{where}"]
    if out.dtype != dtype:
        return [f"dtype {out.dtype}, expected {dtype} ({dtype_note}){where}"]
    return []


def compare_values(answer: Any, expected: Any, rel_tol: float) -> list[str]:
    """A learner's number (within rel_tol) or categorical answer (equal, case-insensitive)."""
    if isinstance(expected, str):
        if not isinstance(answer, str) or answer.strip().lower() != expected.lower():
            return [f"answered {answer!r}; that is not it"]
        return []
    if isinstance(expected, (int, float)):
        try:
            value = float(answer)
        except (TypeError, ValueError):
            return [f"answered {answer!r}: expected a number"]
        if math.isnan(value) or not math.isclose(value, expected, rel_tol=rel_tol, abs_tol=1e-12):
            if rel_tol < 1e-6:  # an exact answer (a count): no tolerance to state
                return [f"answered {value:.6g}; not it: this answer is exact, with no tolerance"]
            return [f"answered {value:.4g}; off by more than {_percent(rel_tol)} (the tolerance)"]
        return []
    if answer != expected:
        return [f"answered {answer!r}; that is not it"]
    return []


def _percent(fraction: float) -> str:
    """A tolerance in words that never reads "0%": 2%, 0.1%, 1e-06 (exact to rounding)."""
    if fraction >= 0.01:
        return f"{fraction:.0%}" if fraction * 100 == round(fraction * 100) else f"{fraction:.1%}"
    return f"{fraction * 100:.2g}%"


def _unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size if size else 0)
        flat //= max(size, 1)
    return tuple(reversed(out))


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n} B"


def cached_inputs(exercise, args: tuple) -> list:
    """The inputs whose re-reads the exercise's BytesWithin counts once (see BytesWithin.cached)."""
    return [t for r in getattr(exercise, "requirements", ()) if isinstance(r, BytesWithin) and r.cached
            for t in r.cached(args)]
