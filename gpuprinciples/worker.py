"""The child process that runs a learner's function: `python -m gpuprinciples.worker IN_FD OUT_FD LOG`.

It is started fresh for every check (spawned, never forked), so a hang, a crash or an illegal
memory access ends this process and never the notebook's. It does as little judging as it can:
it runs the function on the cases the grader sends and sends back what came out and what the
counters saw; the grader compares. Its own primitives are taken before learner code is imported,
and it watches the modules the grading depends on for patching.

Every reply answers one request, and carries the nonce the grader sent for it. The worker reads
that nonce from its input pipe only when the reply is ready, after the learner's calls for that
request have returned: while learner code runs, the nonce is in the pipe, not in this process,
so a message written from learner code (into a duplicate of the result pipe, say) cannot carry
it and the grader refuses it as forged.

It makes itself a child subreaper (Linux): a process the learner's code starts and orphans, even
in a session of its own, stays its descendant, and is killed and reaped when the check ends.

What this does not stop (the learner's code runs in this very process, so it can read or change
anything this module holds): code that reads the grader's input pipe and relays it, or that
rewrites this module's memory or a recording with ctypes, or a thread that edits a reply while
it is being built. Those are deliberate attacks on the grader's own process; the watch for
patched functions, the grader's checks of the output it computes itself, and the timing checks
make the simple forms fail, not all forms.
"""

from __future__ import annotations

import inspect
import os
import signal
import sys
import time
import traceback
import warnings

# Primitives first, before anything of the learner's can run.
_os_dup2 = os.dup2
_os_kill = os.kill
_os_waitpid = os.waitpid
_perf_counter = time.perf_counter

import torch  # noqa: E402

from . import channel, counters, runtime, timing  # noqa: E402  (timing: its clocks, taken now)
from .exercises import get as get_exercise  # noqa: E402
from .exercises.base import cached_inputs  # noqa: E402

_clone = torch.Tensor.clone
_equal = torch.equal

WATCHED = {  # namespaces whose attributes learner code must not replace
    "torch": torch,
    "torch.Tensor": torch.Tensor,
    "torch.nn.functional": torch.nn.functional,
    "torch.cuda": torch.cuda,
    "time": __import__("time"),
    "gpuprinciples.counters": counters,
    "gpuprinciples.channel": channel,
    "gpuprinciples.timing": timing,
    "gpuprinciples.runtime": runtime,
    "torch.cuda.Event": torch.cuda.Event,
    "torch.cuda.Stream": torch.cuda.Stream,
    "gpuprinciples.worker": sys.modules[__name__],  # this module runs as __main__
}


def _snapshot() -> dict[str, int]:
    """ids of the functions and classes learner code could swap. For classes, inherited methods
    count too (`torch.Tensor.cos` lives on a base class until someone assigns it)."""
    snap = {}
    for prefix, space in WATCHED.items():
        names = dir(space) if isinstance(space, type) else list(vars(space))
        for name in names:
            # the stored object, not what getattr builds (a classmethod gives a new bound method each time)
            value = inspect.getattr_static(space, name, None) if isinstance(space, type) else getattr(space, name, None)
            if (callable(value) or isinstance(value, (classmethod, staticmethod))) and not name.startswith("__"):
                snap[f"{prefix}.{name}"] = id(value)
    if runtime.INTERPRETER:
        interp = runtime.interpreter_module()
        for name in list(runtime.interpreter_memory_methods()) + ["__call__"]:
            owner = interp.GridExecutor if name == "__call__" else interp.InterpreterBuilder
            snap[f"triton.interpreter.{owner.__name__}.{name}"] = id(getattr(owner, name))
        for name, value in vars(interp.interpreter_builder).items():  # an instance attribute shadows the class
            if callable(value):
                snap[f"triton.interpreter.interpreter_builder.{name}"] = id(value)
    return snap


def _tampered(before: dict[str, int], _snapshot=_snapshot) -> list[str]:
    after = _snapshot()
    changed = {k for k, v in before.items() if after.get(k) != v}
    added = {k for k in after.keys() - before.keys()
             if k.startswith(("torch.Tensor.", "torch.cuda.Event.", "triton.interpreter."))}
    return sorted(changed | added)


def _to_device(value, device: str):
    """Move a case's arguments to the grading device, keeping strided views strided."""
    if isinstance(value, torch.Tensor):
        if device == "cpu":
            return value
        if value.is_contiguous():
            return value.to(device)
        flat = torch.empty(0, dtype=value.dtype).set_(value.untyped_storage())
        return flat.to(device).as_strided(value.shape, value.stride(), value.storage_offset())
    if isinstance(value, tuple):
        return tuple(_to_device(v, device) for v in value)
    if isinstance(value, list):
        return [_to_device(v, device) for v in value]
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------------------
# Processes the learner's code leaves behind
# ---------------------------------------------------------------------------------------------


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process, not to init (Linux; no root needed)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    PR_SET_CHILD_SUBREAPER = 36
    return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, theirs, ...), from /proc; [] where there is no /proc."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat.rsplit(b")", 1)[1].split()[1])  # the name in (...) may hold spaces
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def end_descendants() -> None:
    """Kill every descendant of this process and reap them, until none is left. As a subreaper,
    this process inherits the orphans of the ones it kills, so a second round finds those."""
    me = os.getpid()
    for _ in range(200):
        found = descendants(me)
        if not found:
            return
        for pid in found:
            try:
                _os_kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                pid, _ = _os_waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        time.sleep(0.005)


def _portable(value):
    """What can cross to the grader: plain tensors on the CPU, numbers, strings, containers."""
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor:
            return f"<not a plain torch.Tensor: {type(value).__module__}.{type(value).__qualname__}>"
        return _clone(value.detach()).cpu()
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    if isinstance(value, (list, tuple)):
        return [_portable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _portable(v) for k, v in value.items()}
    return f"<a {type(value).__module__}.{type(value).__qualname__}>"


def _describe_error(exc: BaseException, source_file: str) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f.filename == source_file]
    where = f" (line {mine[-1].lineno}: {mine[-1].line})" if mine else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    if len(text) > 1200:
        text = text[:1200] + " …"
    return text + where


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return _equal(a, b)


def run_case(exercise, fn, case: dict, device: str, source_file: str, watch: dict, *,
             _record=counters.record, _tampered=_tampered, _portable=_portable,
             _tensors_in=counters.tensors_in) -> dict:
    # (the defaults are bound now, before learner code runs: replacing the module's names does nothing)
    args = _to_device(case["args"], device)
    kwargs = _to_device(case["kwargs"], device)
    result: dict = {"event": "case", "index": case["index"], "error": None}
    runner = exercise.run or (lambda f, a, k: f(*a, **k))
    decoy_out = None
    try:
        if case.get("decoy") is not None:  # warm-up, autotuning, and a trap for cached answers
            decoy_out = runner(fn, _to_device(case["decoy"], device), kwargs)
            runtime.synchronize()
            result["decoy_output"] = _portable(decoy_out)  # a copy, taken before the next call
        pristine = [_clone(t) for t in _tensors_in(args)]
        runtime.synchronize()
        with _record(inputs=list(_tensors_in(args)), cached=cached_inputs(exercise, args)) as rec:
            out = runner(fn, args, kwargs)
            runtime.synchronize()
    except BaseException as exc:  # noqa: BLE001 - the learner's error, reported in words
        if isinstance(exc, NotImplementedError):
            result["not_attempted"] = True
        result["error"] = _describe_error(exc, source_file)
        result["tampered"] = _tampered(watch)
        return result
    inputs = list(_tensors_in(args))
    result["inputs_changed"] = exercise.inputs_read_only and not all(
        _same(t, p) for t, p in zip(inputs, pristine))
    # ... or changed and put back: a kernel read values the input did not hold when the call began
    result["inputs_changed_while_read"] = bool(exercise.inputs_read_only and rec.input_loads_changed)
    outs = list(_tensors_in(out))
    input_storages = {t.untyped_storage().data_ptr() for t in inputs}
    result["aliases_input"] = exercise.inputs_read_only and any(
        t.untyped_storage().data_ptr() in input_storages for t in outs if type(t) is torch.Tensor)
    decoy_storages = {t.untyped_storage().data_ptr() for t in _tensors_in(decoy_out) if type(t) is torch.Tensor}
    result["reuses_output"] = any(t.untyped_storage().data_ptr() in decoy_storages
                                  for t in outs if type(t) is torch.Tensor)
    result["output"] = _portable(out)
    result["output_type"] = f"{type(out).__module__}.{type(out).__qualname__}"
    result["output_device"] = str(out.device.type) if isinstance(out, torch.Tensor) else None
    result["counts"] = rec.as_dict()
    result["tampered"] = _tampered(watch)
    return result


def _fingerprint(out: torch.Tensor, seed: int) -> dict:
    flat = out.detach().reshape(-1)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    idx = torch.randint(0, max(flat.numel(), 1), (4096,), generator=gen).to(flat.device)
    return {"sample": flat[idx].float().cpu(), "sum": float(flat.double().sum()),
            "abs_sum": float(flat.double().abs().sum()), "shape": list(out.shape), "dtype": str(out.dtype)}


def time_case(exercise, fn, command: dict, device: str, source_file: str, watch: dict, *,
              _tampered=_tampered, _record=counters.record) -> dict:
    spec = exercise.timing
    gen = torch.Generator(device=device).manual_seed(command["seed"])
    args = spec.inputs(gen, device)
    result: dict = {"event": "timing", "error": None}
    distinct_counts: dict[str, dict] = {}

    def counted(*call_args):
        """Every warm-up and timed call runs under the counters, like the graded calls: a function
        cannot be honest when counted and hand the work to PyTorch when timed."""
        with _record() as rec:
            out = fn(*call_args)
        counts = rec.as_dict()
        key = repr(sorted(counts.items()))
        if key not in distinct_counts and len(distinct_counts) < 16:
            distinct_counts[key] = counts
        return out

    try:
        first = fn(*args)  # not counted: a first call on new shapes may autotune (many launches)
        runtime.synchronize()
        if type(first) is not torch.Tensor:
            raise TypeError(f"returned a {type(first).__name__} on the timing input")
        result["fingerprint"] = _fingerprint(first, command["sample_seed"])
        mismatches = []

        def check_timed(name, out):  # the outputs of the timed calls are checked too
            if name != "yours":
                return
            if not (type(out) is torch.Tensor and out.shape == first.shape and torch.allclose(
                    out.float(), first.float(), rtol=1e-3, atol=1e-3, equal_nan=True)):
                mismatches.append(1)

        def instrumented(baseline):
            """A baseline under the same counters (its counts unused): with flush=False the host's
            time is timed, and the learner's calls must not be the only ones paying for the counting.
            Only then: the counters' dispatch mode makes torch.compile fall back to eager (Timing
            refuses a compiled baseline with flush=False), and with flush=True the GPU hold hides
            the host's time anyway."""
            def call(*call_args):
                with _record():
                    return baseline(*call_args)
            return call

        fns = {"yours": counted, **{name: b if spec.flush else instrumented(b) for name, b in spec.baselines.items()}}
        comparison = timing.compare(fns, args=args, device=device, budget_s=command.get("budget_s", 1.0),
                                    flush=spec.flush, on_result=check_timed)
        result["timed_mismatches"] = len(mismatches)
        result["timings"] = {name: list(map(float, t.samples)) for name, t in comparison.timings.items()}
        result["after_window"] = {name: float(t.after_window) for name, t in comparison.timings.items()}
        result["speedups"] = {}
        for base in spec.baselines:
            s = comparison.speedup("yours", base)
            result["speedups"][base] = [float(s.ratio), float(s.ci_low), float(s.ci_high)]
    except BaseException as exc:  # noqa: BLE001
        result["error"] = _describe_error(exc, source_file)
    result["timed_counts"] = list(distinct_counts.values())
    result["tampered"] = _tampered(watch)
    return result


def main() -> None:
    in_fd, out_fd, log_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    # The learner's prints go to a log the grader shows; the result pipe stays ours.
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    _os_dup2(log_fd, 1)
    _os_dup2(log_fd, 2)
    become_subreaper()

    # NumPy warns on cos(inf) and the like inside the interpreter: noise, not the learner's output
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\..*")
    job = channel.recv_command(in_fd)
    exercise = get_exercise(job["exercise"])
    device = job["device"]
    source_file = os.path.join(job["workdir"], "submission.py")
    with open(source_file, "w") as f:
        f.write(job["source"])

    # what the rest calls, bound before learner code can replace the module-level names
    send, receive, tampered, run_one, time_one = channel.send_data, channel.recv_command, _tampered, run_case, time_case
    end_all, exit_now = end_descendants, os._exit

    def reply(message: dict) -> None:
        """Send one reply, with the nonce the grader queued behind its request: read only now."""
        for stream in (sys.stdout, sys.stderr):  # the learner's prints reach the log before the grader reads it
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        token = receive(in_fd)
        message["nonce"] = token.get("nonce") if isinstance(token, dict) and token.get("cmd") == "nonce" else None
        send(out_fd, message)

    def finish() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        end_all()  # nothing the learner's code started outlives the check
        exit_now(0)  # without waiting for threads the learner's code left running

    problem = runtime.self_test()
    if problem:
        reply({"event": "import_error", "error": problem, "internal": True})
        finish()
    # Lazy initialisation inside PyTorch replaces some of its own functions (importing
    # torch._dynamo wraps torch.manual_seed): do it now, so only the learner's changes show.
    import torch._dynamo  # noqa: F401
    with counters.record():
        torch.ones(2) + 1
    watch = _snapshot()
    # Import the learner's module: its top-level code runs here, inside this child.
    import importlib.util
    try:
        sys.path.insert(0, job["workdir"])
        spec = importlib.util.spec_from_file_location("submission", source_file)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
        fn = getattr(module, job["name"])
    except BaseException as exc:  # noqa: BLE001
        reply({"event": "import_error", "error": _describe_error(exc, source_file)})
        finish()
    reply({"event": "ready", "tampered": tampered(watch)})

    closed = channel.ChannelClosed
    try:
        while True:
            command = receive(in_fd)
            if command.get("cmd") == "case":
                reply(run_one(exercise, fn, command, device, source_file, watch))
            elif command.get("cmd") == "time":
                reply(time_one(exercise, fn, command, device, source_file, watch))
            else:
                break
    except closed:  # the grader went away
        pass
    finish()


if __name__ == "__main__":
    main()
