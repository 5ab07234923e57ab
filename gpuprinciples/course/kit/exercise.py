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

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .cases import Case
from .requirements import BytesWithin, CompilesForGPU, LaunchesTriton, Requirement, WritesEveryOutput

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
    # the package's kernels that go further than the lesson's solution ("how far it goes"): name -> "module:function"
    # with the solution's signature; `gpuprinciples bench` times each beside it where it runs (a ValueError where not)
    further: dict[str, str] = field(default_factory=dict)
    # what `compare` judges beyond correctness, in words, for the exercise table: (modes, words)
    judges: tuple[tuple[tuple[str, ...], str], ...] = ()
    kind: str = "function"
    # a GPU case timed by `run` itself (kwargs["timed"]): how to count its least work, for the report's roof
    timed_roof: Any = None  # steproof.TimedRoof

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


def cached_inputs(exercise, args: tuple) -> list:
    """The inputs whose re-reads the exercise's BytesWithin counts once (see BytesWithin.cached)."""
    return [t for r in getattr(exercise, "requirements", ()) if isinstance(r, BytesWithin) and r.cached
            for t in r.cached(args)]
