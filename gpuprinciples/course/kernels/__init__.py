"""Reference Triton kernels, one op per file (Liger-Kernel style): the solutions the grader and
`gpuprinciples bench` hold learners' kernels against."""
