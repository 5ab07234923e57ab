"""What a learner's call did where the counters' Python hooks do not reach (the grading child's side).

The counters (counters.py) see PyTorch operators through a dispatch mode and Triton launches through
Triton's hooks. A mode can be switched off from Python (`torch._C._DisableTorchDispatch()`,
`_disable_current_modes()`) and does not follow the call into a thread it starts. So each call the
grader makes is also watched from below:

* PyTorch's profiler, with its RecordFunction callbacks registered for every thread
  (`_ExperimentalConfig(profile_all_threads=True)`), records every operator the dispatcher runs,
  whatever Python modes are active; on a GPU, CUPTI's activity record adds every kernel on every
  stream, by name. A marker recorded before and after the call proves the profiler was on for all of
  it (switching it off, or RecordFunction with it, loses the marker) and the switch that turns
  RecordFunction off is replaced by one that notes the attempt.
* the threads alive before and after the call (`sys._current_frames`, which lists threads started by
  any path), the threads started during it (the functions that start one are wrapped), the child
  processes alive after it (psutil), and the processes started during it (audit events, which Python
  code cannot remove, and the spawn primitive multiprocessing uses).

`Watch` gathers raw evidence only (names and counts); honesty.py, in the grader, turns it into
sentences. Nothing here judges.
"""

from __future__ import annotations

import _thread
import csv
import glob
import os
import site
import sys
import sysconfig
import threading
from collections import Counter

import torch

try:
    import psutil
except ImportError:  # pragma: no cover - a dependency; without it child processes are not listed
    psutil = None

_MARK = "gpuprinciples::call"
_STDLIB = tuple(os.path.realpath(p) for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})
# a Python installed inside its environment keeps site-packages under the standard library's folder (the H200
# image: /opt/torch/.venv/lib/python3.12/site-packages): installed packages are not the standard library;
# installed however (`pip install --user` puts them in the user's site-packages)
_SITE_DIRS = {os.path.realpath(p) for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                                             site.getusersitepackages(), *getattr(site, "getsitepackages", list)())}


def _packages_beside(folder: str) -> set[str]:
    """What pip installed into a folder on sys.path that is no site-packages (`pip install --target DIR`, DIR
    on PYTHONPATH; a carried wheel on the GPU machine): each package's own folder (`DIR/tqdm/`) or module
    (`DIR/six.py`), named by its dist-info, never the whole folder, where a learner's own files may sit."""
    found = set()
    for info in glob.glob(os.path.join(glob.escape(folder), "*.dist-info")):
        try:  # top_level.txt names a package or a module: either
            tops = [p for top in _read(info, "top_level.txt").split() for p in (top + "/", top + ".py")]
            # else RECORD lists each file pip wrote: its first folder, or the file itself. Read as text, not with
            # `Distribution.files`, which from Python 3.12 drops each file it does not find (a stat each)
            tops = tops or [row[0].split("/")[0] + "/" if "/" in row[0] else row[0]
                            for row in csv.reader(_read(info, "RECORD").splitlines()) if row]
        except (OSError, UnicodeDecodeError, csv.Error):  # an unreadable dist-info names nothing: the
            continue  # grading child must still start
        found.update(os.path.join(folder, top) for top in tops
                     if top != "../" and not top.rstrip("/").endswith(".dist-info"))
    return found


def _read(info: str, name: str) -> str:
    """A dist-info's file, or "" where it has none."""
    try:
        with open(os.path.join(info, name), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


# installed packages: the site-packages folders first, then what pip put in other folders on sys.path
_SITE = tuple(sorted(_SITE_DIRS)) + tuple(sorted(
    {p for entry in {os.path.realpath(e) for e in sys.path if e} - _SITE_DIRS for p in _packages_beside(entry)}))
_OURS = tuple(os.path.realpath(os.path.dirname(m.__file__)) for m in (torch,) if getattr(m, "__file__", None))
_current_frames, _getframe = sys._current_frames, sys._getframe

try:
    import triton as _triton
    _OURS += (os.path.realpath(os.path.dirname(_triton.__file__)),)
except ImportError:  # pragma: no cover
    pass
_OURS += (os.path.realpath(os.path.dirname(os.path.dirname(__file__))),)  # the whole package, not measure/ alone

# what the learner's code did while armed (at import or during a call): ("thread" | "process" | "library"
# | "profiler", words); one list for every thread
_noted: list[tuple[str, str]] = []
_armed = [False]
_internal_threads: set = set()  # threads PyTorch or Triton started during a call: not the learner's


def _learners_frame(skip: int = 2):
    """Whose code started this: walking out from the innermost frame past the standard library and other
    installed packages (tqdm, joblib: they act for whoever called them), the first frame of PyTorch,
    Triton or this package makes it theirs (None: Inductor compiling a baseline starts tqdm's monitor
    thread), the first frame of any other code makes it the learner's (that frame is returned)."""
    frame = _getframe(skip)
    while frame is not None:
        path = os.path.realpath(frame.f_code.co_filename)
        if path.startswith(_OURS):
            return None
        library = path.startswith(_SITE) or path.startswith(_STDLIB) or path.startswith("<frozen")
        if not library:
            return frame
        frame = frame.f_back
    return None


def _note(kind: str, what: str) -> None:
    if _armed[0]:
        frame = _learners_frame(3)
        if frame is not None:
            _noted.append((kind, f"{what} (line {frame.f_lineno} of {os.path.basename(frame.f_code.co_filename)})"))


_PROCESS_EVENTS = {"os.fork": "os.fork", "os.forkpty": "os.forkpty", "os.posix_spawn": "os.posix_spawn",
                   "os.spawn": "os.spawn", "os.system": "os.system", "subprocess.Popen": "subprocess.Popen",
                   "os.exec": "os.exec"}
_LIBRARY_EVENTS = {"ctypes.dlopen"}


def _audit(event: str, args) -> None:
    if not _armed[0]:
        return
    if event in _PROCESS_EVENTS:
        _note("process", _PROCESS_EVENTS[event])
    elif event in _LIBRARY_EVENTS:
        _note("library", f"ctypes loaded {args[0] if args else 'a library'}")


def _wrap_thread_start(module, name: str) -> None:
    original = getattr(module, name, None)
    if original is None or getattr(original, "_gp_watched", False):
        return

    def start(*args, **kwargs):
        ours = _armed[0] and _learners_frame(2) is None  # PyTorch's or Triton's own thread
        _note("thread", "started a thread")
        ident = original(*args, **kwargs)
        key = ident if isinstance(ident, int) else getattr(ident, "ident", None)
        # thread ids are reused once a thread ends: a new thread's id is PyTorch's only while PyTorch started it
        (_internal_threads.add if ours else _internal_threads.discard)(key)
        return ident

    start._gp_watched = True
    setattr(module, name, start)


def _wrap_spawn() -> None:
    try:
        import _posixsubprocess
    except ImportError:  # pragma: no cover - not POSIX
        return
    original = _posixsubprocess.fork_exec
    if getattr(original, "_gp_watched", False):
        return

    def fork_exec(*args, **kwargs):
        _note("process", "started a process")
        return original(*args, **kwargs)

    fork_exec._gp_watched = True
    _posixsubprocess.fork_exec = fork_exec


def _wrap_record_function_switch() -> None:
    """Turning RecordFunction off hides operators from the profiler on that thread: the switch notes the
    attempt instead (the grader fails it) and does nothing."""
    import torch.autograd
    original = torch._C._autograd._enable_record_function
    if getattr(original, "_gp_watched", False):
        return

    def switch(enable: bool) -> None:
        if not enable:
            _noted.append(("profiler", "turned PyTorch's RecordFunction off (torch.autograd._enable_record_function)"))

    switch._gp_watched = True
    for space in (torch._C._autograd, torch.autograd):
        if getattr(space, "_enable_record_function", None) is original:
            space._enable_record_function = switch


def install() -> None:
    """Once, in the grading child, before the learner's module is imported (an audit hook stays)."""
    if getattr(install, "done", False):
        return
    install.done = True
    sys.addaudithook(_audit)
    for module, name in ((_thread, "start_new_thread"), (_thread, "start_joinable_thread"),
                         (threading, "_start_new_thread"), (threading, "_start_joinable_thread")):
        _wrap_thread_start(module, name)
    _wrap_spawn()
    _wrap_record_function_switch()


# ---------------------------------------------------------------------------------------------
# Threads and processes alive
# ---------------------------------------------------------------------------------------------


def _thread_names() -> dict[int, str]:
    names = {t.ident: t.name for t in threading.enumerate()}
    return {ident: names.get(ident, "a thread started with _thread") for ident in _current_frames()}


def _children() -> dict[int, str]:
    if psutil is None:
        return {}
    out = {}
    try:
        for child in psutil.Process().children(recursive=True):
            try:
                out[child.pid] = " ".join(child.cmdline()[:4]) or child.name()
            except psutil.Error:
                out[child.pid] = "a process"
    except psutil.Error:  # pragma: no cover
        pass
    return out


def leftovers(threads_before: dict[int, str], children_before: dict[int, str]) -> dict:
    """Threads and processes alive now that were not before (the grader's own excepted)."""
    return {"threads_alive": sorted(n for i, n in _thread_names().items()
                                    if i not in threads_before and i not in _internal_threads),
            "processes_alive": sorted(n for p, n in _children().items() if p not in children_before)}


def import_leftovers(threads_before: dict[int, str], children_before: dict[int, str]) -> dict:
    """What importing the learner's module left behind: threads, processes, dispatch and function
    modes, autograd hooks, and what it started while it ran."""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    found = leftovers(threads_before, children_before)
    found["modes"] = [type(m).__name__ for m in (*_get_current_dispatch_mode_stack(),
                                                 *_get_current_function_mode_stack())]
    found["hooks"] = [name for name, on in (
        ("saved-tensor hooks", bool(torch._C._autograd._top_saved_tensors_default_hooks(False))
         if hasattr(torch._C._autograd, "_top_saved_tensors_default_hooks") else False),
        ("a global module hook", any(bool(getattr(torch.nn.modules.module, h, {})) for h in (
            "_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
            "_global_module_registration_hooks", "_global_parameter_registration_hooks"))),
    ) if on]
    found["noted"] = take_noted()
    return found


class armed:
    """`with armed():` what the learner's code starts in the block is noted (its module's import)."""

    def __enter__(self):
        _noted.clear()
        _armed[0] = True

    def __exit__(self, *exc):
        _armed[0] = False
        return False


def take_noted() -> list[str]:
    out = [f"{kind}: {what}" for kind, what in _noted]
    _noted.clear()
    return out


def snapshot() -> tuple[dict[int, str], dict[int, str]]:
    return _thread_names(), _children()


# ---------------------------------------------------------------------------------------------
# The profiler
# ---------------------------------------------------------------------------------------------


_visible_cache: dict[tuple[str, str], bool] = {}


def dispatch_visible(name: str, overload: str = "") -> bool:
    """Whether a dispatch mode sees this operator itself (not only the operators it decomposes into):
    every registered operator but those with a CompositeImplicitAutograd kernel."""
    key = (name, overload)
    if key not in _visible_cache:
        visible = False
        namespace, _, op = name.partition("::")
        if op and namespace not in ("profiler",):
            try:
                packet = getattr(getattr(torch.ops, namespace), op)
                # the profiler does not say which overload ran: an operator is visible when one of its
                # functional overloads (out= variants are not what a call without out= reaches) is not implicit
                overloads = [getattr(packet, o) for o in ([overload] if overload else packet.overloads())]
                implicit = torch._C.DispatchKey.CompositeImplicitAutograd
                visible = any(not o.has_kernel_for_dispatch_key(implicit) for o in overloads
                              if overload or not any(a.is_out for a in o._schema.arguments))
            except Exception:  # noqa: BLE001 - not an operator: a user annotation, a runtime call
                visible = False
        _visible_cache[key] = visible
    return _visible_cache[key]


def _short(name: str) -> str:
    """The counters' spelling of an operator: aten and prims without their namespace."""
    namespace, _, op = name.partition("::")
    return op if namespace in ("aten", "prims") else name


def _profiler_activities(gpu: bool):
    from torch.profiler import ProfilerActivity
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])


def _all_threads_config():
    from torch._C._profiler import _ExperimentalConfig
    try:
        return _ExperimentalConfig(profile_all_threads=True), True
    except TypeError:  # pragma: no cover - a PyTorch without it: only the calling thread is seen
        return _ExperimentalConfig(), False


class Watch:
    """`with Watch(gpu) as w: fn(...)`, then `w.evidence`: the operators the dispatcher ran (outermost
    of those a dispatch mode sees, on every thread), on a GPU the kernels by name, the threads and
    processes started or left, and whether the profiler was on for the whole call."""

    def __init__(self, gpu: bool = False, profile: bool = True):
        self.gpu, self.profile = gpu, profile
        self.evidence: dict = {}

    def __enter__(self):
        self.before = snapshot()
        _noted.clear()
        self.prof = None
        if self.profile:
            from torch.profiler import profile
            config, self.all_threads = _all_threads_config()
            self.prof = profile(activities=_profiler_activities(self.gpu), experimental_config=config)
            self.prof.__enter__()
            with torch.autograd.profiler.record_function(_MARK):
                pass
        _armed[0] = True
        return self

    def __exit__(self, *exc):
        _armed[0] = False
        ev = self.evidence
        if self.prof is not None:
            stopped = True
            try:
                with torch.autograd.profiler.record_function(_MARK):
                    pass
                self.prof.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 - stopped by someone else: the evidence says so
                stopped = False
            ev.update(self._read(stopped))
        ev.update(leftovers(*self.before))
        ev["noted"] = take_noted()
        return False

    def _read(self, stopped: bool) -> dict:
        events = []
        if stopped:
            try:
                events = list(self.prof.profiler.kineto_results.events())
            except Exception:  # noqa: BLE001
                stopped = False
        marks = sum(1 for e in events if e.name() == _MARK)
        cpu = [e for e in events if e.device_type() == torch.autograd.DeviceType.CPU]
        ops, elsewhere = Counter(), Counter()
        by_thread: dict[int, list] = {}
        for e in cpu:
            by_thread.setdefault(e.start_thread_id(), []).append(e)
        threads = {}
        for events_here in by_thread.values():
            events_here.sort(key=lambda e: (e.start_ns(), -e.duration_ns()))
            open_until = -1
            for e in events_here:
                if e.start_ns() < open_until:
                    continue  # inside an operator already counted: its own work
                if dispatch_visible(e.name(), _overload(e)):
                    name = _short(e.name())
                    ops[name] += 1
                    open_until = e.start_ns() + e.duration_ns()
                    if e.start_thread_id() != self._caller_tid(cpu):
                        elsewhere[name] += 1
            threads[events_here[0].start_thread_id()] = len(events_here)
        out = {"profiled": True, "all_threads": self.all_threads, "profiler_on": stopped and marks >= 2,
               "ops": dict(ops), "ops_elsewhere": dict(elsewhere)}
        if self.gpu:
            out.update(_kernels(events))
        return out

    def _caller_tid(self, cpu) -> int:
        """The profiler's id of the calling thread: the thread that recorded the markers."""
        if not hasattr(self, "_tid"):
            self._tid = next((e.start_thread_id() for e in cpu if e.name() == _MARK), -1)
        return self._tid


def _overload(event) -> str:
    try:
        return event.overload_name() or ""
    except Exception:  # noqa: BLE001 - older PyTorch
        return ""


def _kernels(events) -> dict:
    """On a GPU: every kernel by name, and which of them an operator launched (the profiler links a kernel to
    the innermost operator whose code launched it: its `linked_correlation_id` is that operator's id)."""
    cuda = torch.autograd.DeviceType.CUDA
    operators = {e.correlation_id(): e.name() for e in events
                 if e.device_type() != cuda and "::" in e.name() and e.name() != _MARK}
    kernels, under_ops = Counter(), Counter()
    for e in events:
        if e.device_type() != cuda or _is_copy(e.name()) or _annotation(e):
            continue
        kernels[e.name()] += 1
        if e.linked_correlation_id() in operators:
            under_ops[e.name()] += 1
    return {"kernels": dict(kernels), "kernels_under_ops": dict(under_ops)}


def _annotation(event) -> bool:
    """A `record_function` range (lesson 03 teaches them) as the GPU's timeline shows it: a label, not a kernel."""
    try:
        return bool(event.is_user_annotation())
    except Exception:  # noqa: BLE001 - older PyTorch
        return False


def _is_copy(name: str) -> bool:
    return name.startswith(("Memcpy", "Memset", "cudaMemcpy", "cudaMemset"))
