"""Wrong on a GPU, and it passed on a CPU: a kernel that reads a constant from a table the module made once, at its
top level, without `device=` (a scale of 1, as code that reads its constants from memory does): on a GPU machine the
table is in the CPU's memory, and the launch is refused ("Pointer argument ... cannot be accessed from Triton (cpu
tensor?)"). The placement watch followed only tensors made during the call, so the CPU, where every tensor shares
one memory, ran it; what a module's top level makes without `device=` is now followed too."""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: cannot be accessed from triton
import torch
import triton
import triton.language as tl

SCALE = torch.ones(1)  # made at import, without device=: the CPU's memory on a GPU machine


@triton.jit
def scaled_cos_cos(x_ptr, scale_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32))) * tl.load(scale_ptr)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def cos_cos(x):
    y = torch.empty_like(x)
    scaled_cos_cos[(triton.cdiv(x.numel(), 1024),)](x, SCALE, y, x.numel(), BLOCK=1024)
    return y
