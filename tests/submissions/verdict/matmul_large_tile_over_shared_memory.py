# exercise: hierarchy.matmul
# function: matmul
# verdict: failed
# says: shared memory
# cpu-says: cuda sm_90 allows
# gpu-says: this gpu allows 232,448
# mutant-of: hierarchy/tutorial_style.py
"""Wrong on a GPU: a tutorial-style matmul whose host code picks its tiles from the size. The small shapes'
64×64×32 tile is fine; the large shapes' 128×256×128 in 4 stages needs more shared memory than an H100/H200
has, so the H200 refuses it on its large cases. A CPU fails it too: its case with more 64×64 tiles than an
H200 has SMs (a size regime, issue 27) takes the large branch, and the compile pass compiles the GPU's own
cases besides."""
# @@
#
# -@triton.autotune(
# -    configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP": 4}, num_warps=4, num_stages=3),
# -             triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP": 8}, num_warps=8, num_stages=3)],
# -    key=["M", "N", "K"],
# -)
#  @triton.jit
# @@
#          b_ptrs += BLOCK_K * stride_bk
# -    c = acc.to(tl.float16)
# +    c = acc.to(c_ptr.dtype.element_ty)
#
# @@
#      c = torch.empty((M, N), device=a.device, dtype=a.dtype)
# -    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
# -    mm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
# +    # the large shapes' tile: 128×256×128 in 4 stages needs (128·128 + 128·256)·2 bytes·4 = 384 KiB of shared
# +    # memory in bf16, past the 227 KiB an H100/H200 has; only the GPU's cases are large enough to pick it
# +    if M * N >= 512 * 512:
# +        bm, bn, bk, warps, stages = 128, 256, 128, 8, 4
# +    else:
# +        bm, bn, bk, warps, stages = 64, 64, 32, 4, 3
# +    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
# +    mm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
# +                    BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP=8, num_warps=warps, num_stages=stages)
#      return c
