"""Requirements: what the counters must show. Each returns None when met, else a sentence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .cases import Case
from .compare import _fmt_bytes

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
        from ...toolchain.gpucompile import LOW_PRECISION_DOTS
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


COPY_ADVICE = ("a copy of an input (x.contiguous() of a strided view, a .to() or .clone()) moves it through memory "
               "twice: read it where it is, with its strides, in the kernel")


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
                       if counts.get("cached_reread_bytes") else "")
                    + (f"; {COPY_ADVICE}" if counts["torch_bytes"] > (self.factor - 1) * least else ""))
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
                    f"allows; {COPY_ADVICE}")
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
