# graded-by: test_trust.py
"""Leaves a process behind: forks twice, the grandchild starts its own session (so the grader's
kill of the worker's process group misses it) and sleeps on, holding the worker's pipes."""
import os
import time

_forked = []


def cos_cos(x):
    if _forked:
        raise ValueError("wrong on purpose: the check should end quickly")
    _forked.append(1)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            print(f"orphan pid {os.getpid()}", flush=True)
            time.sleep(60)
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.5)  # let the grandchild print its pid
    raise ValueError("wrong on purpose: the check should end quickly")
