# graded-by: test_sandbox.py
"""A right cos_cos that says how many threads torch.compile would compile with in this child."""
import torch._inductor.config

from gpuprinciples.course.kernels.cos_cos import cos_cos as _cos_cos

print(f"compile threads {torch._inductor.config.compile_threads}", flush=True)


def cos_cos(x):
    return _cos_cos(x)
