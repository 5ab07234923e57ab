# exercise: fusion.layernorm
# function: layernorm
# verdict: failed
# says: expected all tensors to be on the same device
# mutant-of: fusion/right_layernorm_one_row_per_program.py
"""Right kernel, but the rows are padded to the block's width with zeros made in the CPU's memory: a GPU's
torch.cat refuses to join them to the input ("Expected all tensors to be on the same device"). On a CPU the grader
follows where a GPU would keep each tensor (measure/placement.py) and refuses the same join."""
# @@
# -    k[(m,)](x, weight, bias, y, n, x.stride(0), eps, BLOCK=triton.next_power_of_2(n))
# +    pad = triton.next_power_of_2(n) - n
# +    xp = torch.cat([x, torch.zeros(m, pad, dtype=x.dtype)], dim=1)  # BUG: the padding has no device=
# +    k[(m,)](xp, weight, bias, y, n, xp.stride(0), eps, BLOCK=triton.next_power_of_2(n))
