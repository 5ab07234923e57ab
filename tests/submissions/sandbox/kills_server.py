# graded-by: test_sandbox.py
"""Kills the process that forked it (the warm server), then answers right."""
import os
import signal

from gpuprinciples.course.kernels.cos_cos import cos_cos as _cos_cos

os.kill(os.getppid(), signal.SIGKILL)


def cos_cos(x):
    return _cos_cos(x)
