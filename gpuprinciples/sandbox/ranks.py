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
import tempfile
import time
import traceback
from pathlib import Path

import torch

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
            out = target(rank, world_size, *args)
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
