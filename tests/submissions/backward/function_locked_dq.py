# exercise: backward.attention_function
# function: attention
# verdict: passed
# modes: cpu
# mutant-of: backward/function_racy_dq.py
"""Right: the racy one-pass backward with its read-modify-write of dQ made safe by a lock per query tile, taken
with tl.atomic_cas and given back with tl.atomic_xchg, as Triton's layer-norm tutorial accumulates its weight
gradients. Its programs still load and store the same bytes of dQ, but each pair of them is ordered by the lock:
the race check (races.py) must let it through, where it refuses the same kernel without the lock. Graded on a CPU
only: whether a spin lock is fast enough on a GPU is not its point."""
# @@
# -              BLOCK: tl.constexpr):
# +              BLOCK: tl.constexpr, Lock):
# +    tiles = tl.cdiv(N, BLOCK)
# @@
# -        # dQ += dS K for these queries: a plain read-modify-write (the mistake: tl.atomic_add is needed)
# +        # dQ += dS K for these queries: a plain read-modify-write, under this query tile's lock
#          dq_ptrs = DQ + bh * N * D + offs_m[:, None] * D + tl.arange(0, D)[None, :]
# +        lock = Lock + bh * tiles + start_m // BLOCK
# +        while tl.atomic_cas(lock, 0, 1) == 1:
# +            pass
#          dq = tl.load(dq_ptrs, mask=offs_m[:, None] < N, other=0.0)
#          tl.store(dq_ptrs, dq + tl.dot(ds.to(k.dtype), k) * sm_scale, mask=offs_m[:, None] < N)
# +        tl.debug_barrier()  # every thread's part of the store before the lock is given back
# +        tl.atomic_xchg(lock, 0)
# @@
#      scales = (N, 1.4426950408889634 / math.sqrt(D), 1 / math.sqrt(D))
# +    lock = torch.zeros(B * H * triton.cdiv(N, block), dtype=torch.int32, device=q.device)
# @@
# -                                              BLOCK=block)
# +                                              BLOCK=block, Lock=lock)
