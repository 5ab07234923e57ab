# exercise: tensorcores.pad_model
# function: pad_model
# verdict: failed
# says: not aligned
# says: multiple of 8
# seed: 20261202
"""Returns the model as it is: right outputs, misaligned matmuls."""


def pad_model(model):
    return model
