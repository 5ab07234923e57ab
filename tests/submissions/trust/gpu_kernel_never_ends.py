# graded-by: test_trust.py
"""GPU: a Triton kernel that never ends (it waits for a flag that nobody sets)."""
import torch
import triton
import triton.language as tl


@triton.jit
def spin(flag_ptr, y_ptr):
    flag = tl.load(flag_ptr)
    while flag == 0:
        flag = tl.load(flag_ptr, volatile=True)
    tl.store(y_ptr, flag.to(tl.float32))


def cos_cos(x):
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    y = torch.empty_like(x)
    spin[(1,)](flag, y)
    torch.cuda.synchronize()
    return y
