# exercise: bounds.fewer_dispatches
# function: mlp_tail
# verdict: passed
"""Right: two dispatches (addmm, then the tanh GELU), inside a `record_function` label as lesson 03 teaches for
reading a profile. The label's enter and exit were counted as two more dispatches (four, where three are allowed);
they do no work. (Also why `torch.optim`'s own step, which labels itself, failed profiling.foreach_sgd.)"""
import torch
import torch.nn.functional as F


def mlp_tail(x, w, b):
    with torch.autograd.profiler.record_function("mlp_tail"):
        return F.gelu(torch.addmm(b, x, w), approximate="tanh")
