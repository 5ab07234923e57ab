"""Messages between the grader and its child process.

Each message is an 8-byte length and a `torch.save` payload. The grader reads the child's
messages with `torch.load(weights_only=True)`, which builds only tensors and plain containers:
whatever the learner's code writes into the pipe, it cannot make the grader run code.
Commands to the child go the other way as pickles (the grader trusts itself).
"""

from __future__ import annotations

import io
import os
import pickle
import select
import struct
import time

import torch

_HEADER = struct.Struct("<Q")
MAX_MESSAGE = 1 << 32


class ChannelClosed(Exception):
    """The other side went away (the child crashed or exited)."""


class ChannelTimeout(Exception):
    """Nothing arrived before the deadline."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout()
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise ChannelTimeout()
        chunk = os.read(fd, min(n - len(chunks), 1 << 20))
        if not chunk:
            raise ChannelClosed()
        chunks += chunk
    return bytes(chunks)


def send_data(fd: int, obj) -> None:
    """Child -> grader: tensors and plain containers only."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    payload = buffer.getvalue()
    _write_all(fd, _HEADER.pack(len(payload)) + payload)


def recv_data(fd: int, deadline: float | None = None):
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if size > MAX_MESSAGE:
        raise ChannelClosed()
    payload = _read_exact(fd, size, deadline)
    return torch.load(io.BytesIO(payload), weights_only=True)


def send_command(fd: int, obj) -> None:
    """Grader -> child."""
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(fd, _HEADER.pack(len(payload)) + payload)


def recv_command(fd: int):
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, None))
    return pickle.loads(_read_exact(fd, size, None))
