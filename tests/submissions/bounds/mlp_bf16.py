# exercise: bounds.fewer_dispatches
# function: mlp_tail
# verdict: failed
# says: dtype torch.bfloat16, expected torch.float32
# Mistake: casts to bf16 "for speed" and returns the wrong dtype.
import torch
import torch.nn.functional as F


def mlp_tail(x, w, b):
    return F.gelu(torch.addmm(b.bfloat16(), x.bfloat16(), w.bfloat16()), approximate="tanh")
