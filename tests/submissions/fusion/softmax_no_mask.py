# exercise: fusion.softmax
# function: softmax
# verdict: failed
# cpu-says: moved
# cpu-says: is the minimum
# gpu-says: pytorch copies
# mutant-of: fusion/softmax_wrong_tail.py
"""No mask at all on the load: every row reads BLOCK elements, past its end (into the next row
or past the tensor); the extra lanes are then dropped with tl.where, so only the bytes are wrong."""
# @@
#      mask = cols < n_cols
# -    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
# +    x = tl.load(x_ptr + row * x_stride + cols)  # BUG: no mask
# +    x = tl.where(mask, x, -float("inf"))
#      x = x - tl.max(x, axis=0)
# @@
#      m, n = x.shape
#      y = torch.empty((m, n), dtype=x.dtype, device=x.device)
# -    k[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
# +    # room past the end, so the unmasked reads stay inside memory we own
# +    padded = torch.empty(x.shape[0] * x.stride(0) + triton.next_power_of_2(n), dtype=x.dtype, device=x.device)
# +    padded[: x.shape[0] * x.stride(0)].view(x.shape[0], x.stride(0))[:, :n].copy_(x)
# +    k[(m,)](padded, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
#      return y
