"""A right kernel whose host code checks where its tensors are, as FlashAttention's Triton kernels do (`assert
q.is_cuda`; Triton's tutorials, `x.device == DEVICE`) and many libraries' fall back to PyTorch off the GPU (`if
x.device.type != "cuda"`). On a CPU every tensor said "cpu", so the assertion failed (or the fallback did the
work) where a GPU passes the code; under the grader's watch a tensor the GPU would hold answers as the GPU's does
(`is_cuda`, `device`, `get_device()`). (The reference's tiles, 4096 elements and 8 warps, with which an H100
passed it on 2026-12-05.)"""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: passed
import torch
import triton
from _kernels import cos_cos_kernel


def cos_cos(x):
    assert x.is_cuda and not x.is_cpu and x.get_device() == 0, "expected a CUDA tensor"
    assert x.device == triton.runtime.driver.active.get_active_torch_device()  # as Triton's first tutorial asks
    if x.device.type != "cuda":  # the fallback never taken on a GPU
        return torch.cos(torch.cos(x))
    y = torch.empty_like(x)
    assert y.device == x.device
    cos_cos_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096, num_warps=8)
    return y
