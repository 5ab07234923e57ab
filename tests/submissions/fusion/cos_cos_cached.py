# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: values wrong
"""Caches its answer by shape: the second call returns the first call's result."""
from gpuprinciples.course.kernels.cos_cos import cos_cos as _fused

_cache = {}


def cos_cos(x):
    key = tuple(x.shape)
    if key not in _cache:
        _cache[key] = _fused(x)
    return _cache[key].clone()
