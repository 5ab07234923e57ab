# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: not a torch.tensor
"""Returns the right values in a torch.Tensor subclass (which could override ==, allclose, ...)."""
import torch

from gpuprinciples.course.kernels.cos_cos import cos_cos as _fused


class Sneaky(torch.Tensor):
    pass


def cos_cos(x):
    return _fused(x).as_subclass(Sneaky)
