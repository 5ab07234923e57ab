"""Compiling the kernels a learner launches for a GPU, on any machine, and what the compiled kernel says.

A verdict must not depend on where it ran. Triton's CPU interpreter runs kernels that a GPU's compiler
refuses (`tl.cos` on bf16, a plain Python global read inside a kernel), so under the interpreter every
kernel launched while the counters record is also compiled, with that launch's own signature, for an
H100/H200 (sm_90): Triton compiles for a GPU it does not have. What the compiler refuses fails the check
with the compiler's sentence, and a hint where the mistake is a known one. What it accepts says what a
GPU would run: registers and local memory per thread (the bundled `cuobjdump`), shared memory, warps,
and whether a bf16/fp16 `tl.dot` became Hopper's `wgmma` (tensor cores).

On a GPU the same evidence is read from the kernel that really compiled (`from_compiled`), so a
requirement reads the same dict in both modes: `CompiledInfo.as_dict()`, in a recording's
`counts["compiled"]`.

    info = compile_launch(kernel, args, kwargs)      # as launched: kernel[grid](*args, **kwargs)
    info = compile_kernel(kernel, {"x_ptr": "*bf16", "n": "i32"}, {"BLOCK": 1024}, num_warps=8)
    info.ok, info.error, info.registers, info.shared_bytes, info.wgmma
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

from . import compiling


class GPUCompileError(RuntimeError):
    """A GPU's compiler refuses the kernel (raised where a GPU would raise: warm-up, autotuning)."""


@dataclass
class CompiledInfo:
    kernel: str
    ok: bool
    error: str | None = None  # the sentence for the learner when not ok
    num_warps: int | None = None
    num_stages: int | None = None
    shared_bytes: int | None = None
    registers: int | None = None  # per thread
    spills: int | None = None  # 4-byte words of local memory per thread (what `kernel.n_spills` says on a GPU)
    wgmma: bool = False  # Hopper's warpgroup tensor-core instruction is in the PTX
    dots: tuple[str, ...] = ()  # operand dtypes of the kernel's tl.dot (TTIR names: bf16, f16, f32, ...)
    target: str = ""
    signature: str = ""
    # why a GPU refuses it: "arguments" (the JIT's launch), "compiler", "assertion", "ptxas", "resources"
    refusal: str | None = None
    key: str = ""
    ptx: str = field(default="", repr=False)  # kept here: never sent to the grader
    ttir: str = field(default="", repr=False)

    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "ok": self.ok, "error": self.error, "num_warps": self.num_warps,
                "num_stages": self.num_stages, "shared_bytes": self.shared_bytes, "registers": self.registers,
                "spills": self.spills, "wgmma": self.wgmma, "dots": list(self.dots), "target": self.target,
                "signature": self.signature, "refusal": self.refusal, "key": self.key}


LOW_PRECISION_DOTS = ("bf16", "f16")

_cache: dict[tuple, CompiledInfo] = {}
_cache_lock = threading.Lock()
# told the seconds of each compile for the GPU (not a cached one): the grader's worker, whose sandbox does not count
# the grader's own compiling against the learner's time limit (sandbox/child.py)
_listener: list = [None]


def listen_to_compiles(listener) -> None:
    """`listener(seconds)` is called after each compile for the GPU that was not in the cache (None: nobody)."""
    _listener[0] = listener


# ---------------------------------------------------------------------------------------------
# The entry points
# ---------------------------------------------------------------------------------------------


def compile_launch(kernel, args=(), kwargs=None, target=None) -> CompiledInfo:
    """Compile `kernel` as `kernel[grid](*args, **kwargs)` would compile it, for the GPU here or
    (interpreter) for an H100/H200. `kernel` is what was launched: a @triton.jit kernel (a
    JITFunction, or an InterpretedFunction under the interpreter), an autotune or heuristics wrapper
    (its chosen or first configuration, its heuristics applied), or the kernel's Python function.
    Never raises: a refusal is `ok=False` with a sentence in `error`."""
    kwargs = {k: v for k, v in (kwargs or {}).items() if k not in ("grid", "warmup")}  # run()'s own, not the kernel's
    name = _name(kernel)
    target = target or compiling.compile_target()  # another generation's (GPUTarget("cuda", 80, 32)) on request
    try:
        kernel, kwargs = _unwrap(kernel, args, kwargs)
        jit = compiling.jit_function_of(kernel)
        signature, constexprs, attrs, options = compiling.specialize(jit, target, args, kwargs)
    except Exception as exc:  # noqa: BLE001 - what a GPU's launch would raise, in words
        return CompiledInfo(name, ok=False, error=_refusal_sentence(name, exc, launching=True), refusal="arguments",
                            target=_target_name(target))
    return _compile(jit, name, target, signature, constexprs, attrs, options)


def compile_kernel(kernel, signature: dict, constexprs: dict | None = None, num_warps: int = 4,
                   num_stages: int = 3) -> CompiledInfo:
    """Compile a kernel for a signature written by hand, for lessons that ask what the GPU would make
    of it: `signature` maps parameters to types ("*bf16" a pointer, "i32", "fp32"), `constexprs` the
    constexpr parameters to values. Pointers are taken as 16-byte aligned, as PyTorch allocates."""
    constexprs = dict(constexprs or {})
    name = _name(kernel)
    target = compiling.compile_target()
    try:
        jit = compiling.jit_function_of(kernel)
        full, values, attrs, options = compiling.explicit_specialization(
            jit, target, signature, constexprs, {"num_warps": num_warps, "num_stages": num_stages})
    except Exception as exc:  # noqa: BLE001
        return CompiledInfo(name, ok=False, error=_refusal_sentence(name, exc, launching=True), refusal="arguments",
                            target=_target_name(target))
    return _compile(jit, name, target, full, values, attrs, options)


def from_compiled(compiled) -> CompiledInfo:
    """The evidence of a kernel that really compiled (a Triton CompiledKernel, on a GPU)."""
    key = ("compiled", compiled.hash)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    src = compiled.src
    signature = _describe_signature(getattr(src, "signature", {}), getattr(src, "constants", {}))
    info = _evidence(compiled.name, compiled, _target_name(compiled.metadata.target), signature, compiled.hash[:16])
    with _cache_lock:
        _cache[key] = info
    return info


# ---------------------------------------------------------------------------------------------
# Compiling, cached per (source, signature, constexprs, options)
# ---------------------------------------------------------------------------------------------


def _compile(jit, name, target, signature, constexprs, attrs, options) -> CompiledInfo:
    described = _describe_signature(signature, constexprs)
    facts = (str(target), repr(sorted(signature.items())), repr(sorted(constexprs.items())),
             repr(sorted(attrs.items())), repr(options))
    with _cache_lock:
        try:
            key = (compiling.source_key(jit), *facts)  # the source of the kernel and of what it calls
        except Exception as exc:  # noqa: BLE001 - e.g. it calls a function that is not @triton.jit
            return CompiledInfo(name, ok=False, error=_refusal_sentence(name, exc), refusal="compiler",
                                target=_target_name(target), signature=described)
        if key in _cache:
            return _cache[key]
        short_key = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
        started = time.monotonic()
        try:
            compiled = compiling.compile_for(jit, target, signature, constexprs, attrs, options)
        except Exception as exc:  # noqa: BLE001 - the GPU compiler's refusal, in words
            info = CompiledInfo(name, ok=False, error=_refusal_sentence(name, exc),
                                refusal=compiling.compile_refusal_kind(exc), num_warps=options.num_warps,
                                num_stages=options.num_stages, target=_target_name(target), signature=described,
                                key=short_key)
        else:
            info = _evidence(name, compiled, _target_name(target), described, short_key)
        _cache[key] = info
    if _listener[0] is not None:
        _listener[0](time.monotonic() - started)
    return info


def _evidence(name, compiled, target: str, signature: str, key: str) -> CompiledInfo:
    meta = compiled.metadata
    ptx = compiled.asm.get("ptx", "") or ""
    ttir = compiled.asm.get("ttir", "") or ""
    registers, local_bytes = _resource_usage(compiled.asm.get("cubin"), compiled.name)
    info = CompiledInfo(name, ok=True, num_warps=meta.num_warps, num_stages=meta.num_stages,
                        shared_bytes=meta.shared, registers=registers,
                        spills=None if local_bytes is None else local_bytes // 4,
                        wgmma=bool(re.search(r"\bwgmma\.mma_async", ptx)), dots=_dot_dtypes(ttir),
                        target=target, signature=signature, key=key, ptx=ptx, ttir=ttir)
    limit = compiling.max_shared_bytes()
    if meta.shared > limit:
        info.ok, info.refusal = False, "resources"
        info.error = (f"kernel `{name}` needs {meta.shared:,} bytes of shared memory per program; {target} allows "
                      f"{limit:,}, so a GPU refuses to launch it (out of resources): smaller tiles or fewer "
                      "num_stages")
    elif meta.num_warps * 32 > compiling.HOPPER_MAX_THREADS_PER_BLOCK:
        info.ok, info.refusal = False, "resources"
        info.error = (f"kernel `{name}` asks for num_warps={meta.num_warps}: {meta.num_warps * 32} threads per "
                      f"program, more than the {compiling.HOPPER_MAX_THREADS_PER_BLOCK} a GPU allows")
    return info


def _dot_dtypes(ttir: str) -> tuple[str, ...]:
    """Operand dtypes of every tt.dot (and tt.dot_scaled) in the TTIR: `: tensor<64x32xbf16> * ...`."""
    return tuple(sorted(set(re.findall(r"tt\.dot(?:_scaled)?\b[^\n]*?:\s*tensor<(?:\d+x)+(\w+)>", ttir))))


def _resource_usage(cubin: bytes | None, function: str) -> tuple[int | None, int | None]:
    """(registers per thread, local-memory bytes per thread) from `cuobjdump -res-usage` of the cubin."""
    tool = compiling.cuobjdump_path()
    if not cubin or not tool:
        return None, None
    with tempfile.TemporaryDirectory(prefix="gpuprinciples-cubin-") as folder:
        path = os.path.join(folder, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        try:
            text = subprocess.run([tool, "-res-usage", path], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            return None, None
    # "Function NAME:\n  REG:23 STACK:0 SHARED:0 LOCAL:0 ..."; the kernel's own entry, else the first
    blocks = re.findall(r"Function ([^:\n]+):\s*\n\s*(REG:[^\n]*)", text)
    usage = next((u for f, u in blocks if f.strip() == function), blocks[0][1] if blocks else "")
    fields = dict(re.findall(r"(\w+):(\d+)", usage))
    if "REG" not in fields:
        return None, None
    return int(fields["REG"]), int(fields.get("STACK", 0)) + int(fields.get("LOCAL", 0))


# ---------------------------------------------------------------------------------------------
# What was launched, and what to say when it is refused
# ---------------------------------------------------------------------------------------------


def _unwrap(kernel, args, kwargs):
    """Through autotune and heuristics wrappers to the @triton.jit kernel, adding what they add."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    while isinstance(kernel, (Autotuner, Heuristics)):
        if isinstance(kernel, Heuristics):
            named = {**dict(zip(kernel.arg_names, args)), **kwargs}
            for name, rule in kernel.values.items():
                kwargs[name] = rule({**named, **kwargs})
        else:
            config = getattr(kernel, "best_config", None) or kernel.configs[0]
            kwargs = {**kwargs, **config.all_kwargs()}
        kernel = kernel.fn
    return kernel, kwargs


def _name(kernel) -> str:
    return getattr(compiling.python_function_of(kernel), "__name__", "kernel")


def _target_name(target) -> str:
    return f"{target.backend} sm_{target.arch}" if hasattr(target, "arch") else str(target)


def _describe_signature(signature: dict, constexprs: dict) -> str:
    by_index = {path[0] if isinstance(path, tuple) and path else path: value for path, value in constexprs.items()}
    parts = []
    for i, (name, kind) in enumerate(signature.items()):
        parts.append(f"{name}={by_index[i]!r}" if kind == "constexpr" and i in by_index else f"{name}: {kind}")
    return ", ".join(parts)


# known refusals: (pattern in the compiler's message, hint); a hint may use the match
_HINTS = (
    (r"Expected dtype \[[^\]]*fp32[^\]]*\] but got (bf16|fp16)",
     lambda m: f"on a GPU, tl.cos, tl.sin, tl.exp, tl.log, tl.sqrt and the other transcendental functions take "
               f"fp32 or fp64, not {m[1]}: convert with `.to(tl.float32)` before the call (and back with "
               "`.to(...)` before storing)"),
    (r"Both operands must be same dtype\. Got (\w+) and (\w+)",
     lambda m: f"tl.dot multiplies two operands of one dtype, here {m[1]} by {m[2]}: convert the other first, as "
               "in `tl.dot(p.to(v.dtype), v)` (the product still accumulates in fp32; the interpreter's float32 "
               "cases never see this, a GPU's bf16 and fp16 ones do)"),
    (r"Cannot access global variable (\w+)",
     lambda m: f"a kernel can read only constexpr globals: write `{m[1]} = tl.constexpr(value)` at module level, "
               f"or pass {m[1]} to the kernel as an argument"),
    (r"Unsupported function referenced: <function (\w+)",
     lambda m: f"a kernel can call only @triton.jit functions and Triton's own: decorate `{m[1]}` with @triton.jit"),
    (r"^\(((?:triton\.language\.\w+(?:, )?)+)\)$",  # a libdevice function's table has no such entry
     lambda m: "libdevice has no version of this function for arguments of types " + ", ".join(_short_dtypes(m[1]))
               + ": give all its arguments one float type (a Python literal such as 2.0 is fp32; convert with "
               "`.to(...)`)"),
    (r"Keyword argument (\w+) was specified but unrecognised",
     lambda m: f"the kernel has no parameter `{m[1]}` (the interpreter ignores an unknown keyword; a GPU refuses "
               "it)"),
)


def _short_dtypes(text: str) -> list[str]:
    names = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
    return [names.get(n, n) for n in re.findall(r"triton\.language\.(\w+)", text)]


def compile_error_sentence(exc: BaseException) -> str | None:
    """A GPU's own refusal (Triton's CompilationError, raised by a launch on a real GPU) in the words, and with the
    hint, that the CPU's sm_90 compile gives the same mistake; None for any other exception."""
    if type(exc).__name__ == "OutOfResources":  # the launch on a GPU: the CPU's compile says it in these words
        return (f"a kernel does not compile for this GPU: it needs {exc.required:,} bytes of {exc.name} per program; "
                f"this GPU allows {exc.limit:,}, so it refuses to launch it (out of resources): smaller tiles or "
                "fewer num_stages")
    if type(exc).__name__ != "CompilationError":
        return None
    kernel = re.search(r"^\s*def (\w+)\(", str(exc), flags=re.M)
    return _refusal_sentence(kernel[1] if kernel else "?", exc, target="this GPU")


def _refusal_sentence(name: str, exc: BaseException, launching: bool = False,
                      target: str = "an H100/H200 (sm_90)") -> str:
    message = str(getattr(exc, "error_message", None) or exc).strip()
    wrapped = re.fullmatch(r"\w+(?:Error|Exception)\((['\"])(.*)\1\)", message, flags=re.S)
    if wrapped:  # NameError("...") as the compiler quotes it
        message = wrapped[2].replace("\\'", "'")
    message = message.strip("'\"")
    message = re.sub(r" at 0x[0-9a-f]+>", ">", message)  # an address says nothing to the learner
    where = _offending_line(str(exc))
    hint = None
    for pattern, make in _HINTS:
        found = re.search(pattern, message)
        if found:
            hint = make(found)
            message = re.split(r"(?<=[.!?])\s", message, maxsplit=1)[0]  # its first sentence is enough
            break
    if len(message) > 400:
        message = message[:400] + " …"
    who = "Triton refuses to launch" if launching else "the GPU compiler refuses"
    sentence = (f"kernel `{name}` does not compile for {target}: {who} it with "
                f"\"{message}\"" + (f" at `{where}`" if where else ""))
    return sentence + (f". {hint[0].upper()}{hint[1:]}." if hint else ".")


def _offending_line(text: str) -> str | None:
    """The source line above the compiler's caret (`    ^`), if its message shows one."""
    lines = text.splitlines()
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "^":
            return lines[i - 1].strip() or None
    return None
