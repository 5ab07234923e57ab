"""torch.compile's kernel, not one of the learner's: lesson 07's baseline handed in as the answer. Under the
grader's counters (a dispatch mode, on every machine) Dynamo runs the function eagerly, so PyTorch's two cos are
what did the work, on a CPU (where Inductor would write C++, not Triton) as on a GPU."""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: no triton kernel was launched
# says: pytorch operators did work
import torch

_compiled = torch.compile(lambda x: torch.cos(torch.cos(x)))


def cos_cos(x):
    return _compiled(x)
