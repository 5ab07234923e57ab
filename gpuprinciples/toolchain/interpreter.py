"""The interpreter's limits: shimmed where a GPU's behaviour can be reproduced, named where not.

`install()` (called once by `import gpuprinciples`, after the mode is decided) makes Triton's
interpreter behave as an H100/H200 would where it can: a stand-in driver that reports sm_90 (and
torch.cuda's device queries answering alike), libdevice math (through its modules or imported by name),
bf16 dots, warm-up handles, autotuning by compiling every config.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import warnings

import torch
import triton
import triton.language as tl

from ..machine import runtime
from . import compat, compiling
from .compat import interpreter_module

# ---------------------------------------------------------------------------------------------
# The interpreter's limits: shimmed where a GPU's behaviour can be reproduced, named where not
# ---------------------------------------------------------------------------------------------


class InterpreterLimit(RuntimeError):
    """Triton's interpreter cannot run this, although a GPU may: the message says so in a sentence."""


def interpreter_limit(exc: BaseException, kernel: str) -> InterpreterLimit | None:
    """An InterpreterLimit naming what the interpreter cannot do, when `exc` is one of its limits."""
    chain, seen = [], exc
    while seen is not None and len(chain) < 5:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    text = " ".join(str(e) for e in chain)
    if "_semantic` argument must be provided" in text:
        what = ("the kernel calls a Triton function the interpreter does not provide (it provides `tl.*`, "
                "`tl.math.*` and libdevice's functions, through their modules or imported by name)")
    elif any(isinstance(e, NotImplementedError) for e in chain) or "interpreter mode" in text:
        detail = next((str(e) for e in chain if isinstance(e, NotImplementedError)), text)
        what = f"it has no implementation of what the kernel uses ({detail[:200]})"
    else:
        return None
    return InterpreterLimit(f"Triton's CPU interpreter cannot run kernel `{kernel}`: {what}. That is a limit of the "
                            "interpreter, not a mistake of yours: the kernel may well be right on a GPU, "
                            "so grade it on one.")


class _HopperStandIn:
    """`triton.runtime.driver.active` under the interpreter, where Triton has no driver: it answers as
    an H100/H200 would, so launch code that asks (`get_current_target()`, `utils.get_device_properties`
    for SMs, shared memory and registers, as Triton's tutorials do) runs unchanged, and the GPU
    compiler, which asks it too (TMA support), compiles for Hopper."""

    def __init__(self):
        from types import SimpleNamespace
        self.utils = SimpleNamespace(get_device_properties=lambda device=None: dict(compiling.HOPPER_PROPERTIES),
                                     get_device_capability=lambda device=None: (9, 0),
                                     set_printf_fifo_size=lambda size: None)

    @staticmethod
    def is_active():
        return False

    def get_current_target(self):
        # PyTorch's CPU compiler asks only to key its caches: it saw no driver before and sees none now
        if sys._getframe(1).f_globals.get("__name__", "").startswith("torch."):
            raise RuntimeError("0 active drivers: Triton runs under its CPU interpreter")
        return compiling.compile_target()

    def get_active_torch_device(self):
        # where the interpreter's tensors live; the GPU where the grader lets the CPU's memory stand in for the
        # GPU's (its tensors then say cuda:0): Triton's tutorials assert `x.device == DEVICE`
        return torch.device("cuda", 0) if getattr(_stood_in, "depth", 0) else torch.device("cpu")

    def get_current_device(self):
        return 0

    def set_current_device(self, device):
        pass

    def get_current_stream(self, device=None):
        return 0

    def get_device_capability(self, device=None):
        return (compiling.HOPPER[1] // 10, compiling.HOPPER[1] % 10)

    def _no_clock(self, *args, **kwargs):
        raise InterpreterLimit("timing a kernel (triton.testing.do_bench and friends) needs a GPU: Triton's CPU "
                               "interpreter has no clock for one; the grader times kernels on a GPU")

    get_benchmarker = get_device_interface = get_empty_cache_for_benchmark = _no_clock


_stood_in = threading.local()


@contextlib.contextmanager
def gpu_stood_in():
    """While the grader lets the CPU's memory stand in for the GPU's (this thread): the driver names the GPU."""
    _stood_in.depth = getattr(_stood_in, "depth", 0) + 1
    try:
        yield
    finally:
        _stood_in.depth -= 1


def _stand_in_driver() -> None:
    from triton.runtime import driver
    try:
        driver.active  # a real driver (GPUPRINCIPLES_FORCE_CPU on a GPU machine) answers for itself
    except RuntimeError:
        driver.set_active(_HopperStandIn())


def _torch_cuda_stand_in() -> None:
    """`torch.cuda`'s device queries, where PyTorch has no GPU, answer as the Triton stand-in does: launch code
    sizes grids with them (`torch.cuda.get_device_properties(x.device).multi_processor_count`, as Liger-Kernel's and
    Triton's persistent tutorials do; `torch.cuda.get_device_capability()[0] >= 9` to pick tensor descriptors), and
    failed here with "Torch not compiled with CUDA enabled" where a GPU runs it. `with torch.cuda.device(...)` (and
    `device_of`, `set_device`) selects nothing, `torch.cuda.current_device()` is 0, NVTX ranges mark nothing, and
    `torch.cuda.synchronize()` returns at once (an interpreted kernel has finished when its launch returns; code
    copied from benchmarks calls it). The current stream is the one every launch here runs in:
    `torch.cuda.current_stream()` (and `default_stream()`) answer it, and `with torch.cuda.stream(s):` selects
    nothing. A side stream (`torch.cuda.Stream()`) has no stand-in: the GPU's grader refuses launches on one.
    `torch.cuda.is_available()` and `device_count()`: `_availability_stand_in`."""
    from types import SimpleNamespace
    if torch.cuda.is_available() or getattr(torch.cuda.get_device_properties, "_gp_stand_in", False):
        return
    sm = compiling.HOPPER[1]
    props = SimpleNamespace(
        name="NVIDIA H200 (stand-in: Triton's CPU interpreter)", major=sm // 10, minor=sm % 10,
        multi_processor_count=compiling.HOPPER_PROPERTIES["multiprocessor_count"],
        warp_size=compiling.HOPPER_PROPERTIES["warpSize"], total_memory=141 * 10**9,
        L2_cache_size=62_914_560,  # what the course's H200 reports
        regs_per_multiprocessor=compiling.HOPPER_PROPERTIES["max_num_regs"],
        max_threads_per_multi_processor=compiling.HOPPER_WARPS_PER_SM * 32,
        shared_memory_per_block=48 * 1024, shared_memory_per_block_optin=compiling.HOPPER_PROPERTIES["max_shared_mem"],
        shared_memory_per_multiprocessor=228 * 1024)

    def get_device_properties(device=None):
        return props

    def get_device_capability(device=None):
        return props.major, props.minor

    def get_device_name(device=None):
        return props.name

    class device(contextlib.nullcontext):  # no GPU to select here: every device is "current" (a class, as
        def __init__(self, where):      # PyTorch's is: code asks isinstance(d, torch.cuda.device))
            super().__init__()
            self.idx = 0

    def device_of(tensor):
        return device(tensor)

    def set_device(where):
        return None

    def current_device():
        return 0

    def synchronize(device=None):
        return None

    the_stream = SimpleNamespace(cuda_stream=0, synchronize=synchronize, query=lambda: True,
                                 wait_stream=lambda other: None, wait_event=lambda event: None)

    def current_stream(device=None):
        return the_stream

    def default_stream(device=None):
        return the_stream

    def stream(which):
        return contextlib.nullcontext(which)

    for fn in (get_device_properties, get_device_capability, get_device_name, current_device, synchronize,
               current_stream, default_stream, device_of, set_device):
        fn._gp_stand_in = True
        setattr(torch.cuda, fn.__name__, fn)
    torch.cuda.device, torch.cuda.stream = device, stream
    # NVTX ranges mark a profile (lesson 03); without CUDA PyTorch raised "NVTX functions not installed"
    nvtx = torch.cuda.nvtx
    nvtx.range_push = nvtx.range_pop = nvtx.mark = _does_nothing
    nvtx.range = lambda *args, **kwargs: contextlib.nullcontext()


# Libraries whose own questions keep the true answer: told "a GPU is here", PyTorch and Triton would take their
# CUDA paths (lazy CUDA init, autocast's and GradScaler's checks, Triton's driver) on a build that has none.
_TOLD_THE_TRUTH = ("torch", "triton", __name__.split(".")[0])


def _asked_by_a_library(frame) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name.split(".")[0] in _TOLD_THE_TRUTH


# What a one-GPU H200 machine answers, asked by the learner's code where the CPU stands in for the GPU:
# (module, name, answer)
_GPU_MACHINE_ANSWERS = (
    (torch.cuda, "is_available", True), (torch.cuda, "device_count", 1), (torch.cuda, "is_bf16_supported", True),
    (torch.accelerator, "is_available", True), (torch.accelerator, "device_count", 1),
    (torch.accelerator, "current_accelerator", torch.device("cuda")),
    (torch.accelerator, "current_device_index", 0),
)


def _availability_stand_in() -> None:
    """Whether there is a GPU, and which: `torch.cuda.is_available()`, `device_count()`, `is_bf16_supported()` and
    `torch.accelerator`'s `is_available()`, `device_count()`, `current_accelerator()` (PyTorch's device-neutral way
    to pick a device), `current_device_index()` answer as on a one-GPU H200 machine where the grader lets the CPU's
    memory stand in for the GPU's (`gpu_stood_in`: the learner's module being imported, the learner's call under
    the placement watch), asked by the learner's code: a right kernel whose launcher asserts a GPU, picks its device
    (`torch.empty(n, device=torch.accelerator.current_accelerator())`: None here, a tensor the GPU refuses) or falls
    back to PyTorch without one failed here where a GPU runs its kernel. Elsewhere, and asked by PyTorch, Triton or
    this package, the truth. `torch.cuda.is_current_stream_capturing()` is False for every caller (nothing is
    captured here; without CUDA it raised)."""
    if torch.cuda.is_available() or getattr(torch.cuda.is_available, "_gp_stand_in", False):
        return

    def stood_in() -> bool:
        return bool(getattr(_stood_in, "depth", 0)) and not _asked_by_a_library(sys._getframe(2))

    def answering(truth, answer):
        @functools.wraps(truth)
        def here(*args, **kwargs):
            return answer if stood_in() else truth(*args, **kwargs)
        here._gp_stand_in = True
        return here

    for module, name, answer in _GPU_MACHINE_ANSWERS:
        truth = getattr(module, name, None)
        if truth is not None:
            setattr(module, name, answering(truth, answer))
    torch.cuda.is_current_stream_capturing = torch.cuda.graphs.is_current_stream_capturing = lambda: False


def _autocast_stand_in() -> None:
    """`torch.autocast("cuda", ...)` (and `torch.cuda.amp.autocast`), where PyTorch has no GPU, autocasts on the CPU,
    which holds the tensors a GPU would: code writes "cuda" out (PyTorch's own examples do), and without a GPU
    PyTorch disabled the context with a warning, so a right mixed-precision step ran in fp32 here and failed
    (amp.train_step: "only 0% of matmul FLOPs ran in bf16/fp16") where a GPU passes it."""
    from torch.amp import autocast_mode
    init = autocast_mode.autocast.__init__
    if torch.cuda.is_available() or getattr(init, "_gp_stand_in", False):
        return

    @functools.wraps(init)
    def __init__(self, device_type, dtype=None, *args, **kwargs):
        if device_type == "cuda":  # and the GPU's default dtype, float16 (the CPU's is bfloat16)
            device_type, dtype = "cpu", torch.float16 if dtype is None else dtype
        init(self, device_type, dtype, *args, **kwargs)

    __init__._gp_stand_in = True
    autocast_mode.autocast.__init__ = __init__
    # the functional switches, `torch.set_autocast_enabled("cuda", True)` and friends
    for name in ("set_autocast_enabled", "set_autocast_dtype", "is_autocast_enabled", "get_autocast_dtype"):
        original = getattr(torch, name, None)
        if original is not None:
            setattr(torch, name, _cuda_as_cpu(original))


def _cuda_as_cpu(fn):
    @functools.wraps(fn)
    def on_cpu(*args, **kwargs):
        if args and args[0] == "cuda":
            args = ("cpu", *args[1:])
        return fn(*args, **kwargs)
    return on_cpu


def _float_scalars_as_fp32(interp) -> None:
    """A GPU kernel receives a float argument as an fp32 scalar (`eps.to(tl.float32)` works); the
    interpreter passed a Python float (AttributeError: 'float' object has no attribute 'to')."""
    original = interp._implicit_cvt
    if getattr(original, "_gp_floats", False):
        return

    def convert(arg):
        if isinstance(arg, float):
            import numpy as np
            return tl.tensor(interp.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return original(arg)

    convert._gp_floats = True
    interp._implicit_cvt = convert


def _libdevice_math():
    """libdevice's functions by name (no `__nv_` prefix, no float suffix, no rounding mode), computed
    in float64 with NumPy or PyTorch; the caller casts to the function's return type."""
    import numpy as np

    def with_torch(fn):
        return lambda *a: fn(*(torch.from_numpy(np.asarray(x, dtype=np.float64)) for x in a)).numpy()

    erf, erfc, erfinv = with_torch(torch.special.erf), with_torch(torch.special.erfc), with_torch(torch.special.erfinv)
    return {
        "abs": np.abs, "fabs": np.abs, "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin,
        "asinh": np.arcsinh, "atan": np.arctan, "atanh": np.arctanh, "cbrt": np.cbrt, "ceil": np.ceil,
        "cos": np.cos, "cosh": np.cosh, "cospi": lambda x: np.cos(np.pi * x), "erf": erf, "erfc": erfc,
        "erfinv": erfinv, "erfcinv": lambda x: erfinv(1 - x), "erfcx": with_torch(torch.special.erfcx),
        "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x), "expm1": np.expm1,
        "floor": np.floor, "lgamma": with_torch(torch.lgamma), "log": np.log, "log10": np.log10,
        "log1p": np.log1p, "log2": np.log2, "rint": np.rint, "nearbyint": np.rint, "trunc": np.trunc,
        "round": lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x), "rsqrt": lambda x: 1 / np.sqrt(x),
        "rcp": lambda x: 1 / x, "sin": np.sin, "sinh": np.sinh, "sinpi": lambda x: np.sin(np.pi * x),
        "sqrt": np.sqrt, "tan": np.tan, "tanh": np.tanh, "saturate": lambda x: np.clip(x, 0, 1),
        "normcdf": lambda x: 0.5 * erfc(-x / np.sqrt(2)), "normcdfinv": lambda x: np.sqrt(2) * erfinv(2 * x - 1),
        "j0": with_torch(torch.special.bessel_j0), "j1": with_torch(torch.special.bessel_j1),
        "y0": with_torch(torch.special.bessel_y0), "y1": with_torch(torch.special.bessel_y1),
        "i0": with_torch(torch.special.i0), "i1": with_torch(torch.special.i1),
        "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "signbit": np.signbit,
        "pow": np.power, "powi": np.power, "atan2": np.arctan2, "fmod": np.fmod, "hypot": np.hypot,
        "remainder": lambda x, y: x - np.rint(x / y) * y, "fmin": np.fmin, "fmax": np.fmax,
        "copysign": np.copysign, "fdim": lambda x, y: np.maximum(x - y, 0), "nextafter": np.nextafter,
        "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "fdivide": np.divide,
        "fma": lambda x, y, z: x * y + z, "ldexp": lambda x, e: x * np.exp2(e), "scalbn": lambda x, e: x * np.exp2(e),
        "logb": lambda x: np.floor(np.log2(np.abs(x))), "rcbrt": lambda x: 1 / np.cbrt(x),
        "rhypot": lambda x, y: 1 / np.hypot(x, y), "norm3d": lambda *a: np.sqrt(sum(v * v for v in a)),
        "norm4d": lambda *a: np.sqrt(sum(v * v for v in a)), "rnorm3d": lambda *a: 1 / np.sqrt(sum(v * v for v in a)),
        "rnorm4d": lambda *a: 1 / np.sqrt(sum(v * v for v in a)), "tgamma": np.frompyfunc(_gamma, 1, 1),
        "cyl_bessel_i0": with_torch(torch.special.i0), "cyl_bessel_i1": with_torch(torch.special.i1),
        "int_as_float": lambda x: np.asarray(x).astype(np.int32).view(np.float32),
        "uint_as_float": lambda x: np.asarray(x).astype(np.uint32).view(np.float32),
        "longlong_as_double": lambda x: np.asarray(x).astype(np.int64).view(np.float64),
    }


def _gamma(x: float) -> float:
    """Γ(x), with what a GPU returns where Python raises: ±inf at ±0 and past float64, NaN at the poles."""
    import math
    try:
        return math.gamma(x)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.copysign(math.inf, x) if x == 0 else math.nan


def _libdevice_function(symbol: str, table: dict):
    """`__nv_tanhf` -> tanh, `__nv_fast_expf` -> exp, `__nv_fadd_rn` -> add, `__nv_isnand` -> isnan."""
    import re

    import numpy as np
    name = re.sub(r"_r[nzud]$", "", symbol.removeprefix("__nv_").removeprefix("fast_"))
    if re.fullmatch(r"u?(int|ll|double)2(float|double)", name):  # conversions: the caller casts
        return lambda x: np.asarray(x)
    for candidate in (name, name[:-1] if name[-1:] in "fd" else None, name[1:] if name[:1] in "fd" else None):
        if candidate and candidate in table:
            return table[candidate]
    return None


class _ModuleNames:
    """A module's globals as attributes, so that the interpreter's patch scope can rebind a name and restore it."""

    def __init__(self, names: dict):
        object.__setattr__(self, "_names", names)

    def __getattr__(self, name):
        try:
            return self._names[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self._names[name] = value

    def __delattr__(self, name):
        del self._names[name]


def _library_calls_in_interpreter(interp) -> None:
    """libdevice functions (`tl.extra.cuda.libdevice.tanh`, `tl.extra.libdevice.erf`) are GPU library
    calls the interpreter has no implementation of: give it one, computed with NumPy, and make the
    functions reachable while a kernel runs, as `tl.cos` is. PDL's `tl.extra.cuda.gdc_wait()` and
    `gdc_launch_dependents()` raise there (no `_semantic`); they do nothing instead, which is what they mean
    there: the interpreter runs each kernel to its end before the next starts, so the previous kernel's
    writes are always visible and no kernel starts early. One wrapper of the interpreter's patch scope does
    both, through a module or imported by name, for each kernel's run (the compiler later sees Triton's own)."""
    import importlib

    import numpy as np
    builder_cls = interp.InterpreterBuilder
    if getattr(builder_cls.create_extern_elementwise, "_gp_libdevice", False):
        return
    table = _libdevice_math()

    def create_extern_elementwise(self, lib_name, lib_path, symbol, args, ret_type, is_pure):
        fn = _libdevice_function(symbol, table)
        if fn is None:
            raise NotImplementedError(f"libdevice's {symbol} is not one the grader's interpreter computes")
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*(np.asarray(a.data, dtype=np.float64) if a.data.dtype.kind == "f" else a.data
                                  for a in args)))
        scalar = getattr(ret_type, "scalar", ret_type)  # a block of values: the handle keeps the element type
        return interp.TensorHandle(out.astype(interp._get_np_dtype(scalar)), scalar)

    create_extern_elementwise._gp_libdevice = True
    builder_cls.create_extern_elementwise = create_extern_elementwise
    cuda = importlib.import_module("triton.language.extra.cuda.libdevice")
    generic = importlib.import_module("triton.language.extra.libdevice")  # stubs, resolved per backend
    shared_names = [n for n, v in vars(generic).items() if callable(v) and not n.startswith("_") and hasattr(cuda, n)]
    import triton.language.extra.cuda as extra_cuda  # what `tl.extra.cuda` names: not sys.modules' entry under 3.9
    gdc = {name: getattr(extra_cuda, name) for name in compat.GDC_FUNCTIONS if hasattr(extra_cuda, name)}
    patch_lang = interp._patch_lang

    def uses_libdevice(fn) -> bool:  # `tl.extra.cuda.libdevice.tanh`, or the module under another name
        names, scope = fn.__code__.co_names, fn.__globals__
        return "libdevice" in names or any(scope.get(n) is cuda or scope.get(n) is generic for n in names)

    def by_name(fn) -> dict:
        """Functions the kernel's module imported by name (`from triton.language.extra.libdevice import rsqrt`,
        as Liger-Kernel does; `from triton.language.math import rsqrt`): the interpreter patches modules'
        attributes only, so these stayed unpatched (a libdevice stub returns None, a builtin wants `_semantic`)."""
        found = {}
        for name in fn.__code__.co_names:
            value = fn.__globals__.get(name)
            module = getattr(value, "__module__", None)
            if any(value is f for f in gdc.values()):
                found[name] = ("nothing", None)
            elif module in (generic.__name__, cuda.__name__) and hasattr(cuda, getattr(value, "__name__", "")):
                found[name] = ("libdevice", value.__name__)
            elif module in (tl.math.__name__, tl.core.__name__) and tl.core.is_builtin(value):
                found[name] = ("builtin", value)
        return found

    def patched(fn):
        scope = patch_lang(fn)
        for name in gdc:
            scope.set_attr(extra_cuda, name, _does_nothing)
        imported = by_name(fn)
        # patching it costs a few ms, and device calls patch again each time: not for PDL's no-ops alone
        if uses_libdevice(fn) or any(kind != "nothing" for kind, _ in imported.values()):
            interp._patch_builtin(cuda, interp.interpreter_builder, scope)
            for name in shared_names:
                scope.set_attr(generic, name, getattr(cuda, name))
        names = _ModuleNames(fn.__globals__)  # bound for this run, put back by the scope's restore
        for name, (kind, what) in imported.items():
            if kind == "nothing":
                scope.set_attr(names, name, _does_nothing)
            elif kind == "libdevice":
                scope.set_attr(names, name, getattr(cuda, what))
            else:
                interp._patch_attr(names, name, what, interp.interpreter_builder, scope)
        return scope

    interp._patch_lang = patched


def _does_nothing(*args, **kwargs) -> None:
    return None


def _bf16_dots(interp) -> None:
    """The interpreter keeps bf16 values as their 16 bits (uint16) and multiplied those bits in tl.dot
    (3.6 and 3.9): a bf16 tile product came out as garbage. Widen bf16 operands to float32 first, as
    tensor cores do (exactly: every bf16 value is a float32)."""
    import numpy as np
    original = interp.InterpreterBuilder.create_dot
    if getattr(original, "_gp_bf16", False):
        return

    def widen(handle):
        if handle.dtype != tl.bfloat16:
            return handle
        return interp.TensorHandle((handle.data.astype(np.uint32) << 16).view(np.float32), tl.float32)

    @functools.wraps(original)
    def create_dot(self, a, b, d, *args, **kwargs):
        return original(self, widen(a), widen(b), d, *args, **kwargs)

    create_dot._gp_bf16 = True
    interp.InterpreterBuilder.create_dot = create_dot


class InterpretedKernelHandle:
    """What `kernel.warmup(...)` returns under the interpreter, in place of a GPU's compiled kernel:
    `n_regs`, `n_spills`, `metadata.shared`, `metadata.num_warps` answer from the kernel compiled for
    an H100/H200, and `handle[grid](*args)` runs it under the interpreter (and is counted)."""

    def __init__(self, kernel, info, options: dict):
        from types import SimpleNamespace
        self.kernel, self.info, self.options = kernel, info, options
        self.name = info.kernel
        self.n_regs = info.registers or 0
        self.n_spills = info.spills or 0
        regs_per_warp = -(-max(self.n_regs, 1) * 32 // 256) * 256  # allocated 256 at a time
        fitting = compiling.HOPPER_PROPERTIES["max_num_regs"] // regs_per_warp * 32
        self.n_max_threads = max(32, min(compiling.HOPPER_MAX_THREADS_PER_BLOCK, fitting))
        self.metadata = SimpleNamespace(name=info.kernel, shared=info.shared_bytes or 0, num_warps=info.num_warps,
                                        num_stages=info.num_stages, num_ctas=1, warp_size=compiling.HOPPER[2],
                                        target=compiling.compile_target())
        self.asm = {"ptx": info.ptx, "ttir": info.ttir}

    def _init_handles(self):
        pass

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            named = dict(zip(self.kernel.arg_names, args))  # a compiled kernel takes every argument in order
            return self.kernel.run(grid=grid, warmup=False, **{**self.options, **named})
        return runner


def _warmup_handles(interp) -> None:
    """`kernel.warmup(...)` compiled the kernel and returned it on a GPU; under the interpreter it
    returned None (AttributeError on `.n_regs`). Return what the kernel compiled for Hopper says."""
    run = interp.InterpretedFunction.run
    if getattr(run, "_gp_warmup", False):
        return

    @functools.wraps(run)
    def run_or_warm_up(self, *args, grid, warmup, **kwargs):
        if not warmup:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        from . import gpucompile
        info = gpucompile.compile_launch(self, args, kwargs)
        if not info.ok:
            raise gpucompile.GPUCompileError(info.error)
        return InterpretedKernelHandle(self, info, kwargs)

    run_or_warm_up._gp_warmup = True
    interp.InterpretedFunction.run = run_or_warm_up


_tune_every_config = [False]


@contextlib.contextmanager
def autotune_compiles_every_config():
    """Inside (the compile pass): an autotuner under the interpreter compiles every configuration, as a GPU's
    does; outside, configurations after the first one a GPU accepts are left for it."""
    _tune_every_config[0] = True
    try:
        yield
    finally:
        _tune_every_config[0] = False


def _autotune_by_compiling() -> None:
    """Under the interpreter an autotuner with several configurations cannot time them (there is no
    GPU clock). It compiles each for Hopper instead and takes the first that a GPU would run: the ones
    a GPU's autotuner skips (out of shared memory, a failed tl.static_assert, ptxas refusing) are
    skipped; another refusal fails the call, as it does on a GPU. Nothing is launched."""
    from triton.runtime.autotuner import Autotuner
    if getattr(Autotuner._bench, "_gp_compiled", False):
        return

    # (autotuner, its arguments' dtypes, configuration) -> its rank: each configuration is compiled once, not
    # once more for every new key (a persistent matmul's two dozen configurations, re-tuned for every size,
    # took over 300 s); the launch of the one chosen is compiled with its own specialisation anyway
    ranked: dict[tuple, float] = {}
    announced: set = set()

    def earlier_accepted(self, dtypes, position) -> bool:
        return any(ranked.get((id(self), dtypes, i), float("inf")) != float("inf") for i in range(position))

    def rank(self, *args, config, **meta):
        from . import gpucompile
        conflicts = meta.keys() & config.kwargs.keys()
        if conflicts:
            raise ValueError(f"Conflicting meta-parameters: {', '.join(conflicts)}. Make sure that you don't "
                             "re-define auto-tuned symbols.")
        position = next(i for i, c in enumerate(self.configs) if c is config)
        dtypes = tuple(str(getattr(a, "dtype", type(a).__name__)) for a in args)
        key = (id(self), dtypes, position)
        if key not in ranked and not _tune_every_config[0] and earlier_accepted(self, dtypes, position):
            # the interpreter's own cases: the first configuration a GPU accepts is known, the rest wait for
            # the compile pass (compilepass.py), which compiles every one in the GPU's own dtypes
            return [float("inf")] * 3
        if key not in ranked:
            if config.pre_hook:  # as a GPU's autotuner calls it before timing: it may shape the arguments
                config.pre_hook({**(self.nargs or {}), **meta, **config.all_kwargs()})  # (a descriptor's block)
            info = gpucompile.compile_launch(self.fn, args, {**meta, **config.all_kwargs()})
            if not info.ok and info.refusal not in ("assertion", "ptxas", "resources"):
                raise gpucompile.GPUCompileError(f"while autotuning, configuration {config} was refused: {info.error}")
            ranked[key] = float(position) if info.ok else float("inf")
        first = ranked[key] != float("inf") and all(ranked.get((id(self), dtypes, i)) == float("inf")
                                                    for i in range(position))
        if first and (id(self), dtypes) not in announced:  # say which configuration the interpreter runs
            announced.add((id(self), dtypes))
            name = getattr(compiling.python_function_of(self.fn), "__name__", "kernel")
            print(f"[gpuprinciples] @triton.autotune of `{name}` under the interpreter: no GPU to time its "
                  f"{len(self.configs)} configurations, so each is compiled once for sm_90 and the first a GPU "
                  f"accepts runs: configuration {position + 1}, {config}", file=sys.stderr, flush=True)
        return [ranked[key]] * 3

    rank._gp_compiled = True
    Autotuner._bench = rank


def _gluon_before_any_launch() -> None:
    """Gluon's language wraps each triton.language builtin once, as it finds it when first imported, and Triton
    imports it (for its descriptor types) while converting the arguments of the first interpreted launch, when the
    interpreter has put its stand-ins in triton.language's place (3.9): every Gluon kernel compiled for the GPU
    in this process would then be refused ("Did you forget to add @triton.gluon.jit?"). Imported here, first,
    it keeps the builtins themselves."""
    try:
        import triton.experimental.gluon.language  # noqa: F401
        import triton.experimental.gluon.nvidia.hopper  # noqa: F401
    except ImportError:  # pragma: no cover - a Triton without Gluon
        pass


def _remember_pristine_language(interp) -> None:
    """A call of one @triton.jit function from another (tl.max, a helper) patches triton.language for
    the interpreter and never puts it back (3.6 and 3.9): harmless to the interpreter, fatal to the GPU
    compiler run in this process later. Remember, before any kernel runs, what every patch replaces,
    so a compile can put it back (`_language_compiled`)."""
    import types
    probe = types.FunctionType((lambda: None).__code__, {"tl": tl, "core": tl.core})
    scope = interp._patch_lang(probe)
    first = {}
    for owner, name, original in scope._changes:  # patched twice (tl.tensor via tl and tl.core): the first
        first.setdefault((id(owner), name), (owner, name, original))
    scope.restore()
    compiling._pristine_language[:] = first.values()


def _name_interpreter_limits(interp) -> None:
    """A kernel that fails only because the interpreter cannot run it gets one sentence saying so."""
    call = interp.GridExecutor.__call__
    if getattr(call, "_gp_limits", False):
        return

    @functools.wraps(call)
    def run(self, *args, **kwargs):
        try:
            return call(self, *args, **kwargs)
        except Exception as exc:
            limit = interpreter_limit(exc, getattr(self.fn, "__name__", "kernel"))
            if limit is None:
                raise
            raise limit from exc

    run._gp_limits = True
    interp.GridExecutor.__call__ = run


class _LoopCounter(int):
    """A `for i in tl.range(...)` counter: a tensor on a GPU (`i.to(tl.int64)`, for 64-bit offsets, compiles), a
    Python int in Triton's interpreter, where `.to` raised AttributeError. Arithmetic on it stays an int, as before."""

    def to(self, dtype, *args, **kwargs):
        start = tl.int32 if -2**31 <= self < 2**31 else tl.int64
        return tl.full([], int(self), start).to(dtype, *args, **kwargs)


def _loop_counters_with_to(interp) -> None:
    patch = interp._patch_lang
    if getattr(patch, "_gp_counters", False):
        return
    pristine = {tl: tl.range, tl.core: tl.core.range}

    @functools.wraps(patch)
    def patched(fn):
        scope = patch(fn)
        for lang, own in pristine.items():
            counted = lang.range  # the interpreter's for this launch, where it replaced the language's own
            if counted is not own:
                scope.set_attr(lang, "range", lambda *args, _counted=counted, **kwargs: map(
                    _LoopCounter, _counted(*args, **kwargs)))
        return scope

    patched._gp_counters = True
    interp._patch_lang = patched


def install_interpreter_shims() -> None:
    if triton is None or not runtime.INTERPRETER:
        return
    interp = interpreter_module()
    _stand_in_driver()
    _torch_cuda_stand_in()
    _availability_stand_in()
    _autocast_stand_in()
    _float_scalars_as_fp32(interp)
    _library_calls_in_interpreter(interp)
    _bf16_dots(interp)
    _loop_counters_with_to(interp)
    _warmup_handles(interp)
    _autotune_by_compiling()
    _name_interpreter_limits(interp)
    _gluon_before_any_launch()
    _remember_pristine_language(interp)  # last: with every patch the shims above add


def install() -> None:
    """Every shim, once, at `import gpuprinciples` (after the mode is decided, before any kernel is defined)."""
    compat.set_tensor_descriptor_allocator()
    compat.patch_interpreter_index()
    install_interpreter_shims()
    compat.patch_interpreter_mask_dtype()
    if compat.triton_version() < (3, 6):  # pragma: no cover
        warnings.warn(f"gpuprinciples is tested with Triton 3.6 and newer; this is {triton.__version__}.")
