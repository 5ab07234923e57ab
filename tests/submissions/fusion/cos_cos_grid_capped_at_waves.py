# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# cpu-says: not written by a triton store
# cpu-says: more programs than an h200's 132 sms, 4 times over
# gpu-says: wrong on the large timing input
"""A grid capped at four programs per SM, one block each and no loop over the rest: elements past 4 × 132 × 1024
are never written. The CPU's largest case (about 137,000 elements) fit under the cap and passed it, where an H200's
timed input (2**27 elements) fails it; the CPU's largest case now needs more than 4 waves of programs."""
import torch
import triton
from _kernels import cos_cos_kernel

SMS = torch.cuda.get_device_properties(0).multi_processor_count


def cos_cos(x):
    y = torch.empty_like(x)
    cos_cos_kernel[(min(triton.cdiv(x.numel(), 1024), 4 * SMS),)](x, y, x.numel(), BLOCK=1024)
    return y
