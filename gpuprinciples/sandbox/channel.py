"""The messages between the grader and its child process, declared once.

Framing: each message is an 8-byte length and a payload. The child's replies are `torch.save`
payloads that the grader reads with `torch.load(weights_only=True)`, which builds only tensors and
plain containers: whatever learner code writes into the pipe, it cannot make the grader run code.
Every reply is then checked against its declared schema below (`parse`): a reply with a field of
the wrong type is refused like a garbled one, before any of it is used. Commands to the child go
the other way as pickles (the grader trusts itself).

    grader -> child   Job, then per request: a command dict ({"cmd": "case" | "time" | "compile" | "exit"}) and a
                      nonce ({"cmd": "nonce"}), which the child reads only once its reply is ready
    child  -> grader  Ready | LoadError, then one CaseResult per case, one TimingResult per timing, one
                      CompileResult for the compile pass (a CPU compiling the GPU's cases); between them, any
                      number of Progress (no nonce): seconds the grader's own compiling took
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import select
import struct
import time
import types
import typing
from dataclasses import dataclass, field
from typing import Any

import torch

_HEADER = struct.Struct("<Q")
MAX_MESSAGE = 1 << 32


class ChannelClosed(Exception):
    """The other side went away (the child crashed or exited)."""


class ChannelTimeout(Exception):
    """Nothing arrived before the deadline."""


class ChannelGarbled(Exception):
    """A reply that is not one of the declared messages, or has a field of the wrong type."""


# ---------------------------------------------------------------------------------------------
# Framing
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# The messages
# ---------------------------------------------------------------------------------------------


class Message:
    """A declared message: `to_wire()` gives the dict that crosses the pipe, `parse` reads one back."""

    EVENT: typing.ClassVar[str] = ""

    def to_wire(self) -> dict:
        return {"event": self.EVENT, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}


@dataclass
class Job(Message):
    """Grader -> child, first: what to grade and how to load the learner's function.

    `source` (a module's text, written to submission.py) or `module` (imported by name, with
    `sys_path` put first on the child's path) says where the function lives."""

    EVENT: typing.ClassVar[str] = "job"
    exercise: str
    name: str
    device: str
    source: str | None = None
    module: str | None = None
    sys_path: list = field(default_factory=list)


@dataclass
class Ready(Message):
    EVENT: typing.ClassVar[str] = "ready"
    tampered: list = field(default_factory=list)
    left_at_import: dict = field(default_factory=dict)  # observe.import_leftovers: judged by honesty.py


@dataclass
class LoadError(Message):
    """The learner's code did not load; `internal`: the grader's own self-test failed instead."""

    EVENT: typing.ClassVar[str] = "load_error"
    error: str = ""
    internal: bool = False


@dataclass
class CaseResult(Message):
    """One case: what came out and what the counters saw. Judged in the grader (judge.py)."""

    EVENT: typing.ClassVar[str] = "case"
    index: int = 0
    error: str | None = None
    not_attempted: bool = False
    beyond_interpreter: bool = False  # the error is Triton's interpreter's limit (a GPU may run the kernel)
    inputs_changed: bool = False
    inputs_changed_while_read: bool = False
    aliases_input: bool = False
    reuses_output: bool = False
    output: Any = None
    output_type: str = "torch.Tensor"
    output_device: str | None = None
    has_decoy_output: bool = False
    decoy_output: Any = None
    counts: dict = field(default_factory=dict)
    tampered: list = field(default_factory=list)
    watched: list = field(default_factory=list)  # per call (warm-up, graded): observe.py's evidence

    @property
    def ran(self) -> bool:
        """The learner's function returned: its counts are evidence."""
        return self.error is None and bool(self.counts)


@dataclass
class TimingResult(Message):
    """Raw measurements of the timed calls on a GPU: every statistic is computed in the grader.

    `rounds`: per interleaved round, name -> seconds; `after_window`: name -> per-call seconds of
    device work left running after the window; `fingerprints`: per timed call of the learner's
    function, in order, a fingerprint of its output (call i ran on the inputs of judge.round_seed(seed, i):
    new values every call)."""

    EVENT: typing.ClassVar[str] = "timing"
    error: str | None = None
    rounds: list = field(default_factory=list)
    after_window: dict = field(default_factory=dict)
    fingerprints: list = field(default_factory=list)
    timed_counts: list = field(default_factory=list)
    tampered: list = field(default_factory=list)
    watched: list = field(default_factory=list)  # the first (warm-up) call's evidence and what the timed calls left


@dataclass
class CompileResult(Message):
    """The compile pass (compilepass.py): per GPU case, the kernels its launches compiled to, nothing run."""

    EVENT: typing.ClassVar[str] = "compiled"
    cases: list = field(default_factory=list)  # {"label", "compiled": [CompiledInfo dicts], "error"}
    tampered: list = field(default_factory=list)


@dataclass
class Progress(Message):
    """Child -> grader, at any time, without a nonce: the grader's own work in the child (compiling a launch for the
    GPU) took `grader_s` seconds, which the sandbox does not count against the learner's time limit. Learner code
    could send one too: it gains a few more limits at most (child.py's CREDIT_LIMITS), never a verdict."""

    EVENT: typing.ClassVar[str] = "progress"
    grader_s: float = 0.0


REPLIES: dict[str, type[Message]] = {
    m.EVENT: m for m in (Ready, LoadError, CaseResult, TimingResult, CompileResult, Progress)}


def _fits(value, hint) -> bool:
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, origin or hint)


def parse(message, expected: tuple[type[Message], ...]) -> Message:
    """The reply as one of the `expected` message types; ChannelGarbled if it is not one of them or
    a field has the wrong type. Fields the schema does not declare are dropped."""
    if not isinstance(message, dict):
        raise ChannelGarbled("not a dict")
    kind = REPLIES.get(message.get("event"))
    if kind not in expected:
        raise ChannelGarbled(f"unexpected event {message.get('event')!r}")
    hints = typing.get_type_hints(kind)
    values = {}
    for f in dataclasses.fields(kind):
        if f.name in message:
            if not _fits(message[f.name], hints[f.name]):
                raise ChannelGarbled(f"field {f.name} of {kind.EVENT} has the wrong type")
            values[f.name] = message[f.name]
    return kind(**values)
