"""Live loads: which region of which input a kernel read, traced, and judged against what a case needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from .cases import Case
from .compare import _unravel


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
        from ...machine import runtime
        from ...measure import counters
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
