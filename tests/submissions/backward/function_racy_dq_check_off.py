# exercise: backward.attention_function
# function: attention
# verdict: failed
# cpu-says: replaced parts of pytorch or of the grader
# cpu-says: gpuprinciples.measure.races.check
# modes: cpu
# mutant-of: backward/function_racy_dq.py
"""The racy one-pass backward with the grader's race check replaced by one that finds nothing, at import: the
module is watched like the rest of the grader's (worker.WATCHED), so the replacement itself is the failure."""
# @@
#  from _kernels import _p_ds, _rows
# +from gpuprinciples.measure import races
# +
# +races.check = lambda *args: None  # the race check switched off
