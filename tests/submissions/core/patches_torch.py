# graded-by: test_grader_core.py
import torch

from gpuprinciples.course.kernels.cos_cos import cos_cos as _fused

# make the baseline look slow and equality look true: the grader must notice
torch.Tensor.cos = lambda self: _fused(self)
torch.allclose = lambda *a, **k: True


def cos_cos(x):
    return _fused(x)
