"""A `Report` shown three ways: HTML in a notebook, text in a terminal, JSON for tools."""

from __future__ import annotations

import html as _html

from .report import ERROR, NOT_ATTEMPTED, PASSED, Report

_MARK = {True: "✅", False: "❌", None: "·"}
_COLOUR = {PASSED: "#1a7f37", NOT_ATTEMPTED: "#6e7781", ERROR: "#9a6700"}


def _mode_line(report: Report) -> str:
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


def _shown_measurements(report: Report):
    # the raw counters stay in the JSON; people get the summary rows
    return [(k, v) for k, v in report.measurements.items() if k != "counts"]


def text(report: Report) -> str:
    lines = [f"{report.exercise} — {report.title}: {report.status.upper()}  [{_mode_line(report)}]"]
    for reason in report.reasons:
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


def html(report: Report) -> str:
    e = _html.escape
    colour = _COLOUR.get(report.status, "#cf222e")
    rows = "".join(
        f"<tr><td>{_MARK[r.passed]}</td><td>{e(r.name)}</td><td>{e(r.detail)}</td></tr>" for r in report.checks)
    rows += "".join(
        f"<tr><td>·</td><td>{e(str(k))}</td><td>{e(_format(v))}</td></tr>" for k, v in _shown_measurements(report))
    reasons = "".join(f"<li>{e(r)}</li>" for r in report.reasons)
    notes = "".join(f"<p style='margin:4px 0;color:#57606a'>{e(n)}</p>" for n in report.notes)
    printed = (f"<details><summary>your code printed</summary><pre>{e(report.output[-3000:])}</pre></details>"
               if report.output.strip() else "")
    return (
        f"<div class='gp-report' style='border-left:4px solid {colour};padding:6px 12px;margin:6px 0'>"
        f"<b>{e(report.exercise)}</b> — {e(report.title)}: "
        f"<b style='color:{colour}'>{e(report.status.upper())}</b>"
        f"<div style='color:#57606a;font-size:90%'>{e(_mode_line(report))}</div>"
        + (f"<ul style='margin:4px 0'>{reasons}</ul>" if reasons else "")
        + (f"<table style='font-size:90%'>{rows}</table>" if rows else "")
        + notes + printed + "</div>")


def json(report: Report) -> str:
    return report.to_json()
