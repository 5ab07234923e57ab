# exercise: bounds.fewer_dispatches
# function: mlp_tail
# verdict: passed
# modes: cpu
"""Right: two dispatches (addmm, then the tanh GELU), inside a `record_function` label as lesson 03 teaches for
reading a profile. The label's enter and exit were counted as two more dispatches (four, where three are allowed);
they do no work. (Also why `torch.optim`'s own step, which labels itself, failed profiling.foreach_sgd.)
Graded on a CPU only: on a GPU (an H100, 2026-12-05) the label's host time is in this overhead-bound step's time,
1.48× faster than written out where 1.5× is asked (95% interval 1.46-1.50×), a speed verdict that follows the host.
That run also counted the label's range on the GPU's timeline as a kernel no operator launched;
`observe._annotation` now leaves it out (tests/test_observe.py)."""
import torch
import torch.nn.functional as F


def mlp_tail(x, w, b):
    with torch.autograd.profiler.record_function("mlp_tail"):
        return F.gelu(torch.addmm(b, x, w), approximate="tanh")
