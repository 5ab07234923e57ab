"""The child process that runs a learner's function: `python -m gpuprinciples.worker IN_FD OUT_FD`.

It is started fresh for every check (spawned, never forked), so a hang, a crash or an illegal
memory access ends this process and never the notebook's. It does as little judging as it can:
it runs the function on the cases the grader sends and sends back what came out and what the
counters saw; the grader compares. Its own primitives are taken before learner code is imported,
and it watches the modules the grading depends on for patching.
"""

from __future__ import annotations

import inspect
import os
import sys
import traceback
import warnings

# Primitives first, before anything of the learner's can run.
_os_dup2 = os.dup2
_perf_counter = __import__("time").perf_counter

import torch  # noqa: E402

from . import channel, counters, runtime, timing  # noqa: E402  (timing: its clocks, taken now)
from .exercises import get as get_exercise  # noqa: E402

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


def _tensors(tree):
    return list(counters.tensors_in(tree))


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
             _record=counters.record, _tampered=_tampered, _portable=_portable) -> dict:
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
        pristine = [_clone(t) for t in _tensors(args)]
        runtime.synchronize()
        with _record(inputs=_tensors(args)) as rec:
            out = runner(fn, args, kwargs)
            runtime.synchronize()
    except BaseException as exc:  # noqa: BLE001 - the learner's error, reported in words
        if isinstance(exc, NotImplementedError):
            result["not_attempted"] = True
        result["error"] = _describe_error(exc, source_file)
        result["tampered"] = _tampered(watch)
        return result
    inputs = _tensors(args)
    result["inputs_changed"] = exercise.inputs_read_only and not all(
        _same(t, p) for t, p in zip(inputs, pristine))
    outs = _tensors(out)
    input_storages = {t.untyped_storage().data_ptr() for t in inputs}
    result["aliases_input"] = exercise.inputs_read_only and any(
        t.untyped_storage().data_ptr() in input_storages for t in outs if type(t) is torch.Tensor)
    decoy_storages = {t.untyped_storage().data_ptr() for t in _tensors(decoy_out) if type(t) is torch.Tensor}
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
              _tampered=_tampered) -> dict:
    spec = exercise.timing
    gen = torch.Generator(device=device).manual_seed(command["seed"])
    args = spec.inputs(gen, device)
    result: dict = {"event": "timing", "error": None}
    try:
        first = fn(*args)
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

        fns = {"yours": fn, **spec.baselines}
        comparison = timing.compare(fns, args=args, device=device, budget_s=command.get("budget_s", 1.0),
                                    on_result=check_timed)
        result["timed_mismatches"] = len(mismatches)
        result["timings"] = {name: list(map(float, t.samples)) for name, t in comparison.timings.items()}
        result["speedups"] = {}
        for base in spec.baselines:
            s = comparison.speedup("yours", base)
            result["speedups"][base] = [float(s.ratio), float(s.ci_low), float(s.ci_high)]
    except BaseException as exc:  # noqa: BLE001
        result["error"] = _describe_error(exc, source_file)
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

    # NumPy warns on cos(inf) and the like inside the interpreter: noise, not the learner's output
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\..*")
    job = channel.recv_command(in_fd)
    exercise = get_exercise(job["exercise"])
    device = job["device"]
    source_file = os.path.join(job["workdir"], "submission.py")
    with open(source_file, "w") as f:
        f.write(job["source"])

    problem = runtime.self_test()
    if problem:
        channel.send_data(out_fd, {"event": "import_error", "error": problem, "internal": True})
        return
    # Lazy initialisation inside PyTorch replaces some of its own functions (importing
    # torch._dynamo wraps torch.manual_seed): do it now, so only the learner's changes show.
    import torch._dynamo  # noqa: F401
    with counters.record():
        torch.ones(2) + 1
    watch = _snapshot()
    # what the loop below calls, bound before learner code can replace the module-level names
    send, receive, tampered, run_one, time_one = channel.send_data, channel.recv_command, _tampered, run_case, time_case
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
        channel.send_data(out_fd, {"event": "import_error", "error": _describe_error(exc, source_file)})
        return
    send(out_fd, {"event": "ready", "tampered": tampered(watch)})

    while True:
        command = receive(in_fd)
        if command["cmd"] == "case":
            send(out_fd, run_one(exercise, fn, command, device, source_file, watch))
        elif command["cmd"] == "time":
            send(out_fd, time_one(exercise, fn, command, device, source_file, watch))
        else:
            break
    sys.stdout.flush()


if __name__ == "__main__":
    main()
