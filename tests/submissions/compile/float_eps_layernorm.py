# exercise: fusion.layernorm
# function: layernorm
# graded-by: test_gpucompile.py
"""Right: a layer norm that receives eps as a float argument and converts it in the kernel
(`eps.to(tl.float32)`), as kernels written for a GPU do: there a float argument is an fp32 scalar.
Triton's interpreter passed a Python float ('float' object has no attribute 'to'); the grader's
interpreter passes an fp32 scalar, as a GPU does."""
import torch
import triton
import triton.language as tl


@triton.jit
def layer_norm_rows(x_ptr, w_ptr, b_ptr, y_ptr, x_stride, y_stride, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    inside = cols < n
    x = tl.load(x_ptr + row * x_stride + cols, mask=inside, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n
    centred = tl.where(inside, x - mean, 0.0)
    var = tl.sum(centred * centred, axis=0) / n
    inv = 1.0 / tl.sqrt(var + eps.to(tl.float32))
    w = tl.load(w_ptr + cols, mask=inside)
    b = tl.load(b_ptr + cols, mask=inside)
    tl.store(y_ptr + row * y_stride + cols, centred * inv * w + b, mask=inside)


def layernorm(x, weight, bias, eps):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    layer_norm_rows[(m,)](x, weight, bias, y, x.stride(0), y.stride(0), n, eps, BLOCK=triton.next_power_of_2(n))
    return y
