"""Checkpoints nothing: right gradients, every activation kept."""


def fit_budget(model, x, y):
    return model.loss(x, y)
