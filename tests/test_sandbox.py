"""The sandbox and its warm start: each check's child is forked by one server per grading process,
which is fresh for every check, sees the grader's environment as it is now, and survives nothing of
what learner code does to it; with the server off, each child is spawned as before."""

import os
import re
import signal

import psutil
import pytest

from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import PASSED
from gpuprinciples.sandbox import processes
from gpuprinciples.sandbox.child import CREDIT_LIMITS, Sandbox
from gpuprinciples.sandbox.forkserver import ForkServer

COS = "fusion.cos_cos"


def parent_of(report) -> int:
    return int(re.search(r"parent (\d+)", report.output).group(1))


def test_each_check_gets_a_fresh_child_of_the_warm_server(submission):
    first = grade(COS, submission("sandbox/parent_pid.py", "cos_cos"))
    second = grade(COS, submission("sandbox/parent_pid.py", "cos_cos"))
    assert first.status == second.status == PASSED, (first.reasons, second.reasons)
    server = ForkServer.get()
    assert server is not None and parent_of(first) == parent_of(second) == server.proc.pid
    assert not psutil.Process(server.proc.pid).children()  # both children ended with their checks


def test_a_child_sees_the_environment_as_it_is_at_the_check(submission, monkeypatch):
    monkeypatch.setenv("GP_SANDBOX_MARK", "one")
    one = grade(COS, submission("sandbox/parent_pid.py", "cos_cos"))
    monkeypatch.setenv("GP_SANDBOX_MARK", "two")
    two = grade(COS, submission("sandbox/parent_pid.py", "cos_cos"))
    assert "mark one" in one.output and "mark two" in two.output
    assert parent_of(one) == parent_of(two)  # not a variable read at import: the same server


def test_a_variable_read_at_import_starts_a_new_server(submission, monkeypatch):
    before = grade(COS, submission("sandbox/parent_pid.py", "cos_cos"))
    monkeypatch.setenv("GPUPRINCIPLES_SANDBOX_TEST", "1")
    after = grade(COS, submission("sandbox/parent_pid.py", "cos_cos"))
    assert before.status == after.status == PASSED
    assert parent_of(before) != parent_of(after)


def test_learner_code_that_kills_the_server_ends_its_own_check_only(submission):
    grade(COS, submission("sandbox/parent_pid.py", "cos_cos"))
    server_pid = ForkServer.get().proc.pid
    killed = grade(COS, submission("sandbox/kills_server.py", "cos_cos"))
    assert not psutil.pid_exists(server_pid) or psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE
    assert killed.reasons or killed.status == PASSED  # whatever it ended as, it ended, with a report
    after = grade(COS, submission("sandbox/parent_pid.py", "cos_cos"))
    assert after.status == PASSED and parent_of(after) != server_pid


def test_the_server_can_be_turned_off(submission, monkeypatch):
    monkeypatch.setenv("GPUPRINCIPLES_SANDBOX", "spawn")
    assert ForkServer.get() is None
    report = grade(COS, submission("sandbox/parent_pid.py", "cos_cos"))
    assert report.status == PASSED and parent_of(report) == os.getpid()


def test_kill_tree_takes_every_descendant():
    import subprocess
    import sys
    import time
    proc = subprocess.Popen([sys.executable, "-c", "import os, time\n"
                             "for _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n"
                             "time.sleep(60)"], start_new_session=True)
    deadline = time.monotonic() + 30
    while len(processes.descendants(proc.pid)) < 7 and time.monotonic() < deadline:
        time.sleep(0.05)
    tree = [proc.pid, *processes.descendants(proc.pid)]
    assert len(tree) == 8
    processes.kill_tree(proc.pid)
    proc.wait(timeout=10)
    time.sleep(0.2)
    assert not [p for p in tree[1:] if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")
def test_a_served_child_reports_how_it_ended():
    """The exit code travels from the server's waitpid to the grader (a crash is named by its signal)."""
    import tempfile
    server = ForkServer.get()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    with tempfile.TemporaryDirectory() as folder:
        child = server.fork(in_r, out_w, os.path.join(folder, "log"), folder)
        os.close(in_r)
        os.close(out_w)
        assert child is not None and child.poll() is None
        os.kill(child.pid, signal.SIGSEGV)
        assert child.wait(timeout=30) == -signal.SIGSEGV
    for fd in (in_w, out_r):
        os.close(fd)


def test_torch_compile_in_a_child_compiles_in_the_child_itself(submission, monkeypatch):
    """A torch.compile'd baseline in a check compiles in-process: no pool of compile workers (a Python
    importing torch) is started, and killed, for every check. A learner's own setting is kept."""
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    assert processes.child_environment()["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    report = grade(COS, submission("sandbox/compile_threads.py", "cos_cos"))
    assert report.status == PASSED and "compile threads 1" in report.output
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "4")
    assert processes.child_environment()["TORCHINDUCTOR_COMPILE_THREADS"] == "4"


def test_the_graders_own_compiling_is_not_the_learners_time(submission, monkeypatch, tmp_path):
    """Each compile for the GPU the worker does in a check (cold here: an empty Triton cache) reaches the sandbox as
    seconds added to the deadline."""
    credited = []
    real = Sandbox._credit
    monkeypatch.setattr(Sandbox, "_credit", lambda self, seconds: (credited.append(seconds), real(self, seconds)))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    report = grade(COS, submission("sandbox/parent_pid.py", "cos_cos"))
    assert report.status == PASSED, report.reasons
    assert credited and all(s > 0 for s in credited)


def test_a_forged_progress_message_buys_a_few_limits_at_most(submission, monkeypatch):
    """Learner code can send the worker's Progress message too: it moves the deadline by CREDIT_LIMITS limits at most,
    so a sleep past the limit but inside that is let through, and the limit still ends a hang."""
    monkeypatch.setenv("GP_SANDBOX_SLEEP", "15")
    report = grade(COS, submission("sandbox/forges_progress.py", "cos_cos"), timeout=10)
    assert report.status == PASSED, report.reasons
    with Sandbox(limit=10) as box:
        box.deadline = 0.0
        for seconds in (1e9, float("nan"), -5.0, 7.0):
            box._credit(seconds)
        assert box.credited == box.deadline == CREDIT_LIMITS * 10
