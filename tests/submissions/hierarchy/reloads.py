# exercise: hierarchy.matmul
# function: matmul
# verdict: failed
# not-says: values wrong
# not-says: wgmma
# modes: cpu
# says: what its tiles imply
# says: at most 1.25× allowed
# seed: 11
"""Adversarial: right values, but each K step loads its A and B tiles twice: once to see whether the A
tile is all zeros (to skip its product), then again for the product instead of reusing what it loaded."""

import torch
import triton
import triton.language as tl


@triton.jit
def mm_kernel(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a_ptrs = A + rm[:, None] * K + (k + rk)[None, :]
        b_ptrs = B + (k + rk)[:, None] * N + rn[None, :]
        a_mask = (rm[:, None] < M) & ((k + rk)[None, :] < K)
        b_mask = ((k + rk)[:, None] < K) & (rn[None, :] < N)
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)
        b = tl.load(b_ptrs, mask=b_mask, other=0.0)
        if tl.max(tl.abs(a.to(tl.float32))) + tl.max(tl.abs(b.to(tl.float32))) > 0:
            acc = tl.dot(tl.load(a_ptrs, mask=a_mask, other=0.0), tl.load(b_ptrs, mask=b_mask, other=0.0), acc)
    tl.store(C + rm[:, None] * N + rn[None, :], acc.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    mm_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, b, c, M, N, K, BM=64, BN=64, BK=32)
    return c
