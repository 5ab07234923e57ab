# exercise: hierarchy.matmul
# function: matmul
# verdict: failed
# cpu-says: nothing orders them
# cpu-says: memory under `c_ptr`
# modes: cpu
# seed: 11
# mutant-of: hierarchy/tutorial_style.py
"""Wrong on a GPU: split-K in two, each half's program adding its partial product into C with a plain load and
store (C zeroed first). On a GPU the two programs of a tile run at the same time and one's addition can overwrite
the other's; the interpreter runs them one after another, so the values come out right and only the accesses
show the race (measure/races.py). Graded on a CPU only: on a GPU whether a given run loses an addition is luck."""
# @@
# -    for k in range(0, tl.cdiv(K, BLOCK_K)):
# +    a_ptrs += tl.program_id(1) * BLOCK_K * stride_ak  # this program's half of the K tiles: every other one
# +    b_ptrs += tl.program_id(1) * BLOCK_K * stride_bk
# +    for k in range(tl.program_id(1), tl.cdiv(K, BLOCK_K), 2):
#          left = K - k * BLOCK_K
# @@
# -        a_ptrs += BLOCK_K * stride_ak
# -        b_ptrs += BLOCK_K * stride_bk
# -    c = acc.to(tl.float16)
# +        a_ptrs += 2 * BLOCK_K * stride_ak
# +        b_ptrs += 2 * BLOCK_K * stride_bk
# @@
#      cn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
# +    here = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
# +    c = (tl.load(here, mask=(cm[:, None] < M) & (cn[None, :] < N), other=0.0) + acc).to(tl.float16)  # BUG: races
# @@
# -    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
# -    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
# +    c = torch.zeros((M, N), device=a.device, dtype=a.dtype)
# +    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]), 2)  # noqa: E731
