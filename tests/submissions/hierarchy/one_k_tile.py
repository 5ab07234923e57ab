# exercise: hierarchy.matmul
# function: matmul
# verdict: failed
# cpu-says: k past one tile of 512
# says: values wrong (
# seed: 11
"""Adversarial: no loop over K. One masked tile of BK = 512 holds all of K: right while K ≤ 512, and K
past it is never added. A CPU whose K stayed under 512 passed it; an H200's cases reach K = 3000."""

import torch
import triton
import triton.language as tl


@triton.jit
def mm_kernel(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(A + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(B + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    acc = tl.dot(a, b)  # BUG: the K from BK on is never loaded
    tl.store(C + rm[:, None] * N + rn[None, :], acc.to(C.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    mm_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 32))](a, b, c, M, N, K, BM=64, BN=32, BK=512)
    return c
