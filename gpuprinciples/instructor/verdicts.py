"""One verdict everywhere, checked: the requirement lines of the repo's own submission fixtures, graded
on a CPU and on a GPU, must agree.

    python -m gpuprinciples.instructor.verdicts --write tests/fixtures/cpu_verdicts.json   # on a CPU: record
    python -m gpuprinciples.instructor.verdicts --write tests/fixtures/cpu_verdicts.json --only PATH ...
                                                              # re-record the fixtures a change touched
    (tests/test_one_verdict.py, gpu-marked, grades the same fixtures on a GPU and compares)

The CPU's lines are recorded in a checked-in file, not recomputed on the GPU machine: the interpreter
grades these fixtures in minutes of CPU time, which a GPU run should not spend (and Triton 3.6's
interpreter, on the GPU image, is not the one CPUs grade with). Re-record after a change to the grading.

Compared: the "correct" line and each requirement the exercise states (its `describe()`), never the
timing lines. A line that one machine cannot measure (None there) is listed, not compared.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: gpuprinciples/instructor/verdicts.py
SUBMISSIONS = ROOT / "tests" / "submissions"
# the sandbox's and the trust tests' fixtures are attacks on the grader's process (hangs, crashes, forged
# messages), graded by their own tests; lesson 09's ranks take tens of seconds each
FOLDERS = ("fusion", "compile", "decoding", "flash", "hierarchy", "amp", "bounds", "checkpoint", "profiling",
           "tensorcores", "verdict", "backward")
SEED = 27


def fixtures() -> list[tuple[str, str, str]]:
    """(path relative to the repository, exercise id, function name) for every fixture compared, as its header
    lines state them; a file that hangs on purpose is left out (it would only wait for its limit)."""
    found = []
    for folder in FOLDERS:
        for path in sorted((SUBMISSIONS / folder).glob("*.py")):
            stated = _headers().header(path)
            if "hang" not in path.stem and "exercise" in stated:
                found.append((str(path.relative_to(ROOT)), stated["exercise"], stated["function"]))
    return found


_HEADERS_LOCK = threading.Lock()


def _headers():
    """tests/submission_headers.py: the fixtures' header format, and their mutants made from their twins (the
    same loader the tests use, so both grade the same text). Loaded under a lock: `grade_all`'s threads ask at
    once, and a module half run has no `submission` yet."""
    import importlib.util
    with _HEADERS_LOCK:
        if "submission_headers" not in sys.modules:
            path = ROOT / "tests" / "submission_headers.py"
            spec = importlib.util.spec_from_file_location("submission_headers", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules["submission_headers"] = module
            spec.loader.exec_module(module)
    return sys.modules["submission_headers"]


def lines(report, exercise_id: str) -> dict[str, bool | None]:
    """The report's non-timing lines: `correct` and the exercise's own requirements."""
    from ..course.catalog import get
    wanted = {"correct", *(r.describe() for r in getattr(get(exercise_id), "requirements", ()))}
    return {line.name: line.passed for line in report.checks if line.name in wanted}


def grade_all(entries, workers: int = 2, log=None) -> dict[str, dict]:
    """Grade each (path, exercise, function) with the fixed seed; `log(path, result)` as each one ends."""
    from ..grader.grading import grade

    def one(entry):
        path, exercise, name = entry
        report = grade(exercise, _headers().submission(ROOT / path, name), seed=SEED)
        result = {"exercise": exercise, "function": name, "status": report.status,
                  "lines": lines(report, exercise), "reasons": report.reasons[:2]}
        if log:
            log(path, result)
        return path, result

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(pool.map(one, entries))


def compare(cpu: dict, gpu: dict) -> tuple[list[dict], list[str]]:
    """(one row per fixture and line, the disagreements in words). A requirement line both sides judged must
    agree. The `correct` line is listed, not compared: a CPU's comparison also judges what only the interpreter
    counts (which elements each kernel loaded), and a GPU's counts a case its compiler refused as not correct
    where a CPU's compile pass fails the requirement instead; the statuses are listed too."""
    rows, disagree = [], []
    for path, mine in sorted(gpu.items()):
        theirs = cpu.get(path)
        if theirs is None:
            continue
        for name in sorted(set(mine["lines"]) | set(theirs["lines"])):
            c, g = theirs["lines"].get(name), mine["lines"].get(name)
            rows.append({"fixture": path, "line": name, "cpu": c, "gpu": g})
            if name != "correct" and c is not None and g is not None and c != g:
                disagree.append(f"{path}: '{name}' is {c} on the CPU, {g} on the GPU "
                                f"(CPU: {theirs['reasons'][:1]}; GPU: {mine['reasons'][:1]})")
    return rows, disagree


def table(rows: list[dict]) -> str:
    """Counts of (CPU, GPU) outcomes per line: what agreed, what one machine could not measure."""
    from collections import Counter
    counted = Counter((r["line"], r["cpu"], r["gpu"]) for r in rows)
    out = ["line | CPU | GPU | fixtures"]
    out += [f"{line} | {c} | {g} | {n}" for (line, c, g), n in sorted(counted.items(), key=str)]
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuprinciples.instructor.verdicts",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="JSON", help="grade every fixture here and write their lines")
    parser.add_argument("--only", nargs="+", metavar="PATH",
                        help="grade only these fixtures (paths from the repository), and with --write keep the "
                             "others' lines as the file has them: after a change that touches a few fixtures")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    from ..machine import runtime
    entries = fixtures()
    kept = {}
    if args.only:
        compared = {path for path, _, _ in entries}
        unknown = set(args.only) - compared
        if unknown:
            parser.error(f"not a compared fixture: {', '.join(sorted(unknown))}")
        entries = [entry for entry in entries if entry[0] in args.only]
        if args.write and Path(args.write).exists():
            recorded = json.loads(Path(args.write).read_text())
            if recorded.get("mode") != runtime.MODE or recorded.get("seed") != SEED:
                parser.error(f"{args.write} was recorded on another machine or seed: record every fixture")
            kept = {path: lines for path, lines in recorded["fixtures"].items()
                    if path in compared and path not in args.only}
    graded = {**kept, **grade_all(entries, args.workers)}
    payload = {"mode": runtime.MODE, "seed": SEED, "fixtures": graded}
    text = json.dumps(payload, indent=1, sort_keys=True) + "\n"
    if args.write:
        Path(args.write).write_text(text)
        print(f"{len(graded) - len(kept)} fixtures graded ({runtime.MODE}), {len(kept)} kept; written to {args.write}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
