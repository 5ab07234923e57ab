# exercise: bounds.fewer_dispatches
# function: mlp_tail
# verdict: failed
# says: values wrong
# Mistake: forgets the bias.
import torch.nn.functional as F


def mlp_tail(x, w, b):
    return F.gelu(x @ w, approximate="tanh")
