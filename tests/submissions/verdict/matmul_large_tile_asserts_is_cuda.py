# exercise: hierarchy.matmul
# function: matmul
# verdict: failed
# says: shared memory
# cpu-says: cuda sm_90 allows
# gpu-says: this gpu allows 232,448
# mutant-of: verdict/matmul_large_tile_over_shared_memory.py
"""Wrong on a GPU, and it passed on a CPU: its twin's tile too large for an H200's shared memory, picked only at
the GPU's own sizes (1024×1024 outputs or more: none of the CPU's cases), behind host code that asserts its inputs
are on the GPU. The CPU learns of the refusal only from the compile pass, which ran the host code on the GPU's
cases outside the placement watch: `a.is_cuda` said False, the assertion raised before any launch, and the pass
compiled nothing and passed. It now runs the host code as a graded case runs it, and fails a pass that compiled
no kernel because the code raised."""
# @@
#      c = torch.empty((M, N), device=a.device, dtype=a.dtype)
# +    assert a.is_cuda and b.is_cuda, "matmul expects CUDA tensors"
# @@
# -    if M * N >= 512 * 512:
# +    if M * N >= 1024 * 1024:
