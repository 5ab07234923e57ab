# graded-by: test_trust.py
# mutant-of: trust/good_cos_cos.py
"""GPU: an honest kernel on the graded cases (small), and PyTorch on the large timing input: the
size, not the counters, tells the timed calls apart. The timed calls are counted too, so the
PyTorch there is seen."""
# @@
#  def cos_cos(x):
# +    if x.numel() > 2**24:  # the graded cases are far smaller than the timing input
# +        return x.cos().cos()
#      y = torch.empty_like(x)
