"""The child process that learner code runs in, and the process trees it may leave behind.

One implementation for every place the course runs code it does not trust or must not leave
running: the grader's child (`Sandbox`), the child's own clean-up (`end_descendants`), and the
distributed launcher (`kill_tree`). A `Sandbox` is

* a fresh interpreter running `python -m gpuprinciples.grader.worker` (spawned, never forked from the
  notebook: a fork cannot use CUDA once the notebook has initialised it), in a session and a
  temporary folder of its own, its prints going to a log the report shows;
* asked one request at a time through a pipe; each request is followed in that pipe by a fresh
  nonce that the child reads only when its reply is ready (after the learner's calls for the
  request have returned), so a reply without it was written by learner code and is refused;
* held to a deadline for everything it is asked: a hang, a crash or a garbled reply ends the
  sandbox, and `failure` says why in a sentence. The deadline counts the learner's time: the seconds
  the child reports spending on the grader's own compiles for the GPU (channel.Progress: cold, a
  backward kernel takes seconds each on a laptop) move it later, by at most CREDIT_LIMITS more limits in all;
* killed with every process below it when it closes. The child is a subreaper (Linux), so the
  orphans its learner code leaves are its descendants, and found.

The warm start is forkserver.py's.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import channel
from .forkserver import ForkServer
from .processes import WORKER, child_environment, kill_tree

# a cold compile of lesson 12's backward for sm_90 takes about 80 s on an idle 2-core laptop, and several times
# that on one running other work: room for it, while a forged Progress still cannot hold a hang off for ever
CREDIT_LIMITS = 3

# PyTorch's profiler (kineto) logs each start and stop to stderr in this form ("USDT:2026-12-05 08:16:24 26142:26142
# SyncActivityProfilerHandler.cpp:52] profiler_start" in torch 2.13, whatever KINETO_LOG_LEVEL says). The grader's
# watch starts it around every call, so without this filter each report showed ten such lines as the learner's.
PROFILER_LOG = re.compile(r"^[A-Z]+:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ \w+\.cpp:\d+\] .*\n?", re.MULTILINE)

# ---------------------------------------------------------------------------------------------
# The sandbox
# ---------------------------------------------------------------------------------------------


class Sandbox:
    """A fresh `gpuprinciples.grader.worker` with a deadline; see the module's docstring.

        with Sandbox(limit=120) as box:
            box.start(job)                       # a channel.Job
            ready = box.receive("loading your code", (channel.Ready, channel.LoadError))
            result = box.request({"cmd": "case", ...}, "running case 3", (channel.CaseResult,))
            # None: box.failure says why, and the child is gone
    """

    def __init__(self, limit: float, longer: str = "`check(..., timeout=SECONDS)`"):
        self.limit = limit
        self.longer = longer  # how the caller asks for a longer limit (the CLI has its own flag)
        self.deadline = float("inf")  # the limit counts from the child's start
        self.credited = 0.0  # seconds of the grader's own compiling, added to the deadline
        self.failure: str | None = None
        self.proc: subprocess.Popen | None = None
        self.nonce = ""
        self._workdir = tempfile.TemporaryDirectory(prefix="gpuprinciples-")
        self.workdir = self._workdir.name
        self.log_path = os.path.join(self.workdir, "output.log")
        self.to_child = self.from_child = -1

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, job: "channel.Job") -> None:
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        with open(self.log_path, "wb") as log:
            server = ForkServer.get()
            self.proc = server.fork(to_child_r, from_child_w, self.log_path, self.workdir) if server else None
            if self.proc is None:  # no warm server here: a fresh interpreter
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", WORKER, str(to_child_r), str(from_child_w), self.log_path],
                    pass_fds=(to_child_r, from_child_w), env=child_environment(), cwd=self.workdir,
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        os.close(to_child_r)
        os.close(from_child_w)
        self.deadline = time.monotonic() + self.limit
        self._ask(job.to_wire())

    def _ask(self, request: dict) -> None:
        """Send a request, then the nonce its reply must carry (the child reads it only to reply)."""
        self.nonce = secrets.token_hex(16)
        channel.send_command(self.to_child, request)
        channel.send_command(self.to_child, {"cmd": "nonce", "nonce": self.nonce})

    def request(self, request: dict, doing: str, expected: tuple) -> "channel.Message | None":
        if self.failure is not None:  # the child is gone already (a crash, a timeout): `failure` says why
            return None
        try:
            self._ask(request)
        except OSError:  # it died since its last reply: receive() finds the pipe closed and says how
            pass
        return self.receive(doing, expected)

    def receive(self, doing: str, expected: tuple) -> "channel.Message | None":
        """The child's reply, parsed as one of the `expected` message types (channel.py), or None with
        `failure` set and the child gone."""
        try:
            message = channel.recv_data(self.from_child, self.deadline)
            while isinstance(message, dict) and message.get("event") == channel.Progress.EVENT:
                self._credit(channel.parse(message, (channel.Progress,)).grader_s)
                message = channel.recv_data(self.from_child, self.deadline)
            if isinstance(message, dict) and message.get("nonce") == self.nonce:
                return channel.parse(message, expected)
            self.failure = (f"the grader received a message that did not answer its request while {doing} "
                            "(forged: it lacks the nonce the grader sent): your code wrote into the grader's "
                            "result pipe. Nothing it sent was trusted.")
        except channel.ChannelTimeout:
            spent = f" ({self.credited:.0f} s more went to the grader's own compiling)" if self.credited >= 1 else ""
            self.failure = (f"did not finish within {self.limit:g} s{spent} (while {doing}): a loop that never ends, "
                            f"or far more work than needed? The grader stopped it; your notebook is fine. "
                            f"({self.longer} allows longer.)")
        except channel.ChannelClosed:
            self._kill()
            code = self.proc.returncode
            how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
            tail = self.output().strip().splitlines()[-3:]
            self.failure = (f"the process running your code crashed ({how}) while {doing}; your notebook is fine."
                            + (" Its last words: " + " | ".join(tail) if tail else ""))
        except Exception:  # noqa: BLE001 - a message that is not ours: refused, never executed
            self.failure = (f"the grader received a garbled message while {doing}: your code wrote into a "
                            "file descriptor it does not own. Nothing it sent was run.")
        self._kill()
        return None

    def _credit(self, seconds: float) -> None:
        """The grader's compiling in the child took `seconds`: not the learner's time, up to CREDIT_LIMITS limits in
        all (learner code can forge the message, to no more effect than that)."""
        most = CREDIT_LIMITS * self.limit - self.credited
        seconds = min(max(seconds, 0.0), most) if seconds == seconds else 0.0  # NaN: nothing
        self.credited += seconds
        self.deadline += seconds

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_tree(self.proc.pid)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()

    def close(self) -> None:
        """Ask the child to end what its learner code started and exit; then kill what is left."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                channel.send_command(self.to_child, {"cmd": "exit"})
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                pass
        self._kill()
        for fd in (self.to_child, self.from_child):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.to_child = self.from_child = -1
        self._workdir.cleanup()

    def output(self) -> str:
        """The last 4000 characters the child printed, PyTorch's profiler log taken out."""
        try:
            return PROFILER_LOG.sub("", Path(self.log_path).read_text(errors="replace"))[-4000:]
        except OSError:
            return ""
