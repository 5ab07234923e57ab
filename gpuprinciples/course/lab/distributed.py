"""Real torch.distributed from a notebook: launch ranks, collect their results, count collectives.

Nothing here simulates a cluster. A lesson writes a script to a file and runs it with PyTorch's
own launcher, exactly as on a GPU cluster:

    results = launch("ddp_demo.py", nproc=2)      # python -m torch.distributed.run --nproc-per-node 2 ...

Inside the script, each rank calls `init()` (gloo on a CPU, NCCL with one GPU per process),
does its work, and `save()`s what the notebook should see; `launch` returns one result per rank.
`count_collectives()` records every collective a block of code issues, with its size, whether it
came from our own `dist.all_reduce`, from DDP's C++ reducer, from FSDP2 or from DTensor.

Processes are never left behind: `launch` kills the launcher and every rank it started when the
script fails, hangs past its timeout, or the notebook is interrupted.

The grader uses `run_ranks()` instead: it starts N gloo ranks from its own child process, cheaper
than torchrun, on the same torch.distributed. Given `per_rank` data, each rank is forked from a fresh
server process (multiprocessing's forkserver) and receives only its own share: nothing of the other
ranks' data, or of the caller's memory, is in a rank for the learner's code to find.
"""

from __future__ import annotations

import datetime
import os
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import sandbox
from .sandbox import descendants  # noqa: F401  (lesson 09 lists what a run left behind)

RESULTS_ENV = "GPUPRINCIPLES_RESULTS"
BACKEND_ENV = "GPUPRINCIPLES_BACKEND"


class LaunchError(RuntimeError):
    """A distributed run failed or timed out; the message carries the end of its output."""


# ---------------------------------------------------------------------------------------------
# The notebook's side: launch a script with torchrun
# ---------------------------------------------------------------------------------------------


def default_backend() -> str:
    """NCCL when this machine has CUDA GPUs (one per process), gloo on CPU processes otherwise."""
    from . import runtime
    return "nccl" if runtime.HAS_CUDA else "gloo"


def torchrun_command(script: str, nproc: int, args: tuple = (), *, nnodes: int = 1,
                     endpoint: str = "HOST:29500", job_id: str = "lesson09") -> list[str]:
    """The command that starts `script` on `nproc` processes per node.

    One node: `--standalone` (a local rendezvous on a free port). Several nodes: run the same
    command on every node, with the rendezvous at `endpoint` (a host all nodes can reach).
    """
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}"]
    if nnodes == 1:
        cmd.append("--standalone")
    else:
        cmd += [f"--nnodes={nnodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
                f"--rdzv-id={job_id}"]
    return cmd + [str(script), *map(str, args)]


def launch(script: str | os.PathLike, nproc: int = 2, args: tuple = (), *, backend: str | None = None,
           timeout: float = 180.0, show_output: bool = True, progress: bool = True) -> list:
    """Run `script` under torchrun on `nproc` local processes and return what each rank `save()`d.

    Raises `LaunchError` (with the end of the output) when a rank fails or the run takes longer
    than `timeout` seconds; the launcher and every rank are killed first, either way.
    `progress` shows the seconds ticking while the ranks run.
    """
    from .progress import ticking
    backend = backend or default_backend()
    with tempfile.TemporaryDirectory(prefix="gpuprinciples-dist-") as results:
        env = dict(os.environ)
        env[RESULTS_ENV] = results
        env[BACKEND_ENV] = backend
        env.setdefault("OMP_NUM_THREADS", "1")  # one thread per rank: ranks share this machine's cores
        package_parent = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join([package_parent, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        if backend == "gloo":
            env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU run stays on the CPU, even on a GPU machine
        log_path = os.path.join(results, "output.log")
        cmd = torchrun_command(str(script), nproc, args)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True)
        try:
            with ticking(f"{Path(script).name} on {nproc} ranks ({backend})", enabled=progress):
                code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            raise LaunchError(f"{script} did not finish within {timeout:g} s; the launcher and its "
                              f"{nproc} ranks were killed.\n" + _tail(log_path)) from None
        except BaseException:  # KeyboardInterrupt in a notebook: leave nothing running
            kill_tree(proc)
            raise
        output = _clean(Path(log_path).read_text(errors="replace"))
        if code != 0:
            kill_tree(proc)
            raise LaunchError(f"{script} failed (exit code {code}).\n" + _failure(output))
        if show_output and output.strip():
            print(output.rstrip())
        found = []
        for rank in range(nproc):
            path = os.path.join(results, f"rank{rank}.pt")
            found.append(torch.load(path, weights_only=False) if os.path.exists(path) else None)
        return found


def _clean(text: str) -> str:
    """Drop torchrun's banner about OMP_NUM_THREADS, keep everything the ranks printed."""
    skip = ("*****", "Setting OMP_NUM_THREADS")
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(skip))


def _failure(output: str, lines: int = 25) -> str:
    """What the ranks printed last, then torchrun's summary (which rank, which exit code), without
    the launcher's own traceback, which says only that a child failed."""
    agent = output.find('torch/distributed/run.py", line')
    if agent < 0:
        return "\n".join(output.splitlines()[-lines:])
    start = output.rfind("Traceback (most recent call last):", 0, agent)
    ranks, launcher = output[:start if start >= 0 else agent], output[agent:]
    summary = [line.strip() for line in launcher.splitlines()
               if line.strip().startswith(("rank ", "exitcode ", "Root Cause", "[0]", "[1]"))]
    return "\n".join(ranks.rstrip().splitlines()[-lines:] + ["torchrun: " + "; ".join(summary)])


def _tail(path: str, lines: int = 30) -> str:
    try:
        text = _clean(Path(path).read_text(errors="replace"))
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def is_rank_or_launcher(pid: int) -> bool:
    """True for a torchrun launcher, a rank it started, or a grading rank: psutil reads the process's command
    line and environment wherever the course runs (False for a process that is gone or not ours to read)."""
    import psutil
    try:
        proc = psutil.Process(pid)
        return "torch.distributed.run" in " ".join(proc.cmdline()) or RESULTS_ENV in proc.environ()
    except psutil.Error:
        return False


def kill_tree(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """Stop the launcher and every rank. torchrun starts each rank in a session of its own, so
    killing the launcher's process group alone would orphan them: the whole tree goes (sandbox.py),
    after `grace` seconds to exit on SIGTERM (which torchrun forwards to its ranks)."""
    if proc.poll() is None:
        sandbox.kill_tree(proc.pid, term_grace=grace)
        proc.wait()


# ---------------------------------------------------------------------------------------------
# A rank's side: inside a script started by torchrun
# ---------------------------------------------------------------------------------------------


def init(backend: str | None = None, timeout_s: float = 120.0):
    """Join the process group; return (rank, world_size, device).

    NCCL: one GPU per process, picked by LOCAL_RANK (the rank within this node). gloo: the CPU.
    A collective that waits longer than `timeout_s` raises instead of hanging.
    """
    import torch.distributed as dist
    backend = backend or os.environ.get(BACKEND_ENV) or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=timeout_s), device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size(), device


def save(result) -> None:
    """Hand this rank's result back to `launch()` in the notebook."""
    import torch.distributed as dist
    folder = os.environ.get(RESULTS_ENV)
    if folder:
        torch.save(result, os.path.join(folder, f"rank{dist.get_rank()}.pt"))


def finish() -> None:
    """The last line of a rank's script: wait for every rank, leave the process group, and end this
    process (exit code 0) when torchrun started it.

    Why end it here, and not let Python shut down: once a DeviceMesh, DTensor or a functional collective
    was used, `destroy_process_group()` leaves gloo's worker threads running (torch still holds the backend
    from C++). A worker that drops the last reference to a collective's tensor needs the GIL; if the
    interpreter is shutting down at that moment, the thread is unwound where it may not be and the rank
    aborts ("terminate called without an active exception", SIGABRT). The barrier lets every rank's
    collectives complete; `os._exit` then ends the process with no interpreter shutdown for a thread to meet.
    """
    import torch.distributed as dist
    if dist.is_initialized():
        dist.barrier()  # gloo's barrier also waits for this rank's earlier collectives
        dist.destroy_process_group()
    if "TORCHELASTIC_RUN_ID" not in os.environ:  # not a torchrun rank (a notebook's kernel): keep it running
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ---------------------------------------------------------------------------------------------
# Counting collectives
# ---------------------------------------------------------------------------------------------

# c10d op -> (kind, which argument holds the full logical size S)
_C10D = {
    "allreduce_": ("all_reduce", 0), "allreduce_coalesced_": ("all_reduce", 0),
    "_allgather_base_": ("all_gather", 0), "allgather_": ("all_gather", 0),
    "allgather_into_tensor_coalesced_": ("all_gather", 0),
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
    "reduce_scatter_tensor_coalesced": "reduce_scatter", "broadcast": "broadcast",
    "all_to_all_single": "all_to_all",
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


@dataclass
class Collectives:
    """What one block of code sent: one entry per collective call, in order."""

    world_size: int = 1
    calls: list[dict] = field(default_factory=list)  # {"kind", "op", "bytes"} (bytes: the logical size S)

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
            size = _nbytes(args[where]) if where is not None and len(args) > where else 0
            self.record.calls.append({"kind": kind, "op": f"c10d.{name}", "bytes": size})
        elif namespace in ("_c10d_functional", "c10d_functional") and name in _FUNCTIONAL:
            kind = _FUNCTIONAL[name]
            size = _nbytes(args[0])
            if kind == "all_gather":  # the input is one shard; S is the gathered output
                size *= int(args[1]) if len(args) > 1 and isinstance(args[1], int) else self.record.world_size
            self.record.calls.append({"kind": kind, "op": f"{namespace}.{name}", "bytes": size})
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
    in the grader's child, the zygote it forked before any case arrived (sandbox.Zygote, a fork per
    rank); elsewhere, a multiprocessing forkserver started fresh (a new interpreter).
    A rank that raises ends the run with its traceback; a run past `timeout` is killed, ranks and all.
    """
    import multiprocessing as mp
    if per_rank is not None and len(per_rank) != world_size:
        raise ValueError(f"per_rank has {len(per_rank)} entries for {world_size} ranks")
    # gloo ranks compute on the CPU, and a rank forked from a process that initialised CUDA cannot use it
    # (unpickling a CUDA tensor there raises "Cannot re-initialize CUDA in forked subprocess"): on a GPU
    # the grading child holds its cases on the GPU, so every tensor travels to the ranks as a CPU tensor
    args = _on_cpu(args)
    per_rank = _on_cpu(per_rank)
    if per_rank is not None and method is None and sandbox.Zygote.current is not None:
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
        deadline = time.monotonic() + timeout
        try:
            for p in procs:
                p.join(max(deadline - time.monotonic(), 0.0))
        finally:
            hung = [rank for rank, p in enumerate(procs) if p.is_alive()]
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join()
        return _collect(folder, world_size, hung, [p.exitcode for p in procs], timeout)


def _ranks_from_zygote(target, world_size, args, per_rank, timeout, collective_timeout) -> list:
    """run_ranks's ranks, each a fresh fork of the zygote (sandbox.Zygote) sent only its own share."""
    zygote = sandbox.Zygote.current
    with tempfile.TemporaryDirectory(prefix="gpuprinciples-ranks-") as folder:
        procs = [zygote.start(_rank_main, (target, rank, world_size, folder, args + tuple(per_rank[rank]),
                                           collective_timeout), folder, died=os.path.join(folder, f"died{rank}.txt"))
                 for rank in range(world_size)]
        deadline = time.monotonic() + timeout
        try:
            for p in procs:
                try:
                    p.wait(max(deadline - time.monotonic(), 0.0))
                except subprocess.TimeoutExpired:
                    break
        finally:
            hung = [rank for rank, p in enumerate(procs) if p.poll() is None]
            for rank in hung:
                sandbox.kill_tree(procs[rank].pid)
                procs[rank].wait()
        return _collect(folder, world_size, hung, [p.returncode for p in procs], timeout)


def _collect(folder: str, world_size: int, hung: list[int], exitcodes: list, timeout: float) -> list:
    """Each rank's saved value, or a RankError saying which rank failed and how: a rank's own error first,
    then a rank that ended without reporting (the others then only time out waiting for it), then a
    timeout, then ranks still running."""
    errors = {}
    for rank in range(world_size):
        path = os.path.join(folder, f"error{rank}.txt")
        if os.path.exists(path):
            errors[rank] = Path(path).read_text()

    def timed_out(r):
        return "timed out" in errors[r].lower() or "timeout" in errors[r].lower()

    dead = [rank for rank, code in enumerate(exitcodes) if rank not in errors and rank not in hung
            and (code != 0 or not os.path.exists(os.path.join(folder, f"rank{rank}.pt")))]
    if errors and not (dead and all(timed_out(r) for r in errors)):
        # the first rank to fail is the interesting one; the others often only time out waiting
        rank = min(errors, key=lambda r: (timed_out(r), r))
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


# ---------------------------------------------------------------------------------------------
# Writing a notebook function to a file, so a torchrun script can import it unchanged
# ---------------------------------------------------------------------------------------------


def write_function(fn, path: str | os.PathLike) -> Path:
    """Write `fn` (with what it uses from the notebook) to a module a script can import."""
    from .submission import from_function
    submission = from_function(fn)
    path = Path(path)
    path.write_text(submission.source)
    return path


def shell_command(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)


def bubble_fraction(stages: int, microbatches: int) -> float:
    """GPipe's idle fraction (p - 1) / (m + p - 1) (Huang et al. 2019, arXiv 1811.06965)."""
    return (stages - 1) / (microbatches + stages - 1)


def reduce_scatter(output, input, group=None):
    """`dist.reduce_scatter_single` (torch 2.13+), `reduce_scatter_tensor` before it."""
    import torch.distributed as dist
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return fn(output, input, group=group)


def all_gather(output, input, group=None):
    """`dist.all_gather_single` (torch 2.13+), `all_gather_into_tensor` before it."""
    import torch.distributed as dist
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return fn(output, input, group=group)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------------------------
# Reference solutions of the lesson's exercises (the grader's tests and `bench` use them)
# ---------------------------------------------------------------------------------------------


def allreduce_gradients(model) -> None:
    """Data parallel by hand: average every gradient over all ranks, in place."""
    import torch.distributed as dist
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:  # frozen parameters have no gradient to share
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= world


def ring_allreduce(x):
    """Sum `x` over all ranks with only send/recv: a reduce-scatter ring, then an all-gather ring.

    Each rank sends 2(n-1) chunks of about S/n bytes: 2(n-1)/n · S in all, whatever n is.
    """
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    out = x.clone()
    chunks = list(out.tensor_split(n))  # views into out; sizes differ by at most one element
    right, left = (rank + 1) % n, (rank - 1) % n
    for step in range(n - 1):  # reduce-scatter: afterwards chunk (rank + 1) % n is complete here
        send_i, recv_i = (rank - step) % n, (rank - step - 1) % n
        incoming = torch.empty_like(chunks[recv_i])
        request = dist.isend(chunks[send_i], right)
        dist.recv(incoming, left)
        request.wait()
        chunks[recv_i] += incoming
    for step in range(n - 1):  # all-gather: pass the complete chunks around the ring
        send_i, recv_i = (rank + 1 - step) % n, (rank - step) % n
        incoming = torch.empty_like(chunks[recv_i])
        request = dist.isend(chunks[send_i], right)
        dist.recv(incoming, left)
        request.wait()
        chunks[recv_i].copy_(incoming)
    return out


def zero_memory(num_params: int, world_size: int, stage: int) -> dict:
    """Bytes per rank of mixed-precision Adam under ZeRO stage 0-3 (Rajbhandari et al., arXiv 1910.02054).

    fp16 parameters 2Ψ, fp16 gradients 2Ψ, fp32 master weights, momentum and variance 12Ψ.
    Stage 1 shards the optimizer state, stage 2 the gradients too, stage 3 the parameters too.
    A sharded tensor of Ψ elements leaves ceil(Ψ/N) on each rank (the last shard is padded).
    """
    shard = ceil_div(num_params, world_size)
    return {"params": 2 * (shard if stage >= 3 else num_params),
            "grads": 2 * (shard if stage >= 2 else num_params),
            "optimizer": 12 * (shard if stage >= 1 else num_params)}


__all__ = [
    "launch", "LaunchError", "torchrun_command", "kill_tree", "descendants", "is_rank_or_launcher",
    "init", "save", "finish", "count_collectives", "Collectives", "ring_bytes_sent", "run_ranks", "RankError",
    "write_function", "bubble_fraction", "reduce_scatter", "all_gather", "default_backend", "shell_command",
    "ceil_div", "allreduce_gradients", "ring_allreduce", "zero_memory",
]
