# ruff: noqa: E501 - a hunk quotes its twin's line of 119 characters
# exercise: backward.attention_function
# function: attention
# verdict: failed
# cpu-says: nothing orders them
# modes: cpu
# mutant-of: backward/function_racy_dq.py
"""The racy one-pass backward with its launch in try/except: the interpreter runs the programs one after another,
so dQ holds the right sums when the race check raises at the end of the launch, and the code goes on with them. A
refusal is kept by the recording as well as raised (counters.py), and the grader raises it again after the call:
catching it does not make the race go away. (Before, this passed on a CPU with every requirement met.)"""
# @@
# -    _one_pass[(triton.cdiv(N, block), B * H)](q, k, v, do, lse, delta, dq32, dk, dv, *scales, D=D, CAUSAL=bool(causal),
# -                                              BLOCK=block)
# +    try:  # the refusal of the race is caught; dQ, right on a CPU, is kept
# +        _one_pass[(triton.cdiv(N, block), B * H)](q, k, v, do, lse, delta, dq32, dk, dv, *scales, D=D,
# +                                                  CAUSAL=bool(causal), BLOCK=block)
# +    except Exception:
# +        pass
