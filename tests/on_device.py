"""Kernel tests on whichever machine runs them: inputs on its device, and the error its products allow.

Under the interpreter a float32 `tl.dot` is float32. On a GPU it is TF32 unless the kernel asks for IEEE (the
attention kernel does; the matmul does not), with 10 mantissa bits: a K-long product's error there grows with
sqrt(K) and the values' size, about 1e-2 for K of 100 and values of unit size, where a wrong kernel is off by 1."""

import torch

from gpuprinciples.machine import runtime

DEVICE = runtime.DEVICE
# what a GPU's matmul paths are built for; Triton 3.6 cannot compile a warp-specialised TF32 product for sm_90
# ("WGMMA type or shape is not supported"), so those forms are tested in bf16 there
PRODUCT_DTYPE = torch.float32 if runtime.INTERPRETER else torch.bfloat16


def on_device(*tensors: torch.Tensor, dtype: torch.dtype | None = None):
    moved = tuple(t.to(DEVICE, dtype) for t in tensors)
    return moved[0] if len(moved) == 1 else moved


def product_tolerance(interpreter: float, out: torch.Tensor | None = None) -> float:
    """The largest error a product may show: `interpreter` there; on a GPU TF32's for float32, and for a bf16
    result two of its roundings (2^-7) of the largest value."""
    if runtime.INTERPRETER:
        return interpreter
    if out is not None and out.dtype == torch.bfloat16:
        return 2.0 ** -7 * out.float().abs().max().item()
    return 5e-2
