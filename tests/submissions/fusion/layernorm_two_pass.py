# exercise: fusion.layernorm
# function: layernorm
# verdict: failed
# gpu-verdict: passed
# cpu-says: moved
# cpu-says: is the minimum
# mutant-of: fusion/right_layernorm_one_row_per_program.py
"""Right values, but x crosses memory twice: one load for the mean, another for the variance and the
output (1.5x the minimum bytes). Declaring weight and bias as cached must not excuse re-reading x."""
# @@
#      mask = cols < N
# -    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
# -    mean = tl.sum(x, axis=0) / N
# +    mean = tl.sum(tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0), axis=0) / N
# +    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)  # again
#      xc = tl.where(mask, x - mean, 0.0)
