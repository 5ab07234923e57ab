# exercise: fusion.softmax
# function: softmax
# verdict: failed
# says: pytorch copies
"""Wrong on every machine: the package's one-pass softmax kernel, but the input is first made contiguous
(`x.contiguous()`), as some kernel libraries do. On a strided view that is a PyTorch copy of the whole
input: it moves the input through memory twice. A CPU counted it ("PyTorch copies ... KiB") and failed it;
an H200 passed the same file. Both must fail it: the dispatcher counts the copy on both machines."""
import torch

from gpuprinciples.course.kernels.softmax import softmax as _softmax


def softmax(x: torch.Tensor) -> torch.Tensor:
    return _softmax(x.contiguous())
