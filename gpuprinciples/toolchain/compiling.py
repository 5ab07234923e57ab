"""Compiling for a GPU that is not here: Triton's own JIT steps, without a driver (gpucompile.py uses them)."""

from __future__ import annotations

import contextlib
import sys
import warnings

import torch
import triton
import triton.language as tl

from ..machine import runtime
from .compat import interpreter_module

# ---------------------------------------------------------------------------------------------
# Compiling for a GPU that is not here: Triton's own JIT steps, without a driver (gpucompile.py)
# ---------------------------------------------------------------------------------------------

# What a kernel is compiled for under the interpreter: an H100/H200 (both sm_90, 32-thread warps).
HOPPER = ("cuda", 90, 32)
# What the CUDA driver says of an H100 SXM (an H200 has the same SMs; only its memory differs):
# `utils.get_device_properties` keys; max_shared_mem is the per-block opt-in limit (227 KiB of the
# 228 KiB per SM), max_num_regs the 64K registers of one SM (and of one block).
HOPPER_PROPERTIES = {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132,
                     "warpSize": 32, "sm_clock_rate": 1980000, "mem_clock_rate": 2619000, "mem_bus_width": 5120}
HOPPER_WARPS_PER_SM = 64  # for occupancy arithmetic: the driver's properties do not say it
HOPPER_MAX_THREADS_PER_BLOCK = 1024


def compile_target():
    """The GPU kernels are compiled for: this machine's, or (interpreter) an H100/H200's."""
    from triton.backends.compiler import GPUTarget
    if runtime.HAS_CUDA and not runtime.INTERPRETER:
        return triton.runtime.driver.active.get_current_target()
    return GPUTarget(*HOPPER)


def max_shared_bytes() -> int:
    """Shared memory one program may use on the GPU kernels are compiled for."""
    if runtime.HAS_CUDA and not runtime.INTERPRETER:
        return int(triton.runtime.driver.active.utils.get_device_properties(
            torch.cuda.current_device())["max_shared_mem"])
    return HOPPER_PROPERTIES["max_shared_mem"]


def python_function_of(kernel):
    """The plain Python function under a kernel (a JITFunction, an InterpretedFunction, and the
    autotune and heuristics wrappers around them each keep what they wrap in `.fn`)."""
    import inspect
    while not inspect.isfunction(kernel) and callable(getattr(kernel, "fn", None)):
        kernel = kernel.fn
    return kernel


def jit_function_of(kernel):
    """A JITFunction that compiles what `kernel` is: the kernel itself where it is one, else (under the
    interpreter, where @triton.jit makes InterpretedFunctions) one built from the same Python function,
    with the @triton.jit helpers it calls built the same way, so the GPU compiler sees what a GPU would."""
    from triton.runtime.jit import JITFunction
    if isinstance(kernel, JITFunction):
        return kernel
    return _jit_copy(kernel)


_language_jit_cache: list = []
_pristine_language: list = []  # (owner, name, value before the interpreter patched it)


def _language_jit():
    """Under the interpreter Triton's own @triton.jit functions (tl.max, tl.sum, tl.cdiv, ...) are
    InterpretedFunctions too: ([(owner, name, JITFunction)], {python function: JITFunction}) for every
    one of them in triton.language and its submodules, and for the tensor methods that forward to them
    (`x.sum()`), built once."""
    import inspect
    if _language_jit_cache:
        return _language_jit_cache[0]
    interp = interpreter_module()
    made: dict = {}
    swaps = []
    for module_name, module in sorted(sys.modules.items()):
        if module is None or not (module_name == "triton.language" or module_name.startswith("triton.language.")):
            continue
        for name, value in list(vars(module).items()):
            if isinstance(value, interp.InterpretedFunction):
                swaps.append((module, name, _jit_copy(value, made)))
    for name, value in list(vars(tl.tensor).items()):
        cells = (value.__closure__ or ()) if inspect.isfunction(value) else ()
        target = next((c.cell_contents for c in cells if isinstance(c.cell_contents, interp.InterpretedFunction)),
                      None)
        if target is not None:  # a member wrapper; with @triton.jit compiled, the member is the function itself
            swaps.append((tl.tensor, name, _jit_copy(target, made)))
    _language_jit_cache.append((swaps, made))
    return swaps, made


@contextlib.contextmanager
def _language_compiled():
    """While compiling under the interpreter, triton.language is as a GPU compile sees it: no
    interpreter patches, JITFunctions for its @triton.jit functions (put back afterwards; the next
    launch patches what it needs again)."""
    if not runtime.INTERPRETER:
        yield
        return
    missing = interpreter_module()._MISSING
    for owner, name, original in _pristine_language:  # what interpreted device calls left patched
        if original is not missing:
            setattr(owner, name, original)
        elif name in vars(owner):
            delattr(owner, name)
    swaps = _language_jit()[0]
    saved = [(owner, name, vars(owner)[name]) for owner, name, _ in swaps]
    try:
        for owner, name, jit in swaps:
            setattr(owner, name, jit)
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def source_key(jit) -> str:
    """Triton's hash of a kernel's source and of everything it calls."""
    with _language_compiled():
        return jit.cache_key


def _jit_copy(kernel, made: dict | None = None):
    import types

    from triton.runtime.jit import JITFunction
    interp = interpreter_module()
    fn = python_function_of(kernel)
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"expected a @triton.jit kernel, got {type(kernel).__name__!r}")
    made = dict(_language_jit()[1]) if made is None else made
    if fn in made:
        return made[fn]
    scope = dict(fn.__globals__)  # a copy: the learner's module is left as it is
    copy = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    for attribute in ("__qualname__", "__module__", "__annotations__", "__kwdefaults__", "__doc__"):
        setattr(copy, attribute, getattr(fn, attribute))
    options = dict(getattr(kernel, "kwargs", {}) or {})  # @triton.jit(do_not_specialize=..., noinline=...)
    made[fn] = jit = JITFunction(copy, **options)
    for name, value in scope.items():
        if isinstance(value, interp.InterpretedFunction):
            scope[name] = _jit_copy(value, made)
    return jit


def specialize(jit, target, args, kwargs: dict):
    """(signature, constexprs, attrs, options) as Triton's JIT makes them for a launch with these
    arguments on `target`: pointer dtypes, ints equal to 1 made constexprs, divisibility by 16 of
    pointers and ints, num_warps/num_stages from the keywords. Raises what the JIT raises."""
    from triton.compiler.compiler import make_backend
    from triton.runtime.jit import MockTensor, create_function_from_signature
    backend = make_backend(target)
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    kwargs = dict(kwargs)
    kwargs["debug"] = kwargs.get("debug", jit.debug) or triton.knobs.runtime.debug
    with _quiet():
        bound, specialization, options = binder(*map(MockTensor.wrap_dtype, args), **kwargs)
        options, signature, constexprs, attrs = jit._pack_args(backend, kwargs, bound, specialization, options)
    return signature, constexprs, attrs, options


@contextlib.contextmanager
def _quiet():
    """Triton 3.9 warns once, when it first reads compile options, about a default that changes in
    3.10: the grader's own compile, not the learner's, so not in their output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def explicit_specialization(jit, target, signature: dict, constexprs: dict, options: dict):
    """The same four for a signature written by hand ({"x_ptr": "*fp32", "n": "i32", ...}):
    pointers taken as 16-byte aligned, as PyTorch allocates them."""
    from triton.compiler.compiler import make_backend
    backend = make_backend(target)
    names = jit.arg_names
    unknown = sorted(set(signature) - set(names)) + sorted(set(constexprs) - set(names))
    if unknown:
        raise KeyError(f"the kernel has no parameter {', '.join(unknown)} (its parameters: {', '.join(names)})")
    missing = [n for n in names if n not in signature and n not in constexprs]
    if missing:
        raise KeyError(f"give a type or a constexpr value for {', '.join(missing)}")
    full = {n: "constexpr" if n in constexprs else signature[n] for n in names}
    values = {(names.index(n),): v for n, v in constexprs.items()}
    aligned = backend.parse_attr("D")
    attrs = {(i,): aligned for i, n in enumerate(names) if full[n].startswith("*")}
    with _quiet():
        return full, values, attrs, backend.parse_options(dict(options))


def compile_for(jit, target, signature, constexprs, attrs, options):
    """Compile to PTX and cubin for `target` (no GPU needed); Triton's disk cache serves repeats. A @gluon.jit
    kernel goes through Gluon's own front end (it writes TTGIR, layouts chosen by the kernel)."""
    from triton.compiler import ASTSource
    if getattr(jit, "is_gluon", lambda: False)():
        from .compat import gluon_ast_source
        ASTSource = gluon_ast_source()  # noqa: N806 - the class Triton's own front end would be
    with _quiet(), _language_compiled():
        return triton.compile(ASTSource(jit, signature, constexprs, attrs), target=target, options=options.__dict__)


def cuobjdump_path() -> str | None:
    """The cuobjdump Triton's wheel bundles (3.6 and 3.9: `knobs.nvidia.cuobjdump`)."""
    try:
        return triton.knobs.nvidia.cuobjdump.path
    except Exception:  # noqa: BLE001
        return None


def compile_refusal_kind(exc: BaseException) -> str:
    """Why the compiler refused: "assertion" (tl.static_assert), "ptxas", "resources", else "compiler".
    A GPU's autotuner skips a configuration refused for the first three."""
    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime.errors import OutOfResources, PTXASError
    if isinstance(exc, CompileTimeAssertionFailure):
        return "assertion"
    if isinstance(exc, PTXASError):
        return "ptxas"
    if isinstance(exc, OutOfResources):
        return "resources"
    return "compiler"
