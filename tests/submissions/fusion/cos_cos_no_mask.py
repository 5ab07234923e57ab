# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# cpu-says: loaded
# cpu-says: outside every tensor passed to it
# cpu-says: refused the load
# gpu-says: but got bf16
"""Missing mask on the load: the last block reads past the end of x. The store is masked, so the values could
come out right, but on a GPU those lanes read another allocation or fault; under the interpreter they read the
grader's own memory, so the load is refused before it reads (measure/bounds.py). (It counted as extra bytes moved
before loads were checked.)"""
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # BUG: no mask
    tl.store(y_ptr + offs, tl.cos(tl.cos(x)), mask=offs < n)


def cos_cos(x):
    y = torch.empty_like(x)
    k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
