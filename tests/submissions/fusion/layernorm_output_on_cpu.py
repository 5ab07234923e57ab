# exercise: fusion.layernorm
# function: layernorm
# verdict: failed
# says: lives in the cpu's memory
# known-gap: on a CPU an output made without device= is where the inputs are; only a GPU refuses it
# mutant-of: fusion/right_layernorm_one_row_per_program.py
"""Right kernel, output made in the default place, the CPU's memory: a GPU refuses to launch it (Triton:
"cannot be accessed from Triton (cpu tensor?)"), and the grader says why."""
# @@
# -    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
# +    y = torch.empty((m, n), dtype=x.dtype)
