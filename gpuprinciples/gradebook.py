"""The instructor's gradebook: run every learner's notebooks, collect every check, write CSV and HTML.

Layout: `SUBMISSIONS/<learner>/*.ipynb`. Each notebook is copied (with its learner's folder) to a
temporary directory and executed there with nbclient (`notebooks.execute`, errors allowed, a time
limit per cell), so submissions are never touched. The kernel runs with
`GPUPRINCIPLES_REPORT_LOG=<file>`: every `check()` appends its Report there as one JSON line
(`log_report`, called from `grading.check`). Running a notebook again *is* a hidden trial: the
grader draws fresh secret-seeded inputs on every run.

With several GPUs visible, one worker per GPU (its `CUDA_VISIBLE_DEVICES` set to that GPU), so no
two notebooks share a GPU and timings are not disturbed; with one GPU or none, one at a time.

Trust: the log is written by the kernel that runs the learner's code, so a learner who sets out to
forge it can. The gradebook guards against mistakes, not against a determined cheat.
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

LOG_ENV = "GPUPRINCIPLES_REPORT_LOG"
NOT_CHECKED = "not checked"
CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([\w.]+)["']""")


def log_report(report) -> None:
    """Append the report as one JSON line to $GPUPRINCIPLES_REPORT_LOG (called by `check()`)."""
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(report.to_dict(), default=str) + "\n")


# ---------------------------------------------------------------------------------------------
# Running one notebook
# ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One learner notebook, executed: how the run went and the reports its checks logged."""

    learner: str
    notebook: str
    status: str = "ok"  # "ok", "cell errors", "timed out", "kernel died", "failed to run"
    errors: list[str] = field(default_factory=list)  # "cell 7: ValueError: ..."
    reports: list[dict] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)  # exercise ids its check() calls name
    seconds: float = 0.0
    device: str = ""


def find_notebooks(submissions) -> list[tuple[str, Path]]:
    """(learner, notebook) for every SUBMISSIONS/<learner>/*.ipynb, sorted."""
    root = Path(submissions)
    return [(d.name, nb) for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
            for nb in sorted(d.glob("*.ipynb"))]


def run_notebook(learner: str, notebook: Path, *, timeout: int = 600, executed_dir=None, device: str | None = None
                 ) -> Run:
    """Execute a copy of one notebook in a fresh kernel and collect what its checks reported."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from . import notebooks

    notebook = Path(notebook)
    run = Run(learner, notebook.name, expected=_checked_ids(notebook), device=device or "")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpuprinciples-gradebook-") as tmp:
        copy = Path(tmp) / "work"
        shutil.copytree(notebook.parent, copy, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        log = Path(tmp) / "reports.jsonl"
        env = {LOG_ENV: str(log), "GPUPRINCIPLES_HINTS": "off"}
        if device is not None:
            env["CUDA_VISIBLE_DEVICES"] = device
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # the kernel inherits this process's environment
        nb = notebooks.read(copy / notebook.name)
        try:
            notebooks.execute(copy / notebook.name, timeout=timeout, allow_errors=True, nb=nb)
            run.errors = _cell_errors(nb)
            run.status = "cell errors" if run.errors else "ok"
        except CellTimeoutError:
            run.status, run.errors = "timed out", [f"a cell ran longer than {timeout} s and was stopped"]
        except DeadKernelError as exc:
            run.status, run.errors = "kernel died", [f"the kernel died: {exc}"]
        except Exception as exc:  # noqa: BLE001 - one broken notebook must not stop the class
            where = traceback.extract_tb(exc.__traceback__)[-1]
            run.status, run.errors = "failed to run", [
                f"{type(exc).__name__}: {exc} (in {Path(where.filename).name}:{where.lineno})"]
        finally:
            if executed_dir is not None:  # what ran, also when the run stopped part-way
                out = Path(executed_dir) / learner / notebook.name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(notebooks.dumps(nb), encoding="utf-8")
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        run.reports = _read_log(log)
    run.seconds = round(time.monotonic() - started, 1)
    return run


def _checked_ids(notebook: Path) -> list[str]:
    from . import notebooks
    ids = []
    for cell in notebooks.read(notebook).cells:
        if cell.cell_type == "code":
            ids += [i for i in CHECK_CALL.findall(cell.source) if i not in ids]
    return ids


def _cell_errors(nb) -> list[str]:
    found = []
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "error":
                found.append(f"cell {index}: {out.get('ename')}: {out.get('evalue')}")
    return found


def _read_log(path: Path) -> list[dict]:
    reports = []
    if path.exists():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict) and "exercise" in item:
                reports.append(item)
    return reports


# ---------------------------------------------------------------------------------------------
# Running a class: one worker per visible GPU
# ---------------------------------------------------------------------------------------------


def visible_gpus() -> list[str]:
    """The GPU ids this process may use (CUDA_VISIBLE_DEVICES honoured); [] without CUDA."""
    import torch
    if not torch.cuda.is_available():
        return []
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed:
        return [d.strip() for d in listed.split(",") if d.strip()][: torch.cuda.device_count()]
    return [str(i) for i in range(torch.cuda.device_count())]


_WORKER_DEVICE: str | None = None


def _claim_device(devices) -> None:
    global _WORKER_DEVICE
    _WORKER_DEVICE = devices.get()


def _run_in_worker(learner, notebook, timeout, executed_dir) -> Run:
    return run_notebook(learner, notebook, timeout=timeout, executed_dir=executed_dir, device=_WORKER_DEVICE)


def run_all(submissions, *, timeout: int = 600, executed_dir=None, devices: list[str] | None = None,
            progress=None) -> list[Run]:
    """Execute every notebook: in parallel with one worker per device when there are several."""
    jobs = find_notebooks(submissions)
    devices = visible_gpus() if devices is None else devices
    if len(devices) <= 1:
        runs = []
        for learner, nb in jobs:
            runs.append(run_notebook(learner, nb, timeout=timeout, executed_dir=executed_dir,
                                     device=devices[0] if devices else None))
            if progress:
                progress(runs[-1])
        return runs
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    context = multiprocessing.get_context("spawn")  # never fork a process that may hold CUDA
    queue = context.Queue()
    for device in devices:
        queue.put(device)
    with ProcessPoolExecutor(len(devices), mp_context=context, initializer=_claim_device,
                             initargs=(queue,)) as pool:
        futures = [pool.submit(_run_in_worker, learner, nb, timeout, executed_dir) for learner, nb in jobs]
        runs = []
        for future in futures:
            runs.append(future.result())
            if progress:
                progress(runs[-1])
    return runs


# ---------------------------------------------------------------------------------------------
# From runs to a gradebook
# ---------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One learner and one exercise: the last check of it in the learner's notebooks."""

    learner: str
    exercise: str
    status: str
    mode: str = ""
    notebook: str = ""
    time_ms: float | None = None  # the learner's median time, GPU only
    speedups: str = ""  # "eager 1.93× [1.85–2.01]; torch.compile 1.02× [...]", GPU only
    bytes_ratio: float | None = None  # bytes moved / the minimum, counted under the interpreter
    reasons: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def rows_of(runs: list[Run]) -> list[Row]:
    learners = sorted({r.learner for r in runs})
    exercises = []
    for run in runs:
        for ex in run.expected + [rep["exercise"] for rep in run.reports]:
            if ex not in exercises:
                exercises.append(ex)
    last: dict[tuple[str, str], Row] = {}
    for run in runs:
        for rep in run.reports:
            last[(run.learner, rep["exercise"])] = _row(run, rep)
    return [last.get((learner, ex)) or Row(learner, ex, NOT_CHECKED) for learner in learners for ex in exercises]


def _row(run: Run, rep: dict) -> Row:
    m = rep.get("measurements") or {}
    speedups = "; ".join(f"{base} {s[0]:.2f}× [{s[1]:.2f}–{s[2]:.2f}]" for base, s in (m.get("speedup") or {}).items())
    return Row(run.learner, rep["exercise"], rep.get("status", "?"), rep.get("mode", ""), run.notebook,
               (m.get("time_ms") or {}).get("yours"), speedups, m.get("bytes_ratio"), "; ".join(rep.get("reasons", [])))


def leaderboard(rows: list[Row], exercise: str) -> tuple[str, list[Row]]:
    """The passing rows of an exercise, fastest first (GPU time), else fewest bytes (CPU counts)."""
    passed = [r for r in rows if r.exercise == exercise and r.passed]
    timed = [r for r in passed if r.time_ms is not None]
    if timed:
        return "median time on the GPU (ms)", sorted(timed, key=lambda r: r.time_ms)
    counted = [r for r in passed if r.bytes_ratio is not None]
    if counted:
        return "bytes moved / minimum (counted, no GPU)", sorted(counted, key=lambda r: r.bytes_ratio)
    return "", []


CSV_FIELDS = ["learner", "exercise", "status", "passed", "mode", "notebook", "time_ms", "speedups", "bytes_ratio",
              "reasons"]


def write(runs: list[Run], out) -> dict[str, Path]:
    """gradebook.csv, gradebook.html and gradebook.json (every run and report) in `out`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = rows_of(runs)
    paths = {"csv": out / "gradebook.csv", "html": out / "gradebook.html", "json": out / "gradebook.json"}
    with open(paths["csv"], "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, CSV_FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({**asdict(row), "passed": row.passed})
    paths["html"].write_text(render_html(runs, rows), encoding="utf-8")
    paths["json"].write_text(json.dumps([asdict(r) for r in runs], indent=1, default=str), encoding="utf-8")
    return paths


_MARK = {"passed": "✅", "failed": "❌", "error": "⚠️", "not attempted": "·", NOT_CHECKED: "–"}


def render_html(runs: list[Run], rows: list[Row]) -> str:
    e = lambda v: html.escape(str(v))  # noqa: E731
    learners = sorted({r.learner for r in rows} | {r.learner for r in runs})
    exercises = list(dict.fromkeys(r.exercise for r in rows))
    cell = {(r.learner, r.exercise): r for r in rows}
    modes = sorted({r.mode for r in rows if r.mode})
    parts = [
        "<!doctype html><meta charset='utf-8'><title>gpuprinciples gradebook</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f3f3f3}</style>",
        f"<h1>Gradebook</h1><p>{len(learners)} learners, {len(runs)} notebooks, {len(exercises)} exercises; "
        f"graded in mode: {e(', '.join(modes) or '?')} (gpu: timed on a GPU; cpu: Triton interpreter, bytes "
        "and launches counted, no speed claimed). Every run drew fresh secret-seeded inputs.</p>",
        "<h2>Pass / fail</h2><table><tr><th>learner</th><th>passed</th>"
        + "".join(f"<th>{e(x)}</th>" for x in exercises) + "</tr>"]
    for learner in learners:
        mine = [cell[(learner, x)] for x in exercises if (learner, x) in cell]
        tds = "".join(
            f"<td title='{e(r.status)}'>{_MARK.get(r.status, '?')}"
            + (f" {r.speedups.split(';')[0].split(' [')[0]}" if r.speedups else "") + "</td>"
            for r in mine)
        parts.append(f"<tr><td>{e(learner)}</td><td>{sum(r.passed for r in mine)}/{len(mine)}</td>{tds}</tr>")
    parts.append("</table><p>✅ passed · ❌ failed · ⚠️ error · '·' not attempted · – not checked "
                 "(no check ran: deleted, or an earlier error)</p>")

    parts.append("<h2>Leaderboards</h2>")
    for x in exercises:
        what, board = leaderboard(rows, x)
        if board:
            items = "".join(f"<tr><td>{i}</td><td>{e(r.learner)}</td>"
                            f"<td>{e(r.time_ms if r.time_ms is not None else r.bytes_ratio)}</td>"
                            f"<td>{e(r.speedups)}</td></tr>" for i, r in enumerate(board, 1))
            parts.append(f"<h3>{e(x)}</h3><table><tr><th>#</th><th>learner</th><th>{e(what)}</th>"
                         f"<th>speedup [95% interval]</th></tr>{items}</table>")

    parts.append("<h2>What failed, and why</h2>")
    for learner in learners:
        items = [f"<li><b>{e(r.exercise)}</b> ({e(r.status)}): {e(r.reasons or 'no check ran')}</li>"
                 for r in rows if r.learner == learner and not r.passed]
        items += [f"<li>{e(run.notebook)} — {e(run.status)}: {e(err)}</li>"
                  for run in runs if run.learner == learner for err in run.errors]
        if items:
            parts.append(f"<h3>{e(learner)}</h3><ul>{''.join(items)}</ul>")
    parts.append("<h2>Runs</h2><table><tr><th>learner</th><th>notebook</th><th>status</th><th>checks</th>"
                 "<th>seconds</th><th>GPU</th></tr>" + "".join(
                     f"<tr><td>{e(r.learner)}</td><td>{e(r.notebook)}</td><td>{e(r.status)}</td>"
                     f"<td>{len(r.reports)}</td><td>{r.seconds}</td><td>{e(r.device or '-')}</td></tr>" for r in runs)
                 + "</table>")
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------------------------------------
# What each exercise grades, with and without a GPU (for docs and `gpuprinciples exercises`)
# ---------------------------------------------------------------------------------------------


def what_is_graded(exercise) -> tuple[str, str]:
    """(graded on a CPU, graded on a GPU) in words."""
    if exercise.kind == "value":
        return "the answer", "the answer"
    cpu, gpu = ["correctness"], ["correctness"]
    described = [(r.modes, r.describe()) for r in exercise.requirements] + list(exercise.judges)
    for modes, words in described:
        if "cpu" in modes:
            cpu.append(words)
        if "gpu" in modes:
            gpu.append(words)
    for timing in exercise.timing.each() if exercise.timing is not None else ():
        on = f" ({timing.label})" if timing.label else ""
        gpu += [f"speedup over {base} ≥ {need:g}×{on}" for base, need in timing.min_speedup.items()]
        if timing.min_bandwidth_fraction:
            gpu.append(f"≥ {timing.min_bandwidth_fraction:.0%} of copy bandwidth{on}")
        if not timing.min_speedup and not timing.min_bandwidth_fraction:
            gpu.append(f"timed (reported, no target){on}")
    return "; ".join(cpu), "; ".join(gpu)


def exercise_table() -> str:
    """A Markdown table of every exercise and what it grades without and with a GPU."""
    from . import exercises
    lines = ["| exercise | kind | without a GPU (interpreter, counters) | on a GPU |", "| --- | --- | --- | --- |"]
    for ex in exercises.all_exercises().values():
        cpu, gpu = what_is_graded(ex)
        lines.append(f"| `{ex.id}` | {ex.kind} | {cpu} | {gpu} |")
    return "\n".join(lines)
