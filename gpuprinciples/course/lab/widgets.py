"""The interactive pieces of the lessons: the factory and the warehouse, and the roofline explorer.

The model (lesson 01). A GPU is a factory that works at `compute` FLOP/s, fed from a warehouse
over a road that carries `bandwidth` bytes/s. An operation needs F FLOPs and B bytes moved:

    compute_time = F / compute          memory_time = B / bandwidth
    time = max(compute_time, memory_time) + launches × overhead

The larger of the two is the bound; the other side waits for it (its idle fraction). Each
launch also pays a fixed cost (the CPU telling the GPU what to do); when that cost is larger than
the work, the operation is overhead-bound. Adding it is the simplest model; a GPU hides part of it
behind earlier kernels when launches are queued ahead, so the model errs on the slow side.

`factory_time` is the pure model (the grader and tests use it); the widgets only draw it. The
drawing is a PNG in an `ipywidgets.Image`, so a widget works, and can be tested, without a display.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np

# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


def factory_time(flops, bytes_, compute_flops, bandwidth, launches=1, overhead_s=0.0) -> dict:
    """Time of an operation of `flops` FLOPs moving `bytes_` bytes on a machine of `compute_flops`
    FLOP/s and `bandwidth` bytes/s, launched `launches` times at `overhead_s` seconds each.

    Returns time, compute_time, memory_time, overhead_time (seconds); bound ("compute", "memory",
    "balanced" when the two are equal, or "overhead" when launches cost more than the work);
    idle_compute_fraction and idle_memory_fraction (the share of `time` each side waits);
    intensity (FLOP/byte) and ridge (the intensity where the two sides take equally long).
    """
    if compute_flops <= 0 or bandwidth <= 0:
        raise ValueError("compute_flops and bandwidth must be positive")
    if flops < 0 or bytes_ < 0 or launches < 0 or overhead_s < 0:
        raise ValueError("flops, bytes_, launches and overhead_s cannot be negative")
    compute_time = flops / compute_flops
    memory_time = bytes_ / bandwidth
    overhead_time = launches * overhead_s
    work = max(compute_time, memory_time)
    time = work + overhead_time
    if time == 0:
        raise ValueError("an operation with no FLOPs, no bytes and no launch cost takes no time")
    if overhead_time > work:
        bound = "overhead"
    elif compute_time > memory_time:
        bound = "compute"
    elif memory_time > compute_time:
        bound = "memory"
    else:
        bound = "balanced"
    return {
        "time": time,
        "compute_time": compute_time,
        "memory_time": memory_time,
        "overhead_time": overhead_time,
        "bound": bound,
        "idle_compute_fraction": 1.0 - compute_time / time,
        "idle_memory_fraction": 1.0 - memory_time / time,
        "intensity": flops / bytes_ if bytes_ else math.inf,
        "ridge": compute_flops / bandwidth,
    }


# ---------------------------------------------------------------------------------------------
# Presets: what the dropdowns offer
# ---------------------------------------------------------------------------------------------

PRECISIONS = ("bf16", "tf32", "fp32")


@dataclass(frozen=True)
class Preset:
    """A machine as the factory model sees it: FLOP/s by precision, and bytes/s."""

    name: str
    flops: dict  # precision -> FLOP/s; a precision not measured is absent
    bandwidth: float  # bytes/s
    source: str = ""

    def compute(self, precision: str) -> tuple[float, str]:
        """FLOP/s in `precision`, and the precision really used (fp32 when that one is missing)."""
        if precision in self.flops:
            return self.flops[precision], precision
        return self.flops["fp32"], "fp32"


def as_preset(machine, name: str | None = None) -> Preset:
    """A Preset from a `specs.GPUSpec` (datasheet), a `calibrate.Ceilings` (measured here),
    a mapping with `bandwidth` and `<precision>_flops` keys, or a Preset."""
    from ...machine import specs
    from ...measure import calibrate

    if isinstance(machine, Preset):
        return machine
    if isinstance(machine, specs.GPUSpec):
        return Preset(name or machine.name, {k: machine.flops(k) for k in PRECISIONS}, machine.bandwidth,
                      f"datasheet, dense: {machine.source}")
    if isinstance(machine, calibrate.Ceilings):
        flops = {k: getattr(machine, f"{k}_flops") for k in PRECISIONS}
        return Preset(name or f"this machine ({machine.device_name})",
                      {k: v for k, v in flops.items() if v is not None}, machine.copy_bandwidth, "measured here")
    flops = {k: machine[f"{k}_flops"] for k in PRECISIONS if machine.get(f"{k}_flops")}
    if "fp32" not in flops or not machine.get("bandwidth"):
        raise ValueError("a machine needs a bandwidth (bytes/s) and an fp32_flops rate (FLOP/s)")
    return Preset(name or machine.get("name", "this machine"), flops, float(machine["bandwidth"]),
                  machine.get("source", ""))


def default_presets() -> list[Preset]:
    """The GPU spec sheets of gpuprinciples.machine.specs.SPECS (dense peaks)."""
    from ...machine import specs
    return [as_preset(spec) for spec in specs.SPECS.values()]


def _choices(presets, ceilings) -> list[Preset]:
    choices = [as_preset(p) for p in (default_presets() if presets is None else presets)]
    if ceilings is not None:
        choices.insert(0, as_preset(ceilings))
    if not choices:
        raise ValueError("a widget needs at least one machine")
    return choices


# ---------------------------------------------------------------------------------------------
# Drawing helpers
# ---------------------------------------------------------------------------------------------


def _time_unit(seconds: float) -> tuple[str, float]:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return unit, scale
    return "ns", 1e-9


def fmt_time(seconds: float) -> str:
    unit, scale = _time_unit(seconds)
    return f"{seconds / scale:.3g} {unit}"


def _pct(fraction: float) -> str:
    """A share as people say it: 99.97% is "over 99%", not a rounded "100%"."""
    if 0.99 < fraction < 1:
        return "over 99%"
    if 0 < fraction < 0.01:
        return "under 1%"
    return f"{fraction:.0%}"


def fmt_rate(value: float, unit: str) -> str:
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def _figure(width, height):
    from matplotlib.figure import Figure  # no pyplot: no global state, no backend needed
    return Figure(figsize=(width, height))


def factory_figure(result: dict, title: str = "") -> bytes:
    """Two bars, the factory's time and the road's, and the wait of the side that is not the bound."""
    unit, scale = _time_unit(result["time"])
    total, overhead = result["time"] / scale, result["overhead_time"] / scale
    rows = [("factory (compute)", result["compute_time"] / scale, "#4c72b0"),
            ("warehouse road (memory)", result["memory_time"] / scale, "#dd8452")]
    fig = _figure(6.4, 2.2 + 0.4 * bool(overhead))
    ax = fig.add_subplot()
    for y, (label, busy, colour) in enumerate(rows):
        # the launch comes first, then both sides start; the faster one waits for the slower
        ax.barh(y, busy, left=overhead, color=colour)
        if overhead + busy < total:
            ax.barh(y, total - overhead - busy, left=overhead + busy, color="none", edgecolor=colour,
                    hatch="//", linewidth=0.8)
            ax.text(total, y, " waits", va="center", fontsize=8, color=colour)
    labels = [r[0] for r in rows]
    if overhead:
        ax.barh(len(rows), overhead, color="#8c8c8c")
        labels.append("launch overhead")
    ax.axvline(total, color="k", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, total * 1.15)
    ax.set_xlabel(f"time ({unit}); total {fmt_time(result['time'])}")
    ax.set_title(title or f"{result['bound']}-bound", fontsize=10)
    return _png(fig)


def factory_summary(result: dict, precision: str = "", note: str = "") -> str:
    """The picture in one sentence (HTML), with the intensity and the ridge point."""
    bound = result["bound"]
    if bound == "overhead":
        words = "<b>overhead-bound</b>: launching costs more than the work itself"
    elif bound == "balanced":
        words = "<b>balanced</b>: factory and road are both busy the whole time"
    elif bound == "memory":
        words = f"<b>memory-bound</b>: the factory waits {_pct(result['idle_compute_fraction'])} of the time"
    else:
        words = f"<b>compute-bound</b>: the road waits {_pct(result['idle_memory_fraction'])} of the time"
    intensity = result["intensity"]
    shown = "∞" if math.isinf(intensity) else f"{intensity:.3g}"
    return (f"<div class='gp-factory-summary'>Time <b>{fmt_time(result['time'])}</b> = max(compute "
            f"{fmt_time(result['compute_time'])}, memory {fmt_time(result['memory_time'])})"
            f" + overhead {fmt_time(result['overhead_time'])}: {words}.<br>"
            f"Intensity {shown} FLOP/byte; the factory is busy all the time only from "
            f"{result['ridge']:.3g} FLOP/byte{' in ' + precision if precision else ''} up."
            f"{' <i>' + note + '</i>' if note else ''}</div>")


# ---------------------------------------------------------------------------------------------
# The factory widget
# ---------------------------------------------------------------------------------------------

CUSTOM = "custom"
_STYLE = {"description_width": "11em"}


def _log_slider(description, value, lo, hi, fmt=".3g"):
    import ipywidgets as w
    value = min(max(value, 10.0 ** lo), 10.0 ** hi)
    return w.FloatLogSlider(value=value, base=10, min=lo, max=hi, step=0.05, description=description,
                            readout_format=fmt, continuous_update=False, style=_STYLE,
                            layout=w.Layout(width="36em"))


def factory_widget(presets=None, ceilings=None, flops=2**24, bytes_=2**24 * 8, launches=1,
                   overhead_s=0.0, precision="fp32"):
    """Sliders for the machine and the operation; the factory picture and a sentence, redrawn on change.

    `presets`: machines to offer (GPUSpecs, Presets, ...; default: every `specs.SPECS` sheet);
    `ceilings`: this machine's measured `calibrate.Ceilings`, offered first. The defaults describe an
    fp32 elementwise op on 2**24 elements: 1 FLOP and 8 bytes (read 4, write 4) per element.
    Returns an `ipywidgets.VBox` whose parts are attributes: `preset`, `precision`, `sliders`
    (compute, bandwidth, flops, bytes, launches, overhead_us), `picture`, `summary`, and `result`,
    the `factory_time` last drawn.
    """
    import ipywidgets as w

    choices = _choices(presets, ceilings)
    by_name = {p.name: p for p in choices}
    first = choices[0]
    preset = w.Dropdown(options=[*by_name, CUSTOM], value=first.name, description="machine")
    prec = w.ToggleButtons(options=PRECISIONS, value=precision, description="precision")
    sliders = {
        "compute": _log_slider("compute (FLOP/s)", first.compute(precision)[0], 9, 16),
        "bandwidth": _log_slider("bandwidth (bytes/s)", first.bandwidth, 9, 14),
        "flops": _log_slider("FLOPs", flops, 3, 16),
        "bytes": _log_slider("bytes", bytes_, 3, 13),
        "launches": _log_slider("launches", launches, 0, 4, ".0f"),
        "overhead_us": w.FloatSlider(value=overhead_s * 1e6, min=0, max=20, step=0.1, style=_STYLE,
                                     description="overhead/launch (µs)", continuous_update=False,
                                     layout=w.Layout(width="36em")),
    }
    picture, summary = w.Image(format="png"), w.HTML()
    box = w.VBox([w.HBox([preset, prec]), *sliders.values(), picture, summary])
    box.preset, box.precision, box.sliders, box.picture, box.summary = preset, prec, sliders, picture, summary
    # "moving": a preset is setting the sliders, which must not turn the machine into "custom"
    state = {"moving": False, "note": "", "used": precision}

    def redraw(_=None):
        box.result = factory_time(sliders["flops"].value, sliders["bytes"].value, sliders["compute"].value,
                                  sliders["bandwidth"].value, round(sliders["launches"].value),
                                  sliders["overhead_us"].value * 1e-6)
        name = preset.value if preset.value != CUSTOM else "custom machine"
        picture.value = factory_figure(box.result, f"{name}: {box.result['bound']}-bound")
        rate_of = "" if preset.value == CUSTOM else state["used"]
        summary.value = factory_summary(box.result, rate_of, state["note"])

    def pick(_=None):
        chosen = by_name.get(preset.value)
        if chosen is None:
            return
        rate, used = chosen.compute(prec.value)
        state["used"] = used
        state["note"] = "" if used == prec.value else f"({prec.value} was not measured on {chosen.name}: fp32 shown)"
        state["moving"] = True
        try:
            sliders["compute"].value = rate
            sliders["bandwidth"].value = chosen.bandwidth
        finally:
            state["moving"] = False
        redraw()

    def machine_moved(_):
        if not state["moving"]:
            state["note"] = ""
            if preset.value != CUSTOM:
                preset.value = CUSTOM  # the machine no longer matches its sheet
        redraw()

    preset.observe(pick, names="value")
    prec.observe(pick, names="value")
    sliders["compute"].observe(machine_moved, names="value")
    sliders["bandwidth"].observe(machine_moved, names="value")
    for key in ("flops", "bytes", "launches", "overhead_us"):
        sliders[key].observe(redraw, names="value")
    pick()
    return box


# ---------------------------------------------------------------------------------------------
# The roofline explorer
# ---------------------------------------------------------------------------------------------


def roofline_point(intensity: float, peak_flops: float, bandwidth: float) -> dict:
    """Where an op of `intensity` FLOP/byte sits on a roofline: attainable FLOP/s, bound, ridge."""
    from . import roofline

    got = roofline.attainable(peak_flops, bandwidth, intensity)
    ridge = roofline.ridge_point(peak_flops, bandwidth)
    bound = "memory" if intensity < ridge else "compute" if intensity > ridge else "balanced"
    return {"attainable_flops": got, "bound": bound, "ridge": ridge, "fraction_of_peak": got / peak_flops}


def roofline_widget(presets=None, ceilings=None, intensity=0.25, precision="bf16"):
    """Pick a machine and drag an op's arithmetic intensity: attainable FLOP/s and its bound.

    Drawn with `roofline.plot`. Returns an `ipywidgets.VBox` with attributes `preset`, `precision`,
    `intensity`, `picture`, `summary`, and `result` (a `roofline_point`) for the point drawn.
    """
    import ipywidgets as w

    from . import roofline

    choices = _choices(presets, ceilings)
    by_name = {p.name: p for p in choices}
    preset = w.Dropdown(options=list(by_name), value=choices[0].name, description="machine")
    prec = w.ToggleButtons(options=PRECISIONS, value=precision, description="precision")
    slider = _log_slider("intensity (FLOP/byte)", intensity, -2, 4)
    picture, summary = w.Image(format="png"), w.HTML()
    box = w.VBox([w.HBox([preset, prec]), slider, picture, summary])
    box.preset, box.precision, box.intensity, box.picture, box.summary = preset, prec, slider, picture, summary

    def redraw(_=None):
        machine = by_name[preset.value]
        peak, used = machine.compute(prec.value)
        box.result = point = roofline_point(slider.value, peak, machine.bandwidth)
        fig = _figure(6.4, 3.6)
        ax = fig.add_subplot()
        roofline.plot(peak, machine.bandwidth, ax=ax, title=f"{machine.name}, {used}",
                      points=[("your op", slider.value, point["attainable_flops"])])
        span = np.geomspace(1e-2, 1e4, 64)  # fixed axes, so dragging moves the point, not the roof
        ax.loglog(span, roofline.attainable(peak, machine.bandwidth, span), color="black", lw=2)
        ax.set_xlim(span[0], span[-1])
        picture.value = _png(fig)
        note = "" if used == prec.value else f" ({prec.value} not measured there: fp32 shown)"
        summary.value = (f"<div class='gp-roofline-summary'>At {slider.value:.3g} FLOP/byte, {machine.name} "
                         f"reaches at most <b>{fmt_rate(point['attainable_flops'], 'FLOP/s')}</b>, "
                         f"{point['fraction_of_peak']:.1%} of its {used} peak{note}: "
                         f"<b>{point['bound']}-bound</b>. The ridge is at {point['ridge']:.3g} FLOP/byte.</div>")

    for control in (preset, prec, slider):
        control.observe(redraw, names="value")
    redraw()
    return box
