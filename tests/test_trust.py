"""Trust: the grader under attack, under faults, and across Triton releases.

Every submission under tests/submissions/trust/ tries to pass without doing the work, or to break
the grader; each test asserts the RIGHT outcome: the attack fails, and for the right reason (words
in `report.reasons`). Tests marked `xfail(strict=True, reason="HOLE: ...")` document a hole that the
grader has today; the fix is described in the reason and in the submission's docstring. When the
grader is fixed the test passes, strict xfail turns that into a failure, and the marker comes off.

Cost: every `grade()` spawns a worker (seconds each on a CPU). The attacks the selected tests need
are graded up front, two at a time, in a thread pool (one at a time on a GPU, so timings are not
disturbed); each test then reads its report.

GPU-only tests are marked `gpu` and skipped without CUDA. On the H200:
    cd /work/main && pytest -q tests/test_trust.py -m gpu -p no:cacheprovider
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from submission_headers import submission

from gpuprinciples import runtime
from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, PASSED
from gpuprinciples.toolchain import selftest

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"
TRUST = SUBMISSIONS / "trust"
COS, SOFTMAX = "fusion.cos_cos", "fusion.softmax"
SEED = 0x2B1D53C79A0E4F61  # seed_probe.py looks for exactly this

# What a report must say when the grader noticed that learner code went after the grader itself
# (tamper detection today; a source audit or an audit hook saying "may not use" after a fix).
REFUSED = ("replaced parts of pytorch or of the grader", "may not use", "forged")
# What a report must say when the work was done outside the Triton kernel (PyTorch seen by the
# recorder today; after a fix, a lower bound on the bytes the kernel itself reads and writes).
WORK_ELSEWHERE = ("pytorch operators did work", "outside the kernel", "may not use",
                  "were not written by a triton store")
# on a GPU, PyTorch's work hidden from the op counter is still seen in the profiler's kernels
UNSEEN_OPS = "operators the grader's op counter did not see"


def reasons(report) -> str:
    return " ".join(report.reasons).lower()


def says_any(report, phrases) -> bool:
    text = reasons(report)
    return any(p in text for p in phrases)


def _submission(relative: str, name: str):
    return submission(SUBMISSIONS / relative, name)  # a mutant (`# mutant-of:`) materialised from its twin


# -------------------------------------------------------------------------------------------------
# The graded attacks, by key. Each job returns a Report (or a tuple for the composite jobs).
# -------------------------------------------------------------------------------------------------

JOBS: dict[str, callable] = {}


def _attack(key: str, exercise: str, file: str, name: str, **kwargs) -> None:
    JOBS[key] = lambda: grade(exercise, _submission(f"trust/{file}", name), **kwargs)


for _file in ("lazy_subclass", "torch_function_object", "reads_parent_memory", "reused_output",
              "right_every_other_call", "detects_grader", "patches_clocks", "patches_cuda_event",
              "patches_grader_timing", "hides_tampering", "edits_recording", "forges_result_fd",
              "interpreter_instance_patch", "interpreter_class_patch", "numpy_no_launch", "c_entry_points",
              "thread_compute", "thread_keeps_writing", "exit_fake_passed", "answer_through_input", "half_written",
              "custom_op"):
    _attack(_file, COS, f"{_file}.py", "cos_cos")
_attack("seed_probe", COS, "seed_probe.py", "cos_cos", seed=SEED)
for _file in ("softmax_numpy_touch", "softmax_modes_off", "softmax_half", "softmax_edits_recording"):
    _attack(_file, SOFTMAX, f"{_file}.py", "softmax")


def _fork_orphan():
    """Grade, then at once see whether the process the submission left behind is still alive."""
    report = grade(COS, _submission("trust/fork_orphan.py", "cos_cos"))
    time.sleep(1.0)  # the grader has returned: anything it was going to kill is dead by now
    alive = []
    for pid in map(int, re.findall(r"orphan pid (\d+)", report.output)):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
        os.kill(pid, 9)  # started by this test (through the submission): end it by its id
    return report, alive


def _faults_then_good():
    """Faults one after another in this process, then a good answer: each fault ends its own check."""
    return [grade(COS, _submission("trust/memory_error.py", "cos_cos")),
            grade(COS, _submission("core/import_error.py", "cos_cos")),
            grade(COS, _submission("trust/hang_at_import.py", "cos_cos"), timeout=20),
            grade(COS, _submission("trust/good_cos_cos.py", "cos_cos"))]


def _cli_exit_fake_passed():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gpuprinciples.cli", "grade", COS,
                           f"{TRUST / 'exit_fake_passed.py'}:cos_cos", "--json"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)


JOBS["fork_orphan"] = _fork_orphan
JOBS["faults_then_good"] = _faults_then_good
JOBS["cli_exit_fake_passed"] = _cli_exit_fake_passed


def _gpu_faults_then_good():
    return [grade(COS, _submission("trust/gpu_illegal_access.py", "cos_cos")),
            grade(COS, _submission("trust/gpu_out_of_memory.py", "cos_cos")),
            grade(COS, _submission("trust/gpu_kernel_never_ends.py", "cos_cos"), timeout=90),
            grade(COS, _submission("trust/good_cos_cos.py", "cos_cos"))]


JOBS["gpu_faults_then_good"] = _gpu_faults_then_good
for _file in ("gpu_side_stream", "gpu_side_stream_padded", "gpu_side_stream_early", "gpu_pointer_cache",
              "gpu_fast_only_when_timed", "gpu_fast_when_large"):
    _attack(_file, COS, f"{_file}.py", "cos_cos")
_attack("gpu_timing_seed", COS, "gpu_timing_seed.py", "cos_cos", seed=SEED)
_attack("gpu_patches_grader_timing", COS, "patches_grader_timing.py", "cos_cos")


def uses(*keys):
    """Mark a test with the jobs it reads, so that only those are graded up front."""
    def mark(fn):
        fn.trust_jobs = keys
        return fn
    return mark


_futures: dict[str, Future] = {}
_pool: ThreadPoolExecutor | None = None


@pytest.fixture(scope="module", autouse=True)
def _prefetch(request):
    """Start grading every job the selected (and not skipped) tests of this module need."""
    global _pool
    keys = []
    for item in request.session.items:
        skipped = item.get_closest_marker("skip") or any(m.args and m.args[0] for m in item.iter_markers("skipif"))
        if getattr(item, "module", None) is not sys.modules[__name__] or skipped:
            continue
        if item.get_closest_marker("gpu") and not runtime.HAS_CUDA:
            continue
        keys += [k for k in getattr(item.function, "trust_jobs", ()) if k not in keys]
    # the parent's one-off known-answer check runs here first: Triton's interpreter is not
    # thread-safe, and two first checks racing in threads would both run it (see the report)
    selftest.self_test()
    _pool = ThreadPoolExecutor(max_workers=1 if runtime.HAS_CUDA else 2)
    for key in keys:
        _futures[key] = _pool.submit(JOBS[key])
    yield
    _pool.shutdown(wait=True, cancel_futures=True)


def result(key: str):
    if key not in _futures:
        _futures[key] = _pool.submit(JOBS[key])
    return _futures[key].result()


# =================================================================================================
# Attacks on fusion.cos_cos and fusion.softmax (CPU: Triton interpreter)
# =================================================================================================


@uses("lazy_subclass", "torch_function_object")
def test_objects_that_compute_on_access_are_not_tensors():
    for key in ("lazy_subclass", "torch_function_object"):
        report = result(key)
        assert report.status == FAILED, (key, report.reasons)
        assert "not a torch.tensor" in reasons(report), (key, report.reasons)


@uses("lazy_subclass", "torch_function_object")
def test_the_report_names_the_type_that_came_back():
    assert "lazy" in reasons(result("lazy_subclass"))
    assert "pretender" in reasons(result("torch_function_object"))
    assert "builtins.str" not in reasons(result("lazy_subclass"))


@uses("reads_parent_memory")
def test_the_expected_output_cannot_be_found_in_the_worker():
    report = result("reads_parent_memory")
    if "may not use" in reasons(report):  # a source audit refused gc / frames: nothing to prove
        return
    assert "reference found: false" in report.output.lower(), (report.reasons, report.output[-500:])
    assert report.status == FAILED and "values wrong" in reasons(report)


@uses("reused_output")
def test_returning_the_same_buffer_every_call_fails():
    report = result("reused_output")
    assert report.status == FAILED
    assert "earlier call" in reasons(report)


@uses("right_every_other_call")
def test_wrong_on_the_warm_up_call_fails():
    report = result("right_every_other_call")
    assert report.status == FAILED
    assert "values wrong" in reasons(report)


@uses("detects_grader")
def test_cheating_only_under_the_grader_is_still_seen():
    report = result("detects_grader")
    assert report.status == FAILED
    assert "pytorch operators did work" in reasons(report) and "cos" in reasons(report)


@uses("patches_clocks")
def test_patched_clocks_and_comparisons_are_caught():
    report = result("patches_clocks")
    assert report.status == FAILED
    text = reasons(report)
    assert "replaced parts of pytorch" in text and "time.perf_counter" in text and "torch.allclose" in text


@uses("patches_cuda_event")
def test_a_patched_cuda_event_is_caught():
    report = result("patches_cuda_event")
    assert report.status == FAILED
    assert "replaced parts" in reasons(report) and "torch.cuda.event" in reasons(report)


@uses("patches_grader_timing")
def test_a_patched_grader_timing_module_is_caught():
    report = result("patches_grader_timing")
    assert report.status == FAILED
    assert "replaced parts" in reasons(report) and "gpuprinciples.measure.timing" in reasons(report)


@uses("hides_tampering")
def test_hiding_the_tamper_report_is_caught():
    report = result("hides_tampering")
    assert report.status != PASSED
    assert says_any(report, REFUSED + ("pytorch operators did work",)), report.reasons


@uses("edits_recording", "softmax_edits_recording")
def test_rewriting_the_live_counters_is_caught():
    for key in ("edits_recording", "softmax_edits_recording"):
        report = result(key)
        assert report.status != PASSED, key
        assert says_any(report, REFUSED + ("pytorch operators did work", "outside the kernel", UNSEEN_OPS)), \
            (key, report.reasons)


@uses("forges_result_fd")
def test_well_formed_forged_messages_are_refused():
    report = result("forges_result_fd")
    assert report.status != PASSED
    assert says_any(report, REFUSED + ("garbled",)), report.reasons


@uses("interpreter_instance_patch")
def test_switching_off_byte_counting_on_the_builder_instance_is_caught():
    report = result("interpreter_instance_patch")
    assert report.status == FAILED
    assert says_any(report, REFUSED + ("moved", "outside the kernel")), report.reasons


@uses("interpreter_class_patch")
def test_switching_off_byte_counting_on_the_builder_class_is_caught():
    report = result("interpreter_class_patch")
    assert report.status == FAILED
    assert "replaced parts" in reasons(report) and "create_masked_load" in reasons(report)


def test_the_interpreters_methods_are_watched_on_a_gpu_too(monkeypatch):
    """One verdict: interpreter_class_patch strips the CPU's wrappers from the interpreter's memory methods. On a
    GPU, where nothing wrapped them, that was a no-op and the fixture passed; the GPU's counters now wrap them as
    the CPU's do, and the grader's watch covers them on both machines."""
    import inspect

    from triton.runtime import interpreter

    from gpuprinciples.grader import worker
    from gpuprinciples.measure import counters
    from gpuprinciples.toolchain import compat
    builder = interpreter.InterpreterBuilder
    for name in compat.interpreter_memory_methods():  # as a GPU's Triton has them: Triton's own functions
        monkeypatch.setattr(builder, name, inspect.unwrap(getattr(builder, name)))
    monkeypatch.setattr(runtime, "INTERPRETER", False)
    counters._shape_interpreter_methods_as_on_a_cpu()
    before = worker._snapshot()
    method = builder.create_masked_load  # what the fixture does at import
    setattr(builder, "create_masked_load", getattr(method, "__wrapped__", method))
    assert worker._tampered(before) == ["triton.interpreter.InterpreterBuilder.create_masked_load"]


@uses("numpy_no_launch")
def test_numpy_without_a_kernel_fails():
    report = result("numpy_no_launch")
    assert report.status == FAILED
    assert "no triton kernel was launched" in reasons(report)


@uses("c_entry_points")
def test_pytorch_through_c_entry_points_and_no_grad_is_seen():
    report = result("c_entry_points")
    assert report.status == FAILED
    assert "pytorch operators did work" in reasons(report) and "cos" in reasons(report)


@uses("half_written")
def test_a_result_partly_written_outside_the_kernel_fails():
    report = result("half_written")
    assert report.status == FAILED
    # the store addresses are the interpreter's evidence; a GPU's profiler sees the PyTorch kernels instead
    said = "output elements were not written by a triton store in this call" if runtime.INTERPRETER else UNSEEN_OPS
    assert said in reasons(report), report.reasons


@uses("custom_op")
def test_pytorch_work_hidden_in_a_custom_operator_is_counted():
    report = result("custom_op")
    assert report.status == FAILED
    # the operator's Python body runs in the counters' view: its two cos are PyTorch's work, named
    assert "pytorch operators did work" in reasons(report) and "cos ×2" in reasons(report), report.reasons


@uses("softmax_numpy_touch", "softmax_modes_off", "thread_compute")
def test_work_done_outside_the_kernel_fails():
    # on a GPU: NumPy's work costs a round trip to the host (PyTorch's copies over the byte budget), and PyTorch
    # with the modes off shows in the profiler
    elsewhere = WORK_ELSEWHERE + (() if runtime.INTERPRETER else ("pytorch copies", UNSEEN_OPS))
    for key in ("softmax_numpy_touch", "softmax_modes_off", "thread_compute"):
        report = result(key)
        assert report.status == FAILED, key
        assert says_any(report, elsewhere), (key, report.reasons)


@pytest.mark.skipif(runtime.HAS_CUDA, reason="NumPy shares only a CPU tensor's memory: on a GPU this attack "
                    "cannot be written")
@uses("answer_through_input")
def test_the_answer_smuggled_through_the_input_is_caught():
    report = result("answer_through_input")
    assert report.status == FAILED
    assert says_any(report, ("changed its input", "may not use")), report.reasons


@uses("softmax_half")
def test_lower_precision_arithmetic_fails():
    report = result("softmax_half")
    assert report.status == FAILED
    assert "values wrong" in reasons(report) and "torch.float32" in reasons(report)


@uses("thread_keeps_writing")
def test_a_thread_that_keeps_writing_spoils_the_result_and_not_the_grader():
    report = result("thread_keeps_writing")
    assert report.status == FAILED
    # seen when the call returns: the thread is still running, and the check ends there (the next cases
    # would run beside it)
    assert "still running after it returned" in reasons(report)


@uses("fork_orphan")
def test_no_process_outlives_its_check():
    report, alive = result("fork_orphan")
    assert report.status == FAILED
    if "may not use" not in reasons(report):  # (a source audit may refuse os.fork outright)
        assert "wrong on purpose" in reasons(report)
        assert "orphan pid" in report.output  # the orphan did start
    assert alive == []


@uses("exit_fake_passed")
def test_exiting_after_printing_a_fake_pass_fails_and_the_print_stays_inert():
    report = result("exit_fake_passed")
    assert report.status == FAILED
    assert "crashed (exit code 0)" in reasons(report)
    html = report._repr_html_()  # its prints (quoted as its last words too) are escaped, never markup
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<b style='color:green'>" not in html and ">FAILED</b>" in html


@uses("cli_exit_fake_passed")
def test_the_cli_is_not_fooled_by_a_fake_pass_on_stdout():
    done = result("cli_exit_fake_passed")
    assert done.returncode == 1, done.stdout[-1000:] + done.stderr[-1000:]
    data = json.loads(done.stdout)  # stdout is the grader's JSON alone: the child's prints went to its log
    assert data["passed"] is False and data["status"] == FAILED
    assert any("crashed (exit code 0)" in r for r in data["reasons"])


# =================================================================================================
# Isolation
# =================================================================================================


@uses("seed_probe")
def test_the_secret_seed_is_not_visible_in_the_worker():
    report = result("seed_probe")
    if "may not use" in reasons(report):  # a source audit refused gc / frames: nothing to prove
        return
    assert "seed probe: found in nowhere" in report.output, report.output[-800:]


def test_timing_keeps_the_clock_it_took_at_import(monkeypatch):
    import time as time_module

    from gpuprinciples import timing
    monkeypatch.setattr(time_module, "perf_counter", lambda: 0.0)  # as learner code imported later would
    measured = timing.time_fn(lambda: sum(range(20_000)), device="cpu", budget_s=0.01, min_rounds=3,
                              max_rounds=3, warmup=1)
    assert measured.median > 0


def test_the_worker_takes_its_timing_primitives_before_learner_code():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", "import sys, gpuprinciples.grader.worker; "
                           "print('gpuprinciples.measure.timing' in sys.modules)"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-1000:]
    assert done.stdout.strip().splitlines()[-1] == "True"


# =================================================================================================
# Faults: each ends its own check with a sentence; the caller survives; the next check runs
# =================================================================================================


@uses("faults_then_good")
def test_faults_end_their_own_check_and_the_next_check_passes():
    memory, import_error, hang, good = result("faults_then_good")
    assert memory.status == FAILED and "memoryerror" in reasons(memory)
    assert import_error.status == FAILED and "failed when it was loaded" in reasons(import_error)
    assert hang.status == FAILED and "did not finish within 20 s" in reasons(hang)
    assert "loading your code" in reasons(hang)
    assert good.status == PASSED, good.reasons


# =================================================================================================
# GPU only (run on the H200 by the lead)
# =================================================================================================


@pytest.mark.gpu
@uses("gpu_faults_then_good")
def test_gpu_faults_end_their_own_check_and_the_next_check_passes():
    illegal, oom, never_ends, good = result("gpu_faults_then_good")
    assert illegal.status == FAILED
    assert says_any(illegal, ("illegal memory access", "crashed")), illegal.reasons
    assert oom.status == FAILED and says_any(oom, ("out of memory", "outofmemoryerror")), oom.reasons
    assert never_ends.status == FAILED and "did not finish within 90 s" in reasons(never_ends)
    assert good.status == PASSED, good.reasons


@pytest.mark.gpu
@uses("gpu_side_stream", "gpu_pointer_cache")
def test_gpu_timed_calls_that_do_no_work_are_implausible_not_fast():
    # the work left on a side stream is seen first, and named; a window with no work at all would be implausible
    report = result("gpu_side_stream")
    assert report.status == FAILED, (report.status, report.reasons, report.measurements)
    assert "another cuda stream" in reasons(report) and "cos_cos_kernel" in reasons(report), report.reasons
    # an answer kept per input pointer: the inputs' values change in place between the timed calls, so
    # its replayed outputs are wrong before any time is judged
    report = result("gpu_pointer_cache")
    assert report.status != PASSED, (report.status, report.reasons, report.measurements)
    assert says_any(report, ("inputs' values changed", "implausible timing")), report.reasons


@pytest.mark.gpu
@uses("gpu_side_stream_padded")
def test_gpu_work_hidden_on_a_side_stream_is_caught():
    report = result("gpu_side_stream_padded")
    assert report.status != PASSED, report.measurements
    assert says_any(report, ("outside the timed", "implausible", "side stream")), report.reasons
    assert report.measurements.get("after_window_us", 0) > 0


@pytest.mark.gpu
@uses("gpu_side_stream_early")
def test_gpu_work_on_a_side_stream_before_the_window_is_caught():
    # the grader holds the GPU before each window so the host's launch cost is not timed; a side
    # stream could run during the hold: any work on another stream than the current one is refused
    report = result("gpu_side_stream_early")
    assert report.status == FAILED, (report.status, report.reasons, report.measurements)
    assert "another cuda stream" in reasons(report) and "slow_cos_cos" in reasons(report)


@pytest.mark.gpu
@uses("gpu_fast_only_when_timed")
def test_gpu_code_cannot_tell_the_timed_calls_from_the_counted_ones():
    # The timed calls run under the counters too, so `counters._active()` is true there as well:
    # this submission takes its slow honest path when timed and fails on speed (or, should it
    # ever take the PyTorch path, on the requirements).
    report = result("gpu_fast_only_when_timed")
    assert report.status != PASSED, report.measurements
    assert says_any(report, ("pytorch operators did work", "timed call", "copy bandwidth")), report.reasons


@pytest.mark.gpu
@uses("gpu_fast_when_large")
def test_gpu_the_timed_calls_are_held_to_the_requirements():
    report = result("gpu_fast_when_large")
    assert report.status == FAILED, (report.status, report.reasons, report.measurements)
    assert "in the timed calls" in reasons(report) and "pytorch operators did work" in reasons(report)


@pytest.mark.gpu
@uses("gpu_timing_seed")
def test_gpu_the_timing_command_does_not_reveal_the_secret_seed():
    report = result("gpu_timing_seed")
    assert "recovered seed" in report.output  # the probe ran
    assert f"recovered seed {SEED}" not in report.output


@pytest.mark.gpu
@uses("gpu_patches_grader_timing")
def test_gpu_a_replaced_timer_does_not_pass():
    report = result("gpu_patches_grader_timing")
    assert report.status != PASSED, report.measurements
    assert says_any(report, REFUSED), report.reasons
