"""A report shown three ways: HTML in a notebook, text in a terminal, JSON for tools.

This module reads a report's fields and nothing else of the package (report.py builds on it, not
the other way round). What a reader sees once:

* each failed row of the checks table with its reason; a reason no row carries is listed above;
* the CPU/GPU line only where it says something: on a function exercise, not on a value;
* the raw counters stay in the JSON; people get the summary rows.
"""

from __future__ import annotations

import html as _html

# the report's statuses, as they appear in its JSON (report.py)
_COLOUR = {"passed": "#1a7f37", "not attempted": "#6e7781", "error": "#9a6700"}
_FAILED_COLOUR = "#cf222e"
_MARK = {True: "✅", False: "❌", None: "·"}


def _mode_line(report) -> str | None:
    if getattr(report, "kind", "function") != "function":
        return None
    if report.mode == "gpu":
        return "GPU: compiled, run and timed on this GPU"
    return "CPU: Triton interpreter; bytes and launches counted, no GPU time claimed"


def _format(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_format(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    return str(value)


def _shown_measurements(report):
    return [(k, v) for k, v in report.measurements.items() if k != "counts"]


def _loose_reasons(report) -> list[str]:
    """The reasons that no failed row of the checks table already shows."""
    in_rows = {row.detail for row in report.checks if row.passed is False}
    return [r for r in report.reasons if r not in in_rows]


def text(report) -> str:
    mode = _mode_line(report)
    lines = [f"{report.exercise} — {report.title}: {report.status.upper()}" + (f"  [{mode}]" if mode else "")]
    for reason in _loose_reasons(report):
        lines.append(f"  ✗ {reason}")
    for row in report.checks:
        lines.append(f"  {_MARK[row.passed]} {row.name}" + (f": {row.detail}" if row.detail else ""))
    for key, value in _shown_measurements(report):
        lines.append(f"  · {key}: {_format(value)}")
    for note in report.notes:
        lines.append(f"  note: {note}")
    if report.output.strip():
        lines.append("  your code printed:\n    " + "\n    ".join(report.output.strip().splitlines()[-10:]))
    return "\n".join(lines)


def html(report) -> str:
    e = _html.escape
    colour = _COLOUR.get(report.status, _FAILED_COLOUR)
    mode = _mode_line(report)
    rows = "".join(
        f"<tr><td>{_MARK[r.passed]}</td><td>{e(r.name)}</td><td>{e(r.detail)}</td></tr>" for r in report.checks)
    rows += "".join(
        f"<tr><td>·</td><td>{e(str(k))}</td><td>{e(_format(v))}</td></tr>" for k, v in _shown_measurements(report))
    reasons = "".join(f"<li>{e(r)}</li>" for r in _loose_reasons(report))
    notes = "".join(f"<p style='margin:4px 0;color:#57606a'>{e(n)}</p>" for n in report.notes)
    printed = (f"<details><summary>your code printed</summary><pre>{e(report.output[-3000:])}</pre></details>"
               if report.output.strip() else "")
    return (
        f"<div class='gp-report' style='border-left:4px solid {colour};padding:6px 12px;margin:6px 0'>"
        f"<b>{e(report.exercise)}</b> — {e(report.title)}: "
        f"<b style='color:{colour}'>{e(report.status.upper())}</b>"
        + (f"<div style='color:#57606a;font-size:90%'>{e(mode)}</div>" if mode else "")
        + (f"<ul style='margin:4px 0'>{reasons}</ul>" if reasons else "")
        + (f"<table style='font-size:90%'>{rows}</table>" if rows else "")
        + notes + printed + "</div>")


def show(report) -> None:
    """HTML in a notebook, text anywhere else."""
    try:
        from IPython import get_ipython
        shell = get_ipython()
    except ImportError:  # pragma: no cover
        shell = None
    if shell is not None and type(shell).__name__ != "TerminalInteractiveShell":
        from IPython.display import HTML, display
        display(HTML(html(report)))
        report._shown = True
    else:
        print(text(report))


class Shown:
    """What makes a report show itself: `print(report)`, and a report as a cell's value."""

    _shown = False

    def __str__(self) -> str:
        return text(self)

    def _repr_html_(self) -> str:
        return html(self)

    def _ipython_display_(self) -> None:
        # `check()` displays the report itself; when it is also the cell's value, show it once
        if self._shown:
            self._shown = False
            return
        from IPython.display import HTML, display
        display(HTML(html(self)))
