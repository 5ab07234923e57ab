# Mistake: forgets the bias.
import torch.nn.functional as F


def mlp_tail(x, w, b):
    return F.gelu(x @ w, approximate="tanh")
