"""Right: host-side tensor descriptors whose block shape each autotuning configuration sets in its `pre_hook`, as
Triton's persistent-matmul and fused-attention tutorials do (the descriptor is made with a placeholder block;
`nargs["x_desc"].block_shape = [BLOCK]` before each configuration runs). A GPU's autotuner calls the hook before
timing a configuration; the interpreter's, which compiles each instead of timing it, did not, so every
configuration was compiled with the placeholder block and refused ("expected value shape ['1']"). Right, but slow
on a GPU: a 1-D descriptor's block is at most 256 elements, so each program moves 1 KB; an H200 measured 54 % of its
copy bandwidth and 1.08× eager, an H100 0.72× torch.compile (2026-12-05), under the exercise's bars. A CPU times
nothing, and passes it."""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: passed
# gpu-verdict: failed
# gpu-says: speedup over
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


def _set_block(nargs):
    for name in ("x_desc", "y_desc"):
        nargs[name].block_shape = [nargs["BLOCK"]]


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, pre_hook=_set_block),
                          triton.Config({"BLOCK": 256}, pre_hook=_set_block)], key=["n"])
@triton.jit
def cos_cos_kernel(x_desc, y_desc, n, BLOCK: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    y = tl.cos(tl.cos(x_desc.load([start]).to(tl.float32)))  # a tile past the end loads zeros and stores nothing
    y_desc.store([start], y.to(y_desc.dtype))


def cos_cos(x):
    y = torch.empty_like(x)
    x_desc, y_desc = (TensorDescriptor.from_tensor(t.view(-1), [1]) for t in (x, y))
    cos_cos_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x_desc, y_desc, x.numel())
    return y
