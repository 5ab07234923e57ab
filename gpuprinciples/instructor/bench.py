"""`gpuprinciples bench`: every reference solution against PyTorch's best paths, on this GPU.

`gpuprinciples bench --grader` instead measures the learner's wait: per exercise, the wall time of
a first and a second check of the same function in one process (a notebook session: the second
finds the warm sandbox, and on a GPU the baselines timed), on this machine, GPU or CPU; and where
that time went (loading, cases, timing).

For each exercise that declares a `Timing` and a `solution`: make the large timing inputs on the
GPU, check the solution against the exercise's reference there, then time the solution and every
baseline (eager, torch.compile, library kernels) interleaved in one run. Then lesson 10's model (and
one of Llama 3.1 8B's shapes): a decode step, eager and as a CUDA graph, against its bandwidth roofline
(`bench_model`). Printed as a table with achieved bandwidth against the copy ceiling measured in the
same session, TFLOP/s where the
exercise counts FLOPs, and the speedup over each baseline with its 95 % interval.
"""

from __future__ import annotations

import importlib
import json
import sys

import torch


def _load(spec: str):
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def _flat(out) -> torch.Tensor:
    if isinstance(out, (tuple, list)):
        return torch.cat([t.double().flatten() for t in out])
    return out.double()


def _relative_error(out, want: torch.Tensor) -> float:
    out = _flat(out)
    return ((out - want).norm() / want.norm().clamp_min(1e-30)).item()


def bench_exercise(ex, ceilings, budget_s: float = 2.0, spec=None) -> dict:
    """One timed input of `ex` (its first, or `spec`, one of `ex.timing.each()`)."""
    from ..course.lab import roofline
    from ..measure import timing

    spec = spec or ex.timing
    gen = torch.Generator(device="cuda").manual_seed(0)
    args = spec.inputs(gen, "cuda")
    want = _flat(ex.reference(*args))  # a backward returns (dq, dk, dv)
    solution = _load(ex.solution)
    err = _relative_error(solution(*args), want)
    further, not_here, further_errors = {}, {}, {}
    for name, where in getattr(ex, "further", {}).items():
        fn = _load(where)
        try:
            further_errors[name] = _relative_error(fn(*args), want)
            further[name] = fn
        except ValueError as exc:  # the kernel's own sentence: not on this GPU, or not these inputs
            not_here[name] = str(exc)
    del want
    fns = {"solution": solution, **further, **spec.baselines}
    comparison = timing.compare(fns, args=args, device="cuda", budget_s=budget_s, flush=spec.flush)
    least_bytes, flops = spec.min_bytes(args), spec.flops(args)
    peak = roofline.inputs_peak(ceilings, args)
    rows = {}
    for name, t in comparison.timings.items():
        fraction, bound, _ = roofline.fraction_of_roof(t.median, flops, least_bytes, peak, ceilings.copy_bandwidth)
        row = {"median_ms": t.median * 1e3, "spread": t.spread,
               "bandwidth_TBps": least_bytes / t.median / 1e12,
               "of_copy_ceiling": least_bytes / t.median / ceilings.copy_bandwidth,
               "of_roof": fraction, "bound": bound}
        if flops:
            row["TFLOPps"] = flops / t.median / 1e12
        if name != "solution":
            row["solution_speedup"] = list(_ratio_ci(comparison.speedup("solution", name)))
        if name in further:  # how far it goes, against each baseline
            row["relative_error"] = further_errors[name]
            row["speedups"] = {b: list(_ratio_ci(comparison.speedup(name, b))) for b in spec.baselines}
        rows[name] = row
    return {"exercise": ex.id + (f" ({spec.label})" if spec.label else ""), "relative_error": err,
            "rounds": len(comparison.rounds), "rows": rows, "further": list(further), "not_here": not_here}


def _ratio_ci(speedup) -> tuple[float, float, float]:
    """(ratio, low, high) of a speedup with its 95 % interval."""
    return speedup.ratio, speedup.ci_low, speedup.ci_high


MODEL_BENCH = "decoder.decode_step"  # the name `--only` selects the model benchmark by


def bench_model(ceilings, context: int = 4096) -> dict:
    """A greedy decode step at batch 1 with `context` positions cached, eager and as a CUDA graph, with PyTorch's
    operators and with the fused kernels (kernels/decode_step.py), against its bandwidth roofline: the bytes a step
    must read (weights once, the cache) over the measured copy bandwidth. Lesson 10's LLAMA_1B, then LLAMA_8B's
    shapes: gpt-fast's README reports Llama-2-7B at 1,397 GB/s on an A100 whose empirical peak it puts at about
    1,700 GB/s (82 %), the anchor for the share a graphed step should reach; at 1 B the matrices are small enough
    that each kernel's start and drain is a large part of its time (docs/decoding-h200.md)."""
    from ..course.lab.decoder import LLAMA_1B, LLAMA_8B, Decoder, decode_step_bytes, time_step

    models = {}
    for label, config, variants in (
            ("LLAMA_1B", LLAMA_1B, (("eager", False, False), ("CUDA graph", True, False),
                                    ("fused, CUDA graph", True, True))),
            ("LLAMA_8B", LLAMA_8B, (("CUDA graph", True, False), ("fused, CUDA graph", True, True)))):
        model = Decoder(config, batch=1, max_seq=context + 1024)
        model.k_cache.normal_()  # what the cache holds does not change the time
        model.v_cache.normal_()
        roofline = decode_step_bytes(config, 1, context) / ceilings.copy_bandwidth
        rows = {}
        for name, graph, fused in variants:
            model.fused = fused
            seconds = time_step(model, 1, context, graph=graph)
            rows[name] = {"median_ms": seconds * 1e3, "tokens_per_s": 1 / seconds, "of_roofline": roofline / seconds}
        models[label] = {"parameters_B": config.n_params() / 1e9, "roofline_ms": roofline * 1e3, "rows": rows}
        del model
        torch.cuda.empty_cache()
    return {"exercise": MODEL_BENCH, "context": context, "models": models}


def _print_model(result: dict) -> None:
    for label, model in result["models"].items():
        print(f"\n{result['exercise']}  ({label}, {model['parameters_B']:.1f} B parameters in bf16, batch 1, "
              f"{result['context']} positions; bandwidth roofline {model['roofline_ms']:.3f} ms)")
        for name, row in model["rows"].items():
            print(f"  {name:<18}{row['median_ms']:>9.3f}ms{row['tokens_per_s']:>10,.0f} tokens/s"
                  f"{row['of_roofline']:>7.0%} of the roofline")


def _print(result: dict) -> None:
    print(f"\n{result['exercise']}  (relative error of the solution {result['relative_error']:.1e}, "
          f"{result['rounds']} interleaved rounds)")
    print(f"  {'':<18}{'median':>11}{'TB/s':>8}{'of copy':>9}{'TFLOP/s':>9}{'of roof':>9}   solution speedup [95% CI]")
    for name, row in result["rows"].items():
        tflops = f"{row['TFLOPps']:.0f}" if "TFLOPps" in row else "-"
        speed = "-"
        if "solution_speedup" in row:
            r, lo, hi = row["solution_speedup"]
            speed = f"{r:.2f}x [{lo:.2f}, {hi:.2f}]"
        print(f"  {name:<18}{row['median_ms']:>9.3f}ms{row['bandwidth_TBps']:>8.2f}{row['of_copy_ceiling']:>9.0%}"
              f"{tflops:>9}{row['of_roof']:>9.0%}   {speed}")
    for name in result.get("further", ()):
        row = result["rows"][name]
        print(f"  how far it goes, {name} (relative error {row['relative_error']:.1e}): " + ", ".join(
            f"{r:.2f}x {b} [{lo:.2f}, {hi:.2f}]" for b, (r, lo, hi) in row["speedups"].items()))
    for name, why in result.get("not_here", {}).items():
        print(f"  how far it goes, {name}: not timed here ({why})")


def main(json_output: bool = False, only: str | None = None) -> int:
    from ..course import catalog
    from ..machine import runtime
    from ..measure import calibrate

    if not runtime.HAS_CUDA:
        print("gpuprinciples bench needs a GPU: timings on a CPU (under the Triton interpreter) say nothing "
              "about GPU speed. Run it on a machine with a CUDA GPU.", file=sys.stderr)
        return 1
    wanted = set(only.split(",")) if only else None
    # measured now, not the 12-hour cache: on an H200 a ceiling cached while the reference solutions were graded
    # read 2,128 GB/s and 146 TFLOP/s (4,258 and 786 measured alone) and put a decode step at 135 % of its roofline
    ceilings = calibrate.ceilings(refresh=True)
    if not json_output:
        print(f"{torch.cuda.get_device_name()}: {ceilings}")
    results = []
    for ex in catalog.all_exercises().values():
        if getattr(ex, "timing", None) is None or getattr(ex, "solution", None) is None:
            continue
        if wanted and ex.id not in wanted:
            continue
        for spec in ex.timing.each():
            try:
                result = bench_exercise(ex, ceilings, spec=spec)
            except Exception as exc:  # noqa: BLE001 - one broken benchmark must not hide the others
                result = {"exercise": ex.id, "error": f"{type(exc).__name__}: {exc}"}
            results.append(result)
            if not json_output:
                _print(result) if "error" not in result else print(f"\n{ex.id}: FAILED ({result['error']})")
            torch.cuda.empty_cache()
    if not wanted or MODEL_BENCH in wanted:
        try:
            result = bench_model(ceilings)
        except Exception as exc:  # noqa: BLE001
            result = {"exercise": MODEL_BENCH, "error": f"{type(exc).__name__}: {exc}"}
        results.append(result)
        if not json_output:
            _print_model(result) if "error" not in result else print(f"\n{MODEL_BENCH}: FAILED ({result['error']})")
        torch.cuda.empty_cache()
    if json_output:
        print(json.dumps({"device": torch.cuda.get_device_name(), "ceilings": ceilings.__dict__,
                          "results": results}, indent=2, default=str))
    return 0 if all("error" not in r for r in results) else 1


# ---------------------------------------------------------------------------------------------
# The grader's own latency
# ---------------------------------------------------------------------------------------------


def grader_latency(exercise_id: str, answer, tries: int = 2) -> dict:
    """Wall seconds of `tries` checks of `answer` in a row, with each one's status and phases."""
    import time

    from ..grader.grading import grade
    runs = []
    for _ in range(tries):
        started = time.monotonic()
        report = grade(exercise_id, answer)
        runs.append({"wall_s": round(time.monotonic() - started, 2), "status": report.status,
                     "phases_s": report.phases_s, "reasons": report.reasons[:2],
                     "speed": {k: report.measurements[k] for k in ("time_ms", "speedup", "bandwidth_TBps")
                               if k in report.measurements}})
    return {"exercise": exercise_id, "origin": getattr(answer, "origin", getattr(answer, "__name__", "?")),
            "runs": runs}


def grader_main(json_output: bool = False, only: str | None = None, submissions=()) -> int:
    """Every reference solution (or `only` those), then each EXERCISE=FILE.py:FUNCTION of `submissions`."""
    from ..course import catalog
    from ..machine import runtime
    from ..sandbox.submission import from_path

    wanted = set(only.split(",")) if only else None
    jobs = [(ex.id, _load(ex.solution)) for ex in catalog.all_exercises().values()
            if ex.kind == "function" and ex.solution and (wanted is None or ex.id in wanted)]
    for item in submissions:
        exercise_id, _, spec = item.partition("=")
        jobs.append((exercise_id, from_path(spec)))
    results = []
    if not json_output:
        print(f"the grader's latency on this machine ({runtime.describe()['device']}, mode {runtime.MODE}): "
              "wall seconds of a first and a second check in one process")
    for exercise_id, answer in jobs:
        result = grader_latency(exercise_id, answer)
        results.append(result)
        if not json_output:
            first, second = result["runs"]
            print(f"  {exercise_id:<28} {result['origin'][-40:]:<40} first {first['wall_s']:>6.2f} s "
                  f"({first['status']})  second {second['wall_s']:>6.2f} s ({second['status']})\n"
                  f"      phases, first {first['phases_s']}\n      phases, second {second['phases_s']}"
                  + (f"\n      the second's timing: {second['speed']}" if second["speed"] else "")
                  + "".join(f"\n      why the {which} failed: {run['reasons']}" for which, run in
                            (("first", first), ("second", second)) if run["status"] != "passed"))
    if json_output:
        print(json.dumps({"mode": runtime.MODE, "machine": runtime.describe(), "results": results}, indent=2,
                         default=str))
    return 0

