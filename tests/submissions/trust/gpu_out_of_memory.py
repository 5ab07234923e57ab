# graded-by: test_trust.py
"""GPU: asks for 200 GiB of device memory (more than an H200 has)."""
import torch


def cos_cos(x):
    scratch = torch.empty(200 * 2**30, dtype=torch.uint8, device=x.device)
    return scratch[: x.numel()].float().cos().cos().view(x.shape)
