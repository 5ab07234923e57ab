"""`gpuprinciples` on the command line: doctor, grade, hint, release, ceilings, bench, gradebook, exercises, figures.

Exit codes of `grade` (a public contract): 0 passed, 1 not passed (failed, not attempted or an
error in the learner's code), 2 a usage error (unknown exercise, unreadable file). Every usage error
(of every command) exits 2, and what it writes to stderr starts "error: " and a sentence.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _doctor(args) -> int:
    from .machine import runtime
    from .toolchain import selftest
    info = runtime.describe()
    problem = selftest.self_test()
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
    from .course import catalog
    from .grader import display
    from .grader.grading import grade
    from .sandbox.submission import SubmissionError, from_path, value_from_spec
    try:
        exercise = catalog.get(args.exercise)
    except KeyError as exc:
        return _usage_error(exc.args[0])
    try:  # a value exercise's answer is a value (on the line, or a literal in a file), never run
        answer = value_from_spec(args.submission) if exercise.kind == "value" else from_path(args.submission)
    except SubmissionError as exc:
        return _usage_error(str(exc))
    report = grade(args.exercise, answer, timeout=args.timeout, shell=True)
    args.exit_code = 0 if report.passed else 1  # main() keeps it when the reader closes the pipe
    print(report.to_json() if args.json else display.text(report, colour=display.use_colour(sys.stdout)))
    return 0 if report.passed else 1


def _hint(args) -> int:
    from .course import catalog
    from .course.hints import hint
    try:
        catalog.get(args.exercise)
    except KeyError as exc:
        return _usage_error(exc.args[0])
    hint(args.exercise)
    return 0


def _release(args) -> int:
    from .instructor.notebooks import release
    # release() removes every lesson without a solution: a mistyped --solutions would empty lessons/
    if not any(Path(args.solutions).glob("*.ipynb")):
        return _usage_error(f"no notebooks in {Path(args.solutions)} (--solutions names their folder)")
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
    from .machine import runtime
    from .measure import calibrate
    if not runtime.HAS_CUDA:
        c = calibrate.measure_cpu_ceilings()
        print("No GPU here: this CPU's ceilings (CPU figures, not a GPU's).")
    else:
        c = calibrate.ceilings(refresh=args.refresh)
    print(ceilings_table(c))
    return 0


def ceilings_table(c) -> str:
    """The measured ceilings as a table people read: what, how fast, in which unit."""
    import time
    rows = [("device", c.device_name, ""), ("copy bandwidth (read + write)", f"{c.copy_bandwidth / 1e9:,.1f}", "GB/s")]
    for label, rate in (("fp32 matmul" + (", TF32 off" if c.device == "cuda" else ""), c.fp32_flops),
                        ("fp32 matmul, TF32 on", c.tf32_flops), ("bf16 matmul", c.bf16_flops)):
        if rate:
            rows.append((label, f"{rate / 1e12:,.2f}", "TFLOP/s"))
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.measured_at)) if c.measured_at else "?"
    rows.append(("measured", when + (" (quick)" if c.quick else ""), ""))
    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows[1:-1]) if len(rows) > 2 else 0
    return "\n".join(f"{name:<{width}}  {value:>{value_width}} {unit}".rstrip() if unit else f"{name:<{width}}  {value}"
                     for name, value, unit in rows)


def _bench(args) -> int:
    from .course import catalog
    from .instructor.bench import MODEL_BENCH, grader_main
    from .instructor.bench import main as bench_main
    from .sandbox.submission import SubmissionError, from_path
    wanted = list(filter(None, (args.only or "").split(",")))
    for item in args.submission:
        exercise_id, sep, spec = item.partition("=")
        if not sep:
            return _usage_error(f"--submission {item}: write it as EXERCISE=FILE.py:FUNCTION")
        try:
            from_path(spec)
        except SubmissionError as exc:
            return _usage_error(str(exc))
        wanted.append(exercise_id)
    for exercise_id in wanted:
        if exercise_id == MODEL_BENCH and not args.grader:  # lesson 10's model: a benchmark, not an exercise
            continue
        try:
            catalog.get(exercise_id)
        except KeyError as exc:
            return _usage_error(exc.args[0])
    if args.grader:
        return grader_main(json_output=args.json, only=args.only, submissions=args.submission)
    return bench_main(json_output=args.json, only=args.only)


def _gradebook(args) -> int:
    from tqdm import tqdm

    from .instructor import gradebook, intake
    if args.jobs < 1:
        return _usage_error(f"--jobs {args.jobs}: give at least 1")
    found = intake.find(args.submissions)
    try:
        if not found.notebooks:
            listed = "".join(f"\n  {f}: {why}" for f, why in found.skipped[:20])
            return _usage_error(f"no learner notebooks in {args.submissions} (SUBMISSIONS/<learner>/*.ipynb, "
                                f"nbgrader's submitted/<learner>/<assignment>/, <learner>_<lesson>.ipynb files, "
                                f"or a .zip of these){listed}")
        learners = len({n.learner for n in found.notebooks})
        print(f"{len(found.notebooks)} notebooks of {learners} learners ({found.layout}); "
              f"{len(found.skipped)} files left out" + (":" if found.skipped else "."))
        for f, why in found.skipped:
            print(f"  left out {f}: {why}")
        devices = None if args.gpus is None else [d for d in args.gpus.split(",") if d]
        out = Path(args.out)
        with tqdm(total=len(found.notebooks), desc="notebooks", unit="notebook") as bar:
            def finished(r):
                bar.update(1)
                bar.write(f"{r.learner}/{r.notebook}: {r.status}, {len(r.reports)} checks, {r.seconds} s")

            runs = gradebook.run_all(args.submissions, timeout=args.timeout, executed_dir=out / "executed",
                                     devices=devices, progress=finished, jobs=args.jobs, found=found)
        for kind, path in gradebook.write(runs, out, found.skipped).items():
            print(f"wrote {path}")
    finally:
        found.close()
    return 0


def _exercises(args) -> int:
    from .course import catalog
    from .instructor import gradebook
    if args.write:
        if not gradebook.write_exercise_table(Path(args.write)):
            return _usage_error(f"{args.write} has no place for the table: put these two lines where it goes\n"
                                f"{gradebook.TABLE_BEGIN}\n{gradebook.TABLE_END}")
        print(f"wrote the exercise table into {args.write}")
        return 0
    if args.markdown:
        print(gradebook.exercise_table())
        return 0
    for ex in catalog.all_exercises().values():
        cpu, gpu = gradebook.what_is_graded(ex)
        print(f"{ex.id}  ({ex.kind}) {ex.title}\n    without a GPU: {cpu}\n    on a GPU:      {gpu}")
    return 0


def _figures(args) -> int:
    from .instructor.figures import main as figures_main
    if args.from_json:
        try:
            json.loads(Path(args.from_json).read_text())
        except (OSError, ValueError) as exc:
            return _usage_error(f"--from {args.from_json} is not a saved run ({exc})")
    return figures_main(write=args.write, json_path=args.json, from_json=args.from_json)


def _usage_error(sentence: str) -> int:
    print(f"error: {sentence}", file=sys.stderr)
    return 2


class _Parser(argparse.ArgumentParser):
    """argparse's usage errors in the same form as ours: "error: …" first, then the usage line."""

    def error(self, message):
        self.exit(2, f"error: {message}\n{self.format_usage()}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpuprinciples", description=__doc__.split("\n\n")[0],
                     epilog="`gpuprinciples COMMAND --help` says more of each command.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, func, summary, details=""):
        p = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + "." + details)
        p.set_defaults(func=func)
        return p

    p = command("doctor", _doctor, "what this machine is, and whether the course can run",
                " Exit code 0 when it can, 1 when its self-test found a problem.")
    p.add_argument("--json", action="store_true", help="print what it found as one JSON object")

    p = command("grade", _grade, "grade FILE.py:FUNCTION (or a value) against an exercise",
                " Exit code 0 passed, 1 not passed, 2 a usage error. A value exercise takes a value: "
                "`grade factory.intensity 0.083`, or FILE.py:NAME where the file assigns NAME a literal.")
    p.add_argument("exercise", help="exercise id, e.g. fusion.cos_cos (`gpuprinciples exercises` lists them)")
    p.add_argument("submission", help="FILE.py:FUNCTION; for a value exercise a value, or FILE.py:NAME")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds before the check is stopped (default: $GPUPRINCIPLES_TIMEOUT if set, "
                        "else the exercise's own limit, 60 to 300 s)")

    p = command("hint", _hint, "show the next hint for an exercise (the solution after the last)",
                " The same tiers as hint() in a notebook; GPUPRINCIPLES_HINTS=off turns them off.")
    p.add_argument("exercise", help="exercise id, e.g. fusion.cos_cos")

    p = command("release", _release, "write lessons/ from solutions/",
                " Solutions are cut out, instructor cells dropped; a lesson without a solution is removed.")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if lessons/ is stale")
    p.add_argument("--solutions", default="solutions", metavar="DIR",
                   help="folder of the source notebooks (default: solutions)")
    p.add_argument("--lessons", default="lessons", metavar="DIR",
                   help="folder the learners' notebooks are written to (default: lessons)")

    p = command("ceilings", _ceilings, "measure this GPU's copy bandwidth and matmul rates",
                " Without a GPU, this CPU's figures.")
    p.add_argument("--refresh", action="store_true",
                   help="measure again even if a measurement under 12 hours old is cached")

    p = command("bench", _bench, "time every reference solution against PyTorch's best path (GPU)",
                " With --grader, time the grader itself (GPU or CPU).")
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    p.add_argument("--only", default=None, metavar="IDS", help="comma-separated exercise ids")
    p.add_argument("--grader", action="store_true",
                   help="time the grader instead: a first and a second check of each solution (GPU or CPU)")
    p.add_argument("--submission", action="append", default=[], metavar="EXERCISE=FILE.py:FUNCTION",
                   help="with --grader: also check this submission (repeatable)")

    p = command("gradebook", _gradebook, "run every learner's notebooks and write a CSV and HTML gradebook")
    p.add_argument("submissions", help="a folder of SUBMISSIONS/<learner>/*.ipynb, nbgrader's submitted/ folder, a "
                   "folder of <learner>_<lesson>.ipynb, or a .zip of one of these (never modified)")
    p.add_argument("--out", required=True, help="folder for gradebook.csv, gradebook.html, executed notebooks")
    p.add_argument("--timeout", type=int, default=600, metavar="SECONDS",
                   help="seconds each cell may run (default: 600)")
    p.add_argument("--gpus", default=None, help="comma-separated GPU ids, one worker each (default: all visible)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="notebooks run at once (default: 1); without a GPU, N processes; with GPUs, at most one "
                        "notebook per GPU, never two timing on one GPU")

    p = command("exercises", _exercises, "list every exercise and what it grades with and without a GPU")
    p.add_argument("--markdown", action="store_true", help="one Markdown table")
    p.add_argument("--write", metavar="PAGE", help="put the table into PAGE between its two markers "
                                                   "(docs/workshop.md has them)")

    p = command("figures", _figures, "measure every figure the lessons quote on this GPU; write docs/measured.md")
    p.add_argument("--write", metavar="PAGE", help="write the page there (default: print it)")
    p.add_argument("--json", metavar="FILE", help="also save the raw measurements")
    p.add_argument("--from", dest="from_json", metavar="FILE", help="render a saved run instead (no GPU needed)")
    return parser


def main(argv=None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        code = args.func(args)
        sys.stdout.flush()  # here, not at exit: a closed pipe is caught below
    except BrokenPipeError:
        # the reader stopped reading (`gpuprinciples grade ... | head`): not an error of ours, but the verdict
        # stands: a failed grade still exits 1. Point stdout at /dev/null so the interpreter's own flush at
        # exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return getattr(args, "exit_code", 0)
    return code


if __name__ == "__main__":
    sys.exit(main())
