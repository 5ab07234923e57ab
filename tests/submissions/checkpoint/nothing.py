# exercise: checkpoint.fit_budget
# function: fit_budget
# verdict: failed
# says: kept for backward
# says: 100% of the plain step
# says: budget is 50%
# seed: 20261202
"""Checkpoints nothing: right gradients, every activation kept."""


def fit_budget(model, x, y):
    return model.loss(x, y)
