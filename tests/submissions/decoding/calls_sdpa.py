# exercise: decoding.decode_attention
# function: decode_attention
# verdict: failed
# says: no triton kernel was launched
# says: pytorch operators did work
# seed: 10
"""Adversarial: PyTorch's scaled_dot_product_attention, one sequence at a time over its live positions."""

import torch


def decode_attention(q, k_cache, v_cache, seq_lens):
    B, Hq, D = q.shape
    Hkv = k_cache.shape[1]
    out = torch.empty_like(q)
    for b in range(B):
        n = int(seq_lens[b])
        o = torch.nn.functional.scaled_dot_product_attention(q[b].reshape(Hkv, Hq // Hkv, D), k_cache[b, :, :n],
                                                             v_cache[b, :, :n])
        out[b] = o.reshape(Hq, D)
    return out
