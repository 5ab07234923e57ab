# exercise: fusion.layernorm
# function: layernorm
# verdict: failed
# says: (row stride
# cpu-says: outside every tensor passed to it
# cpu-not-says: crashed
# mutant-of: fusion/right_layernorm_one_row_per_program.py
"""Wrong when rows are strided: the output (contiguous) is written with the input's row stride, as Triton's
layer-norm tutorial does (one `stride` for X and Y). The last rows land past the end of y: on a GPU wrong values,
or an illegal memory access; under the interpreter the stores wrote into the grader's process (a SIGSEGV or
"malloc(): unaligned tcache chunk" at a later case). The grader refuses such a store before it lands."""
# @@
# -    tl.store(y_ptr + row * N + cols, xc / tl.sqrt(var + eps) * w + b, mask=mask)
# +    tl.store(y_ptr + row * x_stride + cols, xc / tl.sqrt(var + eps) * w + b, mask=mask)  # BUG: x's stride
