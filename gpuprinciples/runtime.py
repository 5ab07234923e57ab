"""What this machine is, and every difference between Triton releases.

Importing this module (importing `gpuprinciples` is enough) decides the mode once:

* a CUDA GPU is visible: kernels compile and run on it; the grader times them ("gpu" mode);
* no GPU: `TRITON_INTERPRET=1` is set *before any kernel is defined*, so `@triton.jit` kernels run
  under Triton's interpreter on NumPy, and the grader reads counters instead of clocks ("cpu" mode).

Triton reads `TRITON_INTERPRET` when a kernel is decorated, so a kernel defined before this import
would be compiled for a GPU that is not there. Set `GPUPRINCIPLES_FORCE_CPU=1` to use the
interpreter even where a GPU exists (how the CPU path is tested on a GPU machine).

Every shim for a Triton-version difference lives in this file and nowhere else.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings

import torch

FORCE_CPU = os.environ.get("GPUPRINCIPLES_FORCE_CPU", "") not in ("", "0")
HAS_CUDA = torch.cuda.is_available() and not FORCE_CPU
DEVICE = "cuda" if HAS_CUDA else "cpu"
MODE = "gpu" if HAS_CUDA else "cpu"

if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"
INTERPRETER = os.environ.get("TRITON_INTERPRET", "") not in ("", "0")

try:
    import triton  # noqa: E402
    import triton.language as tl  # noqa: E402,F401
except ImportError:  # pragma: no cover - triton is a dependency on Linux
    triton = None

_announced = False


def announce() -> None:
    """Say once, in plain words, which mode this session runs in."""
    global _announced
    if _announced:
        return
    _announced = True
    if HAS_CUDA:
        print(f"gpuprinciples: GPU mode on {torch.cuda.get_device_name()}: kernels are compiled and timed.",
              file=sys.stderr)
    else:
        print("gpuprinciples: no GPU here, so Triton kernels run under Triton's interpreter "
              "(TRITON_INTERPRET=1) and checks grade counted bytes and launches instead of time.",
              file=sys.stderr)


def sizes(cpu, gpu):
    """Pick a problem size for this machine: small enough for the interpreter, large enough on a GPU."""
    return gpu if HAS_CUDA else cpu


def triton_version() -> tuple[int, int]:
    if triton is None:
        return (0, 0)
    major, minor = triton.__version__.split(".")[:2]
    return int(major), int(minor)


def synchronize() -> None:
    if HAS_CUDA:
        torch.cuda.synchronize()


# ---------------------------------------------------------------------------------------------
# Triton-version shims
# ---------------------------------------------------------------------------------------------


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


def patch_interpreter_index() -> None:
    """Triton 3.6's interpreter turns a loop bound into an int with `int(array)`, which NumPy 2.4
    refuses for a 1-element array ("only 0-dimensional arrays can be converted"): every
    `for i in range(0, n, BLOCK)` with a runtime `n` fails. Triton 3.9 squeezes first; do the same."""
    if triton is None or not INTERPRETER or triton_version() >= (3, 9):
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
    if triton is None or not INTERPRETER or triton_version() < (3, 9):
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
        setattr(interp.InterpreterBuilder, name, patched)


def set_tensor_descriptor_allocator() -> None:
    """Tensor descriptors made inside a kernel (`tl.make_tensor_descriptor`) need scratch memory
    on a GPU; Triton asks for an allocator. Harmless under the interpreter."""
    if triton is None or not HAS_CUDA:
        return
    set_allocator = getattr(triton, "set_allocator", None)
    if set_allocator is None:  # pragma: no cover - Triton < 3.3
        return

    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, device="cuda", dtype=torch.int8)

    set_allocator(alloc)


def launch_hook_chain():
    """Where to hang a hook called at every compiled (GPU) Triton launch, or None."""
    knobs = getattr(triton, "knobs", None)
    runtime = getattr(knobs, "runtime", None)
    return getattr(runtime, "launch_enter_hook", None)


# ---------------------------------------------------------------------------------------------
# A known-answer kernel: catches an interpreter or a driver that silently returns zeros
# ---------------------------------------------------------------------------------------------

_self_test_passed = False
_self_test_lock = threading.Lock()


def self_test() -> str | None:
    """Run one tiny known-answer kernel; return None when right, else a sentence saying what is wrong.

    Only success is remembered: the interpreter is not thread-safe, so a failure seen while another
    thread runs a kernel is tried again next time rather than condemning the session."""
    global _self_test_passed
    with _self_test_lock:
        if _self_test_passed:
            return None
        problem = _run_known_answer()
        _self_test_passed = problem is None
        return problem


def _run_known_answer() -> str | None:
    try:
        from .kernels.known_answer import axpb
        x = torch.arange(37, dtype=torch.float32, device=DEVICE)
        y = axpb(x, 3.0, 1.0)
        synchronize()
        if torch.equal(y.cpu(), (x * 3 + 1).cpu()):
            return None
        return ("Triton's known-answer kernel returned wrong values "
                f"(mode {MODE}, Triton {triton.__version__}): grading cannot be trusted on this install.")
    except Exception as exc:  # noqa: BLE001 - reported in words
        return f"Triton's known-answer kernel failed to run ({type(exc).__name__}: {exc})."


def describe() -> dict:
    """What `gpuprinciples doctor` prints."""
    info = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "triton": getattr(triton, "__version__", "missing"),
        "mode": MODE,
        "device": torch.cuda.get_device_name() if HAS_CUDA else "CPU (no CUDA GPU visible)",
        "interpreter": INTERPRETER,
        "cpu_count": os.cpu_count(),
    }
    if HAS_CUDA:
        info["cuda"] = torch.version.cuda
        props = torch.cuda.get_device_properties(0)
        info["sms"] = props.multi_processor_count
        info["memory_gib"] = round(props.total_memory / 2**30, 1)
        info["capability"] = f"{props.major}.{props.minor}"
    return info


set_tensor_descriptor_allocator()
patch_interpreter_index()
patch_interpreter_mask_dtype()

if triton is not None and triton_version() < (3, 6):  # pragma: no cover
    warnings.warn(f"gpuprinciples is tested with Triton 3.6 and newer; this is {triton.__version__}.")
