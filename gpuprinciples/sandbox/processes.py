"""Process trees: what a process left running below it, and ending all of it.

Shared by every place the course runs code it must not leave running: the grader's child, its own
clean-up (`end_descendants`), graded ranks, and the distributed launcher (`kill_tree`).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent.parent)  # the folder that holds gpuprinciples/
WORKER = "gpuprinciples.grader.worker"  # the child's module: `python -m` runs it (the only spelling of its path here)


# ---------------------------------------------------------------------------------------------
# Process trees
# ---------------------------------------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, theirs, ...); [] when `pid` is gone."""
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:  # gone already
        pass


def kill_tree(pid: int, *, term_grace: float = 0.0) -> None:
    """Kill `pid` and every process below it.

    With `term_grace`, SIGTERM first and that long to exit on their own (torchrun forwards it to
    its ranks). Then every process in the tree is stopped before any is killed, round after round
    until a round finds no new one, so nothing forks a process the collection would miss."""
    if term_grace > 0:
        for p in [pid, *descendants(pid)]:
            _signal(p, signal.SIGTERM)
        try:
            psutil.wait_procs([psutil.Process(pid)], timeout=term_grace)
        except psutil.Error:
            pass
    stopped = {pid}
    _signal(pid, signal.SIGSTOP)
    for _ in range(100):
        new = set(descendants(pid)) - stopped
        if not new:
            break
        for p in new:
            _signal(p, signal.SIGSTOP)
        stopped |= new
    for p in stopped:
        _signal(p, signal.SIGKILL)


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process, not to init (Linux; no root needed)."""
    return prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def end_descendants(*, _kill=os.kill, _waitpid=os.waitpid) -> None:
    """Kill and reap every descendant of this process, until none is left. As a subreaper, this
    process inherits the orphans of the ones it kills, so a later round finds those.
    (The primitives are bound at import, before learner code can replace them.)"""
    me = os.getpid()
    for _ in range(200):
        found = descendants(me)
        if not found:
            return
        for pid in found:
            try:
                _kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                pid, _ = _waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        time.sleep(0.005)


def prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0


def child_environment() -> dict:
    """The environment of a child that must import this very package first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_PARENT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # torch.compile'd baselines compile in the child itself: a pool of compile workers would be started
    # (a Python importing torch) for every check, for a kernel or two (on an H200, a cold compile of
    # cos(cos(x)) took 8.1 s with the pool and 5.5 s without; tools/probe_compile.py)
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env
