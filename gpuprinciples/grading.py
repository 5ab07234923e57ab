"""Grade one answer against one exercise and return a `Report`.

For a function exercise, every time:

1. draw fresh cases with a secret seed (exercises/ say which shapes, values and strides);
2. compute the reference here, on the CPU, and prove the comparison can fail on each case
   (all zeros and the unchanged input must not pass);
3. spawn a fresh Python, send it the learner's source and the cases, and read back, per case,
   the output and the counters; the learner's code never runs in this process;
4. judge here: exact tensor type, shape, dtype, device, NaN/Inf positions, values; inputs left
   unchanged and not returned; the exercise's requirements on the counters;
5. on a GPU, when all that holds, time the function against the baselines in the child and
   check the timed outputs against a reference computed here.

A hang ends at the time limit, a crash ends the child: either way a sentence in the report.

Every request to the child is followed in its input pipe by a fresh nonce, which the child reads
only when its reply is ready (after the learner's calls for that request have returned); a reply
without it is refused as forged. When the check ends, the child and every process below it are
killed (the child is a subreaper: orphans the learner's code leaves stay below it).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from . import channel, runtime
from .exercises import Case, FunctionExercise, ValueExercise, compare_tensors, compare_values
from .exercises import get as get_exercise
from .report import ERROR, FAILED, NOT_ATTEMPTED, PASSED, CheckLine, Report
from .submission import Submission, SubmissionError, from_function

# Device work after a timed call's window (median) may reach this fraction of the call, plus this floor,
# before the call is refused: the measure is a difference of two host round trips, so it has jitter.
AFTER_WINDOW_SLACK, AFTER_WINDOW_FLOOR_S = 0.1, 20e-6
DEFAULT_TIMEOUT_S = float(os.environ.get("GPUPRINCIPLES_TIMEOUT", "0") or 0) or None
NOT_ATTEMPTED_TEXT = "not attempted yet: replace the `raise NotImplementedError` with your solution"


def check(exercise_id: str, answer, *, timeout: float | None = None, seed: int | None = None,
          show: bool = True) -> Report:
    """Grade and, in a notebook, show the report. Never raises for a learner's mistake."""
    from .progress import ticking
    with ticking(f"grading {exercise_id}", enabled=show):  # a check takes seconds: show it is working
        report = grade(exercise_id, answer, timeout=timeout, seed=seed)
    try:  # the instructor's gradebook log ($GPUPRINCIPLES_REPORT_LOG) and the hint tiers; never fatal
        from . import gradebook, hints
        gradebook.log_report(report)
        hints.record_result(report)
    except Exception:  # noqa: BLE001
        pass
    if show:
        _show(report)
    return report


def _show(report: Report) -> None:
    try:
        from IPython import get_ipython
        shell = get_ipython()
    except ImportError:  # pragma: no cover
        shell = None
    if shell is not None and type(shell).__name__ != "TerminalInteractiveShell":
        from IPython.display import HTML, display
        display(HTML(report._repr_html_()))
        report._shown = True
    else:
        print(report)


def grade(exercise_id: str, answer, *, timeout: float | None = None, seed: int | None = None) -> Report:
    started = time.monotonic()
    try:
        exercise = get_exercise(exercise_id)
    except KeyError as exc:
        report = Report(exercise=exercise_id, title="?", mode=runtime.MODE, status=ERROR)
        report.reasons.append(exc.args[0])
        return report
    report = Report(exercise=exercise.id, title=exercise.title, mode=runtime.MODE)
    problem = runtime.self_test()  # a Triton that silently returns zeros would grade nonsense
    if problem:
        report.status = ERROR
        report.reasons.append(problem)
        return report
    try:
        if isinstance(exercise, ValueExercise):
            _grade_value(exercise, answer, report)
        else:
            _grade_function(exercise, answer, report, timeout=timeout, seed=seed)
    except Exception as exc:  # noqa: BLE001 - a grader bug must not take the notebook down
        report.status = ERROR
        report.reasons.append(f"the grader itself failed ({type(exc).__name__}: {exc}); "
                              "this is a bug in gpuprinciples, not in your answer")
    report.duration_s = round(time.monotonic() - started, 3)
    return report


# ---------------------------------------------------------------------------------------------
# Value exercises: judged here, nothing of the learner's runs
# ---------------------------------------------------------------------------------------------


def _grade_value(exercise: ValueExercise, answer, report: Report) -> None:
    if answer is None or answer is Ellipsis:
        report.status = NOT_ATTEMPTED
        report.reasons.append("not attempted yet: set your answer in the cell above")
        return
    expected = exercise.expected()
    reasons = (exercise.compare or (lambda a, e: compare_values(a, e, exercise.rel_tol)))(answer, expected)
    report.correct = not reasons
    report.checks.append(CheckLine("answer", not reasons, "; ".join(reasons) or f"{answer!r}"))
    report.measurements["answer"] = answer if isinstance(answer, (int, float, str)) else repr(answer)
    if reasons:
        for reason in reasons:
            report.fail(reason)
    else:
        report.status = PASSED


# ---------------------------------------------------------------------------------------------
# Function exercises
# ---------------------------------------------------------------------------------------------


def _grade_function(exercise: FunctionExercise, answer, report: Report, *, timeout, seed) -> None:
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

    seed = secrets.randbits(62) if seed is None else seed
    cases = exercise.cases(torch.Generator().manual_seed(seed), runtime.MODE)
    expected = [exercise.reference(*c.args, **c.kwargs) for c in cases]
    compare = exercise.compare or compare_tensors
    if exercise.compare is None:
        _prove_comparison_can_fail(exercise, cases, expected)

    limit = timeout or DEFAULT_TIMEOUT_S or exercise.timeout_s
    with _Child(exercise, submission, limit) as child:
        hello = child.receive("loading your code")
        if hello is None or hello.get("event") != "ready":
            report.status = ERROR if hello and hello.get("internal") else FAILED
            report.fail(child.failure or f"your code failed when it was loaded: {hello.get('error')}")
            report.output = child.output()
            return
        _note_tampering(report, hello)

        correct_cases = 0
        requirement_failures: dict[str, str] = {}
        largest_counts = None
        for index, (case, want) in enumerate(zip(cases, expected)):
            result = child.run_case(index, case)
            if result is None:
                report.fail(child.failure)
                break
            _note_tampering(report, result)
            if result.get("not_attempted") and index == 0:
                report.status = NOT_ATTEMPTED
                report.reasons = [NOT_ATTEMPTED_TEXT]
                report.output = child.output()
                return
            if result["error"]:
                report.fail(f"raised on case {case.label}: {result['error']}")
                continue
            problems = []
            if result.get("inputs_changed"):
                problems.append(f"changed its input on case {case.label}: inputs must be left as they were")
            elif result.get("inputs_changed_while_read"):
                problems.append(f"changed its input on case {case.label} while a kernel was reading it (and put "
                                "it back afterwards): the kernel read values that were not the input's; inputs "
                                "must be left as they were")
            if result.get("aliases_input"):
                problems.append(f"returned its input (or a view of it) on case {case.label}: return a new tensor")
            if result.get("reuses_output"):
                problems.append(f"returned memory it had already returned on an earlier call (case {case.label}): "
                                "return a new tensor every call")
            if exercise.compare is None and result.get("output_type", "torch.Tensor") != "torch.Tensor":
                problems.append(f"returned a {result['output_type']}, not a torch.Tensor (case {case.label})")
            if exercise.compare is None and result.get("output_device") not in (None, runtime.DEVICE):
                problems.append(f"returned a tensor on {result['output_device']}, expected it on {runtime.DEVICE}")
            if not problems and exercise.compare is None and case.decoy is not None and "decoy_output" in result:
                decoy_want = exercise.reference(*case.decoy, **case.kwargs)
                problems = [f"on the warm-up call (same shapes, other values): {p}" for p in compare(
                    result["decoy_output"], decoy_want, case, dtype=_output_dtype(case, decoy_want))]
            if not problems:
                got = result["output"]
                problems = compare(got, want, case) if exercise.compare else compare(got, want, case,
                                                                                    dtype=_output_dtype(case, want))
            for problem in problems:
                report.fail(problem)
            if case.kwargs.get("timed") and isinstance(result.get("output"), dict):
                report.measurements["on this GPU"] = _plain_numbers(result["output"])  # time, memory: shown
            if not problems:
                correct_cases += 1
            counts = result["counts"]
            largest_counts = (case, counts) if largest_counts is None or _case_size(case) >= _case_size(
                largest_counts[0]) else largest_counts
            for requirement in exercise.requirements:
                if _requirement_mode() not in requirement.modes:
                    continue
                why = requirement.evaluate(counts, case)
                if why and requirement.describe() not in requirement_failures:
                    requirement_failures[requirement.describe()] = why

        report.correct = correct_cases == len(cases)
        report.checks.append(CheckLine("correct", report.correct,
                                       f"{correct_cases} of {len(cases)} cases match the reference"))
        for requirement in exercise.requirements:
            if _requirement_mode() not in requirement.modes:
                report.checks.append(CheckLine(requirement.describe(), None, "counted under the interpreter only"))
                continue
            why = requirement_failures.get(requirement.describe())
            report.checks.append(CheckLine(requirement.describe(), why is None, why or ""))
            if why:
                report.fail(why)
        if largest_counts is not None:
            case, counts = largest_counts
            report.measurements["counts"] = {"case": case.label, **counts}
            if runtime.INTERPRETER and exercise.run is None:  # a custom run counts a whole program, not a kernel
                report.measurements.update(_byte_summary(exercise, case, counts))

        if report.status == FAILED and not report.reasons:
            report.status = PASSED
        if report.status == PASSED and exercise.timing is not None:
            if runtime.MODE == "gpu":
                _time_on_gpu(exercise, child, report, seed)
            else:
                report.checks.append(CheckLine("speed", None, "timed only on a GPU"))
                report.notes.append("CPU run: no GPU speedup is claimed. Correctness and the counted bytes "
                                    "and launches were graded; run on a GPU to be timed.")
        report.output = child.output()


def _requirement_mode() -> str:
    return "cpu" if runtime.INTERPRETER else "gpu"


def _output_dtype(case, want) -> torch.dtype:
    # The learner returns the dtype of the inputs; the reference may be float64 for accuracy.
    first = next((a for a in case.args if isinstance(a, torch.Tensor)), None)
    return first.dtype if first is not None and first.is_floating_point() else want.dtype


def _case_size(case) -> int:
    return sum(a.numel() for a in case.args if isinstance(a, torch.Tensor))


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


def _byte_summary(exercise, case, counts) -> dict:
    from .exercises.base import BytesWithin, memory_bytes
    moved = memory_bytes(counts)
    out = {"bytes_moved": moved, "launches": counts["triton_launches"]}
    for requirement in exercise.requirements:
        if isinstance(requirement, BytesWithin):
            least = requirement.minimum(case)
            out["bytes_minimum"] = least
            out["bytes_ratio"] = round(moved / least, 3) if least else None
    # What these bytes would cost on real GPUs: a roofline projection from the datasheets, never a
    # measurement (it assumes the full datasheet bandwidth and no launch overhead).
    from . import hardware
    out["projected_us (roofline, not measured)"] = {
        key: round(moved / hardware.SPECS[key].bandwidth * 1e6, 3) for key in ("A100", "H100", "H200")
        if key in hardware.SPECS}
    return out


def _note_tampering(report: Report, message: dict) -> None:
    changed = message.get("tampered") or []
    if changed:
        report.fail("your code replaced parts of PyTorch or of the grader ("
                    + ", ".join(changed[:5]) + (" …" if len(changed) > 5 else "")
                    + "): the grader cannot trust what it measures")


def _prove_comparison_can_fail(exercise, cases, expected) -> None:
    """A case that all zeros or the unchanged input would pass grades nothing: refuse it."""
    for case, want in zip(cases, expected):
        if not isinstance(want, torch.Tensor):
            continue
        dtype = _output_dtype(case, want)
        if not compare_tensors(torch.zeros_like(want, dtype=dtype), want, case, dtype=dtype):
            raise AssertionError(f"exercise {exercise.id}: all zeros would pass case {case.label}")
        first = next((a for a in case.args if isinstance(a, torch.Tensor)), None)
        if first is not None and first.shape == want.shape and first.dtype == dtype and not compare_tensors(
                first.clone(), want, case, dtype=dtype):
            raise AssertionError(f"exercise {exercise.id}: the unchanged input would pass case {case.label}")


# ---------------------------------------------------------------------------------------------
# Timing on a GPU
# ---------------------------------------------------------------------------------------------


def _time_on_gpu(exercise: FunctionExercise, child: "_Child", report: Report, seed: int) -> None:
    from . import hardware
    from .worker import _fingerprint

    spec = exercise.timing
    timing_seed, sample_seed = secrets.randbits(62), secrets.randbits(62)  # nothing the worker sees reveals `seed`
    result = child.command({"cmd": "time", "seed": timing_seed, "sample_seed": sample_seed}, "timing")
    if result is None:
        report.fail(child.failure)
        return
    _note_tampering(report, result)
    if result.get("error"):
        report.fail(f"failed while being timed: {result['error']}")
        return
    # The reference of the timed input, computed here from the same seed.
    gen = torch.Generator(device="cuda").manual_seed(timing_seed)
    args = spec.inputs(gen, "cuda")
    want = exercise.reference(*args)
    theirs = result["fingerprint"]
    mine = _fingerprint(want.to(args[0].dtype) if isinstance(args[0], torch.Tensor) else want, sample_seed)
    rtol, atol = 2e-2, 2e-2
    sample_ok = torch.allclose(theirs["sample"], mine["sample"], rtol=rtol, atol=atol, equal_nan=True)
    scale = max(abs(mine["abs_sum"]), 1.0)
    sums_ok = abs(theirs["sum"] - mine["sum"]) <= 1e-3 * scale + 1e-2 and abs(
        theirs["abs_sum"] - mine["abs_sum"]) <= 1e-3 * scale + 1e-2
    if not (sample_ok and sums_ok) or theirs["shape"] != list(want.shape):
        report.fail("wrong on the large timing input (its output does not match the reference computed "
                    "by the grader)")
        return
    if result.get("timed_mismatches"):
        report.fail(f"{result['timed_mismatches']} timed call(s) returned something other than the first call: "
                    "the answer must not change between calls")
        return

    import statistics
    medians = {name: statistics.median(samples) for name, samples in result["timings"].items()}
    yours = medians["yours"]
    least_bytes = spec.min_bytes(args)
    flops = spec.flops(args)
    ceilings = hardware.ceilings()
    achieved_bw = least_bytes / yours
    report.measurements["time_ms"] = {name: round(t * 1e3, 4) for name, t in medians.items()}
    report.measurements["bandwidth_TBps"] = round(achieved_bw / 1e12, 3)
    report.measurements["copy_ceiling_TBps"] = round(ceilings.copy_bandwidth / 1e12, 3)
    if flops:
        report.measurements["TFLOPps"] = round(flops / yours / 1e12, 2)
    report.measurements["speedup"] = {name: [round(v, 3) for v in s] for name, s in result["speedups"].items()}

    # A time the memory system cannot deliver is not a speedup, it is a measurement error.
    if achieved_bw > 1.15 * ceilings.copy_bandwidth:
        report.status = ERROR
        report.reasons.append(f"implausible timing: {achieved_bw / 1e12:.2f} TB/s is beyond this GPU's measured "
                              f"{ceilings.copy_bandwidth / 1e12:.2f} TB/s; the timed calls did not do the work")
        return
    after = result.get("after_window", {}).get("yours", 0.0)
    report.measurements["after_window_us"] = round(after * 1e6, 1)
    # The timed calls ran under the counters too: they are held to the same requirements.
    timed_case = Case("of the timing input", args)
    broken = {}
    elsewhere = {k: v for counts in result.get("timed_counts", []) for k, v in (counts.get("other_stream_work")
                                                                                   or {}).items()}
    if elsewhere:  # the window is a pair of events on the current stream: another stream's work is not in it
        broken["stream"] = ("work ran on another CUDA stream than the current one (" + ", ".join(
            f"{k} ×{v}" for k, v in elsewhere.items()) + "), outside the timed window (a pair of events on "
            "the current stream); launch on the current stream")
    for counts in result.get("timed_counts", []):
        for requirement in exercise.requirements:
            if "gpu" in requirement.modes and requirement.describe() not in broken:
                why = requirement.evaluate(counts, timed_case)
                if why:
                    broken[requirement.describe()] = why
    if broken:
        for why in broken.values():
            report.fail(f"in the timed calls: {why}")
        return
    # Work left running on another stream when the call returned is not in its timed window.
    if after > AFTER_WINDOW_SLACK * yours + AFTER_WINDOW_FLOOR_S:
        report.fail(f"the GPU kept working {after * 1e6:.0f} µs after each timed call returned (the call itself "
                    f"took {yours * 1e6:.0f} µs): work on a side stream, outside the timed window, is not "
                    "free; make the current stream wait for it before returning")
        return
    ok = True
    fraction = achieved_bw / ceilings.copy_bandwidth
    if spec.min_bandwidth_fraction is not None:
        good = fraction >= spec.min_bandwidth_fraction
        ok &= good
        report.checks.append(CheckLine(f"≥ {spec.min_bandwidth_fraction:.0%} of copy bandwidth", good,
                                       f"{fraction:.0%} ({achieved_bw / 1e12:.2f} TB/s)"))
        if not good:
            report.fail(f"reached {fraction:.0%} of this GPU's copy bandwidth; the target is "
                        f"{spec.min_bandwidth_fraction:.0%}")
    for base, (median, low, high) in result["speedups"].items():
        need = spec.min_speedup.get(base)
        good = need is None or low >= need
        detail = f"{median:.2f}× (95% interval {low:.2f}–{high:.2f}×)"
        report.checks.append(CheckLine(f"speedup over {base}" + (f" ≥ {need:g}×" if need else ""), good if need
                                       else None, detail))
        if not good:
            ok = False
            report.fail(f"speedup over {base} is {detail}; its interval must reach {need:g}×")
    if ok and report.status == FAILED and not report.reasons:
        report.status = PASSED


# ---------------------------------------------------------------------------------------------
# The child process
# ---------------------------------------------------------------------------------------------


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:  # gone already
        pass


class _Child:
    """A fresh interpreter running worker.py, with a deadline for everything it is asked."""

    def __init__(self, exercise, submission: Submission, limit: float):
        self.exercise = exercise
        self.submission = submission
        self.deadline = time.monotonic() + limit
        self.limit = limit
        self.failure: str | None = None
        self.workdir = tempfile.TemporaryDirectory(prefix="gpuprinciples-")
        self.log_path = os.path.join(self.workdir.name, "output.log")

    def __enter__(self):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        env = dict(os.environ)
        package_parent = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join([package_parent, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.setdefault("PYTHONUNBUFFERED", "1")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gpuprinciples.worker", str(to_child_r), str(from_child_w), self.log_path],
                pass_fds=(to_child_r, from_child_w), env=env, cwd=self.workdir.name,
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        os.close(to_child_r)
        os.close(from_child_w)
        self._ask({"exercise": self.exercise.id, "source": self.submission.source,
                   "name": self.submission.name, "device": runtime.DEVICE, "workdir": self.workdir.name})
        return self

    def _ask(self, request: dict) -> None:
        """Send a request, then the nonce its reply must carry (the child reads it only to reply)."""
        self.nonce = secrets.token_hex(16)
        channel.send_command(self.to_child, request)
        channel.send_command(self.to_child, {"cmd": "nonce", "nonce": self.nonce})

    def __exit__(self, *exc):
        try:  # the child ends what its learner code started, and exits
            channel.send_command(self.to_child, {"cmd": "exit"})
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            pass
        self._kill()
        for fd in (self.to_child, self.from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self.workdir.cleanup()

    def _kill(self) -> None:
        """Kill the child and every process below it. Stopped first, so nothing forks while its
        tree is collected; what it orphaned was re-parented to it (a subreaper), so it is found."""
        if self.proc.poll() is None:
            from .worker import descendants
            root = self.proc.pid
            stopped = {root}
            _signal(root, signal.SIGSTOP)
            for _ in range(100):  # until a round finds no new process
                new = set(descendants(root)) - stopped
                if not new:
                    break
                for pid in new:
                    _signal(pid, signal.SIGSTOP)
                stopped |= new
            for pid in stopped:
                _signal(pid, signal.SIGKILL)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()

    def receive(self, doing: str):
        try:
            message = channel.recv_data(self.from_child, self.deadline)
            if isinstance(message, dict) and message.get("nonce") == self.nonce:
                return message
            self._kill()
            self.failure = (f"the grader received a message that did not answer its request while {doing} "
                            "(forged: it lacks the nonce the grader sent): your code wrote into the grader's "
                            "result pipe. Nothing it sent was trusted.")
            return None
        except channel.ChannelTimeout:
            self._kill()
            self.failure = (f"did not finish within {self.limit:g} s (while {doing}): a loop that never ends, "
                            f"or far more work than needed? The grader stopped it; your notebook is fine. "
                            f"(`check(..., timeout=SECONDS)` allows longer.)")
        except channel.ChannelClosed:
            self._kill()
            code = self.proc.returncode
            how = (f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}")
            tail = self.output().strip().splitlines()[-3:]
            self.failure = (f"the process running your code crashed ({how}) while {doing}; your notebook is fine."
                            + (" Its last words: " + " | ".join(tail) if tail else ""))
        except Exception:  # noqa: BLE001 - a message that is not ours: refused, never executed
            self._kill()
            self.failure = (f"the grader received a garbled message while {doing}: your code wrote into a "
                            "file descriptor it does not own. Nothing it sent was run.")
        return None

    def run_case(self, index: int, case):
        self._ask({"cmd": "case", "index": index, "args": case.args, "kwargs": case.kwargs, "decoy": case.decoy})
        return self.receive(f"running case {case.label}")

    def command(self, command: dict, doing: str):
        self._ask(command)
        return self.receive(doing)

    def output(self) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""
        return text[-4000:]
