"""Real torch.distributed from a notebook: launch ranks, collect their results, count collectives.

Nothing here simulates a cluster. A lesson writes a script to a file and runs it with PyTorch's
own launcher, exactly as on a GPU cluster:

    results = launch("ddp_demo.py", nproc=2)      # python -m torch.distributed.run --nproc-per-node 2 ...

Inside the script, each rank calls `init()` (gloo on a CPU, NCCL with one GPU per process),
does its work, and `save()`s what the notebook should see; `launch` returns one result per rank.
`count_collectives()` (measure/collectives.py) records every collective a block of code issues, with
its size, whether it came from our own `dist.all_reduce`, from DDP's C++ reducer, from FSDP2 or DTensor.

Processes are never left behind: `launch` kills the launcher and every rank it started when the
script fails, hangs past its timeout, or the notebook is interrupted.

The graded ranks (`run_ranks`) are sandbox/ranks.py's, the reference solutions course/kernels/distributed.py's;
both are named here too, for lessons and tests that reach them as `gpuprinciples.distributed`.
"""

from __future__ import annotations

import datetime
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from ...measure.collectives import Collectives, count_collectives, ring_bytes_sent  # noqa: F401  (lessons' names)
from ...sandbox import processes
from ...sandbox.processes import descendants  # noqa: F401  (lesson 09 lists what a run left behind)
from ...sandbox.ranks import RankError, run_ranks  # noqa: F401  (the graded ranks, for lessons and tests)
from ..kernels.distributed import allreduce_gradients, ceil_div, ring_allreduce, zero_memory  # noqa: F401

RESULTS_ENV = "GPUPRINCIPLES_RESULTS"
BACKEND_ENV = "GPUPRINCIPLES_BACKEND"


class LaunchError(RuntimeError):
    """A distributed run failed or timed out; the message carries the end of its output."""


# ---------------------------------------------------------------------------------------------
# The notebook's side: launch a script with torchrun
# ---------------------------------------------------------------------------------------------


def default_backend() -> str:
    """NCCL when this machine has CUDA GPUs (one per process), gloo on CPU processes otherwise."""
    from ...machine import runtime
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
        package_parent = processes.PACKAGE_PARENT  # the folder that holds gpuprinciples/
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
    killing the launcher's process group alone would orphan them: the whole tree goes (sandbox/processes.py),
    after `grace` seconds to exit on SIGTERM (which torchrun forwards to its ranks)."""
    if proc.poll() is None:
        processes.kill_tree(proc.pid, term_grace=grace)
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
# Writing a notebook function to a file, so a torchrun script can import it unchanged
# ---------------------------------------------------------------------------------------------


def write_function(fn, path: str | os.PathLike) -> Path:
    """Write `fn` (with what it uses from the notebook) to a module a script can import."""
    from ...sandbox.submission import from_function
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


__all__ = [
    "launch", "LaunchError", "torchrun_command", "kill_tree", "descendants", "is_rank_or_launcher",
    "init", "save", "finish", "count_collectives", "Collectives", "ring_bytes_sent", "run_ranks", "RankError",
    "write_function", "bubble_fraction", "reduce_scatter", "all_gather", "default_backend", "shell_command",
    "ceil_div", "allreduce_gradients", "ring_allreduce", "zero_memory",
]
