"""The compile pass: on a CPU, the learner's host code runs on the GPU's own cases, and every kernel it
launches is compiled for the GPU with that launch's signature, constexprs and specialisation, and run
nowhere. A kernel whose tiles, stages or page handling are chosen from the input's size (a 128×256×128
tile with 4 stages for a large matmul, a tl.dot of K = 8 for a page of 8) is compiled as an H200 would
compile it, so what the H200 refuses fails on a laptop too, with the compiler's sentence.

The GPU's cases, and the inputs it times, are drawn here, in the grader, once per exercise and process
(their shapes, dtypes and strides are what matter: `plan`); their large floating-point tensors cross to the
child as a shape alone and are made there with `torch.empty_strided` (no values: a compile reads none;
untouched pages cost nothing). Integer tensors and small ones keep their values: host code sizes its grid and
its buffers from them (a decode's `seq_lens`, a page table). Compiles are cached by (source, signature)
(gpucompile.py). Code that raises on one of these before launching anything fails: on a GPU it raises there too.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

# the other GPU generations each kernel of the compile pass is compiled for (Triton bundles their ptxas):
# the verdict is sm_90's (the H100/H200 a GPU run grades on); these are reported
GENERATIONS = {80: "sm_80 (A100)", 90: "sm_90 (H100/H200)", 100: "sm_100 (B200)"}
VERDICT_TARGET = "cuda sm_90"

# a floating-point tensor up to this many elements keeps its values (host code may read a few)
KEEP_VALUES = 4096

_plans: dict[str, list[dict]] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Blank:
    """A tensor that crosses as its layout only; the child makes it with torch.empty_strided."""

    shape: tuple
    stride: tuple
    offset: int
    dtype: str
    storage: int  # elements of the storage it views


def _describe(value):
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and value.numel() > KEEP_VALUES:
            elements = value.untyped_storage().nbytes() // value.element_size()
            return Blank(tuple(value.shape), tuple(value.stride()), value.storage_offset(),
                         str(value.dtype).replace("torch.", ""), elements)
        return value
    if isinstance(value, tuple):
        return tuple(_describe(v) for v in value)
    if isinstance(value, list):
        return [_describe(v) for v in value]
    if isinstance(value, dict):
        return {k: _describe(v) for k, v in value.items()}
    return value


# random floating-point factories, whose values a compile never reads: the timed inputs' large tensors are made
# as torch.empty (a 2^28-element torch.randn takes seconds on a laptop; untouched empty pages cost nothing)
_RANDOM_FLOATS = {torch.randn: torch.empty, torch.rand: torch.empty, torch.randn_like: torch.empty_like,
                  torch.rand_like: torch.empty_like}


class _BlankFloats(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        blank = _RANDOM_FLOATS.get(func)
        if blank is not None:
            kwargs.pop("generator", None)
            return blank(*args, **kwargs)
        return func(*args, **kwargs)


def _timed_inputs(exercise) -> list[dict]:
    """The inputs the GPU times (and checks the answer on), as compile-pass cases called as the timing calls the
    learner's function: directly. A kernel chosen by size only at the timed size (a larger tile for a large
    matmul, a split for a long cache) is compiled as the H200 compiles it."""
    timing = getattr(exercise, "timing", None)
    out = []
    for spec in timing.each() if timing else ():
        with _BlankFloats():
            args = spec.inputs(torch.Generator().manual_seed(27), "cpu")
        label = "the timed input" + (f" ({spec.label})" if spec.label else "")
        out.append({"label": label, "args": _describe(tuple(args)), "kwargs": {}, "direct": True})
    return out


def plan(exercise) -> list[dict]:
    """The GPU's cases of `exercise` and its timed inputs, as the compile pass sends them: {"label", "args",
    "kwargs", "direct" (called without the exercise's `run`)}."""
    with _lock:
        if exercise.id not in _plans:
            cases = exercise.cases(torch.Generator().manual_seed(27), "gpu")
            _plans[exercise.id] = [{"label": c.label, "args": _describe(c.args), "kwargs": _describe(c.kwargs)}
                                   for c in cases] + _timed_inputs(exercise)
        return _plans[exercise.id]


# ---------------------------------------------------------------------------------------------
# The child's side
# ---------------------------------------------------------------------------------------------


def materialise(value):
    if isinstance(value, Blank):
        storage = torch.empty(value.storage, dtype=getattr(torch, value.dtype))
        return storage.as_strided(value.shape, value.stride, value.offset)
    if isinstance(value, tuple):
        return tuple(materialise(v) for v in value)
    if isinstance(value, list):
        return [materialise(v) for v in value]
    if isinstance(value, dict):
        return {k: materialise(v) for k, v in value.items()}
    return value


def run(exercise, fn, cases: list[dict], follow_placement: bool = False) -> list[dict]:
    """Per GPU case: {"label", "compiled": [CompiledInfo dicts], "error": a refusal raised by a launch or
    None, "host_error": any other exception the learner's code raised, in words, or None}. The host code runs
    as in a graded case: with `follow_placement` (a kernel exercise under the interpreter), under the placement
    watch, where a tensor the GPU would hold says so (`assert x.is_cuda` holds)."""
    from triton.backends.compiler import GPUTarget

    from ..measure import counters, placement
    from ..toolchain import gpucompile, interpreter
    def direct(f, a, k):  # as the timing calls it
        return f(*a, **k)

    runner = exercise.run or direct
    others = [GPUTarget("cuda", arch, 32) for arch in GENERATIONS if arch != 90]
    out = []
    for case in cases:
        args, kwargs = materialise(case["args"]), materialise(case["kwargs"])
        error = host_error = None
        placed = placement.watch((args, kwargs)) if follow_placement else contextlib.nullcontext()
        with counters.record() as rec, counters.compile_only(others), interpreter.autotune_compiles_every_config():
            try:
                with placed:
                    (direct if case.get("direct") else runner)(fn, args, kwargs)
            except gpucompile.GPUCompileError as exc:  # a warm-up or an autotuner met a refusal
                error = str(exc)
            except Exception as exc:  # noqa: BLE001 - the compiler's own exception, or host code on blank values
                error = gpucompile.compile_error_sentence(exc)
                if error is None:
                    host_error = f"{type(exc).__name__}: {str(exc)[:300]}"
        out.append({"label": case["label"], "compiled": list(rec.compiled.values()), "error": error,
                    "host_error": host_error})
        del args, kwargs
        if error or any(not c["ok"] for c in out[-1]["compiled"] if c["target"] == VERDICT_TARGET):
            break  # the first refusal is the verdict: the other cases' compiles would change nothing
    return out


def refusal(results: list[dict]) -> str | None:
    """The first refusal the compile pass met, in a sentence naming the GPU's case; None if none."""
    for result in results:
        refused = [c for c in result["compiled"] if not c["ok"] and c["target"] == VERDICT_TARGET]
        why = refused[0]["error"] if refused else result["error"]
        if why:
            return f"{why.rstrip('.')} (on a GPU's case, {result['label']}: compiled for the GPU here, not run)"
    return None


def unchecked(results: list[dict]) -> str | None:
    """A GPU case on which the learner's code raised before launching any kernel, in a sentence; None if none.
    On a GPU the same code raises there too, and its kernels were never compiled at that case's sizes."""
    raised = next((r for r in results if r.get("host_error") and not r["compiled"]), None)
    if raised is None:
        return None
    return (f"on a GPU's case ({raised['label']}: its shapes and dtypes, compiled here, not run) your code raised "
            f"{raised['host_error']} before launching any kernel; a GPU meets the same error there")


def accepted(results: list[dict]) -> int:
    """How many distinct kernels and signatures the compile pass compiled for sm_90."""
    return len({c["key"] or c["signature"] for r in results for c in r["compiled"] if c["target"] == VERDICT_TARGET})


def generations(results: list[dict]) -> dict[str, str]:
    """Per GPU generation: whether it compiles every kernel of the GPU's cases, in words."""
    out = {}
    for arch, name in GENERATIONS.items():
        mine = [c for r in results for c in r["compiled"] if c["target"] == f"cuda sm_{arch}"]
        refused = next((c for c in mine if not c["ok"]), None)
        if not mine:
            out[name] = "not compiled"
        elif refused:
            out[name] = "refuses: " + (refused["error"] or "?")[:300]
        else:
            out[name] = f"compiles all {len({c['key'] or c['signature'] for c in mine})} kernel signatures"
    return out
