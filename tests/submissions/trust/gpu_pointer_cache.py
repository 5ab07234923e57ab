# graded-by: test_trust.py
# mutant-of: trust/good_cos_cos.py
"""GPU: remembers its answer by the input's address; the timed calls (same input tensor each time)
return the remembered output without doing any work."""
# @@
#
# +_last = {}
# +
# +
#  def cos_cos(x):
# +    key = (x.data_ptr(), tuple(x.shape), x.dtype)
# +    if key in _last:
# +        return _last[key]
#      y = torch.empty_like(x)
# -    block, warps = (4096, 8) if x.is_cuda else (1024, 4)
# -    cos_cos_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block, num_warps=warps)
# +    cos_cos_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096, num_warps=8)
# +    _last.clear()
# +    _last[key] = y
#      return y
