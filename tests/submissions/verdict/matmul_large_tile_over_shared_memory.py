# verdict: failed: shared memory; cuda sm_90 allows
"""Wrong on a GPU: a tutorial-style matmul whose host code picks its tiles from the size. The small shapes'
64×64×32 tile is fine; the large shapes' 128×256×128 in 4 stages needs more shared memory than an H100/H200
has, so the H200 refuses it on its large cases. A CPU fails it too: its case with more 64×64 tiles than an
H200 has SMs (a size regime, issue 27) takes the large branch, and the compile pass compiles the GPU's own
cases besides."""

import torch
import triton
import triton.language as tl


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP * tiles_n
    first = (pid // in_group) * GROUP
    height = min(tiles_m - first, GROUP)
    pm = first + (pid % in_group) % height
    pn = (pid % in_group) // height

    rm = (pm * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rn = (pn * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=rk[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)

    cm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn, c, mask=(cm[:, None] < M) & (cn[None, :] < N))


def matmul(a, b):
    assert a.shape[1] == b.shape[0]
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    # the large shapes' tile: 128×256×128 in 4 stages needs (128·128 + 128·256)·2 bytes·4 = 384 KiB of shared
    # memory in bf16, past the 227 KiB an H100/H200 has; only the GPU's cases are large enough to pick it
    if M * N >= 512 * 512:
        bm, bn, bk, warps, stages = 128, 256, 128, 8, 4
    else:
        bm, bn, bk, warps, stages = 64, 64, 32, 4, 3
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    mm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                    BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP=8, num_warps=warps, num_stages=stages)
    return c
