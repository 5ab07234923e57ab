"""The child process that runs a learner's function: `python -m gpuprinciples.grader.worker IN_FD OUT_FD LOG`.

It is started fresh for every check (spawned, never forked from the notebook: sandbox/child.py), so a
hang, a crash or an illegal memory access ends this process and never the notebook's. It does as
little judging as it can: it runs the function on the cases the grader sends and sends back what
came out and what the counters saw; the grader compares (judge.py). Its own primitives are
taken before learner code is imported, and it watches the modules the grading depends on for
patching.

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

import importlib
import importlib.util
import inspect
import os
import sys
import threading
import time
import traceback
import warnings
from contextlib import nullcontext

# Primitives first, before anything of the learner's can run.
_os_dup2 = os.dup2
_perf_counter = time.perf_counter

import torch  # noqa: E402

from ..course.catalog import get as get_exercise  # noqa: E402
from ..course.kit import cached_inputs  # noqa: E402
from ..machine import runtime  # noqa: E402
from ..measure import bounds, counters, observe, placement, races, timing  # noqa: E402
from ..sandbox import channel, forkserver, processes  # noqa: E402
from ..sandbox.channel import CaseResult, CompileResult, Job, LoadError, Progress, Ready, TimingResult  # noqa: E402
from ..toolchain import compat, compiling, gpucompile, interpreter, selftest  # noqa: E402
from . import compilepass, judge  # noqa: E402

_clone = torch.Tensor.clone
_copy = torch.Tensor.copy_
_equal = torch.equal

WATCHED = {  # namespaces whose attributes learner code must not replace
    "torch": torch,
    "torch.Tensor": torch.Tensor,
    "torch.nn.functional": torch.nn.functional,
    "torch.cuda": torch.cuda,
    "time": __import__("time"),
    "gpuprinciples.measure.counters": counters,
    "gpuprinciples.measure.placement": placement,  # where a GPU would keep each tensor (the interpreter's launches)
    "gpuprinciples.measure.placement.HostTensors": placement.HostTensors,
    "gpuprinciples.measure.bounds": bounds,  # the interpreter's checks of every access and of races between programs
    "gpuprinciples.measure.races": races,
    "gpuprinciples.measure.races.Log": races.Log,
    "gpuprinciples.sandbox.channel": channel,
    "gpuprinciples.measure.timing": timing,
    "gpuprinciples.machine.runtime": runtime,
    "gpuprinciples.toolchain.compat": compat,  # the launch hooks the counters rely on
    "gpuprinciples.toolchain.compiling": compiling,
    "gpuprinciples.toolchain.interpreter": interpreter,
    "gpuprinciples.toolchain.selftest": selftest,
    "gpuprinciples.sandbox.processes": processes,  # the child's clean-up of what learner code left running
    "gpuprinciples.sandbox.forkserver": forkserver,
    "gpuprinciples.grader.judge": judge,
    "gpuprinciples.toolchain.gpucompile": gpucompile,
    "gpuprinciples.measure.observe": observe,  # the watch under every call: its functions and its class
    "gpuprinciples.measure.observe.Watch": observe.Watch,
    "torch.cuda.Event": torch.cuda.Event,
    "torch.cuda.Stream": torch.cuda.Stream,
    "gpuprinciples.grader.worker": sys.modules[__name__],  # this module runs as __main__
}


# the special methods through which a replaced class changes what the grader sees (a context manager's exit,
# a call, PyTorch's overrides); the others are not watched (too many, and none of them hides work)
_WATCHED_DUNDERS = frozenset({"__enter__", "__exit__", "__call__", "__torch_function__", "__torch_dispatch__"})


def _snapshot() -> dict[str, int]:
    """ids of the functions and classes learner code could swap. For classes, inherited methods
    count too (`torch.Tensor.cos` lives on a base class until someone assigns it)."""
    snap = {}
    for prefix, space in WATCHED.items():
        names = dir(space) if isinstance(space, type) else list(vars(space))
        for name in names:
            # the stored object, not what getattr builds (a classmethod gives a new bound method each time)
            value = inspect.getattr_static(space, name, None) if isinstance(space, type) else getattr(space, name, None)
            if (callable(value) or isinstance(value, (classmethod, staticmethod))) and (
                    not name.startswith("__") or name in _WATCHED_DUNDERS):
                snap[f"{prefix}.{name}"] = id(value)
    # the interpreter's memory methods are the CPU's instruments; swapping them is refused on a GPU too, where
    # they measure nothing, so that the two machines give one verdict
    interp = compat.interpreter_module()
    for name in list(compat.interpreter_memory_methods()) + ["__call__"]:
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


OUT_OF_MEMORY = ("the GPU's memory ran out while your code ran: the check runs it in a process of its own, so "
                 "what your notebook still keeps on the GPU, and what other programs hold, leaves it less; `del` "
                 "those tensors and call `torch.cuda.empty_cache()`, or restart the kernel, then check again")

# A GPU's words for what it refuses (Triton a launch, PyTorch an operation across the two memories), and what
# the learner did: (fragment of the message, the sentence added)
GPU_ERRORS = (
    ("cannot be accessed from Triton (cpu tensor?)",
     "a tensor handed to the kernel lives in the CPU's memory while the kernel runs on the GPU: make outputs on "
     "the inputs' device (`torch.empty_like(x)`, or `device=x.device`)"),
    ("Expected all tensors to be on the same device",
     "a tensor made in the CPU's memory (without `device=`) meets one in the GPU's: make it on the inputs' device "
     "(`device=x.device`), or use a Python number"),
    *((fragment, OUT_OF_MEMORY) for fragment in ("CUDA out of memory", "CUDA error: out of memory")),
)


def _describe_error(exc: BaseException, source_file: str) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f.filename == source_file]
    where = f" (line {mine[-1].lineno}: {mine[-1].line})" if mine else ""
    text = gpucompile.compile_error_sentence(exc) or f"{type(exc).__name__}: {exc}".strip()
    whys = "".join(f"; {why}" for fragment, why in GPU_ERRORS if fragment in text)
    if len(text) > 1200:  # the library's own words are cut, never the sentence that says what to do
        text = text[:1200] + " …"
    return text + whys + where


def _beyond_interpreter(exc: BaseException) -> bool:
    """Triton's interpreter could not run a kernel (interpreter.InterpreterLimit), however the learner's code
    wrapped the error: the case says nothing of the kernel's values."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, interpreter.InterpreterLimit):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _raised_by_a_stub(exc: BaseException, source_file: str) -> bool:
    """A NotImplementedError raised in the learner's own file (the unsolved exercise's `raise`): not attempted.
    One raised inside a library the learner called (torch.func under the grader's recording, an operator a
    backend lacks) is an error of their attempt, to be reported in its own words."""
    frames = traceback.extract_tb(exc.__traceback__)
    return isinstance(exc, NotImplementedError) and bool(frames) and frames[-1].filename == source_file


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return _equal(a, b)


class _Unwatched:
    """Where the grader itself starts processes (distributed ranks): no watch."""

    evidence: dict = {}

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _watched_entry(call: str, watch, rec) -> dict:
    """One call's raw evidence for honesty.py: the watch's, and what the counters saw to compare it with."""
    from collections import Counter
    return {"call": call, "watch": dict(watch.evidence), "torch_ops": dict(rec.torch_ops),
            "torch_internal_ops": dict(rec.torch_internal_ops), "triton": dict(Counter(rec.kernel_names)),
            "benchmark": dict(rec.benchmark_launches)}


def _returned_problems(returned: list) -> list[str]:
    """What the learner's function returned that is not plain memory the grader can read: tensor subclasses
    and lazy values (their elements are computed when read, after the call and its counters)."""
    bad = []
    for value in returned:
        for t in counters.tensors_in(value):
            if type(t) is not torch.Tensor:
                bad.append(f"{type(t).__module__}.{type(t).__qualname__}")
    return bad


def launches_triton(exercise) -> bool:
    """A kernel exercise: its PyTorch work is counted and limited."""
    return any(type(r).__name__ == "LaunchesTriton" for r in exercise.requirements)


def follows_placement(exercise) -> bool:
    """A kernel exercise under the interpreter: the placement watch stands in for the GPU's memory."""
    return runtime.INTERPRETER and not exercise.forks_ranks and launches_triton(exercise)


def _raise_refused(rec) -> None:
    """A stray access or a race the interpreter refused during the call, raised again after it: the learner's code
    may have caught the exception, but the kernel still did what was refused."""
    if rec.refused:
        raise rec.refused[0]


def run_case(exercise, fn, case: dict, device: str, source_file: str, watch: dict, *,
             _record=counters.record, _tampered=_tampered, _portable=_portable,
             _tensors_in=counters.tensors_in, _Watch=observe.Watch, _placement=placement.watch,
             _raise_refused=_raise_refused) -> CaseResult:
    # (the defaults are bound now, before learner code runs: replacing the module's names does nothing)
    args = _to_device(case["args"], device)
    kwargs = _to_device(case["kwargs"], device)
    result = CaseResult(index=case["index"])
    runner = exercise.run or (lambda f, a, k: f(*a, **k))
    # the profiler for kernel exercises (their PyTorch work is counted and limited); threads and processes
    # for all but those whose ranks the grader starts itself
    profile = launches_triton(exercise)
    gpu = device != "cpu"

    def watching(gpu):
        return _Unwatched() if exercise.forks_ranks else _Watch(gpu, profile=profile)

    def placed(inputs):  # a kernel exercise under the interpreter: what a GPU refuses for host tensors is refused
        return _placement(inputs) if follows_placement(exercise) else nullcontext()

    returned: list = []  # what the learner's function returned on the graded call, however `run` calls it

    def learner(*a, **k):
        out = fn(*a, **k)
        returned.append(out)
        return out

    decoy_out = None
    try:
        if case.get("decoy") is not None:  # warm-up, autotuning, and a trap for cached answers: judged too
            decoy_args = _to_device(case["decoy"], device)
            with watching(gpu) as seen, _record() as decoy_rec, placed((decoy_args, kwargs)):
                decoy_out = runner(fn, decoy_args, kwargs)
                runtime.synchronize()
            _raise_refused(decoy_rec)
            result.watched.append(_watched_entry("warm-up call", seen, decoy_rec))
            result.decoy_output = _portable(decoy_out)  # a copy, taken before the next call
            result.has_decoy_output = True
        pristine = [_clone(t) for t in _tensors_in(args)]
        runtime.synchronize()
        with watching(gpu) as seen, _record(inputs=list(_tensors_in(args)), cached=cached_inputs(exercise, args),
                                            stores=True, races=True) as rec, placed((args, kwargs)):
            out = runner(fn if exercise.forks_ranks else learner, args, kwargs)  # (ranks get fn by pickle)
            runtime.synchronize()
        _raise_refused(rec)
        # before anything else runs: which elements of what the learner returned its kernels wrote, and did not
        # change after (WritesEveryOutput)
        plain = [t for t in _tensors_in(returned) if type(t) is torch.Tensor]
        written = [rec.written_check(t) for t in plain] if rec.track_stores else []
        result.watched.append(_watched_entry("graded call", seen, rec))
    except BaseException as exc:  # noqa: BLE001 - the learner's error, reported in words
        result.not_attempted = _raised_by_a_stub(exc, source_file)
        result.beyond_interpreter = _beyond_interpreter(exc)
        result.error = _describe_error(exc, source_file)
        result.tampered = _tampered(watch)
        return result
    inputs = list(_tensors_in(args))
    result.inputs_changed = exercise.inputs_read_only and not all(_same(t, p) for t, p in zip(inputs, pristine))
    # ... or changed and put back: a kernel read values the input did not hold when the call began
    result.inputs_changed_while_read = bool(exercise.inputs_read_only and rec.input_loads_changed)
    outs = list(_tensors_in(out))
    input_storages = {t.untyped_storage().data_ptr() for t in inputs}
    result.aliases_input = exercise.inputs_read_only and any(
        t.untyped_storage().data_ptr() in input_storages for t in outs if type(t) is torch.Tensor)
    decoy_storages = {t.untyped_storage().data_ptr() for t in _tensors_in(decoy_out) if type(t) is torch.Tensor}
    result.reuses_output = any(t.untyped_storage().data_ptr() in decoy_storages
                               for t in outs if type(t) is torch.Tensor)
    result.output = _portable(out)
    result.output_type = f"{type(out).__module__}.{type(out).__qualname__}"
    result.output_device = str(out.device.type) if isinstance(out, torch.Tensor) else None
    result.counts = rec.as_dict()
    if rec.track_stores:  # which elements of the result no kernel of this call wrote (WritesEveryOutput)
        result.counts["output_elements"] = sum(t.numel() for t in plain)
        result.counts["output_unwritten"] = sum(w[0] for w in written)
        result.counts["output_changed"] = sum(w[1] for w in written)
    result.counts["returned_not_plain"] = _returned_problems(returned)
    result.tampered = _tampered(watch)
    return result


def time_case(exercise, fn, command: dict, device: str, source_file: str, watch: dict, *,
              _tampered=_tampered, _record=counters.record, _copy=_copy,
              _fingerprint=judge.fingerprint, _Watch=observe.Watch) -> TimingResult:
    """Time the learner's function against the baselines on large inputs, and send back only raw
    measurements. Call k's inputs are drawn from `judge.round_seed(command["seeds"][0], k)`: before every
    round new values are copied into the same buffers (same pointers; values no call saw before, so a cache
    keyed on pointers or on values never hits), and every timed output is fingerprinted, so an answer kept
    and replayed is caught."""
    spec = exercise.timing.each()[command.get("which", 0)]
    seed = command["seeds"][0]

    def inputs(k: int) -> tuple:
        return spec.inputs(torch.Generator(device=device).manual_seed(judge.round_seed(seed, k)), device)

    args = tuple(_clone(a) if isinstance(a, torch.Tensor) else a for a in inputs(0))
    buffers = list(counters.tensors_in(args))
    result = TimingResult()
    distinct_counts: dict[str, dict] = {}

    def load(k: int) -> None:  # outside every timed window
        for dst, src in zip(buffers, counters.tensors_in(inputs(k))):
            _copy(dst, src)
        runtime.synchronize()

    def note(out) -> None:
        result.fingerprints.append(_fingerprint(out, command["sample_seed"]) if judge.timed_output(out) else None)

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

    def instrumented(baseline):
        """A baseline under the same counters (its counts unused): with flush=False the host's time is
        timed, and the learner's calls must not be the only ones paying for the counting. Only then:
        the counters' dispatch mode makes torch.compile fall back to eager (Timing refuses a compiled
        baseline with flush=False), and with flush=True the GPU hold hides the host's time anyway."""
        def call(*call_args):
            with _record():
                return baseline(*call_args)
        return call

    gpu = device != "cpu"
    try:
        # a first call on new shapes may autotune (many launches): recorded and watched, its counts not judged
        with _Watch(gpu) as seen, _record() as first_rec:
            first = fn(*args)
            runtime.synchronize()
        result.watched.append(_watched_entry("first timing call", seen, first_rec))
        if not judge.timed_output(first):
            raise TypeError(f"returned a {type(first).__name__} on the timing input")
        note(first)
        del first
        wanted = command.get("baselines", list(spec.baselines))  # the others were timed in an earlier check
        fns = {"yours": counted, **{name: b if spec.flush else instrumented(b) for name, b in spec.baselines.items()
                                    if name in wanted}}
        before = observe.snapshot()
        with observe.armed():  # threads and processes the timed calls start or leave (not profiled: the clock runs)
            comparison = timing.compare(fns, args=args, device=device, budget_s=command.get("budget_s", 1.0),
                                        flush=spec.flush, before_round=lambda r: load(r + 1),
                                        on_result=lambda name, out: note(out) if name == "yours" else None)
        left = observe.leftovers(*before)
        left["noted"] = observe.take_noted()
        result.watched.append({"call": "timed calls", "watch": left})
        result.rounds = [dict(r) for r in comparison.rounds]
        result.after_window = {name: list(t.after_samples) for name, t in comparison.timings.items()}
    except BaseException as exc:  # noqa: BLE001
        result.error = _describe_error(exc, source_file)
    result.timed_counts = list(distinct_counts.values())
    result.tampered = _tampered(watch)
    return result


def prepare_path(job: Job) -> None:
    """Where the learner's module is found: the notebook's path (by reference), or this folder, where
    its source is written as submission.py."""
    if job.module is None:
        with open(os.path.join(os.getcwd(), "submission.py"), "w") as f:
            f.write(job.source or "")
    for entry in reversed([*job.sys_path, *([os.getcwd()] if job.module is None else [])]):
        sys.path.insert(0, entry)


def load_function(job: Job):
    """Import the learner's module here, in the child (its top-level code runs now), and return
    (the named function, the file whose lines an error message points at)."""
    if job.module is not None:  # by reference: an importable module, with the notebook's path
        module = importlib.import_module(job.module)
        source_file = getattr(module, "__file__", None) or job.module
    else:  # by source: a notebook's packed cells or a loose file
        source_file = os.path.join(os.getcwd(), "submission.py")
        spec = importlib.util.spec_from_file_location("submission", source_file)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
    return getattr(module, job.name), source_file


def run(in_fd: int, out_fd: int, log_path: str) -> None:
    """Grade what the grader asks through `in_fd`, reply through `out_fd`, and exit (never returns)."""
    # The learner's prints go to a log the grader shows; the result pipe stays ours.
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    _os_dup2(log_fd, 1)
    _os_dup2(log_fd, 2)
    processes.become_subreaper()

    # NumPy warns on cos(inf), NaN reductions and the like inside the interpreter: noise, not the learner's output
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"(triton|numpy)\..*")
    wire = channel.recv_command(in_fd)
    job = Job(**{k: v for k, v in wire.items() if k != "event"})
    exercise = get_exercise(job.exercise)
    device = job.device

    # what the rest calls, bound before learner code can replace the module-level names
    send, receive, tampered, run_one, time_one = channel.send_data, channel.recv_command, _tampered, run_case, time_case
    end_all, exit_now = processes.end_descendants, os._exit
    sending = threading.Lock()  # one frame at a time: a learner's thread may compile while a reply goes out
    worker_pid = os.getpid()

    def compiled_for_gpu(seconds: float) -> None:
        """The grader compiled a launch for the GPU: its seconds are not the learner's (sandbox/child.py). Not from
        a distributed exercise's ranks: forked from this process, without its pipes. Under 0.1 s, no frame: such a
        compile came from Triton's own disk cache, and a frame each would only crowd the pipe."""
        if seconds >= 0.1 and os.getpid() == worker_pid:
            with sending:
                send(out_fd, Progress(grader_s=seconds).to_wire())

    gpucompile.listen_to_compiles(compiled_for_gpu)

    def reply(message: channel.Message) -> None:
        """Send one reply, with the nonce the grader queued behind its request: read only now."""
        for stream in (sys.stdout, sys.stderr):  # the learner's prints reach the log before the grader reads it
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        wire = message.to_wire()
        token = receive(in_fd)
        wire["nonce"] = token.get("nonce") if isinstance(token, dict) and token.get("cmd") == "nonce" else None
        with sending:
            send(out_fd, wire)

    def finish() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        end_all()  # nothing the learner's code started outlives the check
        exit_now(0)  # without waiting for threads the learner's code left running

    observe.install()  # before the learner's module: the audit hook and the watched primitives
    problem = selftest.self_test()
    if problem:
        reply(LoadError(error=problem, internal=True))
        finish()
    # Lazy initialisation inside PyTorch replaces some of its own functions (importing
    # torch._dynamo wraps torch.manual_seed): do it now, so only the learner's changes show.
    import torch._dynamo  # noqa: F401
    with counters.record():
        torch.ones(2) + 1
    watch = _snapshot()
    source_file = job.module or "submission.py"
    try:
        prepare_path(job)
        # forked now, before learner code or any case is in this process: distributed ranks come from it
        forkserver.Zygote.current = forkserver.Zygote(close_fds=(in_fd, out_fd)) if exercise.forks_ranks else None
        before = observe.snapshot()
        with observe.armed(), placement.gpu_named_as_cpu() if follows_placement(exercise) else nullcontext():
            fn, source_file = load_function(job)
        left_at_import = {} if exercise.forks_ranks else observe.import_leftovers(*before)
    except BaseException as exc:  # noqa: BLE001
        reply(LoadError(error=_describe_error(exc, source_file)))
        finish()
    if not callable(fn):
        reply(LoadError(error=f"`{job.name}` is a {type(fn).__name__}, not a function: give the name of the "
                              "function to grade"))
        finish()
    reply(Ready(tampered=tampered(watch), left_at_import=left_at_import))

    closed = channel.ChannelClosed
    try:
        while True:
            command = receive(in_fd)
            if command.get("cmd") == "case":
                reply(run_one(exercise, fn, command, device, source_file, watch))
            elif command.get("cmd") == "time":
                reply(time_one(exercise, fn, command, device, source_file, watch))
            elif command.get("cmd") == "compile":  # the compile pass: the GPU's cases, compiled, not run
                reply(CompileResult(cases=compilepass.run(
                    exercise, fn, command["cases"], follows_placement(exercise)),
                                    tampered=tampered(watch)))
            else:
                break
    except closed:  # the grader went away
        pass
    finish()


# ---------------------------------------------------------------------------------------------
# The warm start: a server that has imported everything once and forks a fresh child per check
# ---------------------------------------------------------------------------------------------


def preload() -> str | None:
    """What every child would do first, done once in the server: imports, the interpreter's
    self-test (CPU only: on a GPU the server must never initialise CUDA, or its forks could not use
    it), and the lazy initialisation inside PyTorch. Returns a problem in words, or None."""
    import torch._dynamo  # noqa: F401
    compat.warm_compile_key()  # every check compiles for sm_90 (the compile pass): Triton's key once, here
    with counters.record():
        torch.ones(2) + 1
    if not runtime.HAS_CUDA:
        # PyTorch's profiler starts slowly the first time in a process (seconds): once here, not per check
        with observe.Watch(gpu=False):
            torch.ones(2) + 1
        return selftest.self_test()
    # a GPU check times torch.compile'd baselines: Inductor's modules (seconds to import) come in
    # once here, not in every child; importing them does not initialise CUDA (the probe below checks)
    import torch._inductor.compile_fx  # noqa: F401
    return forkserver.probe_fork_cuda()


def serve(sock_fd: int) -> None:
    """`python -m gpuprinciples.grader.worker --serve FD`: the fork server of sandbox/forkserver.py's ForkServer."""
    import socket
    sock = socket.socket(fileno=sock_fd)
    forkserver.harden_server()
    problem = preload()
    if problem:
        sock.sendall(b"E" + problem.encode()[:4000])
        os._exit(1)
    sock.sendall(b"R")

    def child(request: dict, fds: list[int]) -> None:
        sock.close()
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])  # the grader's environment now, as a spawned worker gets it
        sys.argv = [sys.argv[0], str(fds[0]), str(fds[1]), request["log"]]  # as a spawned worker's
        try:
            run(fds[0], fds[1], request["log"])
        finally:
            os._exit(70)

    forkserver.serve_forks(sock, child)
    os._exit(0)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--serve"]:
        serve(int(argv[1]))
    run(int(argv[0]), int(argv[1]), argv[2])


if __name__ == "__main__":
    main(sys.argv[1:])
