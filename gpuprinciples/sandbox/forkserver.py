"""The warm start (`ForkServer`): importing torch and Triton costs seconds, more than most checks.
So one server per grading process imports everything once and forks a fresh child for each
check. The child is then a fresh process as before: nothing of the notebook, nor of any earlier
check, is in it (the server never holds a case, a seed, a reference or a CUDA context), and
everything above holds unchanged; only its parent is the server. The server cannot be read or
traced by the children it forks (not dumpable), ends its children when it ends, and ends when the
grading process goes (its socket closes). `GPUPRINCIPLES_SANDBOX=spawn` turns it off; any fault of
the server's turns it off for that check, which then spawns.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from .processes import WORKER, become_subreaper, child_environment, kill_tree, prctl

# ---------------------------------------------------------------------------------------------
# The fork server: the server's side (run in `python -m gpuprinciples.grader.worker --serve FD`)
# ---------------------------------------------------------------------------------------------

PR_SET_DUMPABLE = 4
_EXIT = struct.Struct("<i")
_PID = struct.Struct("<q")


def harden_server() -> None:
    """Children cannot read or trace the server's memory (not dumpable), and orphans come to it."""
    prctl(PR_SET_DUMPABLE, 0)
    become_subreaper()


def probe_fork_cuda() -> str | None:
    """On a GPU: can a process forked from this one use CUDA? (It cannot once this process has
    initialised CUDA: the server must not have.) None when it can, else a sentence."""
    import torch
    if torch.cuda.is_initialized():
        return "the fork server initialised CUDA"
    pid = os.fork()
    if pid == 0:
        try:
            torch.cuda.init()
            ok = float(torch.ones(4, device="cuda").sum()) == 4.0
        except BaseException:  # noqa: BLE001
            ok = False
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    return None if os.waitstatus_to_exitcode(status) == 0 else "a forked process could not use CUDA"


def serve_forks(sock: socket.socket, child) -> None:
    """Fork `child(request, fds)` (which never returns) for each request on `sock`, a JSON object with
    file descriptors, the last of them a status pipe: send back the child's pid, and its exit code
    down that pipe when it ends. A request without descriptors ("retire"): fork no more, and end once
    every child has ended. The socket closing (whoever asked is gone): end at once, with every child."""
    forked: dict[int, int] = {}  # pid -> the write end of its status pipe
    retiring = False
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the select below
    try:
        while not (retiring and not forked):
            readable, _, _ = select.select([sock, wake_r], [], [])
            if wake_r in readable:
                os.read(wake_r, 4096)
                _reap(forked)
            if sock not in readable:
                continue
            try:
                data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
            except OSError:
                break
            if not data:
                break
            if not fds:
                retiring = True
                continue
            *passed, status_w = fds
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (wake_r, wake_w, status_w, *forked.values()):
                    os.close(fd)
                prctl(PR_SET_DUMPABLE, 1)  # the child itself is an ordinary process again
                child(json.loads(data), passed)
            for fd in passed:
                os.close(fd)
            forked[pid] = status_w
            sock.sendall(_PID.pack(pid))
    finally:
        for pid in list(forked):
            kill_tree(pid)
        time.sleep(0.05)
        _reap(forked)


def _reap(forked: dict[int, int]) -> None:
    """Collect every child that ended: its exit code goes down its status pipe; an orphan that came
    to this subreaper from a check whose child died is ended too."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            break
        fd = forked.pop(pid, None)
        if fd is not None:
            try:
                os.write(fd, _EXIT.pack(os.waitstatus_to_exitcode(status)))
            except OSError:  # nobody reads it any more: the server carries on
                pass
            finally:
                os.close(fd)
    for orphan in psutil.Process().children():
        if orphan.pid not in forked:
            kill_tree(orphan.pid)


# ---------------------------------------------------------------------------------------------
# The fork server: the grader's side
# ---------------------------------------------------------------------------------------------


def _package_stamp() -> float:
    """The newest change to this package's files: a server that imported older code is replaced."""
    return max((p.stat().st_mtime for p in Path(__file__).resolve().parent.parent.rglob("*.py")), default=0.0)


class ForkServerUnavailable(Exception):
    pass


class _Served:
    """A child forked by the server, with the parts of `subprocess.Popen` that a Sandbox uses."""

    def __init__(self, pid: int, status_fd: int):
        self.pid = pid
        self.returncode: int | None = None
        self._status = status_fd

    def poll(self) -> int | None:
        if self.returncode is None and self._status >= 0 and select.select([self._status], [], [], 0)[0]:
            self._collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and self._status >= 0:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("gpuprinciples worker", timeout)
            self._collect()
        return self.returncode

    def _collect(self) -> None:
        data = os.read(self._status, _EXIT.size)
        # no exit code: the server itself is gone (and the child with it, or soon killed by its tree)
        self.returncode = _EXIT.unpack(data)[0] if len(data) == _EXIT.size else -signal.SIGKILL
        os.close(self._status)
        self._status = -1


class ForkServer:
    """One warm server per grading process, environment and state of this package's files (a change
    to either starts a new one)."""

    _current: "ForkServer | None" = None
    _retired: list = []  # kept until they end: closing a server's socket would end its children at once
    _refused: dict = {}  # environment -> why the server could not start there
    _lock = threading.Lock()
    # Variables read when torch, Triton and this package are imported: the server has them from its
    # start, so a change needs a new server. Every other variable reaches each child as it is now.
    IMPORT_TIME = ("TRITON", "CUDA", "GPUPRINCIPLES", "PYTORCH", "TORCH", "OMP_", "MKL", "OPENBLAS", "PYTHON",
                   "LD_", "NVIDIA", "PATH")

    def __init__(self, env: dict, key: tuple, start_timeout: float = 180.0):
        self.key, self.owner = key, os.getpid()
        self.lock = threading.Lock()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(env, PYTORCH_NVML_BASED_CUDA_CHECK="1")  # "is there a GPU?" without initialising CUDA
        # what the server (and a child, before its own log is open) prints, for a bug report
        self.log_path = os.path.join(tempfile.gettempdir(), f"gpuprinciples-forkserver-{os.getuid()}.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", WORKER, "--serve", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), env=env, cwd=tempfile.gettempdir(), stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True)
        theirs.close()
        self.sock = mine
        self.sock.settimeout(start_timeout)
        try:
            hello = self.sock.recv(4096)
        except OSError:
            hello = b""
        if hello[:1] != b"R":
            self.stop()
            raise ForkServerUnavailable(hello[1:].decode(errors="replace") or "the fork server did not start")
        self.sock.settimeout(30.0)

    @classmethod
    def get(cls) -> "ForkServer | None":
        """The server for this process and environment, started if need be; None where it cannot run."""
        if os.environ.get("GPUPRINCIPLES_SANDBOX", "fork") == "spawn" or not hasattr(socket, "send_fds"):
            return None
        env = child_environment()
        key = (sys.executable, _package_stamp(),
               tuple(sorted((k, v) for k, v in env.items() if k.startswith(cls.IMPORT_TIME))))
        with cls._lock:
            server = cls._current
            if server is not None and (server.key != key or server.owner != os.getpid() or not server.alive()):
                if server.owner == os.getpid():
                    server.retire()  # its children still running (other threads' checks) finish first
                    cls._retired.append(server)
                cls._current = server = None
            cls._retired = [old for old in cls._retired if old.alive()]
            if server is None and key not in cls._refused:
                try:
                    server = cls._current = cls(env, key)
                except ForkServerUnavailable as exc:
                    cls._refused[key] = str(exc)
            return server

    @classmethod
    def warm_up_in_background(cls) -> None:
        """Start the server now, in a thread, so that the first check finds it ready (a notebook's
        `import gpuprinciples` comes minutes before its first check)."""
        threading.Thread(target=cls.get, name="gpuprinciples-fork-server", daemon=True).start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, in_fd: int, out_fd: int, log_path: str, cwd: str) -> _Served | None:
        """A fresh child reading `in_fd` and writing `out_fd`; None if the server failed (then spawn)."""
        status_r, status_w = os.pipe()
        try:
            with self.lock:
                request = json.dumps({"log": log_path, "cwd": cwd, "env": child_environment()}).encode()
                socket.send_fds(self.sock, [request], [in_fd, out_fd, status_w])
                reply = self.sock.recv(_PID.size, socket.MSG_WAITALL)
            if len(reply) != _PID.size:
                raise OSError("the fork server went away")
        except OSError:
            os.close(status_r)
            self.stop()
            return None
        finally:
            os.close(status_w)
        return _Served(_PID.unpack(reply)[0], status_r)

    def retire(self) -> None:
        """Fork no more; the server ends once its children have."""
        try:
            with self.lock:
                self.sock.sendall(b"retire")
        except OSError:
            self.stop()

    def stop(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait()


class Zygote:
    """A process forked from this one while it holds nothing secret, which forks fresh processes later.

    The grading child starts one before it loads learner code or receives a case (worker.run). A rank
    of a distributed exercise is then forked from it and sent only its own share of the data: nothing
    of the other ranks' data, nor of the child's frames, is in the rank for learner code to find, and a
    rank costs a fork (multiprocessing's forkserver would start and import a new interpreter).
    """

    current: "Zygote | None" = None

    def __init__(self, close_fds: tuple[int, ...] = ()):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            mine.close()
            for fd in close_fds:  # the grader's pipes: nothing forked from here may touch them
                os.close(fd)
            serve_forks(theirs, _run_payload)
            os._exit(0)
        theirs.close()
        self.pid, self.sock, self.lock = pid, mine, threading.Lock()

    def start(self, fn, args: tuple, folder: str, died: str | None = None) -> _Served:
        """fn(*args) in a fresh fork of the zygote (both pickled, by reference for functions). If the
        fork fails before `fn` returns (the payload cannot be loaded, `fn` raises past its own handler),
        the traceback is written to `died` (a path), so the caller can say what happened."""
        import pickle
        path = os.path.join(folder, f"payload-{secrets.token_hex(8)}.pkl")
        with open(path, "wb") as f:
            pickle.dump((fn, args), f, protocol=pickle.HIGHEST_PROTOCOL)
        status_r, status_w = os.pipe()
        try:
            with self.lock:
                request = {"payload": path, "died": died}
                socket.send_fds(self.sock, [json.dumps(request).encode()], [status_w])
                reply = self.sock.recv(_PID.size, socket.MSG_WAITALL)
        finally:
            os.close(status_w)
        if len(reply) != _PID.size:
            os.close(status_r)
            raise OSError("the zygote went away")
        return _Served(_PID.unpack(reply)[0], status_r)


PAYLOAD_FAILED = 70  # the exit code of a zygote's fork whose payload failed (its traceback: request["died"])


def _run_payload(request: dict, fds: list[int]) -> None:
    import pickle
    import traceback
    code = PAYLOAD_FAILED
    try:
        with open(request["payload"], "rb") as f:
            fn, args = pickle.load(f)
        os.remove(request["payload"])
        fn(*args)
    except BaseException:  # noqa: BLE001 - an exit code alone would hide what happened: keep the traceback
        if request.get("died"):
            try:
                with open(request["died"], "w") as f:
                    f.write(traceback.format_exc())
            except OSError:
                pass
    finally:
        os._exit(code)
