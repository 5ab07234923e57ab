"""Triton made to behave alike everywhere: every version shim (compat), compile steps without a driver
(compiling), the sm_90 compile and its sentences (gpucompile), the interpreter's Hopper emulation
(interpreter, installed by one `install()`), the known-answer self-test. Imports only machine/."""
