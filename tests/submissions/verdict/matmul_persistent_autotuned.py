# exercise: hierarchy.matmul
# function: matmul
# verdict: passed
# gpu-verdict: failed
# gpu-says: speedup over torch.mm
"""Right: a persistent matmul in the style of Triton's tutorials: one program per SM walks the output tiles
(grouped order), and @triton.autotune chooses among 24 configurations keyed on the sizes. Under the
interpreter every configuration is compiled once for sm_90 and the first a GPU accepts runs; this got its
verdict after more than 300 s ("a loop that never ends") when every configuration was compiled again for
every size."""
import torch
import triton
import triton.language as tl

NUM_SMS = 132


def _configs():
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP": 8}, num_warps=w, num_stages=s)
            for bm, bn in ((64, 64), (128, 64), (64, 128), (128, 128)) for bk in (32, 64)
            for s, w in ((3, 4), (4, 4), (3, 8))]


@triton.autotune(configs=_configs(), key=["M", "N", "K"])
@triton.jit
def persistent_mm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  NUM_PROGRAMS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP: tl.constexpr):
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    for tile in range(tl.program_id(0), tiles_m * tiles_n, NUM_PROGRAMS):
        in_group = GROUP * tiles_n
        first = (tile // in_group) * GROUP
        height = min(tiles_m - first, GROUP)
        pm = first + (tile % in_group) % height
        pn = (tile % in_group) // height
        rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                        mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                        mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    programs = lambda meta: min(NUM_SMS, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]))  # noqa: E731
    persistent_mm[lambda meta: (programs(meta),)](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        NUM_PROGRAMS=132)
    return c
