"""The roofline model: a kernel is limited by its arithmetic, by its memory traffic, or by overhead.

    time >= max(flops / peak_flops, bytes / bandwidth)

A kernel doing `flops` FLOPs over `bytes` bytes has arithmetic intensity flops / bytes. Below the
ridge point (peak_flops / bandwidth FLOPs per byte) memory limits it; above, compute does. When
the measured time sits far above both, neither is the limit: launch and Python overhead are.
"""

from __future__ import annotations

import numpy as np

from ...machine.specs import GPUSpec, dtype_key
from ...measure.calibrate import Ceilings

# The smallest time one kernel launch takes, whatever it does, as the model assumes it: a round
# 5 µs. A measured floor depends on the host (CPU, driver, load) as much as on the GPU: 14 to 25 µs
# on the H200 host of docs/measured.md#launch (2026-12-03); lesson 02 measures it. Work predicted to
# take less is overhead-bound.
LAUNCH_FLOOR_S = 5e-6
OVERHEAD_FACTOR = 3.0


def intensity(flops: float, bytes: float) -> float:
    """FLOPs per byte moved."""
    if bytes <= 0:
        raise ValueError("bytes moved must be positive")
    return flops / bytes


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The intensity (FLOP/byte) where the memory roof meets the compute roof."""
    return peak_flops / bandwidth


def attainable(peak_flops: float, bandwidth: float, intensity):
    """The highest FLOP/s a kernel of this intensity can reach: min(peak, bandwidth * intensity)."""
    out = np.minimum(peak_flops, bandwidth * np.asarray(intensity, dtype=float))
    return float(out) if out.ndim == 0 else out


def predict_time(flops: float, bytes: float, peak_flops: float, bandwidth: float,
                 overhead_s: float = 0.0) -> float:
    """Seconds the roofline model predicts: the slower of computing and moving, plus overhead."""
    return max(flops / peak_flops, bytes / bandwidth) + overhead_s


def bound(flops: float, bytes: float, peak_flops: float, bandwidth: float, *,
          overhead_s: float = LAUNCH_FLOOR_S, measured_s: float | None = None,
          factor: float = OVERHEAD_FACTOR) -> str:
    """"compute", "memory" or "overhead".

    Overhead: the work is below the launch floor `overhead_s`, or the measured time is more than
    `factor` times both the compute time and the memory time (neither explains it).
    """
    compute_s, memory_s = flops / peak_flops, bytes / bandwidth
    model_s = max(compute_s, memory_s)
    if model_s < overhead_s:
        return "overhead"
    if measured_s is not None and measured_s > factor * model_s:
        return "overhead"
    return "compute" if compute_s >= memory_s else "memory"


class Projection(float):
    """Predicted seconds on a GPU that is not here: a datasheet projection, never a measurement."""

    def __new__(cls, seconds: float, gpu: str, dtype: str, bound: str):
        self = super().__new__(cls, seconds)
        self.gpu, self.dtype, self.bound = gpu, dtype, bound
        return self

    def __reduce__(self):
        return (Projection, (float(self), self.gpu, self.dtype, self.bound))

    @property
    def seconds(self) -> float:
        return float(self)

    def __repr__(self) -> str:
        from ...measure.timing import format_seconds
        return (f"Projection({format_seconds(float(self))} on {self.gpu}, {self.dtype}, {self.bound}-bound; "
                "datasheet roofline, not measured)")

    __str__ = __repr__


def project(flops: float, bytes: float, spec: GPUSpec, dtype="bf16", overhead_s: float = 0.0) -> Projection:
    """Seconds the work would take on `spec`'s GPU at its dense datasheet peaks (a projection)."""
    key = dtype_key(dtype)
    peak = spec.flops(key)
    seconds = predict_time(flops, bytes, peak, spec.bandwidth, overhead_s)
    return Projection(seconds, spec.name, key, bound(flops, bytes, peak, spec.bandwidth))


def roof_of(x, dtype=None) -> tuple[float, float]:
    """(peak FLOP/s, bandwidth bytes/s) of a GPUSpec, a Ceilings or a (peak, bandwidth) pair.

    dtype defaults to bf16 for a spec and to the measured default (bf16 on a GPU, fp32 on a CPU)
    for Ceilings."""
    if isinstance(x, GPUSpec):
        return x.flops(dtype or "bf16"), x.bandwidth
    if isinstance(x, Ceilings):
        return x.flops(dtype), x.copy_bandwidth
    peak, bandwidth = x
    return float(peak), float(bandwidth)


def matmul_peak(ceilings: Ceilings, dtype) -> float | None:
    """The measured matmul rate a kernel on `dtype` inputs can reach here: fp32 inputs through Tensor
    Cores as TF32 (Triton's `tl.dot` default) where that was measured; None where nothing was."""
    key = dtype_key(dtype)
    for candidate in (("tf32", "fp32") if key == "fp32" else (key,)):
        try:
            return ceilings.flops(candidate)
        except ValueError:
            continue
    return None


def inputs_peak(ceilings: Ceilings, args) -> float | None:
    """`matmul_peak` for the dtype of the first floating-point tensor among a call's arguments."""
    import torch
    dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
    return matmul_peak(ceilings, dtype) if dtype in (torch.float32, torch.float16, torch.bfloat16) else None


def fraction_of_roof(seconds: float, flops: float, bytes: float, peak_flops: float | None,
                     bandwidth: float) -> tuple[float, str, float]:
    """(fraction, bound, roof seconds): how close `seconds` came to the least time this machine's roof
    allows for the work, `bytes` at `bandwidth` or `flops` at `peak_flops`, whichever is slower. 1.0 is at
    the roof. `peak_flops` None (no matmul rate for the dtype measured here): bytes alone set the roof."""
    memory_s = bytes / bandwidth
    compute_s = flops / peak_flops if flops and peak_flops else 0.0
    roof_s = max(memory_s, compute_s)
    return roof_s / seconds, ("compute" if compute_s > memory_s else "memory"), roof_s


def describe_roof(fraction: float, bound: str, roof_s: float, flops: float, bytes: float, peak_flops: float | None,
                  bandwidth: float) -> str:
    """The roof fraction in a sentence a learner reads: what bounds the work, and at which measured rate."""
    from ...measure.timing import format_seconds
    if bound == "compute":
        why = f"compute-bound: {flops / 1e9:,.3g} GFLOP at the measured {peak_flops / 1e12:,.0f} TFLOP/s"
    else:
        why = f"memory-bound: {bytes / 1e6:,.4g} MB at the measured {bandwidth / 1e12:,.2f} TB/s copy"
    share = f"{fraction:.0%}" if fraction >= 0.01 else f"{fraction * 100:.2g}%"  # never "0%": say how small
    return f"{share} of this GPU's roof for this work ({why} take {format_seconds(roof_s)} at best)"


def _describe(x, dtype) -> str:
    if isinstance(x, GPUSpec):
        return f"{x.name}, datasheet, {dtype or 'bf16'}"
    if isinstance(x, Ceilings):
        return f"{x.device_name}, measured, {dtype or x.default_dtype}"
    return ""


def plot(peak_flops, bandwidth: float | None = None, points=(), ax=None, title: str | None = None,
         dtype=None):
    """A log-log roofline with its ridge marked and each (label, intensity, achieved FLOP/s) point.

    `peak_flops` may be a number (then give `bandwidth`), a GPUSpec or a Ceilings. Returns the Axes.
    """
    what = _describe(peak_flops, dtype)
    if bandwidth is None:
        peak, bw = roof_of(peak_flops, dtype)
    else:
        peak, bw = float(peak_flops), float(bandwidth)
    if ax is None:
        import matplotlib.pyplot as plt
        _, ax = plt.subplots(figsize=(7, 4.5))
    ridge = ridge_point(peak, bw)
    for label, x, y in points:
        if x <= 0 or y <= 0:
            raise ValueError(f"point {label!r}: intensity and FLOP/s must be positive on a log plot")
    xs = [ridge] + [x for _, x, _ in points]
    grid = np.geomspace(min(xs) / 8, max(xs) * 8, 256)
    ax.loglog(grid, attainable(peak, bw, grid), color="black", lw=2, label="roof")
    ax.axvline(ridge, color="gray", ls="--", lw=1)
    ax.annotate(f"ridge {ridge:.3g} FLOP/B", (ridge, peak), textcoords="offset points", xytext=(4, -14),
                color="gray")
    for label, x, y in points:
        ax.scatter([x], [y], zorder=3)
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 5))
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title if title is not None else "Roofline" + (f": {what}" if what else ""))
    ax.grid(True, which="both", alpha=0.2)
    return ax
