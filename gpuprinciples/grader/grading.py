"""Grade one answer against one exercise and return a `Report`.

For a function exercise, every time:

1. draw fresh cases with a secret seed (exercises/ say which shapes, values and strides);
2. compute the reference here, on the CPU, and prove the comparison can fail on each case
   (all zeros and the unchanged input must not pass);
3. start a sandbox (sandbox/child.py: a fresh Python with a deadline), send it the learner's function
   and the cases, and read back, per case, the output and the counters; the learner's code never
   runs in this process;
4. judge here (judge.py): exact tensor type, shape, dtype, device, NaN/Inf positions, values;
   inputs left unchanged and not returned; the exercise's requirements on the counters of the
   cases that ran;
5. on a GPU, when all that holds, have the child time the function against the baselines on
   large inputs whose values change between rounds, and judge the raw samples and every timed
   output's fingerprint here.

A hang ends at the time limit, a crash ends the child: either way a sentence in the report.
"""

from __future__ import annotations

import os
import secrets
import time

import torch

from ..course.catalog import get as get_exercise
from ..course.kit import (
    CompilesForGPU,
    FunctionExercise,
    LaunchesTriton,
    ValueExercise,
    compare_tensors,
    compare_values,
)
from ..machine import runtime
from ..sandbox.channel import CaseResult, CompileResult, LoadError, Ready, TimingResult
from ..sandbox.child import Sandbox
from ..sandbox.submission import Submission, SubmissionError, from_function
from ..toolchain import selftest
from . import honesty, judge
from .report import ERROR, FAILED, NOT_ATTEMPTED, PASSED, CheckLine, Report

DEFAULT_TIMEOUT_S = float(os.environ.get("GPUPRINCIPLES_TIMEOUT", "0") or 0) or None
NOT_ATTEMPTED_TEXT = "not attempted yet: replace the `raise NotImplementedError` with your solution"
# timed calls whose outputs the grader checks against its own reference: the first, the last and some drawn at
# random after the run (every call has new values, judge.round_seed; a replayed answer is wrong on most of them)
CHECKED_TIMED_CALLS = 6
# The baselines' samples, timed in the first check of an exercise in this process (a notebook session, on
# this GPU) and reused by the later ones: a learner's second try does not wait for torch.compile again.
# GPUPRINCIPLES_RETIME_BASELINES=1 times them in every check, side by side with the learner's calls.
_EARLIER_BASELINES: dict[tuple[str, int], tuple[float, dict[str, list[float]]]] = {}


def check(exercise_id: str, answer, *, timeout: float | None = None, seed: int | None = None,
          show: bool = True) -> Report:
    """Grade and, in a notebook, show the report. Never raises for a learner's mistake."""
    from ..course.lab.progress import ticking
    answer, changed = _locked(exercise_id, answer)
    # a check takes seconds: show it is working, and clear the line before the verdict
    with ticking(f"grading {exercise_id}", enabled=show, leave=False):
        report = grade(exercise_id, answer, timeout=timeout, seed=seed)
    if changed is not None:
        report.notes.append(
            f"Prediction locked: your first answer this session, {answer!r}, is the one graded, not {changed!r}: a "
            "prediction is made once, before the measurement that follows shows the answer (restart the kernel to "
            "predict afresh).")
    try:  # the log the instructor's gradebook reads ($GPUPRINCIPLES_REPORT_LOG) and the hint tiers; never fatal
        from ..course import hints
        from .report import log_report
        log_report(report)
        hints.record_result(report)
    except Exception:  # noqa: BLE001
        pass
    if show:
        from .display import show as show_report
        show_report(report)
    return report


# check() grades the first answer a session gave to a prediction (ValueExercise.prediction): changing it after the
# measurement has shown the answer would grade hindsight. grade() itself, as the CLI and tests call it, keeps nothing.
_PREDICTIONS: dict[str, object] = {}


def _locked(exercise_id: str, answer):
    """(the answer to grade, the one given now if it differs from the first, else None)."""
    try:
        exercise = get_exercise(exercise_id)
    except KeyError:
        return answer, None
    if not getattr(exercise, "prediction", False) or answer is None or answer is Ellipsis:
        return answer, None
    first = _PREDICTIONS.setdefault(exercise_id, answer)
    try:
        same = bool(first == answer)
    except Exception:  # noqa: BLE001 - an answer whose == is not a truth value
        same = repr(first) == repr(answer)
    return (answer, None) if same else (first, answer)


def grade(exercise_id: str, answer, *, timeout: float | None = None, seed: int | None = None,
          shell: bool = False) -> Report:
    """`shell=True`: the report's advice names the command line's ways (`--timeout`, `gpuprinciples hint`)."""
    started = time.monotonic()
    try:
        exercise = get_exercise(exercise_id)
    except KeyError as exc:
        report = Report(exercise=exercise_id, title="?", mode=runtime.MODE, status=ERROR)
        report.reasons.append(exc.args[0])
        return report
    report = Report(exercise=exercise.id, title=exercise.title, mode=runtime.MODE, kind=exercise.kind)
    problem = selftest.self_test()  # a Triton that silently returns zeros would grade nonsense
    if problem:
        report.status = ERROR
        report.reasons.append(problem)
        return report
    try:
        if isinstance(exercise, ValueExercise):
            _grade_value(exercise, answer, report)
        else:
            _grade_function(exercise, answer, report, timeout=timeout, seed=seed, shell=shell)
    except Exception as exc:  # noqa: BLE001 - a grader bug must not take the notebook down
        report.status = ERROR
        report.reasons.append(f"the grader itself failed ({type(exc).__name__}: {exc}); "
                              "this is a bug in gpuprinciples, not in your answer")
    report.duration_s = round(time.monotonic() - started, 3)
    if not report.passed:
        from ..course.hints import offer
        report.hint = offer(exercise.id, shell=shell)
    return report


# ---------------------------------------------------------------------------------------------
# Value exercises: judged here, nothing of the learner's runs
# ---------------------------------------------------------------------------------------------


def _grade_value(exercise: ValueExercise, answer, report: Report) -> None:
    if answer is None or answer is Ellipsis:
        report.status = NOT_ATTEMPTED
        report.reasons.append("not attempted yet: set your answer in this cell")
        return
    expected = exercise.expected()
    reasons = (exercise.compare or (lambda a, e: compare_values(a, e, exercise.rel_tol)))(answer, expected)
    report.correct = not reasons
    report.checks.append(CheckLine("answer", not reasons, "; ".join(reasons) or f"{answer!r}"))
    report.measurements["answer"] = answer if isinstance(answer, (int, float, str)) else repr(answer)
    for reason in reasons:
        report.fail(reason)
    if not reasons:
        report.status = PASSED


# ---------------------------------------------------------------------------------------------
# Function exercises
# ---------------------------------------------------------------------------------------------


def _grade_function(exercise: FunctionExercise, answer, report: Report, *, timeout, seed, shell=False) -> None:
    try:
        submission = answer if isinstance(answer, Submission) else from_function(answer)
    except SubmissionError as exc:
        report.status = ERROR
        report.reasons.append(str(exc))
        return
    if submission.is_stub:
        report.status = NOT_ATTEMPTED
        report.reasons.append(NOT_ATTEMPTED_TEXT)
        return

    phase = _Phases(report)
    seed = secrets.randbits(62) if seed is None else seed
    cases = exercise.cases(torch.Generator().manual_seed(seed), runtime.MODE)
    expected = [exercise.reference(*c.args, **c.kwargs) for c in cases]
    if exercise.compare is None:
        _prove_comparison_can_fail(exercise, cases, expected)

    phase("references")
    _ceilings_before_the_child(exercise)
    _memory_for_the_child()
    longer = "`--timeout SECONDS`" if shell else "`check(..., timeout=SECONDS)`"
    with Sandbox(timeout or DEFAULT_TIMEOUT_S or exercise.timeout_s, longer=longer) as box:
        box.start(submission.job(exercise.id, runtime.DEVICE))
        hello = box.receive("loading your code", (Ready, LoadError))
        phase("loading")
        if not isinstance(hello, Ready):
            internal = isinstance(hello, LoadError) and hello.internal  # the machine, before the learner's code ran
            report.status = ERROR if internal else FAILED
            where = ("the grader could not start on this machine, before loading your code" if internal
                     else "your code failed when it was loaded")
            report.fail(box.failure or f"{where}: {hello.error}")
            report.output = box.output()
            return
        _note_tampering(report, hello.tampered)
        for reason in honesty.import_sentences(hello.left_at_import):
            report.fail(reason)

        verdicts: list[judge.CaseVerdict] = []
        for index, (case, want) in enumerate(zip(cases, expected)):
            result = box.request({"cmd": "case", "index": index, "args": case.args, "kwargs": case.kwargs,
                                  "decoy": case.decoy}, f"running case {case.label}", (CaseResult,))
            if result is None:
                report.fail(box.failure)
                break
            _note_tampering(report, result.tampered)
            if result.not_attempted and index == 0:
                report.status = NOT_ATTEMPTED
                report.reasons = [NOT_ATTEMPTED_TEXT]
                report.output = box.output()
                return
            verdicts.append(judge.judge_case(exercise, case, want, result, runtime.DEVICE))
            if honesty.left_running(result.watched):  # the next cases would run beside it: this one says why
                break
            if case.kwargs.get("timed") and isinstance(result.output, dict):
                report.measurements["on this GPU"] = _plain_numbers(_summarized(result.output))  # time, memory
                _timed_case_roof(exercise, case, result.output, report)

        phase("cases")
        case_reasons = judge.case_reasons(verdicts)
        for reason in case_reasons:
            report.fail(reason)
        correct = sum(v.correct for v in verdicts)
        report.correct = correct == len(cases)
        beyond = sum(v.beyond_interpreter for v in verdicts)
        # every case that was not right could not run here at all: this machine cannot judge the values
        unjudged = bool(beyond) and correct + beyond == len(cases)
        report.checks.append(CheckLine("correct", None if unjudged else report.correct, (
            f"not judged: {beyond} of {len(cases)} cases cannot run under Triton's CPU interpreter"
            + (f"; the other {correct} match the reference" if correct else "") if unjudged
            else f"{correct} of {len(cases)} cases match the reference")))
        over_read = sum(bool(v.reads) for v in verdicts)
        if over_read:  # the per-element load rules (LiveLoads) failed: shown beside the values, not as them
            report.checks.append(CheckLine("loads", False, f"{over_read} of {len(cases)} cases loaded what they must "
                                           "not, or skipped or re-read live elements"))
        requirements = judge.judge_requirements(exercise.requirements, verdicts, _requirement_mode())
        for r in requirements:
            report.checks.append(CheckLine(r.name, r.passed, r.detail))
            if r.passed is False:
                report.fail(r.detail)
        if runtime.INTERPRETER and any(isinstance(r, CompilesForGPU) for r in exercise.requirements):
            # the pass runs the learner's host code at the GPU's sizes (minutes on a laptop for a loop in Python):
            # only where it can still change the verdict, a pass or values this machine could not judge
            undecided = not report.reasons or (unjudged and set(report.reasons) <= set(case_reasons))
            _compile_gpu_cases(exercise, box, report, undecided)
            phase("compile pass")
        shown = judge.evidence_case(verdicts, requirements)
        if shown is not None:
            report.measurements["counts"] = {"case": shown.case.label, **shown.counts}
            # bytes and their projection for a kernel: not for a custom run (a whole program) nor plain Python
            if runtime.INTERPRETER and exercise.run is None and any(
                    isinstance(r, LaunchesTriton) for r in exercise.requirements):
                from ..machine import specs
                report.measurements.update(judge.byte_summary(exercise, shown.case, shown.counts, {
                    key: specs.SPECS[key].bandwidth for key in ("A100", "H100", "H200") if key in specs.SPECS}))

        if report.status == FAILED and not report.reasons:
            report.status = PASSED
        if unjudged and report.status == FAILED and set(report.reasons) <= set(case_reasons):
            report.status = ERROR  # nothing wrong was seen; what could not run here is for a GPU to grade
        if report.status == PASSED and exercise.timing is not None:
            if runtime.MODE == "gpu" and os.environ.get("GPUPRINCIPLES_UNTIMED"):
                # the verdict-diff test compares the lines both machines judge: no time is claimed
                report.checks.append(CheckLine("speed", None, "not timed (GPUPRINCIPLES_UNTIMED is set)"))
            elif runtime.MODE == "gpu":
                for which in range(len(exercise.timing.each())):
                    if report.status == PASSED:
                        _time_on_gpu(exercise, which, box, report)
                phase("timing")
            else:
                report.checks.append(CheckLine("speed", None, "timed only on a GPU"))
                report.notes.append("CPU run: no GPU speedup is claimed. Correctness and the counted bytes "
                                    "and launches were graded; run on a GPU to be timed.")
        report.output = box.output()


RUNS_ON_THE_GPUS_CASES = "your code reaches its kernels on the GPU's own cases (compiled here, not run)"


def _compile_gpu_cases(exercise: FunctionExercise, box: Sandbox, report: Report, undecided: bool) -> None:
    """The compile pass (compilepass.py): the learner's host code on the GPU's cases, every launch compiled
    for sm_90 and run nowhere; what a GPU refuses at its own sizes fails here too."""
    from . import compilepass
    name = CompilesForGPU().describe()
    line = next((c for c in report.checks if c.name == name), None)
    if line is None or line.passed is not True or box.failure:  # refused already, nothing to judge, or no child
        return
    if not undecided:  # the cases' compiles stand; the GPU's sizes were not compiled, so the line claims no more
        line.passed, line.detail = None, (f"not judged at the GPU's own sizes (the check has failed already); "
                                          f"compiled for the GPU {line.detail}")
        return
    result = box.request({"cmd": "compile", "cases": compilepass.plan(exercise)},
                         "compiling the kernels of a GPU's cases", (CompileResult,))
    if result is None:
        report.fail(box.failure)
        return
    _note_tampering(report, result.tampered)
    # which GPU generations accept the kernels: compiled here, for each, with the GPU's own cases
    report.measurements["compiles for (the GPU's cases, compiled here)"] = compilepass.generations(result.cases)
    refused = compilepass.refusal(result.cases)
    # code that raises on the GPU's own sizes before launching (refusing a large input, asking a blank tensor for
    # values) raises on the GPU too, where no CPU case reaches those sizes: its own line, a CPU's only
    raised = compilepass.unchecked(result.cases)
    timed = sum(bool(case.get("direct")) for case in compilepass.plan(exercise))
    cases = f"the GPU's {len(compilepass.plan(exercise)) - timed} cases and {timed} timed input{'s' * (timed != 1)}"
    if refused:
        line.passed, line.detail = False, refused
        report.fail(refused)
    else:
        line.detail += (f", and on {'the ones of ' * bool(raised)}{cases} your code reached "
                        f"({compilepass.accepted(result.cases)} kernel signatures compiled for the GPU, not run)")
    report.checks.append(CheckLine(RUNS_ON_THE_GPUS_CASES, not raised, raised or f"on {cases}"))
    if raised:
        report.fail(raised)


class _Phases:
    """Seconds since the last mark, by name, into `report.phases_s` (what `bench --grader` shows)."""

    def __init__(self, report: Report):
        self.report, self.last = report, time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        self.report.phases_s[name] = round(now - self.last, 3)
        self.last = now


def _requirement_mode() -> str:
    return "cpu" if runtime.INTERPRETER else "gpu"


def _ceilings_before_the_child(exercise: FunctionExercise) -> None:
    """A timed exercise's ceilings, measured here (when none is cached) before the learner's code runs: measured
    later, while their child could still keep the GPU busy, a ceiling reads low and is cached for 12 hours."""
    if runtime.MODE == "gpu" and (exercise.timing is not None or exercise.timed_roof is not None):
        from ..measure import calibrate
        calibrate.ceilings()


def _memory_for_the_child() -> None:
    """The GPU memory this process caches but no longer uses (the references just computed, a notebook's freed
    tensors) goes back to the GPU: the learner's code runs in another process, which could not allocate it."""
    if runtime.MODE == "gpu" and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _timed_case_roof(exercise: FunctionExercise, case, output: dict, report: Report) -> None:
    """A step timed by the exercise's own run: its fraction of this GPU's roof, as every timed kernel's."""
    from ..course.lab import steproof
    from ..measure import calibrate
    if exercise.timed_roof is None or runtime.MODE != "gpu":
        return
    def roof_with(ceilings):
        return steproof.timed_roof(exercise.timed_roof, case.args[0], output.get("rounds"), ceilings)

    roof = calibrate.judged(roof_with, lambda roof: roof is not None and roof[0]["fraction"] > 1)
    if roof is not None:
        report.measurements["roof"], sentence = roof
        report.notes.append(sentence[0].upper() + sentence[1:] + f" (your step, case {case.label}).")


def _summarized(value):
    """A timed case's output with its raw rounds replaced by their medians, computed here (timing.py)."""
    from ..measure.timing import summarize_rounds
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key == "rounds" and isinstance(item, list) and item and isinstance(item[0], dict):
            names = list(item[0])
            try:
                out["median_ms"] = summarize_rounds(item, names[0], names[-1])["median_ms"]
            except (ValueError, IndexError):
                pass
        else:
            out[key] = _summarized(item)
    return out


def _plain_numbers(value):
    """Numbers, strings and their lists and dicts, rounded for a report; anything else left out."""
    if isinstance(value, dict):
        plain = {str(k): _plain_numbers(v) for k, v in value.items()}
        return {k: v for k, v in plain.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain_numbers(v) for v in value]
    if isinstance(value, bool) or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return round(value, 4)
    return None


def _note_tampering(report: Report, changed: list) -> None:
    if changed:
        report.fail("your code replaced parts of PyTorch or of the grader ("
                    + ", ".join(map(str, changed[:5])) + (" …" if len(changed) > 5 else "")
                    + "): the grader cannot trust what it measures")


def _prove_comparison_can_fail(exercise, cases, expected) -> None:
    """A case that all zeros or the unchanged input would pass grades nothing: refuse it."""
    for case, want in zip(cases, expected):
        if not isinstance(want, torch.Tensor):
            continue
        dtype = judge.output_dtype(case, want)
        if not compare_tensors(torch.zeros_like(want, dtype=dtype), want, case, dtype=dtype):
            raise AssertionError(f"exercise {exercise.id}: all zeros would pass case {case.label}")
        first = next((a for a in case.args if isinstance(a, torch.Tensor)), None)
        if first is not None and first.shape == want.shape and first.dtype == dtype and not compare_tensors(
                first.clone(), want, case, dtype=dtype):
            raise AssertionError(f"exercise {exercise.id}: the unchanged input would pass case {case.label}")


def _time_on_gpu(exercise: FunctionExercise, which: int, box: Sandbox, report: Report) -> None:
    """Time in the child; here, make some timed calls' inputs again and fingerprint their right outputs; judge here.
    `which`: the index of the timed input (Timing.each); the first one's figures are the report's own,
    another's sit under "timing <label>"."""
    spec = exercise.timing.each()[which]
    key = (exercise.id, which)
    earlier = None if os.environ.get("GPUPRINCIPLES_RETIME_BASELINES") else _EARLIER_BASELINES.get(key)
    on = f" ({spec.label})" if spec.label else ""
    timed = _timed_verdict(exercise, spec, which, box, report, earlier)
    if timed is not None and timed[0].undecided and report.status == PASSED:
        # a median at the bar with an interval below it: noise, not a verdict; time again, baselines beside it
        earlier = None
        report.notes.append(f"Timed twice: the first rounds{on} were too noisy to decide "
                            f"({'; '.join(timed[0].reasons)}).")
        timed = _timed_verdict(exercise, spec, which, box, report, earlier)
    if timed is None:
        return
    verdict, result = timed
    if which == 0:
        report.measurements.update(verdict.measurements)
    else:
        report.measurements[f"timing {spec.label or which}"] = verdict.measurements
    if verdict.implausible:
        report.status = ERROR
        report.reasons.append(verdict.implausible + on)
        return
    if earlier:
        report.notes.append(f"The baselines{on} were timed in this session's first check of this exercise, "
                            f"{time.monotonic() - earlier[0]:.0f} s ago, on this GPU (set "
                            "GPUPRINCIPLES_RETIME_BASELINES=1 to time them again, side by side).")
    elif not result.error and result.rounds and not verdict.reasons:
        _EARLIER_BASELINES[key] = (time.monotonic(), {
            name: [r[name] for r in result.rounds] for name in spec.baselines if name in result.rounds[0]})
    if verdict.roof:
        report.notes.append(verdict.roof[0].upper() + verdict.roof[1:] + on + ".")
    for name, passed, detail in verdict.checks:
        report.checks.append(CheckLine(name + on, passed, detail))
    for reason in verdict.reasons:
        report.fail(reason + on)


def _timed_verdict(exercise: FunctionExercise, spec, which: int, box: Sandbox, report: Report, earlier):
    """One timing in the child, judged here: (the verdict, the child's result), or None when the child failed
    (the report says why)."""
    from ..course.lab import roofline
    from ..measure import calibrate

    seeds = [secrets.randbits(62)]  # nothing the child sees reveals the case seed
    sample_seed = secrets.randbits(62)
    result = box.request({"cmd": "time", "which": which, "seeds": seeds, "sample_seed": sample_seed,
                          "baselines": [] if earlier else list(spec.baselines)}, "timing", (TimingResult,))
    if result is None:
        report.fail(box.failure)
        return None
    _note_tampering(report, result.tampered)
    for reason in honesty.sentences(result.watched, "timing input"):
        report.fail(reason)
    calls = len(result.fingerprints)
    rest = list(range(1, calls - 1))
    checked = {0, calls - 1} | set(secrets.SystemRandom().sample(rest, min(len(rest), CHECKED_TIMED_CALLS - 2)))
    references, args = {}, None
    for call in sorted(c for c in checked if c >= 0):
        variant = spec.inputs(torch.Generator(device="cuda").manual_seed(judge.round_seed(seeds[0], call)), "cuda")
        want = exercise.reference(*variant)
        first = variant[0]
        if isinstance(first, torch.Tensor):  # the right output(s) rounded to the inputs' dtype, as returned
            want = [w.to(first.dtype) for w in want] if isinstance(want, (tuple, list)) else want.to(first.dtype)
        references[call] = judge.fingerprint(want, sample_seed)
        args = args if args is not None else variant
        del want
    if args is None:  # nothing came back: the judge says so; the inputs still give the minimum bytes
        args = spec.inputs(torch.Generator(device="cuda").manual_seed(seeds[0]), "cuda")
    def judge_with(ceilings):
        return judge.judge_timing(spec, exercise.requirements, args, references, result, ceilings.copy_bandwidth,
                                  earlier[1] if earlier else None, peak_flops=roofline.inputs_peak(ceilings, args))

    verdict = calibrate.judged(judge_with, lambda verdict: verdict.implausible)  # faster than the copy ceiling
    return verdict, result
