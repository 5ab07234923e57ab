"""Returns the model as it is: right outputs, misaligned matmuls."""


def pad_model(model):
    return model
