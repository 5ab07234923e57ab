# exercise: bounds.fewer_dispatches
# function: mlp_tail
# verdict: failed
# says: addmm ×
# Mistake: one row at a time, as a per-sample loop: every row pays the dispatches again.
import torch
import torch.nn.functional as F


def mlp_tail(x, w, b):
    rows = [F.gelu(torch.addmm(b, x[i:i + 1], w), approximate="tanh") for i in range(x.shape[0])]
    return torch.cat(rows)
