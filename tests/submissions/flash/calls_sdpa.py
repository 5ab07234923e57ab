# exercise: flash.attention
# function: attention
# verdict: failed
# says: no triton kernel was launched
# says: pytorch operators did work
# says: scaled_dot_product
# seed: 8
"""Adversarial: hands the whole job to PyTorch's scaled_dot_product_attention."""

import torch


def attention(q, k, v, causal=False):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
