"""`gpuprinciples` on the command line: doctor, grade, release, ceilings, bench, gradebook, exercises.

Exit codes of `grade` (a public contract): 0 passed, 1 not passed (failed, not attempted or an
error in the learner's code), 2 a usage error (unknown exercise, unreadable file).
"""

from __future__ import annotations

import argparse
import json
import sys


def _doctor(args) -> int:
    from . import runtime
    info = runtime.describe()
    problem = runtime.self_test()
    info["self_test"] = problem or "ok"
    if args.json:
        print(json.dumps(info, indent=2))
        return 1 if problem else 0
    width = max(map(len, info))
    for key, value in info.items():
        print(f"{key:>{width}}  {value}")
    print()
    if runtime.HAS_CUDA:
        print("GPU mode: kernels are compiled for this GPU; checks time them against PyTorch.")
    else:
        print("CPU mode: no CUDA GPU is visible, so Triton kernels run under Triton's interpreter.\n"
              "Every lesson runs; checks grade correctness and counted bytes/launches, not speed.")
    if problem:
        print(f"\nPROBLEM: {problem}")
        return 1
    print("The course can run here.")
    return 0


def _grade(args) -> int:
    from . import exercises
    from .grading import grade
    from .submission import SubmissionError, from_path
    try:
        exercises.get(args.exercise)
    except KeyError as exc:
        print(exc.args[0], file=sys.stderr)
        return 2
    try:
        submission = from_path(args.submission)
    except SubmissionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = grade(args.exercise, submission, timeout=args.timeout)
    print(report.to_json() if args.json else report)
    return 0 if report.passed else 1


def _release(args) -> int:
    from .notebooks import release
    changed = release(args.solutions, args.lessons, check=args.check)
    if args.check:
        if changed:
            print("lessons/ is stale; run `gpuprinciples release`. Out of date: " + ", ".join(changed))
            return 1
        print("lessons/ is up to date.")
        return 0
    for path in changed:
        print(f"wrote {path}")
    return 0


def _ceilings(args) -> int:
    from . import hardware, runtime
    if not runtime.HAS_CUDA:
        c = hardware.measure_cpu_ceilings()
        print("No GPU here: this CPU's ceilings (CPU figures, not a GPU's):")
    else:
        c = hardware.ceilings(refresh=args.refresh)
    print(json.dumps(c.as_dict() if hasattr(c, "as_dict") else c.__dict__, indent=2, default=str))
    return 0


def _bench(args) -> int:
    from .bench import grader_main
    from .bench import main as bench_main
    if args.grader:
        return grader_main(json_output=args.json, only=args.only, submissions=args.submission)
    return bench_main(json_output=args.json, only=args.only)


def _gradebook(args) -> int:
    from pathlib import Path

    from . import gradebook
    if not Path(args.submissions).is_dir() or not gradebook.find_notebooks(args.submissions):
        print(f"error: no SUBMISSIONS/<learner>/*.ipynb under {args.submissions}", file=sys.stderr)
        return 2
    devices = None if args.gpus is None else [d for d in args.gpus.split(",") if d]
    out = Path(args.out)
    runs = gradebook.run_all(args.submissions, timeout=args.timeout, executed_dir=out / "executed", devices=devices,
                             progress=lambda r: print(f"{r.learner}/{r.notebook}: {r.status}, "
                                                      f"{len(r.reports)} checks, {r.seconds} s", flush=True))
    for kind, path in gradebook.write(runs, out).items():
        print(f"wrote {path}")
    return 0


def _exercises(args) -> int:
    from . import exercises, gradebook
    if args.markdown:
        print(gradebook.exercise_table())
        return 0
    for ex in exercises.all_exercises().values():
        cpu, gpu = gradebook.what_is_graded(ex)
        print(f"{ex.id}  ({ex.kind}) {ex.title}\n    without a GPU: {cpu}\n    on a GPU:      {gpu}")
    return 0


def _figures(args) -> int:
    from .figures import main as figures_main
    return figures_main(write=args.write, json_path=args.json, from_json=args.from_json)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gpuprinciples", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="what this machine is, and whether the course can run")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_doctor)

    p = sub.add_parser("grade", help="grade FILE.py:FUNCTION against an exercise")
    p.add_argument("exercise", help="exercise id, e.g. fusion.cos_cos")
    p.add_argument("submission", help="FILE.py:FUNCTION")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--timeout", type=float, default=None, help="seconds before the check is stopped")
    p.set_defaults(func=_grade)

    p = sub.add_parser("release", help="write lessons/ from solutions/")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if lessons/ is stale")
    p.add_argument("--solutions", default="solutions")
    p.add_argument("--lessons", default="lessons")
    p.set_defaults(func=_release)

    p = sub.add_parser("ceilings", help="measure this GPU's copy bandwidth and matmul rates")
    p.add_argument("--refresh", action="store_true")
    p.set_defaults(func=_ceilings)

    p = sub.add_parser("bench", help="time every reference solution against PyTorch's best path (GPU)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--only", default=None, help="comma-separated exercise ids")
    p.add_argument("--grader", action="store_true",
                   help="time the grader instead: a first and a second check of each solution (GPU or CPU)")
    p.add_argument("--submission", action="append", default=[], metavar="EXERCISE=FILE.py:FUNCTION",
                   help="with --grader: also check this submission (repeatable)")
    p.set_defaults(func=_bench)

    p = sub.add_parser("gradebook", help="run every learner's notebooks and write a CSV and HTML gradebook")
    p.add_argument("submissions", help="a folder of SUBMISSIONS/<learner>/*.ipynb (never modified)")
    p.add_argument("--out", required=True, help="folder for gradebook.csv, gradebook.html, executed notebooks")
    p.add_argument("--timeout", type=int, default=600, help="seconds each cell may run")
    p.add_argument("--gpus", default=None, help="comma-separated GPU ids, one worker each (default: all visible)")
    p.set_defaults(func=_gradebook)

    p = sub.add_parser("exercises", help="list every exercise and what it grades with and without a GPU")
    p.add_argument("--markdown", action="store_true", help="one Markdown table")
    p.set_defaults(func=_exercises)

    p = sub.add_parser("figures", help="measure every figure the lessons quote on this GPU; write docs/measured.md")
    p.add_argument("--write", metavar="PAGE", help="write the page there (default: print it)")
    p.add_argument("--json", metavar="FILE", help="also save the raw measurements")
    p.add_argument("--from", dest="from_json", metavar="FILE", help="render a saved run instead (no GPU needed)")
    p.set_defaults(func=_figures)

    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
