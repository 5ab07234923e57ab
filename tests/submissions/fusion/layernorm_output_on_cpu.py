# exercise: fusion.layernorm
# function: layernorm
# verdict: failed
# says: lives in the cpu's memory
# mutant-of: fusion/right_layernorm_one_row_per_program.py
"""Right kernel, output made in the default place, the CPU's memory: a GPU refuses to launch it (Triton:
"cannot be accessed from Triton (cpu tensor?)"), and the grader says why. On a CPU, where every tensor is in
the same memory, the grader follows where a GPU would keep each one (measure/placement.py) and refuses the
same launch."""
# @@
# -    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
# +    y = torch.empty((m, n), dtype=x.dtype)
