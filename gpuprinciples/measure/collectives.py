"""Counting collectives: every collective a block of code issues, with its size, whether it came from our
own `dist.all_reduce`, from DDP's C++ reducer, from FSDP2 or from DTensor, and the bytes a ring sends."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# ---------------------------------------------------------------------------------------------
# Counting collectives
# ---------------------------------------------------------------------------------------------

# c10d op -> (kind, which argument holds the full logical size S)
_C10D = {
    "allreduce_": ("all_reduce", 0), "allreduce_coalesced_": ("all_reduce", 0),
    "_allgather_base_": ("all_gather", 0), "allgather_": ("all_gather", 0),
    "allgather_into_tensor_coalesced_": ("all_gather", 0), "allgather_coalesced_": ("all_gather", 0),
    "_reduce_scatter_base_": ("reduce_scatter", 1), "reduce_scatter_": ("reduce_scatter", 1),
    "reduce_scatter_tensor_coalesced_": ("reduce_scatter", 1),
    "broadcast_": ("broadcast", 0), "reduce_": ("reduce", 0), "gather_": ("gather", 1),
    "scatter_": ("scatter", 0), "alltoall_": ("all_to_all", 1), "alltoall_base_": ("all_to_all", 1),
    "send": ("send", 0), "recv_": ("recv", 0), "recv_any_source_": ("recv", 0),
    "barrier": ("barrier", None),
}
# torch.distributed._functional_collectives (DTensor, FSDP2 under compile): op -> kind
_FUNCTIONAL = {
    "all_reduce": "all_reduce", "all_reduce_": "all_reduce", "all_reduce_coalesced": "all_reduce",
    "all_gather_into_tensor": "all_gather", "all_gather_into_tensor_out": "all_gather",
    "all_gather_into_tensor_coalesced": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter", "reduce_scatter_tensor_out": "reduce_scatter",
    "broadcast": "broadcast", "broadcast_": "broadcast", "all_to_all_single": "all_to_all",
    "isend": "send", "irecv": "recv",
}


def ring_bytes_sent(kind: str, size: int, n: int) -> float:
    """Bytes each rank sends for a collective of logical size `size` bytes on `n` ranks (ring).

    all-reduce: a reduce-scatter then an all-gather, 2(n-1)/n · S. reduce-scatter and all-gather:
    (n-1)/n · S. Broadcast (pipelined ring): about S. A send is its own size.
    """
    if n <= 1:
        return 0.0
    if kind == "all_reduce":
        return 2 * (n - 1) / n * size
    if kind in ("reduce_scatter", "all_gather", "all_to_all"):
        return (n - 1) / n * size
    if kind in ("broadcast", "reduce", "send", "gather", "scatter"):
        return float(size)
    return 0.0


def _nbytes(tree) -> int:
    if isinstance(tree, torch.Tensor):
        return tree.numel() * tree.element_size()
    if isinstance(tree, (list, tuple)):
        return sum(_nbytes(t) for t in tree)
    return 0


def _element_size(tree) -> int:
    """The element size of the first tensor in `tree` (0 without one)."""
    if isinstance(tree, torch.Tensor):
        return tree.element_size()
    for t in tree if isinstance(tree, (list, tuple)) else ():
        size = _element_size(t)
        if size:
            return size
    return 0


@dataclass
class Collectives:
    """What one block of code sent: one entry per collective call, in order."""

    world_size: int = 1
    # {"kind", "op", "bytes", "element_size"} (bytes: the logical size S)
    calls: list[dict] = field(default_factory=list)

    @property
    def counts(self) -> Counter:
        return Counter(c["kind"] for c in self.calls)

    def bytes(self, kind: str | None = None) -> int:
        return sum(c["bytes"] for c in self.calls if kind is None or c["kind"] == kind)

    @property
    def sent_bytes(self) -> float:
        """Bytes this rank put on the wire, by the ring model (send: counted exactly)."""
        return sum(ring_bytes_sent(c["kind"], c["bytes"], self.world_size) for c in self.calls)

    def as_dict(self) -> dict:
        return {"world_size": self.world_size, "counts": dict(self.counts),
                "bytes": {k: self.bytes(k) for k in self.counts}, "sent_bytes": self.sent_bytes,
                "calls": [dict(c) for c in self.calls]}

    def __str__(self) -> str:
        parts = [f"{k} ×{n} ({_fmt(self.bytes(k))})" for k, n in sorted(self.counts.items())]
        return ", ".join(parts) or "no collectives"


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n} B"


class _CollectiveMode(TorchDispatchMode):
    """Sees every collective that goes through PyTorch's dispatcher: `dist.*` calls from Python,
    DDP's reducer (C++), FSDP2 and DTensor. Waits and metadata are not collectives."""

    def __init__(self, record: Collectives):
        super().__init__()
        self.record = record

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        namespace = func.namespace
        name = func._schema.name.split("::", 1)[-1]
        if namespace == "c10d" and name in _C10D:
            kind, where = _C10D[name]
            held = args[where] if where is not None and len(args) > where else None
            self.record.calls.append({"kind": kind, "op": f"c10d.{name}", "bytes": _nbytes(held),
                                      "element_size": _element_size(held)})
        elif namespace in ("_c10d_functional", "c10d_functional") and name in _FUNCTIONAL:
            kind = _FUNCTIONAL[name]
            size = _nbytes(args[0])
            if kind == "all_gather":  # the input is one shard; S is the gathered output
                size *= int(args[1]) if len(args) > 1 and isinstance(args[1], int) else self.record.world_size
            self.record.calls.append({"kind": kind, "op": f"{namespace}.{name}", "bytes": size,
                                      "element_size": _element_size(args[0])})
        elif namespace in ("_c10d_functional", "c10d_functional") and name == "batch_p2p_ops":
            for op, tensor in zip(args[0], args[3]):  # ("isend" | "irecv", ...), one tensor each
                self.record.calls.append({"kind": "send" if "send" in op else "recv", "op": f"{namespace}.{name}",
                                          "bytes": _nbytes(tensor), "element_size": _element_size(tensor)})
        return func(*args, **kwargs)


class count_collectives:
    """`with count_collectives() as c: ...` then `c.counts`, `c.bytes("all_reduce")`, `c.sent_bytes`."""

    def __init__(self):
        import torch.distributed as dist
        world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        self.record = Collectives(world_size=world)
        self._mode = _CollectiveMode(self.record)

    def __enter__(self) -> Collectives:
        self._mode.__enter__()
        return self.record

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)
