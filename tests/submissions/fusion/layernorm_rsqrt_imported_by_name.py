# exercise: fusion.layernorm
# function: layernorm
# verdict: passed
# mutant-of: fusion/right_layernorm_one_row_per_program.py
"""Right: 1/sqrt taken by functions imported by name, as libraries do (`from triton.language.extra.libdevice
import rsqrt`, as Liger-Kernel does; `from triton.language.math import sqrt`). A GPU compiles them as it compiles
`libdevice.rsqrt`; the interpreter left such names unpatched (the libdevice stub returned None: "'NoneType' object
has no attribute 'to'"; the tl.math builtin asked for `_semantic`)."""
# @@
#  import triton.language as tl
# +from triton.language.extra.libdevice import rsqrt
# +from triton.language.math import sqrt
# @@
# -    tl.store(y_ptr + row * N + cols, xc / tl.sqrt(var + eps) * w + b, mask=mask)
# +    scale = rsqrt(var + eps) * (sqrt(var + eps) * rsqrt(var + eps))  # 1/sqrt, through both imports
# +    tl.store(y_ptr + row * N + cols, xc * scale * w + b, mask=mask)
