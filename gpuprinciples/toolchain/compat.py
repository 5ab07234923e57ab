"""Every difference between Triton releases (3.6 to 3.9), and nowhere else: where a module, a hook or
a method moved, the rest of the package asks here."""

from __future__ import annotations

import functools

import torch
import triton

from ..machine import runtime


def triton_version() -> tuple[int, int]:
    if triton is None:
        return (0, 0)
    major, minor = triton.__version__.split(".")[:2]
    return int(major), int(minor)


# ---------------------------------------------------------------------------------------------
# Triton-version shims
# ---------------------------------------------------------------------------------------------


def compile_key():
    """Triton's digest of its own sources, the first part of every compile's cache key (None if not found)."""
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):  # 3.9 keeps it in the first
        key = getattr(__import__(module, fromlist=["triton_key"]), "triton_key", None)
        if key is not None:
            return key
    return None


def warm_compile_key() -> None:
    """Triton hashes its own sources (about 0.4 s on a 2-core CPU) the first time a process compiles anything,
    and keeps the digest for the process. Done once in the grader's fork server, every child inherits it."""
    key = compile_key()
    if key is not None:
        key()


def interpreter_module():
    """Triton's interpreter module (3.6 and 3.9 both keep it at triton.runtime.interpreter)."""
    from triton.runtime import interpreter
    return interpreter


def interpreter_memory_methods() -> dict[str, tuple[int, int]]:
    """InterpreterBuilder methods that touch global memory -> (pointer arg index, mask arg index).

    Between Triton 3.6 and 3.9 the trailing arguments changed (cache_modifier/eviction_policy
    became cache_policy), but the pointer and mask keep their positions. A mask index of -1
    means every lane is on.
    """
    return {
        "create_masked_load": (0, 1),
        "create_masked_store": (0, 2),
        "create_atomic_rmw": (1, 3),
        "create_atomic_cas": (0, -1),
    }


def interpreter_atomic_accesses() -> tuple[str, ...]:
    """InterpreterBuilder methods that make an atomic access of a plain masked load or store (Triton 3.9's
    `tl.atomic_load`, `tl.atomic_store`, `tl.atomic_poll`; absent in 3.6): what they touch is atomic."""
    return ("create_atomic_load", "create_atomic_store", "create_atomic_poll")


def patch_interpreter_index() -> None:
    """Triton 3.6's interpreter turns a loop bound into an int with `int(array)`, which NumPy 2.4
    refuses for a 1-element array ("only 0-dimensional arrays can be converted"): every
    `for i in range(0, n, BLOCK)` with a runtime `n` fails. Triton 3.9 squeezes first; do the same."""
    if triton is None or not runtime.INTERPRETER or triton_version() >= (3, 9):
        return
    interp = interpreter_module()
    original = interp._patch_lang_tensor
    if getattr(original, "_gp_index", False):
        return

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._gp_index = True
    interp._patch_lang_tensor = patched


def patch_interpreter_mask_dtype() -> None:
    """Triton 3.9's interpreter keeps a scalar comparison such as `tl.program_id(0) < n` as int32, so a
    mask made with it (`(offs < G) & live`) is int32 and its loads and stores fail with "mask has
    unsupported dtype"; 3.6 and compiled code accept it. Give the interpreter's loads and stores a
    boolean mask, as the compiled code sees one."""
    if triton is None or not runtime.INTERPRETER or triton_version() < (3, 9):
        return
    import numpy as np

    interp = interpreter_module()
    for name, mask_index in (("create_masked_load", 1), ("create_masked_store", 2)):
        original = getattr(interp.InterpreterBuilder, name)
        if getattr(original, "_gp_mask", False):
            continue

        def patched(self, *args, _original=original, _i=mask_index, **kwargs):
            mask = args[_i]
            data = None if mask is None else np.asarray(mask.data)
            if data is not None and data.dtype != np.bool_:
                args = args[:_i] + (interp.TensorHandle(data.astype(np.bool_), mask.dtype),) + args[_i + 1:]
            return _original(self, *args, **kwargs)

        patched._gp_mask = True
        patched.__wrapped__ = original  # its parameters, for inspect.signature (counters.py finds is_volatile)
        setattr(interp.InterpreterBuilder, name, patched)


# Programmatic Dependent Launch (PDL, sm_90+): `kernel[grid](..., launch_pdl=True)` lets the kernel start while
# the one before it in the stream drains; inside it, `tl.extra.cuda.gdc_wait()` waits for that kernel's writes
# and `tl.extra.cuda.gdc_launch_dependents()` lets the next one start. Triton 3.6 and 3.9 both have the launch
# option and both functions; 3.6 writes them as inline PTX (`griddepcontrol.wait`), 3.9 as an op of its own,
# and both compile to the same two PTX instructions. The interpreter has neither: interpreter.py makes them no-ops.
GDC_FUNCTIONS = ("gdc_wait", "gdc_launch_dependents")


def has_pdl() -> bool:
    """Whether this Triton has `tl.extra.cuda.gdc_wait` and `gdc_launch_dependents` (3.6 and 3.9 do)."""
    try:
        import triton.language.extra.cuda as cuda
    except ImportError:  # pragma: no cover - a Triton without the CUDA extras
        return False
    return all(hasattr(cuda, name) for name in GDC_FUNCTIONS)


def gluon_tma_copies():
    """Gluon's Hopper TMA copies (load, store): 3.9 calls them `async_load` / `async_store` (its old names
    there only raise), 3.6 has only `async_copy_global_to_shared` / `async_copy_shared_to_global`."""
    from triton.experimental.gluon.language.nvidia.hopper import tma
    return (getattr(tma, "async_load", None) or tma.async_copy_global_to_shared,
            getattr(tma, "async_store", None) or tma.async_copy_shared_to_global)


def gluon_ast_source():
    """The front end `triton.compile` takes a @gluon.jit kernel through (it writes TTGIR itself; 3.6 and 3.9
    keep it in the same place)."""
    from triton.experimental.gluon._runtime import GluonASTSource
    return GluonASTSource


def set_tensor_descriptor_allocator() -> None:
    """Tensor descriptors made inside a kernel (`tl.make_tensor_descriptor`) need scratch memory
    on a GPU; Triton asks for an allocator. Harmless under the interpreter."""
    if triton is None or not runtime.HAS_CUDA:
        return
    set_allocator = getattr(triton, "set_allocator", None)
    if set_allocator is None:  # pragma: no cover - Triton < 3.3
        return

    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, device="cuda", dtype=torch.int8)

    set_allocator(alloc)
    # set_allocator holds it in a ContextVar: one thread's. Autograd runs a backward on a thread of its own, where a
    # kernel with descriptors would find Triton's default, NullAllocator, which raises. Make the default allocate.
    try:
        from triton.runtime import _allocation
        _allocation.NullAllocator.__call__ = lambda self, size, alignment, stream: alloc(size, alignment, stream)
    except (ImportError, AttributeError):  # pragma: no cover - another Triton: each thread sets its own
        pass


def launch_hook_chain():
    """Where to hang a hook called at every compiled (GPU) Triton launch, or None. In 3.6 and 3.9
    `knobs.runtime.launch_enter_hook` is a chain (`.add`) that the launcher calls with the launch's
    metadata just before the GPU starts the kernel, whatever path the launch came by."""
    knobs = getattr(triton, "knobs", None)
    runtime = getattr(knobs, "runtime", None)
    return getattr(runtime, "launch_enter_hook", None)


def add_launch_enter_hook(hook) -> bool:
    """Call `hook(metadata)` at every compiled Triton launch; False where this Triton has no chain."""
    chain = launch_hook_chain()
    if chain is None or not hasattr(chain, "add"):
        return False
    chain.add(hook)
    return True


def launched_kernel_name(metadata) -> str | None:
    """The kernel's name from what the launch enter hook receives (a LazyDict in 3.6 and 3.9)."""
    data = getattr(metadata, "data", metadata)
    return data.get("name") if isinstance(data, dict) else None


def before_compiled_launch(note) -> None:
    """Call `note(compiled_kernel, grid)` right before a compiled kernel is launched. Triton builds a
    launch's metadata right before every launch (`kernel[grid](...)`, an autotuned or heuristics
    kernel, the handle `kernel.warmup(...)` returns): the only place that sees the kernel and its grid."""
    from triton.compiler.compiler import CompiledKernel
    original = CompiledKernel.launch_metadata
    if getattr(original, "_gp_noted", False):
        return

    @functools.wraps(original)
    def launch_metadata(self, grid, stream, *args):
        try:
            note(self, grid)
        except Exception:  # noqa: BLE001 - counting must never break a launch
            pass
        return original(self, grid, stream, *args)

    launch_metadata._gp_noted = True
    CompiledKernel.launch_metadata = launch_metadata


def around_autotuner_benchmarks(context) -> None:
    """Run each of the autotuner's benchmarks of one configuration inside `context()` (a context
    manager): those launches are the autotuner's, not the learner's."""
    from triton.runtime.autotuner import Autotuner
    original = Autotuner._bench
    if getattr(original, "_gp_around", False):
        return

    @functools.wraps(original)
    def bench(self, *args, **kwargs):
        with context():
            return original(self, *args, **kwargs)

    bench._gp_around = True
    Autotuner._bench = bench
