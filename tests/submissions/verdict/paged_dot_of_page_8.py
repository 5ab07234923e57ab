# exercise: decoding.paged_decode_attention
# function: paged_decode_attention
# verdict: failed
# says: k >= 16
# mutant-of: decoding/good_paged.py
"""Wrong on a GPU: a paged decode attention whose P·V is always tl.dot(p, v), with K = the page size. On the
GPU's float16 page-8 case the compiler refuses it ("Input shapes should have M >= 1, N >= 1 and K >= 16"),
as production serving kernels have been refused; a CPU's page-8 case is float32, which the compiler accepts,
so only compiling the GPU's own cases (the compile pass) makes a CPU fail it too."""
# @@
#          l_run = l_run * alpha + tl.sum(p, 1)
# -        if PAGE >= 16:
# -            pv = tl.dot(p.to(v.dtype), v)
# -        else:
# -            pv = tl.sum(p[:, :, None] * v[None, :, :].to(tl.float32), 1)
# +        pv = tl.dot(p.to(v.dtype), v)
#          acc = acc * alpha[:, None] + pv
