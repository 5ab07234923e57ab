# exercise: fusion.softmax
# function: softmax
# verdict: failed
# cpu-says: not written by a triton store
# gpu-says: values wrong
# mutant-of: fusion/softmax_grid_capped_at_waves.py
"""A one-row-per-program softmax whose block is capped at 8192 columns (as libraries cap theirs), with no loop over
the columns past it: they are never written, and the rest is normalised over part of the row. Neither machine had
a row that wide, so it passed both; each now grades a row of more than 8192 columns."""
# @@
#      y = torch.empty_like(x)
# -    row_softmax[(min(rows, 4 * SMS),)](x, y, x.stride(0), y.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
# +    block = min(triton.next_power_of_2(cols), 8192)
# +    row_softmax[(rows,)](x, y, x.stride(0), y.stride(0), cols, BLOCK=block, num_warps=8)
