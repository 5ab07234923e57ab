# exercise: tensorcores.pad_model
# function: pad_model
# verdict: failed
# says: computes in torch.float32
# says: keep the dtype
# seed: 20261202
"""Pads to multiples of 8 but returns the model in float32: aligned, but no longer the model it was given."""

from gpuprinciples.course.exercises.tensorcores import pad_model as _pad


def pad_model(model):
    return _pad(model.float(), 8)
