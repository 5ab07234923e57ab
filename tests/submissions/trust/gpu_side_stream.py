# graded-by: test_trust.py
# mutant-of: trust/good_cos_cos.py
"""GPU: the kernel runs on a side stream and the function returns at once, so the timing events
on the current stream bracket almost nothing."""
# @@
#
# +_side = []
# +
# +
#  def cos_cos(x):
# +    if not _side:
# +        _side.append(torch.cuda.Stream())
# +    side = _side[0]
#      y = torch.empty_like(x)
# -    block, warps = (4096, 8) if x.is_cuda else (1024, 4)
# -    cos_cos_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block, num_warps=warps)
# +    side.wait_stream(torch.cuda.current_stream())
# +    with torch.cuda.stream(side):
# +        cos_cos_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096, num_warps=8)
#      return y
