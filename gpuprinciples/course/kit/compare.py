"""Comparing an answer with the reference: tolerances per dtype, tensors element by element, values
within a relative tolerance."""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from .cases import Case

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
    from ...machine import runtime
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
