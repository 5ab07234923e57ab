"""A report shown three ways: HTML in a notebook, text in a terminal, JSON for tools.

This module reads a report's fields and nothing else of the package (report.py builds on it, not
the other way round). What a reader sees once:

* the verdict in words first (PASSED, FAILED, NOT JUDGED, ...); colour only adds to the words, and only
  where the terminal shows it and `NO_COLOR` is not set (https://no-color.org);
* each failed row of the checks table with its reason; a reason no row carries is listed above;
* the CPU/GPU line only where it says something: on a function exercise, not on a value;
* measurements under names a learner knows, with units; the raw keys and counters stay in the JSON;
* on a report that did not pass, how to ask for a hint.

The HTML comes from a jinja2 template (grader/templates/report.html.j2), which escapes every value.
"""

from __future__ import annotations

import os
import re
import sys
from functools import lru_cache

# A row's verdict (CheckLine.passed) and a report's status (its JSON "status"), in words
ROW_WORD = {True: "PASSED", False: "FAILED", None: "NOT JUDGED"}
_COLOUR = {"PASSED": "#1a7f37", "FAILED": "#cf222e", "NOT JUDGED": "#6e7781", "NOT ATTEMPTED": "#6e7781",
           "ERROR": "#9a6700"}
_ANSI = {"PASSED": "32", "FAILED": "31", "NOT JUDGED": "2", "NOT ATTEMPTED": "2", "ERROR": "33"}
_WIDTH = max(map(len, ROW_WORD.values()))
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")

# measurement keys (report.measurements, judge.py) -> (what a learner calls it, unit)
_NAMES = {
    "bytes_case": ("bytes counted on", ""),
    "bytes_moved": ("bytes moved", "B"),
    "bytes_minimum": ("fewest bytes the result needs", "B"),
    "bytes_ratio": ("bytes moved ÷ fewest", "×"),
    "launches": ("kernel launches", ""),
    "projected_us (roofline, not measured)": ("projected time from the datasheets (roofline, not measured)", "µs"),
    "time_ms": ("median time", "ms"),
    "bandwidth_TBps": ("bandwidth reached", "TB/s"),
    "copy_ceiling_TBps": ("this GPU's copy bandwidth", "TB/s"),
    "TFLOPps": ("compute rate", "TFLOP/s"),
    "speedup": ("speedup (median, 95 % interval)", "×"),
    "after_window_us": ("GPU work after the timed call returned", "µs"),
    "answer": ("your answer", ""),
}


# in the JSON for tools, not in the rows: the raw counters, and the roof fraction, which a note says in words
_JSON_ONLY = frozenset({"counts", "roof"})


def status_word(report) -> str:
    return report.status.upper()


def use_colour(stream=None) -> bool:
    """ANSI colour for a terminal that shows it; never with NO_COLOR set (to anything but ""), a pipe or TERM=dumb."""
    if os.environ.get("NO_COLOR"):
        return False
    stream = sys.stdout if stream is None else stream
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and os.environ.get("TERM", "") != "dumb"


def _paint(word: str, colour: bool, width: int = 0) -> str:
    padded = word.ljust(width)
    return f"\x1b[{_ANSI[word]}m{word}\x1b[0m{padded[len(word):]}" if colour and word in _ANSI else padded


def _mode_line(report) -> str | None:
    if getattr(report, "kind", "function") != "function":
        return None
    if report.mode == "gpu":
        return "GPU: compiled, run and timed on this GPU"
    return "CPU: Triton interpreter; bytes and launches counted, no GPU time claimed"


def _number(value) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    return str(value)


def _bytes(n) -> str:
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return str(n)
    if abs(n) < 1024:
        return f"{n:,.0f} B"
    scaled = n
    for unit in ("KiB", "MiB", "GiB"):
        scaled /= 1024
        if abs(scaled) < 1024:
            break
    return f"{scaled:.2f} {unit} ({n:,.0f} B)"


def _with_unit(value, unit: str) -> str:
    if unit == "B":
        return _bytes(value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {_with_unit(v, unit)}" for k, v in value.items())
    if isinstance(value, (list, tuple)) and len(value) == 3 and unit == "×":  # (median, low, high)
        return f"{_number(value[0])}× ({_number(value[1])}–{_number(value[2])}×)"
    text = _number(value)
    if not unit or value is None:
        return text
    return f"{text}{unit}" if unit == "×" else f"{text} {unit}"


def measurement_rows(report) -> list[tuple[str, str]]:
    """(name, value with its unit) for each measurement a person reads; raw counters stay in the JSON."""
    rows = []
    for key, value in report.measurements.items():
        if key in _JSON_ONLY:
            continue
        name, unit = _NAMES.get(key, (key.replace("_", " "), ""))
        if isinstance(value, dict) and key not in _NAMES:  # a timing of one labelled input: its own names
            inner = ", ".join(f"{_NAMES.get(k, (k.replace('_', ' '), ''))[0]} "
                              f"{_with_unit(v, _NAMES.get(k, ('', ''))[1])}" for k, v in value.items()
                              if k not in _JSON_ONLY)
            rows.append((name, inner))
            continue
        rows.append((name, _with_unit(value, unit)))
    return rows


def reason_word(report) -> str:
    """A loose reason's word: an ERROR report's reasons say why nothing could be decided, not what failed."""
    return "ERROR" if report.status == "error" else "FAILED"


def _loose_reasons(report) -> list[str]:
    """The reasons that no failed row of the checks table already shows."""
    in_rows = {row.detail for row in report.checks if row.passed is False}
    return [r for r in report.reasons if r not in in_rows]


def text(report, *, colour: bool = False) -> str:
    mode = _mode_line(report)
    lines = [f"{_paint(status_word(report), colour)}  {report.exercise} — {report.title}"
             + (f"  [{mode}]" if mode else "")]
    for reason in _loose_reasons(report):
        lines.append(f"  {_paint(reason_word(report), colour, _WIDTH)}  {reason}")
    for row in report.checks:
        word = ROW_WORD[row.passed]
        lines.append(f"  {_paint(word, colour, _WIDTH)}  {row.name}" + (f": {row.detail}" if row.detail else ""))
    for name, value in measurement_rows(report):
        lines.append(f"  {'':{_WIDTH}}  {name}: {value}")
    for note in report.notes:
        lines.append(f"  note: {note}")
    if report.output.strip():
        lines.append("  your code printed:\n    " + "\n    ".join(report.output.strip().splitlines()[-10:]))
    if getattr(report, "hint", ""):
        lines.append(report.hint)
    return "\n".join(lines)


@lru_cache(maxsize=None)
def template(name: str, package: str = __package__):
    """A jinja2 template of `package`'s templates/ folder (the grader's by default), HTML-escaping every value."""
    import jinja2
    env = jinja2.Environment(loader=jinja2.PackageLoader(package, "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    return env.get_template(name)


def html(report) -> str:
    word = status_word(report)
    coloured = not os.environ.get("NO_COLOR")
    return template("report.html.j2").render(
        report=report, word=word, mode=_mode_line(report), reasons=_loose_reasons(report), why=reason_word(report),
        rows=[(ROW_WORD[r.passed], r.name, r.detail) for r in report.checks],
        measurements=measurement_rows(report), printed=report.output[-3000:] if report.output.strip() else "",
        hint=getattr(report, "hint", ""),
        colour=(lambda w: _COLOUR.get(w, "inherit")) if coloured else (lambda w: "inherit"))


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
        print(text(report, colour=use_colour(sys.stdout)))


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
