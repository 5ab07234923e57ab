"""Loads and stores outside every tensor a launch was given, refused before they happen (under the interpreter).

On a GPU such an access is an illegal memory access, or it silently reads or overwrites a neighbouring
allocation. Under the interpreter a stray store wrote into the grader's own process: a crash many operations later
("malloc(): unaligned tcache chunk", SIGSEGV) or, worse, a verdict computed from damaged memory; a stray load read
the process's memory (whatever lay there, or a SIGSEGV). While a launch runs (counters.py's hooks), the lanes a
load's or a store's mask leaves on must each fall in the memory of one of the launch's tensor arguments: its whole
storage, so a view may reach around itself as on a GPU. A launch that turns integers into pointers (a table of
addresses) is not checked: its targets need not be among its arguments.
"""

from __future__ import annotations

import numpy as np
import torch


class OutOfBounds(RuntimeError):
    """A kernel loaded or stored outside every tensor it was given; the message is the sentence for the learner."""


def launch_tensors(arg):
    """The tensors a launch argument hands a kernel: itself, a tuple's members, a host tensor descriptor's base
    (also placement.py's, which refuses the host tensors among them)."""
    if isinstance(arg, (tuple, list)):
        for item in arg:
            yield from launch_tensors(item)
    elif hasattr(arg, "data_ptr"):
        yield arg
    elif hasattr(getattr(arg, "base", None), "data_ptr"):  # triton.tools.tensor_descriptor.TensorDescriptor
        yield arg.base


def extents(named: dict) -> list[tuple[int, int, str]] | None:
    """[(first byte, end byte, argument name)] of each tensor argument's storage; None when one cannot be read
    (then nothing is checked: never a refusal a GPU would not make)."""
    found = []
    for name, arg in named.items():
        for t in launch_tensors(arg):
            try:
                storage = (t if isinstance(t, torch.Tensor) else t.base).untyped_storage()
                first = storage.data_ptr()
                found.append((first, first + storage.nbytes(), name))
            except Exception:  # noqa: BLE001 - an argument we cannot place: check nothing
                return None
    return found


def check(kernel: str, program: tuple, addresses: np.ndarray, itemsize: int,
          known: list[tuple[int, int, str]], op: str = "store") -> None:
    """Raise OutOfBounds when the `addresses` of a load or store (`op`; the lanes its mask left on) leave every
    extent."""
    if addresses.size == 0:
        return
    inside = np.zeros(addresses.shape, dtype=bool)
    for first, end, _ in known:
        inside |= (addresses >= first) & (addresses + itemsize <= end)
    if inside.all():
        return
    outside = addresses[~inside]
    at = int(outside[0])
    where = ""
    if known:  # the nearest argument, and the first stray element counted in its elements
        first, end, name = min(known, key=lambda k: min(abs(at - k[0]), abs(at - k[1])))
        where = (f"; the first at element {(at - first) // itemsize:,} of the memory under `{name}`, which holds "
                 f"{(end - first) // itemsize:,}")
    did, harm = {"load": ("loaded", "reads memory that is not the kernel's (another tensor's values)"),
                 "store": ("stored", "silently overwrites other memory")}[op]
    raise OutOfBounds(
        f"kernel `{kernel}` (program {program}) {did} {outside.size:,} element(s) outside every tensor passed to "
        f"it{where}. On a GPU that is an illegal memory access, or it {harm}; the grader refused the {op}. "
        f"Check the {op}'s offsets and mask: a row stride taken from another tensor, a tail left unmasked")


def raised(exc: BaseException) -> OutOfBounds | None:
    """The refusal behind an exception the interpreter wrapped (InterpreterError(repr(e)) from e)."""
    seen = exc
    for _ in range(5):
        if seen is None or isinstance(seen, OutOfBounds):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
