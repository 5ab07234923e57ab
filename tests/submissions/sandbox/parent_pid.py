# graded-by: test_sandbox.py
"""A right cos_cos that says which process is its parent and what the environment holds."""
import os

from gpuprinciples.course.kernels.cos_cos import cos_cos as _cos_cos

print(f"parent {os.getppid()} mark {os.environ.get('GP_SANDBOX_MARK')}", flush=True)


def cos_cos(x):
    return _cos_cos(x)
