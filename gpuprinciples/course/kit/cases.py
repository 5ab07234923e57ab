"""Cases: the inputs an exercise draws (fresh, from a secret seed), their dtypes per mode, and size regimes."""

from __future__ import annotations

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
