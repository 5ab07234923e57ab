# exercise: fusion.layernorm
# function: layernorm
# verdict: failed
# says: values wrong
# says: eps=0.001
# mutant-of: fusion/layernorm_naive_variance.py
"""Uses eps = 1e-5 whatever it is given: wrong where the variance is small and eps is 1e-3."""
# @@
#              mean = tl.sum(x, axis=0) / N
# -            var = tl.sum(x * x, axis=0) / N - mean * mean  # BUG: cancellation
# +            xc = tl.where(cm, x - mean, 0.0)
# +            var = tl.sum(xc * xc, axis=0) / N
#              y = (x - mean) / tl.sqrt(var + eps) * w + b
# @@
#  def layernorm(x, weight, bias, eps):
# +    eps = 1e-5  # BUG: ignores the eps it is given
#      m, n = x.shape
