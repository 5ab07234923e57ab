"""Graded ranks: N gloo ranks started from the grading child, cheaper than torchrun, on the same torch.distributed.

The grader uses `run_ranks()`: it starts N gloo ranks from its own child process, cheaper
than torchrun, on the same torch.distributed. Given `per_rank` data, each rank is forked from a fresh
server process (multiprocessing's forkserver) and receives only its own share: nothing of the other
ranks' data, or of the caller's memory, is in a rank for the learner's code to find.
"""

from __future__ import annotations

import datetime
import os
import sys
import sysconfig
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import forkserver, processes

# ---------------------------------------------------------------------------------------------
# The grader's side: N gloo ranks forked from the grading child
# ---------------------------------------------------------------------------------------------


class RankError(RuntimeError):
    """A rank raised, hung or died; the message says which and why."""


def run_ranks(target, world_size: int, args: tuple = (), *, per_rank: list[tuple] | None = None,
              timeout: float = 120.0, collective_timeout: float = 60.0, method: str | None = None) -> list:
    """Run `target(rank, world_size, *args, *per_rank[rank])` on `world_size` gloo ranks; return
    each rank's value.

    Without `per_rank`, ranks are forked (cheap: torch is already imported) unless CUDA is
    initialised in this process, where a fork could not be trusted: then they are spawned. With
    `per_rank`, a fork would hand every rank the caller's memory (all ranks' data, the caller's
    frames), so ranks come from a process that holds none of it, each sent its own arguments only:
    in the grader's child, the zygote it forked before any case arrived (forkserver.Zygote, a fork per
    rank); elsewhere, a multiprocessing forkserver started fresh (a new interpreter).
    A rank that raises ends the run with its traceback; once a rank has ended without its result, the others
    are stopped FAILED_RANK_GRACE_S later (not left to wait for it until the collective timeout); a run past
    `timeout` is killed, ranks and all.
    """
    import multiprocessing as mp
    if per_rank is not None and len(per_rank) != world_size:
        raise ValueError(f"per_rank has {len(per_rank)} entries for {world_size} ranks")
    # gloo ranks compute on the CPU, and a rank forked from a process that initialised CUDA cannot use it
    # (unpickling a CUDA tensor there raises "Cannot re-initialize CUDA in forked subprocess"): on a GPU
    # the grading child holds its cases on the GPU, so every tensor travels to the ranks as a CPU tensor
    args = _on_cpu(args)
    per_rank = _on_cpu(per_rank)
    if per_rank is not None and method is None and forkserver.Zygote.current is not None:
        return _ranks_from_zygote(target, world_size, args, per_rank, timeout, collective_timeout)
    if method is None and per_rank is not None:
        method = "forkserver"
    method = method or ("spawn" if torch.cuda.is_available() and torch.cuda.is_initialized() else "fork")
    ctx = mp.get_context(method)
    if method == "forkserver":  # imported once by the server, not once per rank
        ctx.set_forkserver_preload(["torch.distributed", getattr(target, "__module__", "torch")])
    with tempfile.TemporaryDirectory(prefix="gpuprinciples-ranks-") as folder:
        procs = [ctx.Process(target=_rank_main, daemon=True,
                             args=(target, rank, world_size, folder,
                                   args + (tuple(per_rank[rank]) if per_rank is not None else ()),
                                   collective_timeout))
                 for rank in range(world_size)]
        for p in procs:
            p.start()
        try:
            _wait(lambda rank: procs[rank].exitcode, folder, world_size, time.monotonic() + timeout)
        finally:
            hung = [rank for rank, p in enumerate(procs) if p.is_alive()]
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join()
        return _collect(folder, world_size, hung, [p.exitcode for p in procs], timeout)


def _ranks_from_zygote(target, world_size, args, per_rank, timeout, collective_timeout) -> list:
    """run_ranks's ranks, each a fresh fork of the zygote (forkserver.Zygote) sent only its own share."""
    zygote = forkserver.Zygote.current
    with tempfile.TemporaryDirectory(prefix="gpuprinciples-ranks-") as folder:
        procs = [zygote.start(_rank_main, (target, rank, world_size, folder, args + tuple(per_rank[rank]),
                                           collective_timeout), folder, died=os.path.join(folder, f"died{rank}.txt"))
                 for rank in range(world_size)]
        try:
            _wait(lambda rank: procs[rank].poll(), folder, world_size, time.monotonic() + timeout)
        finally:
            hung = [rank for rank, p in enumerate(procs) if p.poll() is None]
            for rank in hung:
                processes.kill_tree(procs[rank].pid)
                procs[rank].wait()
        return _collect(folder, world_size, hung, [p.returncode for p in procs], timeout)


# Once a rank has ended without its result (it raised, crashed or exited), how long the others get to end too
# before they are stopped: left running, they would only wait for it in a collective until its timeout.
FAILED_RANK_GRACE_S = 3.0


def _wait(exitcode, folder: str, world_size: int, deadline: float) -> None:
    """Until every rank has ended, the deadline has passed, or FAILED_RANK_GRACE_S after a rank ended without
    its result (`exitcode(rank)`: None while it runs)."""
    failed_at = None
    while time.monotonic() < deadline:
        codes = [exitcode(rank) for rank in range(world_size)]
        if all(code is not None for code in codes):
            return
        if failed_at is None and any(code is not None and _ended_without_result(folder, rank, code)
                                     for rank, code in enumerate(codes)):
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at >= FAILED_RANK_GRACE_S:
            return
        time.sleep(0.02)


def _ended_without_result(folder: str, rank: int, code) -> bool:
    """An ended rank that failed (a non-zero status) or left no saved value."""
    return code != 0 or not os.path.exists(os.path.join(folder, f"rank{rank}.pt"))


# What a rank's error says when it failed only because another rank stopped answering: it timed out waiting,
# or gloo found the connection closed (the other rank's process ended). Such a rank is not the one to name.
LEFT_WAITING = ("timed out", "timeout", "connection closed by peer", "connection reset by peer", "broken pipe")


def _collect(folder: str, world_size: int, hung: list[int], exitcodes: list, timeout: float) -> list:
    """Each rank's saved value, or a RankError saying which rank failed and how: a rank's own error first,
    then a rank that ended without reporting (the others then only time out waiting for it, or find its
    connection closed), then a timeout, then ranks still running."""
    errors = {}
    for rank in range(world_size):
        path = os.path.join(folder, f"error{rank}.txt")
        if os.path.exists(path):
            errors[rank] = Path(path).read_text()

    def left_waiting(r):
        return any(words in errors[r].lower() for words in LEFT_WAITING)

    dead = [rank for rank, code in enumerate(exitcodes) if rank not in errors and rank not in hung
            and _ended_without_result(folder, rank, code)]
    if errors and not (dead and all(left_waiting(r) for r in errors)):
        # the first rank to fail is the interesting one; the others often only wait for it and fail
        rank = min(errors, key=lambda r: (left_waiting(r), r))
        raise RankError(f"rank {rank} of {world_size} raised: {errors[rank]}")
    if dead:
        raise RankError(_death(folder, dead[0], world_size, exitcodes[dead[0]]))
    if hung:
        raise RankError(f"ranks {hung} of {world_size} were still running after {timeout:g} s and were "
                        "stopped: a collective that not every rank calls waits forever")
    return [torch.load(os.path.join(folder, f"rank{rank}.pt"), weights_only=True) for rank in range(world_size)]


def _on_cpu(tree):
    """`tree` (tuples, lists, dicts of tensors and other values) with every tensor on the CPU."""
    if isinstance(tree, torch.Tensor):
        return tree if tree.device.type == "cpu" else tree.detach().cpu()
    if isinstance(tree, tuple):
        return tuple(_on_cpu(t) for t in tree)
    if isinstance(tree, list):
        return [_on_cpu(t) for t in tree]
    if isinstance(tree, dict):
        return {k: _on_cpu(v) for k, v in tree.items()}
    return tree


def _death(folder: str, rank: int, world_size: int, code) -> str:
    """A sentence for a rank that ended without reporting: what its traceback says, or how it ended."""
    head = f"rank {rank} of {world_size} ended before it could report a result"
    try:
        text = Path(folder, f"died{rank}.txt").read_text().strip()
    except OSError:
        text = ""
    if text:
        last = text.splitlines()[-1].strip()
        why = ("; ranks are CPU processes (gloo) forked from the grader: CUDA cannot be used in them"
               if "forked subprocess" in last else "")
        return f"{head}: {last[:600]}{why}"
    if isinstance(code, int) and code < 0:
        import signal
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"{head}: it was killed by {name} (a crash in native code, or something killed it)"
    return (f"{head}: the process exited (status {code}) without a result or a traceback: something in it "
            "called os._exit before the function returned")


def _rank_main(target, rank, world_size, folder, args, collective_timeout) -> None:
    import torch.distributed as dist
    from torch.utils._python_dispatch import _disable_current_modes
    code = 0
    # A forked rank inherits the grader's counters (a dispatch mode): not ours to record into.
    with _disable_current_modes():
        try:
            torch.set_num_threads(1)
            dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank,
                                    world_size=world_size,
                                    timeout=datetime.timedelta(seconds=collective_timeout))
            with AsOnNccl() as nccl:  # the target's collectives behave as NCCL's, where gloo's differ
                out = target(rank, world_size, *args)
            nccl.settle()  # a race is this rank's error; transfers left running end before the group does
            torch.save(out, os.path.join(folder, f"rank{rank}.pt"))
        except BaseException as exc:  # noqa: BLE001 - sent back as a sentence
            Path(folder, f"error{rank}.txt").write_text(_describe(exc))
            code = 1
        finally:
            try:
                if dist.is_initialized():
                    dist.destroy_process_group()
            except Exception:  # noqa: BLE001
                pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip exit handlers inherited from the grading process


def _describe(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith("submission.py")]
    where = f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    return (text[:800] + " …" if len(text) > 800 else text) + where


# ---------------------------------------------------------------------------------------------
# A rank's collectives as NCCL runs them, where gloo's differ
# ---------------------------------------------------------------------------------------------
#
# The graded ranks run on gloo, on every machine; the learner's code is written for NCCL, one GPU per rank.
# Where the two differ, a rank behaves as NCCL would, so that a verdict does not depend on the backend:
#   - a request (isend, irecv, async_op=True) that the learner drops still completes: gloo cancels a send
#     whose request is garbage-collected, and a rank that returns tears its connections down under its own
#     unfinished sends (NCCL's run on the GPU to completion). settle() waits for what is left;
#   - wait() on a request twice returns (gloo's second wait on an isend/irecv waits for another message);
#   - the requests of one batch_isend_irecv are one request, as NCCL's coalesced batch: waiting one waits all;
#   - reduce leaves a non-root rank's tensor as it was (gloo writes partial sums into it);
#   - ReduceOp.PREMUL_SUM (dist._make_nccl_premul_sum) reduces as NCCL does, scaling each rank's input first;
#   - a tensor that an unfinished request still uses, touched before the request's wait(), is a race: NCCL
#     runs the transfer on a stream of its own, beside the rank's kernels, so the values depend on timing.
#     On gloo the same code usually reads the finished transfer (or always the unfinished one), so a race is
#     this rank's error (CollectiveRace), wherever it happens, instead of whatever values gloo's timing gave.

class CollectiveRace(RuntimeError):
    """A rank read or wrote a tensor that a request it had not waited for was still transferring."""


# c10d op -> how it uses its tensor arguments: (argument index, "r" reads, "w" writes; "bcast"/"reduce": by
# root: a broadcast's root reads, the others write; a reduce's root writes, the others only send)
_USES = {
    "allreduce_": ((0, "w"),), "allreduce_coalesced_": ((0, "w"),),
    "broadcast_": ((0, "bcast"),), "reduce_": ((0, "reduce"),),
    "allgather_": ((0, "w"), (1, "r")), "_allgather_base_": ((0, "w"), (1, "r")),
    "allgather_coalesced_": ((0, "w"), (1, "r")), "allgather_into_tensor_coalesced_": ((0, "w"), (1, "r")),
    "reduce_scatter_": ((0, "w"), (1, "r")), "_reduce_scatter_base_": ((0, "w"), (1, "r")),
    "reduce_scatter_tensor_coalesced_": ((0, "w"), (1, "r")),
    "alltoall_": ((0, "w"), (1, "r")), "alltoall_base_": ((0, "w"), (1, "r")),
    "gather_": ((0, "w"), (1, "r")), "scatter_": ((0, "w"), (1, "r")),
    "send": ((0, "r"),), "recv_": ((0, "w"),), "recv_any_source_": ((0, "w"),), "barrier": (),
}
_ROOT = {"broadcast_": 2, "reduce_": 3}  # the argument holding the root's rank in the group
_NAMES = {"allreduce_": "all_reduce", "allreduce_coalesced_": "all_reduce_coalesced", "_allgather_base_":
          "all_gather_into_tensor", "allgather_": "all_gather", "_reduce_scatter_base_": "reduce_scatter_tensor",
          "reduce_scatter_": "reduce_scatter", "send": "isend", "recv_": "irecv", "recv_any_source_": "irecv",
          "broadcast_": "broadcast", "reduce_": "reduce", "alltoall_base_": "all_to_all_single",
          "alltoall_": "all_to_all", "gather_": "gather", "scatter_": "scatter"}
_P2P = ("send", "recv_", "recv_any_source_")
# c10d ops that reduce: (the ReduceOp's argument, the tensors reduced, reduced in place)
_REDUCING = {"allreduce_": (2, 0, True), "allreduce_coalesced_": (2, 0, True), "reduce_": (2, 0, True),
             "reduce_scatter_": (3, 1, False), "_reduce_scatter_base_": (3, 1, False),
             "reduce_scatter_tensor_coalesced_": (3, 1, False)}
# aten ops that read no element of their tensor arguments: only their shape, dtype and place
_NO_DATA = frozenset({
    "empty_like", "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "zeros_like",
    "ones_like", "full_like", "rand_like", "randn_like", "randint_like", "detach", "alias", "lift_fresh", "size",
    "stride", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size", "record_stream",
    "_has_compatible_shallow_copy_type"})

_ACTIVE = None  # the AsOnNccl of this rank, while its target runs (Work's methods ask it)
_ORIGINAL: dict = {}  # Work's own methods, before _hook_work


@dataclass(eq=False)
class _Request:
    work: object  # the request (kept: gloo cancels a send whose request is garbage-collected)
    what: str  # "isend", "all_reduce", ...
    where: str  # the learner's line that started it, or ""
    uses: list  # (tensor, "r" | "w"): the tensors it reads or writes until it completes (kept alive, as NCCL does)
    p2p: bool
    batch: object = None  # one object for the requests of one batch_isend_irecv (NCCL: one request)
    done: bool = False
    future: object = None


class AsOnNccl(TorchDispatchMode):
    """A rank's collectives, as NCCL runs them where gloo's differ (the list above). Entered around the rank's
    target (with the target's own modes, such as count_collectives, above it: they see the learner's calls as
    the learner made them); settle() after it."""

    def __init__(self):
        super().__init__()
        self.requests: list[_Request] = []
        self.open: list[_Request] = []  # those the learner's code holds and has not waited for
        self._by_work: dict[int, _Request] = {}
        self.race: str | None = None  # the first race, a sentence with its line
        self._batch = (None, None)  # (the frame of the batch_isend_irecv being issued, its requests' token)

    def __enter__(self):
        global _ACTIVE
        _hook_work()
        _ACTIVE = self
        return super().__enter__()

    # -- the learner's requests ---------------------------------------------------------------

    def request_of(self, work) -> _Request | None:
        return self._by_work.get(id(work))

    def members(self, request: _Request) -> list[_Request]:
        """The request and those of its batch: NCCL gives one request for a batch_isend_irecv."""
        if request.batch is None:
            return [request]
        return [r for r in self.requests if r.batch is request.batch]

    def finished(self, request: _Request) -> None:
        request.done = True
        request.uses = []  # its tensors are the learner's again (the request stays known: a second wait returns)
        if request in self.open:
            self.open.remove(request)

    def settle(self) -> None:
        """After the target: a race this rank's code caught is still its error; every request the learner left
        running completes before the group is torn down (on a GPU they complete on their own)."""
        global _ACTIVE
        try:
            if self.race:
                raise CollectiveRace(self.race)
            for request in self.requests:
                if not request.done and not (request.future is not None and request.future.done()):
                    self.finished(request)
                    try:
                        _ORIGINAL["wait"](request.work)
                    except RuntimeError as exc:
                        started = f" (started at {request.where})" if request.where else ""
                        raise RuntimeError(f"the {request.what}{started} was never waited for, and it did not "
                                           f"complete after the function returned: {exc}") from None
        finally:
            _ACTIVE = None

    # -- every operation ----------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name.split("::", 1)[-1]
        if func.namespace == "c10d" and name in _USES:
            args = list(args)
            uses = _quietly(_c10d_uses, name, args) or []
            self._check(uses)
            _quietly(_stand_in, name, args)
            out = func(*args, **kwargs)
            _quietly(self._started, name, out, uses)
            return out
        if self.open and not _from_torch_distributed():  # torch.distributed's own code keeps its buffers
            self._check(_quietly(_aten_uses, func, name, args, kwargs) or [])
        return func(*args, **kwargs)

    def _started(self, name, out, uses) -> None:
        import torch.distributed as dist
        work = out[-1] if isinstance(out, tuple) and out else out
        if not isinstance(work, torch.ScriptObject):
            return
        by_torch_distributed, learner, batch = _frames()
        if not by_torch_distributed:  # no dist.* call handed it back: torch's C++ (DDP's reducer...) waits for it
            return
        work = dist.Work.unbox(work)  # the object the learner's call returns (pybind keeps one per request)
        token = None
        if batch is not None:
            if self._batch[0] is not batch:
                self._batch = (batch, object())
            token = self._batch[1]
        request = _Request(work, _NAMES.get(name, name), _line(learner), uses, name in _P2P, token)
        self.requests.append(request)
        self._by_work[id(work)] = request
        self.open.append(request)

    def _check(self, uses) -> None:
        for request in list(self.open):
            if request.future is not None and request.future.done():
                self.finished(request)
                continue
            for tensor, mode in uses:
                for held, held_mode in request.uses:
                    if "w" in (mode, held_mode) and _overlap(tensor, held):
                        self._raced(request, mode)

    def _raced(self, request: _Request, mode: str) -> None:
        _, learner, _ = _frames()
        started = f"the {request.what} started at {request.where}" if request.where else f"an unfinished {request.what}"
        if learner is not None:
            text = (f"your code {'wrote to' if mode == 'w' else 'read'} a tensor that {started} was still "
                    f"{'sending' if request.what == 'isend' else 'using'}, before wait() on its request")
            where = f" (at {_line(learner)})"
        else:
            text = f"{started} was never waited for: no wait() on its request before your function returned"
            where = ""
        text += (": on a GPU, NCCL runs the transfer on a stream of its own, beside your code's kernels, so the "
                 "two race and the values depend on timing; call wait() on the request (or on each of them) first")
        if self.race is None:
            self.race = text + where
        raise CollectiveRace(text)


def _quietly(fn, *args):
    """fn(*args), or None where it fails: what this layer cannot read (another PyTorch's signatures) it leaves
    to gloo as it is, never failing the learner's code for it."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001
        return None


def _hook_work() -> None:
    """Work's wait, synchronize and future answer for the learner's requests as NCCL's do (once per rank)."""
    import torch.distributed as dist
    if _ORIGINAL:
        return
    for name in ("wait", "synchronize", "block_current_stream", "get_future", "is_completed"):
        if hasattr(dist.Work, name):
            _ORIGINAL[name] = getattr(dist.Work, name)

    def wait(self, *args, **kwargs):
        request = _ACTIVE.request_of(self) if _ACTIVE is not None else None
        if request is None:
            return _ORIGINAL["wait"](self, *args, **kwargs)
        for member in _ACTIVE.members(request):
            if not member.done:  # gloo's second wait on an isend/irecv would wait for another message
                _ACTIVE.finished(member)  # first: gloo's wait itself copies a result into the learner's tensor
                _ORIGINAL["wait"](member.work, *args, **kwargs)
        return True

    def get_future(self):
        future = _ORIGINAL["get_future"](self)
        request = _ACTIVE.request_of(self) if _ACTIVE is not None else None
        if request is not None:
            request.future = future
        return future

    def is_completed(self):
        request = _ACTIVE.request_of(self) if _ACTIVE is not None else None
        if request is None or request.done:
            return request is not None or _ORIGINAL["is_completed"](self)
        # gloo's isend/irecv reports completion only once waited for (NCCL's once transferred), and gloo copies a
        # collective's result into the learner's tensor only in wait(): a loop on is_completed() ends as on NCCL
        if request.p2p or _ORIGINAL["is_completed"](self):
            return wait(self)
        return False

    hooks = {"wait": wait, "get_future": get_future, "is_completed": is_completed,
             # NCCL's: the rank's stream waits for the transfer; here the rank does
             "synchronize": wait, "block_current_stream": wait}
    for name, hook in hooks.items():
        if name in _ORIGINAL:
            setattr(dist.Work, name, hook)


def _c10d_uses(name: str, args: list) -> list:
    import torch.distributed as dist
    uses = []
    for index, mode in _USES[name]:
        if mode in ("bcast", "reduce"):
            root = dist.ProcessGroup.unbox(args[1]).rank() == args[_ROOT[name]]
            mode = "r" if root == (mode == "bcast") else "w"
        uses += [(t, mode) for t in _tensors(args[index])]
    return uses


def _aten_uses(func, name: str, args, kwargs) -> list:
    if func.is_view or name in _NO_DATA:
        return []
    uses = []
    for i, argument in enumerate(func._schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(argument.name)
        if value is None:
            continue
        written = argument.alias_info is not None and argument.alias_info.is_write
        uses += [(t, "w" if written else "r") for t in _tensors(value)]
    return uses


def _stand_in(name: str, args: list) -> None:
    """Where gloo's op differs from NCCL's, the arguments that make it do what NCCL's does."""
    import torch.distributed as dist
    if name == "reduce_" and dist.ProcessGroup.unbox(args[1]).rank() != args[3]:
        args[0] = [t.clone() for t in args[0]]  # NCCL leaves a non-root rank's tensor as it was
    if name in _REDUCING:
        at, tensors, in_place = _REDUCING[name]
        if args[at].op() == int(dist.ReduceOp.RedOpType.PREMUL_SUM):
            factor = _premul_factor()
            if factor is None:  # not found: gloo says it has no PREMUL_SUM
                return
            if in_place:
                for t in _tensors(args[tensors]):
                    t.mul_(factor)
            else:
                args[tensors] = _map_tensors(lambda t: t * factor, args[tensors])
            args[at] = torch.classes.c10d.ReduceOp()  # SUM


def _premul_factor():
    """The factor of the PREMUL_SUM being issued: the ReduceOp the learner passed (torch.distributed's call holds
    it; the op that reaches the dispatcher does not carry its factor). Read from its pickled state, (op, factor):
    PyTorch 2.13 also names it ReduceOp.factor, 2.11 (the GPU machine's) has no such attribute."""
    import torch.distributed as dist
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == _C10D:
            value = frame.f_locals.get("op")
            if isinstance(value, dist.ReduceOp) and value.op == dist.ReduceOp.RedOpType.PREMUL_SUM:
                return value.__getstate__()[1]  # a number or a one-element tensor
        frame = frame.f_back
    return None


def _tensors(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _map_tensors(fn, value):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(fn, v) for v in value)
    return value


def _span(t: torch.Tensor):
    """(storage address, first byte, end byte) of the memory `t` covers, or None (no elements, no storage)."""
    try:
        if t.numel() == 0:
            return None
        size = t.element_size()
        first = t.storage_offset() * size
        return (t.untyped_storage().data_ptr(), first,
                first + (1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))) * size)
    except (RuntimeError, NotImplementedError):
        return None


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors share an element of memory (two chunks of one buffer do not)."""
    sa, sb = _span(a), _span(b)
    if sa is None or sb is None or sa[0] != sb[0] or sa[2] <= sb[1] or sb[2] <= sa[1]:
        return False
    if (a.is_contiguous() and b.is_contiguous()) or a.element_size() != b.element_size():
        return True
    return bool(torch.isin(_offsets(a), _offsets(b)).any())


def _offsets(t: torch.Tensor) -> torch.Tensor:
    index = torch.tensor(t.storage_offset())
    for n, s in zip(t.shape, t.stride()):
        index = index.unsqueeze(-1) + torch.arange(n) * s
    return index.flatten()


_TORCH = os.path.dirname(torch.__file__) + os.sep
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_DISTRIBUTED = os.path.join(_TORCH, "distributed") + os.sep
_C10D = os.path.join(_DISTRIBUTED, "distributed_c10d.py")
_OURS = (os.path.abspath(__file__), os.path.join(_PACKAGE, "measure", "collectives.py"))
_INSTALLED = tuple(sorted({sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")}))


def _machinery(name: str) -> bool:
    """A frame of the dispatcher's (torch's own code outside torch.distributed), the counters' or this file's."""
    return name in _OURS or (name.startswith(_TORCH) and not name.startswith(_DISTRIBUTED))


def _from_torch_distributed() -> bool:
    """Whether the operation being dispatched comes from torch.distributed's own code (a collective's C++ or
    Python filling its buffers), not from the learner's or the grader's."""
    frame = sys._getframe(2)
    while frame is not None and _machinery(frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(_DISTRIBUTED)


def _frames():
    """(whether torch.distributed's own Python issued the collective; the learner's innermost frame; the frame of
    the batch_isend_irecv it is part of). A request is the learner's to wait for when torch.distributed's
    functions (dist.isend, dist.all_reduce, ...) hand it back: the first frame past the dispatcher's, the
    counters' and this file's is theirs. A collective issued from C++ (DDP's reducer in backward, its
    _broadcast_coalesced) shows the learner's frame there instead, or another of torch.distributed's files: torch
    waits for those itself, in C++, where Work's Python methods never see it. A learner's direct call of a
    process group's method looks the same, and is left to gloo as it is."""
    issuer, learner, batch = None, None, None
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if issuer is None and not _machinery(name):
            issuer = frame
        if learner is None and not name.startswith((_TORCH, _PACKAGE, *_INSTALLED, "<")) and name not in _OURS:
            learner = frame
        if batch is None and frame.f_code.co_name == "batch_isend_irecv" and name == _C10D:
            batch = frame
        frame = frame.f_back
    return issuer is not None and issuer.f_code.co_filename == _C10D, learner, batch


def _line(frame) -> str:
    if frame is None:
        return ""
    import linecache
    code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f"line {frame.f_lineno} ({code})" if code else f"line {frame.f_lineno}"
