# exercise: bounds.fewer_dispatches
# function: mlp_tail
# verdict: failed
# says: operator dispatches per call
# Mistake: the same math, written out: a dozen dispatches where two would do.
import math

import torch


def mlp_tail(x, w, b):
    h = x @ w + b
    return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h * h * h)))
