# graded-by: test_sandbox.py
"""A right cos_cos that, on its first call, writes a forged Progress message ("the grader compiled for 10⁹ s") into
every file descriptor it can, then sleeps past the check's limit: the sandbox credits it no more than
CREDIT_LIMITS more limits, never without end."""
import io
import os
import time

import torch

from gpuprinciples.course.kernels.cos_cos import cos_cos as _cos_cos

SLEEP_S = float(os.environ.get("GP_SANDBOX_SLEEP", "0"))
calls = []


def cos_cos(x):
    if not calls:
        buffer = io.BytesIO()
        torch.save({"event": "progress", "grader_s": 1e9}, buffer)
        frame = len(buffer.getvalue()).to_bytes(8, "little") + buffer.getvalue()
        for fd in range(3, 256):
            try:
                os.write(fd, frame)
            except OSError:
                pass
        time.sleep(SLEEP_S)
    calls.append(1)
    return _cos_cos(x)
