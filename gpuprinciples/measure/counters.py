"""Measuring work without a clock.

    with counters.record() as rec:
        y = my_kernel(x)
    rec.load_bytes, rec.store_bytes, rec.triton_launches, rec.torch_compute_ops, ...

What is counted, and where:

* Triton launches: every kernel launch, on a GPU and under the interpreter, by every path a launch
  takes (`kernel[grid](...)`, autotune and heuristics wrappers, the handle `kernel.warmup(...)`
  returns); an autotuner's benchmark runs are not the learner's launches and are not counted.
* What each launched kernel compiles to (gpucompile.py): under the interpreter every kernel launched
  while recording is compiled for an H100/H200 with that launch's signature; on a GPU the kernel that
  really compiled is read. One entry per distinct kernel and signature, in `compiled`.
* Triton bytes: under the interpreter only, every lane of every load and store that its mask
  leaves on, times the element size. Masked-off lanes are not counted: they move no memory.
  Re-reading the same element counts again: a cache may soften that on a GPU, but the first-
  principles budget is "read each input once, write each output once".
* Under the interpreter, a load or store outside every tensor its launch was given is refused before it happens
  (bounds.py): a GPU faults or reads or corrupts other memory there, the interpreter would read or corrupt this
  process.
* Under the interpreter, with record(races=True): two programs of one launch touching the same bytes, one storing,
  with nothing ordering them, are refused when the launch ends (races.py): a GPU runs them together.
* PyTorch operators called by the code (the interpreter's own copies of a launch's arguments are
  not; the learner's grid callable and pre-run hooks are), through a dispatch mode:
  allocations and views are free; copies and fills are data movement (their bytes are counted);
  everything else is compute that a kernel exercise must not hand to PyTorch.
* FLOPs of matrix operators by dtype (for "are the matmuls in bf16?"), and the largest tensor
  created (for "no N×N intermediate").
* Bytes saved for backward, with `record(saved=True)`.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..machine import runtime
from ..toolchain import compat, gpucompile
from . import bounds, placement, races

# ---------------------------------------------------------------------------------------------
# PyTorch operators: which are free, which move data, the rest compute
# ---------------------------------------------------------------------------------------------

FREE_OPS = frozenset({
    # allocation
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted",
    # views and metadata
    "view", "_unsafe_view", "as_strided", "expand", "permute", "transpose", "t", "squeeze",
    "unsqueeze", "slice", "select", "split", "split_with_sizes", "unbind", "alias", "detach",
    "lift_fresh", "view_as_real", "view_as_complex", "unfold", "diagonal", "movedim",
    "_reshape_alias", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size",
    "_local_scalar_dense", "set_", "resize_", "record_stream", "_has_compatible_shallow_copy_type",
})
MOVEMENT_OPS = frozenset({
    "clone", "copy_", "_to_copy", "contiguous", "fill_", "zero_", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "_copy_from",
    "_copy_from_and_resize", "lift_fresh_copy", "cat", "stack", "index_select", "masked_fill_",
})
MATMUL_OPS = frozenset({"mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "convolution",
                        "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                        "_scaled_dot_product_cudnn_attention", "_scaled_mm"})


def _nbytes(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def tensors_in(tree):
    """Every tensor in a nest of tuples, lists and dicts (arguments, outputs)."""
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (list, tuple)):
        for item in tree:
            yield from tensors_in(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from tensors_in(item)


# ---------------------------------------------------------------------------------------------
# The recording
# ---------------------------------------------------------------------------------------------


@dataclass
class KernelLaunch:
    name: str
    grid: tuple
    load_bytes: int = 0
    store_bytes: int = 0


@dataclass
class Access:
    """One load or store of one program, for drawing what a kernel touches."""

    kernel: str
    program: tuple
    op: str  # "load" or "store"
    addresses: np.ndarray  # byte addresses of the lanes the mask left on
    itemsize: int
    shape: tuple = ()  # the block's shape, every lane counted, masked or not (a [BM, BN] tile store: (BM, BN))


@dataclass
class Recording:
    trace: bool = False
    launches: list[KernelLaunch] = field(default_factory=list)
    load_bytes: int = 0
    store_bytes: int = 0
    torch_ops: Counter = field(default_factory=Counter)
    torch_compute_ops: Counter = field(default_factory=Counter)
    torch_bytes: int = 0
    # operators Triton's machinery ran during a launch (not the learner's; the profiler sees them too)
    torch_internal_ops: Counter = field(default_factory=Counter)
    # on a GPU: launches of an autotuner's benchmark runs, by kernel name (not the learner's launches;
    # the profiler's kernel record has them)
    benchmark_launches: Counter = field(default_factory=Counter)
    largest_new_numel: int = 0
    flops_by_dtype: Counter = field(default_factory=Counter)
    saved_bytes: int = 0
    accesses: list[Access] = field(default_factory=list)
    # (start, end) byte ranges of the tensors passed in as inputs, and the bytes Triton loaded from them
    input_ranges: list[tuple[int, int]] = field(default_factory=list)
    input_bytes: int = 0
    input_load_bytes: int = 0
    # per input range: (live bytes, a copy taken when the recording began); and how many elements
    # Triton loaded from an input that were not what the input held then (written in and put back?)
    # (None for an input not in host memory); dropped when the recording ends
    input_pristine: list = field(default_factory=list, repr=False)
    input_loads_checked: bool = False
    input_loads_changed: int = 0
    # inputs whose re-reads a GPU serves from its L2 cache (small operands every program reads, like a
    # layer norm's weight): per range, which bytes were loaded already; later loads of those count here
    cached_seen: list[tuple[int, np.ndarray]] = field(default_factory=list, repr=False)
    cached_reread_bytes: int = 0
    # on a GPU: the CUDA stream current when recording began, and the Triton launches and PyTorch
    # operators that ran on another one (work a timing window on that stream does not see)
    stream: int | None = None
    other_stream_work: Counter = field(default_factory=Counter)
    # what each distinct kernel and signature launched compiled to: CompiledInfo.as_dict() by its key
    compiled: dict[str, dict] = field(default_factory=dict)
    # with record(stores=True), under the interpreter: (byte addresses, item size) of every store, so
    # that `unwritten` can tell which elements of a result no kernel of this call wrote
    track_stores: bool = False
    # with record(races=True), under the interpreter: each launch's programs checked for races (races.py)
    check_races: bool = False
    # what the interpreter's checks refused in this recording (bounds.OutOfBounds, races.RaceBetweenPrograms), kept
    # here as well as raised: code that catches the exception has not made the access or the race go away
    refused: list[BaseException] = field(default_factory=list, repr=False)
    stores: list[tuple[np.ndarray, int, np.ndarray | None]] = field(default_factory=list, repr=False)

    def unwritten(self, t: torch.Tensor) -> int:
        """How many elements of `t` (host memory) no Triton store of this recording wrote, every byte."""
        return self.written_check(t)[0]

    def written_check(self, t: torch.Tensor) -> tuple[int, int]:
        """(elements of `t` no Triton store of this recording wrote, every byte; elements written whose
        bytes now differ from what the last store to them wrote: changed after the kernel stored them).
        Host memory only (the interpreter); (0, 0) otherwise."""
        if not _has_memory(t) or t.device.type != "cpu":
            return 0, 0
        first, end = _byte_range(t)
        covered = np.zeros(end - first, dtype=bool)
        known = np.zeros(end - first, dtype=bool)  # the last store here had a value we could read
        last = np.zeros(end - first, dtype=np.uint8)
        for addresses, itemsize, values in self.stores:
            keep = (addresses >= first) & (addresses < end)
            inside = addresses[keep] - first
            good = values is not None and values.shape[1:] == (itemsize,)
            for k in range(itemsize):
                at = np.minimum(inside + k, covered.size - 1)
                covered[at] = True
                known[at] = good
                if good:
                    last[at] = values[keep, k]
        offsets = sum(np.meshgrid(*[np.arange(n, dtype=np.int64) * stride for n, stride in zip(t.shape, t.stride())],
                                  indexing="ij"), np.zeros((), dtype=np.int64)).reshape(-1) * t.element_size()
        live = np.ctypeslib.as_array((ctypes.c_uint8 * (end - first)).from_address(first))
        written = np.ones(offsets.size, dtype=bool)
        changed = np.zeros(offsets.size, dtype=bool)
        for k in range(t.element_size()):
            at = offsets + k
            written &= covered[at]
            changed |= known[at] & (live[at] != last[at])
        return int(offsets.size - written.sum()), int((changed & written).sum())

    @property
    def store_footprint_bytes(self) -> int | None:
        """Distinct bytes the Triton stores and atomics of this recording wrote: what was kept in memory, however
        often it was written (dQ added tile by tile is dQ once). None without record(stores=True)."""
        if not self.track_stores:
            return None
        if not self.stores:
            return 0
        sizes = {itemsize for _, itemsize, _ in self.stores}
        starts = np.concatenate([addresses for addresses, _, _ in self.stores])
        # elements of one size at aligned addresses are the same or do not overlap at all: count elements, on a
        # map of the span they lie in (a sort of half a million addresses took 0.17 s, byte by byte 1.5 s)
        if len(sizes) == 1 and not (starts % (itemsize := sizes.pop())).any():
            low = int(starts.min())
            cells = (int(starts.max()) - low) // itemsize + 1
            if cells <= 8 * starts.size:
                covered = np.zeros(cells, dtype=bool)
                covered[(starts - low) // itemsize] = True
                return int(covered.sum()) * itemsize
            return int(np.unique(starts).size) * itemsize
        spans = [(addresses[:, None] + np.arange(itemsize)).reshape(-1) for addresses, itemsize, _ in self.stores]
        return int(np.unique(np.concatenate(spans)).size)

    @property
    def triton_launches(self) -> int:
        return len(self.launches)

    @property
    def kernel_names(self) -> list[str]:
        return [k.name for k in self.launches]

    @property
    def bytes_moved(self) -> int:
        return self.load_bytes + self.store_bytes + self.torch_bytes

    def as_dict(self) -> dict:
        return {
            "triton_launches": self.triton_launches,
            "kernel_names": self.kernel_names,
            "load_bytes": self.load_bytes,
            "store_bytes": self.store_bytes,
            "store_footprint_bytes": self.store_footprint_bytes,
            "torch_ops": dict(self.torch_ops),
            "torch_compute_ops": dict(self.torch_compute_ops),
            "torch_bytes": self.torch_bytes,
            "torch_internal_ops": dict(self.torch_internal_ops),
            "benchmark_launches": dict(self.benchmark_launches),
            "largest_new_numel": self.largest_new_numel,
            "flops_by_dtype": dict(self.flops_by_dtype),
            "saved_bytes": self.saved_bytes,
            "bytes_counted": runtime.INTERPRETER,
            "input_bytes": self.input_bytes if self.input_ranges else None,
            "input_load_bytes": self.input_load_bytes if self.input_ranges else None,
            "input_loads_changed": self.input_loads_changed if self.input_loads_checked else None,
            "cached_reread_bytes": self.cached_reread_bytes,
            "other_stream_work": dict(self.other_stream_work),
            "compiled": list(self.compiled.values()),
        }

    def summary(self) -> str:
        parts = [f"{self.triton_launches} Triton launch(es)"]
        if runtime.INTERPRETER:
            parts.append(f"loads {self.load_bytes:,} B, stores {self.store_bytes:,} B")
        if self.torch_compute_ops:
            parts.append("PyTorch compute: " + ", ".join(f"{k}×{v}" for k, v in self.torch_compute_ops.items()))
        if self.torch_bytes:
            parts.append(f"PyTorch data movement {self.torch_bytes:,} B")
        return "; ".join(parts)


_state = threading.local()
# the recordings in progress, one list for every thread: a Triton launch (and, under the interpreter, each
# load and store) from a worker thread the learner's code started counts like one from the grader's
_STACK: list["Recording"] = []
# bound now, as module names the worker watches: learner code replacing gpucompile's is seen
_compile_launch, _from_compiled = gpucompile.compile_launch, gpucompile.from_compiled
_cuda_current_stream, _cuda_initialized = torch.cuda.current_stream, torch.cuda.is_initialized  # before learner code


# the compile pass (compilepass.py): every launch, on any thread, is compiled for the GPU and not run;
# [on, other GPU targets each launch is also compiled for]
_compile_only = [False, ()]


@contextmanager
def compile_only(also_for=()):
    """Inside: a Triton launch (interpreter) is compiled for the GPU with its signature and recorded, never run;
    and for each target in `also_for` (other GPU generations) too."""
    _compile_only[:] = [True, tuple(also_for)]
    try:
        yield
    finally:
        _compile_only[:] = [False, ()]


def _active() -> list[Recording]:
    if not hasattr(_state, "stack"):
        _state.stack = _STACK
        _state.in_triton = 0  # inside Triton's own machinery: its PyTorch operators are not the learner's
        _state.benchmarking = 0  # inside an autotuner's benchmark: its launches are not the learner's
        _state.launching = None  # the InterpretedFunction whose launch is starting
        _state.pending = None  # (compiled kernel, grid) about to be launched on a GPU
        _state.bounds = None  # under the interpreter, while a launch runs: its tensor arguments' extents (bounds.py)
        _state.kernel = "?"  # ... and its name
        _state.races = None  # ... and, when a recording checks races, the log of every program's accesses (races.py)
        _state.atomic = 0  # inside an atomic load, store or poll (made of a plain one by the interpreter)
    return _state.stack


# ---------------------------------------------------------------------------------------------
# Hooks into Triton (installed once, idle unless a recording is active)
# ---------------------------------------------------------------------------------------------


def _count_memory(method_name: str, ptr_index: int, mask_index: int, original):
    op = "store" if "store" in method_name else "load"
    parameters = list(inspect.signature(original).parameters)[1:]
    volatile_index = parameters.index("is_volatile") if "is_volatile" in parameters else -1

    @functools.wraps(original)
    def counted(self, *args, **kwargs):
        stack = _active()
        known = _state.bounds
        log = _state.races
        if stack or known is not None or log is not None:
            ptrs = args[ptr_index]
            itemsize = max(ptrs.dtype.element_ty.primitive_bitwidth // 8, 1)
            block = np.asarray(ptrs.data)
            addresses = block.reshape(-1)
            on_mask = None
            if mask_index >= 0 and args[mask_index] is not None:
                on_mask = np.broadcast_to(np.asarray(args[mask_index].data, dtype=bool), block.shape).reshape(-1)
                addresses = addresses[on_mask]
            builder = compat.interpreter_module().interpreter_builder
            if known is not None:  # before it happens: a stray store would write into this process
                bounds.check(_state.kernel, tuple(builder.grid_idx), addresses, itemsize, known,
                             "store" if "atomic" in method_name else op)
            volatile = kwargs.get("is_volatile", args[volatile_index] if 0 <= volatile_index < len(args) else False)
            atomic = "atomic" in method_name or _state.atomic or bool(volatile)  # a volatile load spins on a flag
            stored = None
            if op == "store" and not atomic and (log is not None or any(rec.track_stores for rec in stack)):
                stored = _stored_bytes(args, block, on_mask)
            if log is not None:
                log.note(races.ATOMIC if atomic else races.STORE if op == "store" else races.LOAD,
                         tuple(builder.grid_idx), addresses, itemsize, stored)
        if stack:
            nbytes = int(addresses.size) * itemsize
            if "atomic" in method_name:  # read-modify-write moves the bytes both ways
                op_bytes = {"load": nbytes, "store": nbytes}
            else:
                op_bytes = {op: nbytes}
            for rec in stack:
                if op_bytes.get("load") and rec.input_ranges:
                    inside = np.zeros(addresses.shape, dtype=bool)
                    for i, (start, end) in enumerate(rec.input_ranges):
                        here = (addresses >= start) & (addresses < end)
                        inside |= here
                        pristine = rec.input_pristine[i] if i < len(rec.input_pristine) else None
                        if pristine is not None and here.any():
                            rec.input_loads_changed += _changed_elements(addresses[here] - start, itemsize,
                                                                         *pristine)
                    rec.input_load_bytes += int(inside.sum()) * itemsize
                if op_bytes.get("load") and rec.cached_seen:
                    rec.cached_reread_bytes += _reread(rec.cached_seen, addresses, itemsize)
                rec.load_bytes += op_bytes.get("load", 0)
                rec.store_bytes += op_bytes.get("store", 0)
                if rec.launches:
                    rec.launches[-1].load_bytes += op_bytes.get("load", 0)
                    rec.launches[-1].store_bytes += op_bytes.get("store", 0)
                if rec.track_stores and op_bytes.get("store"):
                    rec.stores.append((addresses.astype(np.int64), itemsize, stored))
                if rec.trace:
                    name = rec.launches[-1].name if rec.launches else "?"
                    rec.accesses.append(Access(name, tuple(builder.grid_idx), op, addresses.copy(), itemsize,
                                               tuple(block.shape)))
        return original(self, *args, **kwargs)

    return counted


def _stored_bytes(args, block: np.ndarray, on_mask) -> np.ndarray | None:
    """The bytes a masked store writes, lane by lane (uint8 [lanes, itemsize]), in the order of its addresses."""
    try:
        values = np.ascontiguousarray(np.broadcast_to(np.asarray(args[1].data), block.shape)).reshape(-1)
        if on_mask is not None:
            values = values[on_mask]
        return values.view(np.uint8).reshape(values.size, -1).copy()
    except Exception:  # noqa: BLE001 - a store whose value we cannot read is still a store of its addresses
        return None


def _reread(cached_seen: list[tuple[int, np.ndarray]], addresses: np.ndarray, itemsize: int) -> int:
    """Bytes of this load that fall in a cached input and were loaded before (or twice in this load);
    marks the rest as loaded."""
    again = 0
    for start, seen in cached_seen:
        offsets = addresses[(addresses >= start) & (addresses < start + seen.size)] - start
        if offsets.size:
            fresh = np.unique(offsets)
            fresh = fresh[~seen[fresh]]
            seen[fresh] = True
            again += (offsets.size - fresh.size) * itemsize
    return again


def _changed_elements(offsets: np.ndarray, itemsize: int, live: np.ndarray, pristine: np.ndarray) -> int:
    """How many of the elements at these byte offsets hold other bytes now than when recording began."""
    index = (offsets.astype(np.int64)[:, None] + np.arange(itemsize)).clip(0, live.size - 1)
    return int((live[index] != pristine[index]).any(axis=1).sum())


def _current_stream_id() -> int | None:
    return _cuda_current_stream().cuda_stream if _cuda_initialized() else None


def _note_other_stream(rec: "Recording", name: str) -> None:
    if rec.stream is not None and _current_stream_id() != rec.stream:
        rec.other_stream_work[name] += 1


def _grid_tuple(grid) -> tuple:
    return tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)


def _note_launch(name: str, grid) -> list[KernelLaunch]:
    made = []
    for rec in _active():
        made.append(KernelLaunch(name, _grid_tuple(grid)))
        rec.launches.append(made[-1])
        _note_other_stream(rec, name)
    return made


def _note_compiled(info: "gpucompile.CompiledInfo") -> None:
    plain = info.as_dict()
    for rec in _active():
        rec.compiled.setdefault(info.key or repr(sorted(plain.items())), plain)


def _as_learner_code(fn, on_result=None):
    """`fn` (a grid callable, a pre-run hook) is the learner's code even when Triton calls it during a
    launch: what it does with PyTorch counts."""
    if not callable(fn):
        return fn

    @functools.wraps(fn)
    def call(*args, **kwargs):
        depth, _state.in_triton = _state.in_triton, 0
        try:
            result = fn(*args, **kwargs)
        finally:
            _state.in_triton = depth
        if on_result is not None:
            on_result(result)
        return result

    return call


@contextmanager
def _autotuner_benchmark():
    _active()
    _state.benchmarking += 1
    _state.in_triton += 1
    try:
        yield
    finally:
        _state.benchmarking -= 1
        _state.in_triton -= 1


def _pointers_made(original):
    """A kernel that turns integers into pointers (a table of addresses) may reach where no argument lies:
    its loads and stores are not checked against the arguments (bounds.py) for the rest of the launch."""

    @functools.wraps(original)
    def made(self, src, dst_type):
        if getattr(dst_type, "scalar", dst_type).is_ptr():
            _active()
            _state.bounds = None
        return original(self, src, dst_type)

    made._gp_counted = True
    return made


def _as_atomic(original):
    """An atomic load, store or poll, which the interpreter makes of a plain one: the plain one is logged as an
    atomic (races.py)."""

    @functools.wraps(original)
    def atomic(self, *args, **kwargs):
        _active()
        _state.atomic += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _state.atomic -= 1

    atomic._gp_counted = True
    return atomic


def _install_interpreter_hooks() -> None:
    interp = compat.interpreter_module()
    builder_cls = interp.InterpreterBuilder
    for name, (ptr_i, mask_i) in compat.interpreter_memory_methods().items():
        original = getattr(builder_cls, name, None)
        if original is not None and not getattr(original, "_gp_counted", False):
            wrapped = _count_memory(name, ptr_i, mask_i, original)
            wrapped._gp_counted = True
            setattr(builder_cls, name, wrapped)

    for name in compat.interpreter_atomic_accesses():
        original = getattr(builder_cls, name, None)
        if original is not None and not getattr(original, "_gp_counted", False):
            setattr(builder_cls, name, _as_atomic(original))

    for name in ("create_int_to_ptr", "create_bitcast"):
        original = getattr(builder_cls, name)
        if not getattr(original, "_gp_counted", False):
            setattr(builder_cls, name, _pointers_made(original))

    run = interp.InterpretedFunction.run
    if not getattr(run, "_gp_counted", False):
        @functools.wraps(run)
        def run_noting_kernel(self, *args, grid, warmup, **kwargs):
            if not warmup:
                _active()
                _state.launching = self  # the launch below compiles with this kernel's @triton.jit options
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)

        run_noting_kernel._gp_counted = True
        interp.InterpretedFunction.run = run_noting_kernel

    grid_call = interp.GridExecutor.__call__
    if getattr(grid_call, "_gp_counted", False):
        return

    @functools.wraps(grid_call)
    def launch(self, *args, **kwargs):
        with placement.launching(args, kwargs):  # a host tensor among the arguments: the GPU's refusal
            return counted_launch(self, *args, **kwargs)

    def counted_launch(self, *args, **kwargs):
        _active()
        kernel, _state.launching = _state.launching, None
        if kernel is None or kernel.rewritten_fn.get(kernel.fn) is not self.fn:
            kernel = _original_function(interp, self.fn)  # launched without InterpretedFunction.run
        compiled = None
        if _state.stack and not _state.benchmarking:
            name = getattr(self.fn, "__name__", "kernel")
            made = _note_launch(name, "dynamic" if callable(self.grid) else self.grid)
            compiled = _compile_launch(kernel, args, kwargs)
            _note_compiled(compiled)

            def note_grid(grid):
                for launch_record in made:
                    launch_record.grid = _grid_tuple(grid)

            self.grid = _as_learner_code(self.grid, on_result=note_grid)
            self.pre_run_hooks = [_as_learner_code(hook) for hook in self.pre_run_hooks]
        if _compile_only[0]:  # the compile pass: a GPU's case, compiled for the GPU, run nowhere
            if compiled is None:
                _note_compiled(_compile_launch(kernel, args, kwargs))
            for target in _compile_only[1]:
                _note_compiled(_compile_launch(kernel, args, kwargs, target=target))
            return None
        _state.in_triton += 1  # the interpreter copies tensors with PyTorch ops: not the learner's
        _state.bounds = extents = bounds.extents({**dict(zip(self.arg_names, args)), **kwargs})
        _state.kernel = getattr(self.fn, "__name__", "kernel")
        _state.races = log = races.Log() if any(rec.check_races for rec in _state.stack) else None
        try:
            ran = grid_call(self, *args, **kwargs)
        except Exception as exc:
            stray = bounds.raised(exc)
            if stray is not None:  # the refusal in its own words, not wrapped in the interpreter's repr()
                _refused(stray)
                raise stray from None
            # a GPU refuses the kernel before it runs: its sentence, not the interpreter's (compiled now
            # if it was not: a failing launch outside a recording, such as the grader's warm-up call)
            compiled = compiled or _compile_launch(kernel, args, kwargs)
            if not compiled.ok:
                raise gpucompile.GPUCompileError(compiled.error) from exc
            raise
        else:
            if log is not None:  # the programs ran one after another: would they race on a GPU?
                try:
                    if _state.races is not log:  # code the launch ran (a grid callable, a hook) switched it off
                        raise races.RaceBetweenPrograms(
                            f"kernel `{_state.kernel}`: the grader's log of this launch's accesses was replaced while "
                            "it ran (gpuprinciples.measure.counters); a kernel is graded with it on")
                    races.check(log, _state.kernel, extents)
                except races.RaceBetweenPrograms as race:
                    _refused(race)
                    raise
            return ran
        finally:
            _state.in_triton -= 1
            _state.bounds = None
            _state.races = None

    launch._gp_counted = True
    interp.GridExecutor.__call__ = launch


def _refused(exc: BaseException) -> None:
    for rec in _active():
        if len(rec.refused) < 8:
            rec.refused.append(exc)


def _original_function(interp, rewritten):
    """The learner's Python function behind the interpreter's rewritten copy of it."""
    return next((fn for fn, copy in interp.InterpretedFunction.rewritten_fn.items() if copy is rewritten), rewritten)


def _install_gpu_hooks() -> None:
    compat.before_compiled_launch(_note_pending_launch)
    compat.add_launch_enter_hook(_on_gpu_launch)


def _note_pending_launch(kernel, grid) -> None:
    _active()
    _state.pending = (kernel, grid)


def _on_gpu_launch(metadata) -> None:
    """Triton's launch enter hook: a compiled kernel is being launched, by whatever path."""
    try:
        stack = _active()
        pending, _state.pending = _state.pending, None
        if not stack:
            return
        name = compat.launched_kernel_name(metadata)
        if _state.benchmarking:
            for rec in stack:
                rec.benchmark_launches[name or "kernel"] += 1
            return
        kernel, grid = pending if pending is not None and pending[0].name == (name or pending[0].name) else (None, "?")
        _note_launch(name or getattr(kernel, "name", "kernel"), grid)
        if kernel is not None:
            _note_compiled(_from_compiled(kernel))
    except Exception:  # noqa: BLE001 - a hook that raises would fail the learner's launch
        pass


def _shape_interpreter_methods_as_on_a_cpu() -> None:
    """On a GPU nothing runs the interpreter, but its memory methods get pass-through wrappers, as the CPU's
    counters wrap them: code that strips the CPU's wrappers (`__wrapped__`) then changes them on a GPU too, and
    the grader's watch (worker._snapshot) refuses it on both machines."""
    builder_cls = compat.interpreter_module().InterpreterBuilder
    for name in compat.interpreter_memory_methods():
        original = getattr(builder_cls, name, None)
        if original is None or hasattr(original, "__wrapped__"):
            continue

        @functools.wraps(original)
        def passthrough(*args, _original=original, **kwargs):
            return _original(*args, **kwargs)

        setattr(builder_cls, name, passthrough)


def install() -> None:
    if runtime.triton is None:  # pragma: no cover
        return
    if runtime.INTERPRETER:
        _install_interpreter_hooks()
    else:
        _install_gpu_hooks()
        _shape_interpreter_methods_as_on_a_cpu()
    compat.around_autotuner_benchmarks(_autotuner_benchmark)


# ---------------------------------------------------------------------------------------------
# PyTorch operators
# ---------------------------------------------------------------------------------------------


def _matmul_flops(func, args, kwargs, out) -> int:
    try:
        from torch.utils.flop_counter import flop_registry
        counter = flop_registry.get(func.overloadpacket)
        if counter is None:
            return 0
        return int(counter(*args, **kwargs, out_val=out))
    except Exception:  # noqa: BLE001 - an op the flop counter does not know costs no FLOPs here
        return 0


def _python_body(func, args, kwargs):
    """The Python function that implements a torch.library custom operator (`custom_op`, `triton_op`) for the
    device a GPU would run this call on, or None (an operator registered in C++ or with `torch.library.Library`,
    which stays opaque). Under the interpreter, the operator's "cuda" kernel where it has one: a GPU runs that."""
    try:
        from torch._library.custom_ops import OPDEFS  # torch >= 2.4: every custom_op by its qualified name
        opdef = OPDEFS.get(func._schema.name)
    except Exception:  # noqa: BLE001 - no such registry in this torch: every custom operator stays opaque
        return None
    if opdef is None:
        return None
    kernels = opdef._backend_fns
    tensors = list(tensors_in(args)) + list(tensors_in(kwargs))
    device = "cuda" if runtime.INTERPRETER else (tensors[0].device.type if tensors else None)
    return kernels.get(device) or kernels.get(None)


class _OpRecorder(TorchDispatchMode):
    """Counts for its own recording only: with nested recordings each mode sees every op once
    (an inner mode's call of `func` reaches the outer mode), so each adds to its own."""

    def __init__(self, rec: "Recording"):
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        _active()  # this thread's state, before reading it
        namespace = getattr(func, "namespace", "aten")
        body = None if namespace in ("aten", "prims") or _state.in_triton else _python_body(func, args, kwargs)
        if body is not None:
            # a custom operator written in Python: run its body in view, as if written inline, so that its
            # operators and its Triton launches count as any others do (a `triton_op` is a kernel; PyTorch
            # arithmetic hidden in a `custom_op` is PyTorch's work). The call itself is counted, not as compute:
            # the profiler sees it, and honesty.hidden_ops would otherwise take it for work done out of view
            self.rec.torch_ops[f"{namespace}::{func.overloadpacket.__name__}"] += 1
            with self:
                return body(*args, **kwargs)
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if _state.in_triton:  # Triton's own (the interpreter's copies, an autotuner's cache flush)
            self.rec.torch_internal_ops[name if namespace in ("aten", "prims") else f"{namespace}::{name}"] += 1
            return out
        stack = [self.rec]
        if namespace not in ("aten", "prims"):
            # a custom operator without a Python body (registered in C++ or with torch.library.Library): the
            # operators inside it never reach this mode, so what it does is unseen; it counts as compute, named
            # with its namespace (profiler markers do nothing)
            name = f"{namespace}::{name}"
        inputs = list(tensors_in(args)) + list(tensors_in(kwargs))
        outputs = list(tensors_in(out))
        is_free = name in FREE_OPS or namespace == "profiler"
        moved = 0 if is_free else sum(map(_nbytes, inputs)) + sum(map(_nbytes, outputs))
        if name in ("fill_", "zero_", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like",
                    "new_zeros", "new_ones", "new_full"):
            moved = sum(map(_nbytes, outputs))  # a fill writes, it reads nothing
        input_storages = {t.untyped_storage().data_ptr() for t in inputs if t.device.type != "meta"}
        new_numel = max((t.numel() for t in outputs
                         if t.device.type == "meta" or t.untyped_storage().data_ptr() not in input_storages),
                        default=0)
        flops = _matmul_flops(func, args, kwargs, out) if name in MATMUL_OPS else 0
        dtype = str(inputs[0].dtype).replace("torch.", "") if inputs else "?"
        for rec in stack:
            rec.torch_ops[name] += 1
            if not is_free:
                _note_other_stream(rec, name)
            if not is_free and name not in MOVEMENT_OPS:
                rec.torch_compute_ops[name] += 1
            rec.torch_bytes += moved
            rec.largest_new_numel = max(rec.largest_new_numel, new_numel)
            if flops:
                rec.flops_by_dtype[dtype] += flops
        return out


def _has_memory(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type != "meta" and t.numel() > 0


def _byte_range(t: torch.Tensor) -> tuple[int, int]:
    """[first, end) byte addresses of the memory a (possibly strided) tensor spans."""
    first = t.data_ptr()
    last = first + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) * t.element_size()
    return first, last + t.element_size()


@contextmanager
def record(trace: bool = False, saved: bool = False, torch_ops: bool = True, inputs=(), cached=(),
           stores: bool = False, races: bool = False):
    """Count what the code in the block does. `trace=True` keeps every access (for drawing);
    `saved=True` counts the bytes autograd saves for backward; `inputs` (tensors) also counts the bytes
    Triton loads from them (a kernel that does the work reads every input byte at least once) and,
    for inputs in host memory (the interpreter), how many loaded elements were not what the input held
    when the block began (`input_loads_changed`): an answer written into an input and put back after
    the kernel read it leaves the input unchanged, but not what the kernel read. `cached` (tensors):
    loads of bytes of these already loaded once are also counted in `cached_reread_bytes` (a GPU's L2
    serves them: small operands that every program reads). `stores=True` (interpreter) keeps every
    store's addresses, for `Recording.unwritten`. `races=True` (interpreter): a launch whose programs would race
    on a GPU raises races.RaceBetweenPrograms when it ends."""
    rec = Recording(trace=trace, stream=_current_stream_id(), track_stores=stores and runtime.INTERPRETER,
                    check_races=races and runtime.INTERPRETER)
    for t in cached:
        if _has_memory(t):
            first, end = _byte_range(t)
            rec.cached_seen.append((first, np.zeros(end - first, dtype=bool)))
    for t in inputs:
        if _has_memory(t):
            first, end = _byte_range(t)
            rec.input_ranges.append((first, end))
            rec.input_bytes += t.numel() * t.element_size()
            if t.device.type == "cpu":  # the byte span as it is in memory, live, and a copy of it now
                live = np.ctypeslib.as_array((ctypes.c_uint8 * (end - first)).from_address(first))
                rec.input_pristine.append((live, live.copy()))
                rec.input_loads_checked = True
            else:
                rec.input_pristine.append(None)
    stack = _active()
    stack.append(rec)
    mode = _OpRecorder(rec) if torch_ops else None
    seen_storages: set[int] = set()

    def pack(t):
        key = t.untyped_storage().data_ptr() if t.device.type != "meta" else id(t)
        if key not in seen_storages:
            seen_storages.add(key)
            rec.saved_bytes += t.untyped_storage().nbytes() if t.device.type != "meta" else _nbytes(t)
        return t

    try:
        if saved:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                if mode is not None:
                    with mode:
                        yield rec
                else:
                    yield rec
        elif mode is not None:
            with mode:
                yield rec
        else:
            yield rec
    finally:
        stack.remove(rec)
        rec.input_pristine = []  # views of memory the caller may free next


def touched(rec: Recording, tensor: torch.Tensor, kernel: str | None = None):
    """Per program, which elements of `tensor` a traced run loaded and stored.

    Returns {program: {"load": flat element indices, "store": ...}} for a recording made with
    `record(trace=True)`. Addresses outside the tensor are ignored (they belong to others).
    """
    start = tensor.untyped_storage().data_ptr() + tensor.storage_offset() * tensor.element_size()
    end = start + tensor.numel() * tensor.element_size()
    result: dict = {}
    for acc in rec.accesses:
        if kernel is not None and acc.kernel != kernel:
            continue
        inside = acc.addresses[(acc.addresses >= start) & (acc.addresses < end)]
        if inside.size == 0:
            continue
        elems = ((inside - start) // acc.itemsize).astype(np.int64)
        slot = result.setdefault(acc.program, {"load": [], "store": []})
        slot[acc.op].append(elems)
    return {p: {op: (np.concatenate(v) if v else np.zeros(0, np.int64)) for op, v in d.items()}
            for p, d in result.items()}


def load_counts(rec: Recording, tensor: torch.Tensor) -> np.ndarray:
    """How many times a traced run (`record(trace=True)`) loaded each element of `tensor`'s storage,
    all programs and kernels together: int64 [storage bytes // element size], indexed like the storage
    (a view's element at index i sits at storage_offset + Σ i_k · stride_k). Loads anywhere in the
    storage count, inside the view or not: a view is often a window of a larger buffer."""
    storage = tensor.untyped_storage()
    start, size = storage.data_ptr(), tensor.element_size()
    n = storage.nbytes() // size
    hits = [acc.addresses[(acc.addresses >= start) & (acc.addresses < start + n * size)]
            for acc in rec.accesses if acc.op == "load"]
    offsets = np.concatenate(hits) if hits else np.zeros(0, np.uint64)
    return np.bincount(((offsets - start) // size).astype(np.int64), minlength=n)[:n]


install()
