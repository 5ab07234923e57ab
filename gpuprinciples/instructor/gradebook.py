"""The instructor's gradebook: run every learner's notebooks, collect every check, write CSV and HTML.

Layouts (intake.py): `SUBMISSIONS/<learner>/*.ipynb`, nbgrader's `submitted/<learner>/<assignment>/`,
one folder of `<learner>_<lesson>.ipynb`, or any of these zipped by an LMS; every file left out is listed
with the reason, on the page and by the CLI. Each notebook is copied (with its learner's folder) to a
temporary directory and executed there with nbclient (`notebooks.execute`, errors allowed, a time
limit per cell), so submissions are never touched. The kernel runs with
`GPUPRINCIPLES_REPORT_LOG=<file>`: every `check()` appends its Report there as one JSON line
(`log_report`, called from `grading.check`). Running a notebook again *is* a hidden trial: the
grader draws fresh secret-seeded inputs on every run.

With several GPUs visible, one worker per GPU (its `CUDA_VISIBLE_DEVICES` set to that GPU), so no
two notebooks share a GPU and timings are not disturbed; without a GPU, `jobs` worker processes.
The page is rendered from templates/gradebook.html.j2 (jinja2 escapes every value).

Trust: the log is written by the kernel that runs the learner's code, so a learner who sets out to
forge it can. The gradebook guards against mistakes, not against a determined cheat.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..grader.report import LOG_ENV  # the log check() appends each report to (grader/report.py)
from . import intake

NOT_CHECKED = "not checked"
CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([\w.]+)["']""")


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
    """(learner, notebook) for every notebook of the class, in any layout intake.py knows, sorted."""
    found = intake.find(submissions)
    try:
        return [(n.learner, n.path) for n in found.notebooks]
    finally:
        found.close()


def run_notebook(learner: str, notebook: Path, *, timeout: int = 600, executed_dir=None, device: str | None = None,
                 label: str | None = None, folder: Path | None | bool = True) -> Run:
    """Execute a copy of one notebook in a fresh kernel and collect what its checks reported.
    `folder`: what is copied beside it (default its own folder; None: the notebook alone)."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from . import notebooks

    notebook = Path(notebook)
    label = label or notebook.name
    run = Run(learner, label, expected=_checked_ids(notebook), device=device or "")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpuprinciples-gradebook-") as tmp:
        copy = Path(tmp) / "work"
        if folder is None:  # one file of a folder of every learner's files: the notebook alone
            copy.mkdir()
            shutil.copy2(notebook, copy / notebook.name)
        else:
            shutil.copytree(notebook.parent if folder is True else folder, copy,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
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
                out = Path(executed_dir) / learner / label
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


def _run_in_worker(notebook: intake.Notebook, timeout, executed_dir) -> Run:
    return run_notebook(notebook.learner, notebook.path, timeout=timeout, executed_dir=executed_dir,
                        device=_WORKER_DEVICE, label=notebook.label, folder=notebook.folder)


def run_all(submissions, *, timeout: int = 600, executed_dir=None, devices: list[str] | None = None,
            progress=None, jobs: int = 1, found: intake.Intake | None = None) -> list[Run]:
    """Execute every notebook, in the order found. With GPUs: one worker per GPU (at most `jobs` of them when
    more than one is asked for), each holding its GPU for good, so no two notebooks time on one GPU at once.
    Without a GPU: `jobs` worker processes. `progress(run)` is called as each notebook finishes."""
    own = found is None
    found = intake.find(submissions) if own else found
    try:
        work = list(found.notebooks)
        devices = visible_gpus() if devices is None else devices
        workers = (min(len(devices), jobs) if jobs > 1 else len(devices)) if devices else max(1, jobs)
        if workers <= 1:
            runs = []
            for nb in work:
                runs.append(run_notebook(nb.learner, nb.path, timeout=timeout, executed_dir=executed_dir,
                                         device=devices[0] if devices else None, label=nb.label, folder=nb.folder))
                if progress:
                    progress(runs[-1])
            return runs
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        context = multiprocessing.get_context("spawn")  # never fork a process that may hold CUDA
        queue = context.Queue()
        for device in devices[:workers] or [None] * workers:
            queue.put(device)
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_claim_device,
                                 initargs=(queue,)) as pool:
            futures = {pool.submit(_run_in_worker, nb, timeout, executed_dir): i for i, nb in enumerate(work)}
            runs: list[Run | None] = [None] * len(work)
            for future in as_completed(futures):
                runs[futures[future]] = future.result()
                if progress:
                    progress(runs[futures[future]])
        return runs
    finally:
        if own:
            found.close()


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


def write(runs: list[Run], out, skipped: list[tuple[str, str]] = ()) -> dict[str, Path]:
    """gradebook.csv, gradebook.html, gradebook.json (every run and report) and skipped.csv (the files of the
    submissions left out, with why: intake.py) in `out`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = rows_of(runs)
    paths = {"csv": out / "gradebook.csv", "html": out / "gradebook.html", "json": out / "gradebook.json",
             "skipped": out / "skipped.csv"}
    with open(paths["csv"], "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, CSV_FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow({**asdict(row), "passed": row.passed})
    paths["html"].write_text(render_html(runs, rows, skipped), encoding="utf-8")
    paths["json"].write_text(json.dumps([asdict(r) for r in runs], indent=1, default=str), encoding="utf-8")
    with open(paths["skipped"], "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["file", "why"])
        writer.writerows(skipped)
    return paths


# a row's status, in the words a report uses (display.py)
WORD = {"passed": "PASSED", "failed": "FAILED", "error": "ERROR", "not attempted": "NOT ATTEMPTED",
        NOT_CHECKED: "NOT CHECKED"}
SHORT_REASON = 160  # characters of a reason shown before "more"


def _short(text: str) -> str:
    return text if len(text) <= SHORT_REASON else text[:SHORT_REASON].rsplit(" ", 1)[0] + " …"


def class_plot_svg(rows: list[Row]) -> str:
    """Each learner's speedup per exercise (GPU), else bytes moved ÷ minimum (CPU counts), as an inline SVG;
    "" when no row has either."""
    first_speedup = {(r.learner, r.exercise): float(re.search(r"([\d.]+)×", r.speedups).group(1))
                     for r in rows if r.passed and re.search(r"([\d.]+)×", r.speedups)}
    if first_speedup:
        values, label = first_speedup, "speedup over the first baseline (×, GPU timing)"
    else:
        values = {(r.learner, r.exercise): r.bytes_ratio for r in rows if r.passed and r.bytes_ratio is not None}
        label = "bytes moved ÷ the minimum (counted, no GPU: lower is better)"
    if not values:
        return ""
    import io

    import matplotlib
    from matplotlib.figure import Figure
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, small
    exercises = list(dict.fromkeys(x for _, x in values))
    learners = sorted({who for who, _ in values})
    fig = Figure(figsize=(max(5.0, 1.2 * len(exercises) + 2), 3.2))
    ax = fig.subplots()
    width = 0.8 / len(learners)
    for k, learner in enumerate(learners):
        xs = [i + k * width for i, x in enumerate(exercises) if (learner, x) in values]
        ys = [values[(learner, x)] for x in exercises if (learner, x) in values]
        ax.bar(xs, ys, width, label=learner)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(exercises))], exercises, rotation=20, ha="right")
    ax.set_ylabel(label, fontsize=8)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.legend(fontsize=7, ncols=min(len(learners), 6))
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    return buffer.getvalue()[buffer.getvalue().index("<svg"):]


def render_html(runs: list[Run], rows: list[Row], skipped: list[tuple[str, str]] = ()) -> str:
    from ..grader.display import template
    learners = sorted({r.learner for r in rows} | {r.learner for r in runs})
    exercises = list(dict.fromkeys(r.exercise for r in rows))
    cell = {(r.learner, r.exercise): r for r in rows}
    table = []
    for learner in learners:
        mine = [cell.get((learner, x)) for x in exercises]
        table.append({"learner": learner, "passed": sum(bool(r and r.passed) for r in mine),
                      "of": sum(r is not None for r in mine),
                      "cells": [(WORD.get(r.status, r.status.upper()), r.status,
                                 r.speedups.split(";")[0].split(" [")[0] if r.speedups else "") if r else None
                                for r in mine]})
    boards = []
    for x in exercises:
        what, board = leaderboard(rows, x)
        if board:
            boards.append((x, what, board))
    failures = {}
    for learner in learners:
        items = [(r.exercise, WORD.get(r.status, r.status), _short(r.reasons or "no check ran"), r.reasons)
                 for r in rows if r.learner == learner and not r.passed]
        items += [(run.notebook, run.status, _short(err), err) for run in runs if run.learner == learner
                  for err in run.errors]
        if items:
            failures[learner] = items
    from markupsafe import Markup
    return template("gradebook.html.j2", __package__).render(
        learners=learners, runs=runs, exercises=exercises, table=table, boards=boards, failures=failures,
        skipped=list(skipped), modes=", ".join(sorted({r.mode for r in rows if r.mode})) or "?",
        plot=Markup(class_plot_svg(rows)))


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
    from ..course import catalog
    lines = ["| exercise | kind | without a GPU (interpreter, counters) | on a GPU |", "| --- | --- | --- | --- |"]
    for ex in catalog.all_exercises().values():
        cpu, gpu = what_is_graded(ex)
        lines.append(f"| `{ex.id}` | {ex.kind} | {cpu} | {gpu} |")
    return "\n".join(lines)


TABLE_BEGIN = "<!-- exercise table: generated by `gpuprinciples exercises --write PAGE`; edits are lost -->"
TABLE_END = "<!-- end of the exercise table -->"


def write_exercise_table(page: Path) -> bool:
    """Put the table between the page's two markers, replacing what was there; False if the page lacks them."""
    text = page.read_text()
    begin, end = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if begin < 0 or end < begin:
        return False
    page.write_text(f"{text[:begin + len(TABLE_BEGIN)]}\n{exercise_table()}\n{text[end:]}")
    return True
