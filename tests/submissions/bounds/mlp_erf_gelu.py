# exercise: bounds.fewer_dispatches
# function: mlp_tail
# verdict: failed
# says: values wrong
# Mistake: the exact (erf) GELU, not the tanh form the step computes.
import torch
import torch.nn.functional as F


def mlp_tail(x, w, b):
    return F.gelu(torch.addmm(b, x, w))
