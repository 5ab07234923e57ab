"""Where a GPU would keep each tensor, followed on a machine without one.

On a GPU the inputs live in the GPU's memory and `torch.empty((m, n))`, made without `device=`, lives in the
CPU's; a Triton launch handed it is refused ("Pointer argument ... cannot be accessed from Triton (cpu
tensor?)"). Under the interpreter every tensor is in the CPU's memory, so that launch runs and a laptop would
pass what the GPU refuses. While `watch()` is on, a function mode follows which tensors a GPU would make in
the CPU's memory (host tensors):

* made by a factory (`torch.empty`, `torch.tensor`, `torch.arange`, ...) without `device=`; moved there
  (`.cpu()`);
* made by any other operation all of whose tensor arguments are host tensors (`torch.empty_like(host)`,
  `host * 2`, a view of one), unless `device=` says otherwise.

A `device=` or a `.to()` target counts as the GPU (in the learner's code it is `x.device`), as does `.cuda()`;
a move that the CPU answers with the same tensor is answered with a copy, as a GPU would. One that names the GPU
outright (`device="cuda"`, `.to("cuda")`, `.cuda()`) is made in the CPU's memory, which stands in for the GPU's:
PyTorch here has none to put it in (so too at a module's top level, `gpu_named_as_cpu`, while the learner's
module is imported). A launch handed a host tensor (`launching`, around the interpreter's launch hook in
counters.py) raises the GPU's error. Asked where it is (`is_cuda`, `device`, `get_device()`), a tensor the GPU
would hold answers as the GPU's does, and Triton's stand-in driver names the GPU as well; the grader's own code
is told the truth.

PyTorch on a GPU refuses arithmetic that mixes the two memories too (`x + torch.arange(n)`: "Expected all
tensors to be on the same device"), a CPU scalar (a 0-dim tensor) excepted. The watch refuses it as well, for
the operations of MIXES_REFUSED only, and only between a host tensor and one it knows is the GPU's: the call's
inputs (`watch(inputs)`), tensors made with `device=` or moved there, and what operations make from them.

What this does not see (a gap, never a false refusal): tensors made before the call by anything but the
learner's module's top level (which `gpu_named_as_cpu` follows), `device="cpu"` written out, `device=h.device`
of a host tensor, and mixing in operations outside MIXES_REFUSED (indexing with a host index tensor and copies
between the memories are allowed on a GPU too).
"""

from __future__ import annotations

import sys
import threading
from contextlib import ExitStack, contextmanager

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from ..toolchain import interpreter
from . import bounds

# Factories: no tensor argument tells where the result goes, so without `device=` it is the CPU's memory
FACTORIES = frozenset({
    torch.empty, torch.zeros, torch.ones, torch.full, torch.rand, torch.randn, torch.randint, torch.randperm,
    torch.arange, torch.linspace, torch.logspace, torch.eye, torch.empty_strided, torch.tensor,
    torch.as_tensor, torch.from_numpy, torch.scalar_tensor, torch.asarray,
})
HOST, DEVICE = "host", "device"

# Operations that a GPU refuses when a host tensor of one or more dimensions meets a GPU tensor: arithmetic,
# comparisons, products and joins, by name (torch.add, Tensor.add, Tensor.add_ and `+` alike)
_ELEMENTWISE = ("add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "pow", "maximum",
                "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "bitwise_and", "bitwise_or")
_OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or")  # a + b, b + a, a += b
MIXES_REFUSED = frozenset({
    *_ELEMENTWISE, *(f"{n}_" for n in _ELEMENTWISE), "where", "matmul", "mm", "bmm", "addmm", "cat", "stack",
    *(f"__{side}{n}__" for n in _OPERATORS for side in ("", "r", "i")),
    *(f"__{n}__" for n in ("eq", "ne", "lt", "le", "gt", "ge")),
})

# what the GPU's error gains here: why a CPU, where every tensor shares one memory, raises it at all
FOLLOWED = ("[on this CPU, the grader follows where a GPU would keep each tensor: {which} was made without "
            "`device=`, or from such a tensor]")

_local = threading.local()


def _tensors(tree) -> list[torch.Tensor]:
    return [leaf for leaf in tree_leaves(tree) if isinstance(leaf, torch.Tensor)]


def _key(t: torch.Tensor) -> int | None:
    """Where t's storage lies; None for an empty tensor (they share address 0) and for a tensor without a storage
    of its own (torch.func's wrappers, wrapper subclasses): of no known place, so never refused on a guess."""
    try:
        storage = t.untyped_storage()
    except (NotImplementedError, RuntimeError):  # "Cannot access storage of TensorWrapper"
        return None
    return storage.data_ptr() if storage.nbytes() else None


def _gpu_as_cpu(device):
    """A device argument that names the GPU ("cuda", "cuda:0", torch.device("cuda"), an index) as "cpu"."""
    if isinstance(device, bool):
        return device
    if (isinstance(device, int) or (isinstance(device, str) and device.startswith("cuda"))
            or (isinstance(device, torch.device) and device.type == "cuda")):
        return "cpu"
    return device


def _cuda_here(t, *args, **kwargs):
    return t  # `.cuda()` of a GPU tensor is the tensor itself; `_place` copies a host one, as a GPU would


def _on_this_machine(func, args, kwargs):
    """(what to call, args, kwargs) with the GPU named as the CPU. On a GPU machine `device="cuda"`, `.to("cuda")`
    and `.cuda()` put a tensor in the GPU's memory; PyTorch here has no GPU and raised "Torch not compiled with CUDA
    enabled" where a GPU runs the code. What they make still counts as the GPU's (`_place`)."""
    if "device" in kwargs:
        kwargs = {**kwargs, "device": _gpu_as_cpu(kwargs["device"])}
    if func is torch.Tensor.to:
        args = (args[0], *(_gpu_as_cpu(a) for a in args[1:]))
    elif func is torch.Tensor.cuda:
        return _cuda_here, args, kwargs
    return func, args, kwargs


# What a tensor says of its place, as a GPU's tensor says it: launch code asks (`assert x.is_cuda`, as FlashAttention's
# Triton kernels do; `if x.device.type != "cuda": return reference(x)`, the fallback of many libraries), and here,
# where the CPU's memory stands in for the GPU's, it answered "cpu", so a right kernel failed where a GPU passes it.
# The grader's own code inside the call (an exercise's `run`) is told the truth.
_GPU_ANSWERS = {torch.Tensor.is_cuda: True, torch.Tensor.is_cpu: False, torch.Tensor.device: torch.device("cuda", 0)}
_GPU_DEVICE_INDEX = 0  # Tensor.get_device()
_PACKAGE = __name__.split(".")[0]


def _gpu_answer(func, args, is_host):
    """(True, the GPU tensor's answer) for a question of place that code outside this package asks of a tensor
    the GPU would hold; else (False, None). Called for every operation under the watch: the asker's frame is read
    only for a question of place."""
    if func is torch.Tensor.get_device:
        answer = _GPU_DEVICE_INDEX
    else:
        prop = getattr(func, "__self__", None)  # a property's getter: `x.is_cuda` arrives as its __get__
        if not any(prop is known for known in _GPU_ANSWERS):
            return False, None
        answer = _GPU_ANSWERS[prop]
    caller = sys._getframe(2).f_globals.get("__name__", "")  # (1 is the mode's __torch_function__)
    if (not args or not isinstance(args[0], torch.Tensor) or is_host(args[0])
            or caller == _PACKAGE or caller.startswith(_PACKAGE + ".")):
        return False, None
    return True, answer


def _named_place(device) -> str | None:
    """A `device=` or `.to()` target, named: the GPU's memory, whatever the name. Code outside the watch (and the
    grader's own) sees the CPU in `x.device`, and a "cpu" written out cannot be told from it; refusing a right kernel
    would be worse than missing a wrong one."""
    named = isinstance(device, (str, torch.device, int)) and not isinstance(device, bool)  # .to(dtype, non_blocking)
    return DEVICE if named else None


class HostTensors(TorchFunctionMode):
    """The tensors a GPU would hold in the CPU's memory, by storage address. They are kept alive until the
    watch ends, so no later tensor can take one's address."""

    def __init__(self, inputs=()):
        super().__init__()
        self.kept: dict[int, torch.Tensor] = {}
        self.gpus: set[int] = {_key(t) for t in _tensors(inputs)} - {None}  # known to be the GPU's, by address

    def is_host(self, t: torch.Tensor) -> bool:
        key = _key(t)
        return key is not None and (key in self.kept or key in _MODULES_HOST)

    def is_gpus(self, t: torch.Tensor) -> bool:
        key = _key(t)
        return key is not None and key in self.gpus and key not in self.kept

    def _refuse_mixing(self, func, inputs: list[torch.Tensor]) -> None:
        if getattr(func, "__name__", None) not in MIXES_REFUSED:
            return
        if any(self.is_host(t) and t.dim() > 0 for t in inputs) and any(self.is_gpus(t) for t in inputs):
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! "
                f"(in {func.__name__}) " + FOLLOWED.format(which="one of these"))

    def _remember(self, place: str | None, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        """What an operation made is the GPU's if it was put there or made from a tensor of the GPU's; any other
        output forgets an address a freed GPU tensor may have left (a module's tensor is never the GPU's)."""
        gpus = place == DEVICE or (place is None and any(self.is_gpus(t) for t in inputs))
        for t in outputs:
            key = _key(t)
            if key is not None:
                (self.gpus.add if gpus else self.gpus.discard)(key)

    def _place(self, func, args, kwargs, inputs: list[torch.Tensor]) -> str | None:
        if func is torch.Tensor.cpu:
            return HOST
        if func is torch.Tensor.cuda:
            return DEVICE
        if func is torch.Tensor.to:  # .to(device), .to(other), .to(dtype) (which keeps the place)
            for target in (*args[1:], kwargs.get("device"), kwargs.get("other")):
                if isinstance(target, torch.Tensor):
                    return HOST if self.is_host(target) else DEVICE
                if _named_place(target):
                    return _named_place(target)
        elif _named_place(kwargs.get("device")):
            return _named_place(kwargs.get("device"))
        elif func in FACTORIES:
            return HOST
        if inputs and all(self.is_host(t) for t in inputs):
            return HOST
        return None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(_local, "paused", False):  # Triton's own copies of a launch's arguments
            return func(*args, **kwargs)
        answered, answer = _gpu_answer(func, args, self.is_host)
        if answered:
            return answer
        call, args, kwargs = _on_this_machine(func, args, kwargs)
        inputs = _tensors((args, kwargs))
        self._refuse_mixing(func, inputs)
        out = call(*args, **kwargs)
        outputs = _tensors(out)
        if not outputs:
            return out
        place = self._place(func, args, kwargs, inputs)
        if place == DEVICE and any(self.is_host(t) for t in outputs):
            out = _copied(out)  # a move to the GPU makes a new tensor there; the host one stays behind
        self._remember(place, inputs, _tensors(out))
        if place == HOST:
            if any(not self.is_host(t) and any(_key(t) == _key(i) for i in inputs) for t in outputs):
                out = _copied(out)  # `.cpu()` of a GPU tensor: a copy, not the GPU tensor itself
            for t in _tensors(out):
                if _key(t) is not None:
                    self.kept[_key(t)] = t
        return out


# What the learner's module made in the CPU's memory at its top level (a buffer or a table made without
# `device=`), by storage address, kept alive for the process: on a GPU a launch handed one is refused as well.
_MODULES_HOST: dict[int, torch.Tensor] = {}


@contextmanager
def gpu_named_as_cpu():
    """While a learner's module is imported (its top level, outside the watched call): `DEVICE =
    torch.device("cuda")` and a table made with it, as Triton's tutorials write them, are made in the CPU's memory,
    where a GPU machine makes them in the GPU's; what the module makes without `device=` is followed as a host
    tensor for the rest of the process (`_MODULES_HOST`), so a launch in a later call refuses it."""
    with watch() as mode:
        yield
        _MODULES_HOST.update(mode.kept)


def _copied(out):
    if isinstance(out, torch.Tensor):
        return out.clone()
    return type(out)(_copied(item) for item in out) if isinstance(out, (list, tuple)) else out


@contextmanager
def watch(inputs=()):
    """Follow host tensors in the block (this thread); `launching` refuses them at a launch. `inputs`: the call's
    arguments, the GPU's on a GPU machine."""
    mode = HostTensors(inputs)
    outer = getattr(_local, "mode", None)
    _local.mode = mode
    try:
        with mode, interpreter.gpu_stood_in(), modes_in_backward():
            yield mode
    finally:
        _local.mode = outer
        mode.kept.clear()


@contextmanager
def modes_in_backward():
    """Inside: a custom autograd.Function's backward (`backward` or `vjp`; a `custom_op`'s `register_autograd`
    and torch.utils.checkpoint's recomputation run as one) runs under the torch function modes that were on when
    the block began. PyTorch's autograd engine carries dispatch modes into a backward, not torch function modes:
    the backward ran with none. The watch is one, so in a learner's backward `do.is_cuda` was False and
    `do.device` the CPU (a right backward that asserts a GPU, or falls back to PyTorch without one, failed),
    `device="cuda"` raised "Torch not compiled with CUDA enabled", and a workspace made without `device=` went
    unfollowed, so a launch the GPU refuses ran. Only this package's modes: one the learner's code entered
    (`torch.set_default_device`'s) is off in a GPU's backward too, which runs on a thread of autograd's own. On a GPU
    nothing changes (no mode of the grader's is on)."""
    from torch.autograd.function import BackwardCFunction
    from torch.overrides import _get_current_function_mode_stack
    package = __name__.split(".")[0]
    modes = [m for m in _get_current_function_mode_stack() if type(m).__module__.split(".")[0] == package]
    names = [name for name in ("apply", "apply_boxed") if name in vars(BackwardCFunction)]
    if not modes or not names:
        yield
        return
    originals = {name: vars(BackwardCFunction)[name] for name in names}

    def under_modes(original):
        def apply(self, *args):
            if torch._C._len_torch_function_stack():  # called where the modes are on (grad_fn.apply by hand)
                return original(self, *args)
            with ExitStack() as stack:
                for mode in modes:  # bottom first, as they were
                    stack.enter_context(mode)
                return original(self, *args)
        return apply

    for name, original in originals.items():
        setattr(BackwardCFunction, name, under_modes(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(BackwardCFunction, name, original)


@contextmanager
def launching(args, kwargs):
    """Around a Triton launch under the interpreter: refuse it, as a GPU would, if a host tensor is among its
    arguments (a tensor descriptor's base counts); else run it with the watch paused (the interpreter copies
    the arguments with PyTorch operations of its own)."""
    _refuse_host_pointers(args, kwargs)
    paused = getattr(_local, "paused", False)
    _local.paused = True
    try:
        yield
    finally:
        _local.paused = paused


def _refuse_host_pointers(args, kwargs) -> None:
    mode = getattr(_local, "mode", None)
    if mode is None:
        return
    for index, arg in enumerate((*args, *kwargs.values())):
        if any(isinstance(t, torch.Tensor) and mode.is_host(t) for t in bounds.launch_tensors(arg)):
            raise ValueError(f"Pointer argument (at {index}) cannot be accessed from Triton (cpu tensor?) "
                             + FOLLOWED.format(which="this one"))
