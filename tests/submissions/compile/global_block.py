# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: cannot access global variable block
# says: `block = tl.constexpr(value)`
# mutant-of: compile/constexpr_global_block.py
"""Wrong on a GPU: the kernel reads a plain module global (`BLOCK = 1024`). The interpreter runs it
as Python; a GPU's compiler refuses it: a kernel may read only `tl.constexpr` globals."""
# @@
#
# -BLOCK = tl.constexpr(1024)
# +BLOCK = 1024
#
# @@
#      y = torch.empty_like(x)
# -    cos_cos_global[(triton.cdiv(x.numel(), BLOCK.value),)](x, y, x.numel())
# +    cos_cos_global[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel())
#      return y
