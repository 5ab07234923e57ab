"""Issue 32 on a GPU, in one run: the FlashAttention backward's plans (`attention_backward.Plan`) against SDPA's
FlashAttention and cuDNN backwards, then `gpuprinciples bench` rows and a grade of backward.* with the winners.

    PYTHONPATH=. python tools/tune_backward.py [--budget SECONDS] [--jobs N]
    PYTHONPATH=. python tools/tune_backward.py --dry-run     # a CPU: tiny shapes under the interpreter
    PYTHONPATH=. python tools/tune_backward.py --plans 2,24- # PLANS[2] and PLANS[24:] (and PLANS[0], run 1's
                                                             # default: the others' reference) only

1. every plan of PLANS is compiled first, in `--jobs` processes at once (Triton's disk cache then serves the
   timing process): a plan the compiler refuses is reported and dropped;
2. B4 H16 N4096 D128 bf16, causal and not: each plan's gradients are checked against the first plan's (run 1's
   default, itself checked against SDPA FlashAttention's); a plan with a NaN or a gradient off by more than 2 % of
   that gradient's largest value is reported as wrong and never chosen; the right ones are timed
   (`triton.testing.do_bench` medians, L2 cleared) against SDPA flash and cuDNN backwards (`sdpa_kernel`);
3. float64: `torch.autograd.gradcheck` of backward.attention on small shapes, on this GPU's Triton;
4. the fastest right plan of each case set as the package's default in this process, then `bench_exercise`
   rows of backward.attention_backward (both timings) and grades (`grading.grade`, as `gpuprinciples grade`) of
   backward.attention_backward through a file that calls the package's backward with those plans, and of
   backward.attention_function.

TFLOP/s count the backward as 10·B·H·N²·D (five products), half causal. Past the budget the rest is skipped and
says so.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import torch

from gpuprinciples.course.kernels import attention_backward as ab

Plan = ab.Plan
START = time.monotonic()
# (BLOCK_M, BLOCK_N, num_warps, num_stages) per pass; see Plan. The others are checked against the first (run 1's
# default); results in docs/flash-backward-h200.md (run 2).
PLANS = [
    Plan(),
    Plan(dkdv=(64, 128, 8, 4)),
    Plan(dq=(128, 64, 8, 4)),
    Plan(dq=(128, 128, 8, 2)),
    Plan(dkdv=(64, 128, 8, 3), maxnreg=240),
    # warp-specialised loops: 4 computing warps and a producer warp for the TMA loads (one loop per kernel)
    Plan(dkdv=(64, 64, 4, 2), dkdv_ws=True),
    Plan(dkdv=(64, 64, 4, 3), dkdv_ws=True),
    Plan(dkdv=(64, 128, 4, 2), dkdv_ws=True),
    Plan(dkdv=(32, 128, 4, 2), dkdv_ws=True),
    Plan(dq=(64, 64, 4, 2), dq_ws=True),
    Plan(dq=(64, 64, 4, 3), dq_ws=True),
    Plan(dkdv=(64, 64, 4, 2), dkdv_ws=True, dq=(64, 64, 4, 2), dq_ws=True),
    Plan(dkdv=(64, 128, 4, 2), dkdv_ws=True, dq=(64, 64, 4, 2), dq_ws=True),
    # one pass: dQ added by the dK/dV kernel (TMA reduces, or pointer atomics), then converted
    Plan(dkdv=(64, 128, 8, 3), dq=None, dq_tma=True),
    Plan(dkdv=(64, 128, 8, 2), dq=None, dq_tma=True),
    Plan(dkdv=(64, 64, 4, 3), dq=None, dq_tma=True),
    Plan(dkdv=(64, 64, 4, 2), dq=None, dq_tma=True),
    Plan(dkdv=(64, 64, 8, 3), dq=None, dq_tma=True),
    Plan(dkdv=(32, 128, 8, 3), dq=None, dq_tma=True),
    Plan(dkdv=(64, 128, 8, 3), dq=None, dq_tma=False),
    Plan(dkdv=(64, 128, 8, 3), dq=None, dq_tma=True, rotate=True),
    Plan(dkdv=(64, 64, 4, 3), dq=None, dq_tma=True, rotate=True),
    Plan(dkdv=(64, 128, 8, 2), dq=None, dq_tma=True, rotate=True),
    Plan(dkdv=(64, 64, 4, 2), dkdv_ws=True, dq=None, dq_tma=True),  # Triton 3.9 refuses it (sm_90, on a CPU)
    # not in run 2 (which timed the 24 above): both 4-stage passes, each faster alone there; one loop per pass
    # (causal: the dK/dV pass's 8 spilled words at 255 registers become none at 248, compiled for sm_90 by Triton 3.9)
    Plan(dkdv=(64, 128, 8, 4), dq=(128, 64, 8, 4)),
    Plan(dq=(128, 64, 8, 4), one_loop=True),
    Plan(dkdv=(64, 128, 8, 4), dq=(128, 64, 8, 4), one_loop=True),
    # narrower query tiles for the dK/dV pass (fewer registers for Sᵀ and dPᵀ), and a fifth stage for its loads
    Plan(dkdv=(32, 128, 8, 4), dq=(128, 64, 8, 4)),
    Plan(dkdv=(32, 128, 8, 4), dq=(128, 64, 8, 4), one_loop=True),
    Plan(dkdv=(64, 128, 8, 5), dq=(128, 64, 8, 4)),
]
DRY_PLANS = [Plan((32, 32, 4, 1), (32, 32, 4, 1)), Plan((32, 32, 4, 1), (32, 32, 4, 1), True, True),
             Plan((32, 64, 4, 1), None)]


def left(budget: float) -> float:
    return budget - (time.monotonic() - START)


def inputs(shape, dtype, device, causal):
    gen = torch.Generator(device=device).manual_seed(0)
    q, k, v, do = (torch.randn(shape, generator=gen, device=device, dtype=dtype) for _ in range(4))
    o, lse = ab.attention_lse(q, k, v, causal)
    return q, k, v, o, lse, do


def _compile(plan: Plan, causal: bool, shape) -> str | None:
    """In a worker process: run the plan once on a small input of the timed dtype and head dim (the same
    specialisation), which leaves its kernels in Triton's disk cache. None, or why it failed."""
    try:
        ab.attention_backward(*inputs(shape, torch.bfloat16, "cuda", causal), causal, plan=plan)
        torch.cuda.synchronize()
        return None
    except Exception as exc:  # noqa: BLE001 - a compiler refusal, out of shared memory
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:160] if str(exc).strip() else ''}"


def precompile(plans, jobs: int, budget: float, shape) -> dict:
    """{(plan, causal): why} of those the compiler refused. A worker that crashes takes its pool down: the tasks
    not done yet go to a new pool (three pools at most), and what is left after that to the timing process."""
    refused, done = {}, set()
    tasks = [(p, c) for p in plans for c in (False, True)]
    for _ in range(3):
        todo = [t for t in tasks if t not in done]
        if not todo or left(budget) < 5:
            break
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(_compile, p, c, shape): (p, c) for p, c in todo}
            for fut, (p, c) in futures.items():
                try:
                    why = fut.result(timeout=max(left(budget), 1))
                except Exception:  # noqa: BLE001 - a timeout, a crashed worker
                    continue
                done.add((p, c))
                if why:
                    refused[(p, c)] = why
                    print(f"  compile {'causal' if c else 'full  '} {p.label()}: {why}", flush=True)
            for fut in futures:
                fut.cancel()
    print(f"  compiled {len(done) - len(refused)} of {len(tasks)}, refused {len(refused)}, "
          f"{len(tasks) - len(done)} left to the timing process; {time.monotonic() - START:.0f} s", flush=True)
    return refused


def wrong(got, want) -> str | None:
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        g, w = g.float(), w.float()
        if not torch.isfinite(g).all():
            return f"{name} has NaN/inf"
        err, top = (g - w).abs().max().item(), w.abs().max().item()
        if err > 0.02 * top:
            return f"{name} off by {err:.2e} (largest |{name}| {top:.2e})"
    return None


def sweep(plans, shape, dtype, device, budget: float, refused: dict, bench) -> dict:
    """Per causal: {plan: ms} of the right plans, printed with TFLOP/s and the ratios to SDPA's."""
    B, H, N, D = shape
    best = {}
    for causal in (False, True):
        flops = 10 * B * H * N * N * D / (2 if causal else 1)
        args = inputs(shape, dtype, device, causal)
        want = ab.attention_backward(*args, causal, plan=plans[0])
        libs = {}
        if device == "cuda":
            from gpuprinciples.course.exercises.backward import sdpa_backward
            for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
                fn = sdpa_backward(name)
                grads = fn(*args, causal)
                if name == "FLASH_ATTENTION":
                    diffs = [f"{(a.float() - b.float()).abs().max().item():.1e}" for a, b in zip(want, grads)]
                    print(f"\n== causal={causal}: default plan vs SDPA flash: {wrong(want, grads) or 'agree'} "
                          f"(max |diff| {diffs})")
                libs[name] = ms = bench(lambda fn=fn: fn(*args, causal))
                print(f"  sdpa {name.split('_')[0].lower():<6} {ms:.3f} ms {flops / ms / 1e9:5.0f} TFLOP/s", flush=True)
        rows = {}
        for plan in plans:
            if left(budget) < 0:
                print("  (out of time: the rest skipped)", flush=True)
                break
            if (plan, causal) in refused:
                continue
            try:
                got = ab.attention_backward(*args, causal, plan=plan)
                problem = wrong(got, want)
                if problem:
                    print(f"  WRONG {plan.label()}: {problem}", flush=True)
                    continue
                ms = bench(lambda plan=plan: ab.attention_backward(*args, causal, plan=plan))
            except Exception as exc:  # noqa: BLE001
                print(f"  failed {plan.label()}: {type(exc).__name__}: {str(exc).strip()[-160:]}", flush=True)
                continue
            rows[plan] = ms
            ratios = "  ".join(f"{libs[n] / ms:.2f}x {n.split('_')[0].lower()}" for n in libs)
            print(f"  {ms:7.3f} ms {flops / ms / 1e9:5.0f} TFLOP/s  {ratios}  {plan.label()}", flush=True)
        if rows:
            best[causal] = min(rows, key=rows.get)
            print(f"  best (causal={causal}): {best[causal].label()}", flush=True)
    return best


def gradcheck(device: str) -> None:
    from gpuprinciples.course.exercises import backward as bw
    for causal in (False, True):
        gen = torch.Generator(device=device).manual_seed(0)
        q, k, v = (torch.randn(1, 2, 24, 16, generator=gen, device=device, dtype=torch.float64, requires_grad=True)
                   for _ in range(3))
        try:
            ok = torch.autograd.gradcheck(lambda q, k, v: bw.attention(q, k, v, causal), (q, k, v), fast_mode=True)
            print(f"  gradcheck float64 causal={causal} on {device}: {ok}", flush=True)
        except Exception as exc:  # noqa: BLE001 - e.g. the compiler refuses a float64 tl.dot
            lines = [line for line in str(exc).splitlines() if line.strip()]
            print(f"  gradcheck float64 causal={causal} on {device}: {type(exc).__name__}: "
                  f"{' / '.join(lines[:1] + lines[-2:])[:300]}", flush=True)


WINNER = '''from gpuprinciples.course.kernels import attention_backward as ab

FULL, CAUSAL = ab.{full!r}, ab.{causal!r}


def attention_backward(q, k, v, o, lse, do, causal=False):
    return ab.attention_backward(q, k, v, o, lse, do, causal, plan=CAUSAL if causal else FULL)
'''


def bench_and_grade(best: dict, budget: float) -> None:
    from gpuprinciples.course import catalog
    from gpuprinciples.instructor import bench
    from gpuprinciples.measure import calibrate
    ab.GPU_PLAN = best.get(False, ab.GPU_PLAN)
    ab.GPU_CAUSAL_PLAN = best.get(True, ab.GPU_CAUSAL_PLAN)
    print(f"\n== gpuprinciples bench rows, plans: full {ab.GPU_PLAN.label()}; causal {ab.GPU_CAUSAL_PLAN.label()}",
          flush=True)
    ceilings = calibrate.ceilings()
    print(f"{torch.cuda.get_device_name()}: {ceilings}", flush=True)
    ex = catalog.get("backward.attention_backward")
    for spec in ex.timing.each():
        if left(budget) < 45:
            print("  (bench: out of time)")
            break
        try:
            bench._print(bench.bench_exercise(ex, ceilings, spec=spec))
        except Exception as exc:  # noqa: BLE001
            print(f"  bench {spec.label}: {type(exc).__name__}: {exc}")
        torch.cuda.empty_cache()
    path = os.path.join(tempfile.mkdtemp(), "winner_backward.py")
    with open(path, "w") as f:
        f.write(WINNER.format(full=ab.GPU_PLAN, causal=ab.GPU_CAUSAL_PLAN))
    from gpuprinciples.grader.grading import grade
    from gpuprinciples.sandbox.submission import from_path  # what `gpuprinciples grade EXERCISE FILE:NAME` grades
    for ex_id, where in (("backward.attention_backward", f"{path}:attention_backward"),
                         ("backward.attention_function", "gpuprinciples/course/exercises/backward.py:attention")):
        if left(budget) < 15:
            print(f"\n== grade {ex_id}: skipped (out of time)")
            continue
        report = grade(ex_id, from_path(where), timeout=max(left(budget), 15))
        print(f"\n== grade {ex_id} ({report.duration_s:.0f} s): {report.status} "
              f"{json.dumps(report.measurements, default=str)[:1200]}", flush=True)
        for r in report.reasons[:3]:
            print("   reason:", r[:300])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=170.0, help="seconds; past it the rest is skipped")
    parser.add_argument("--jobs", type=int, default=12, help="processes compiling at once")
    parser.add_argument("--dry-run", action="store_true", help="a CPU: tiny shapes under the interpreter")
    parser.add_argument("--skip", default="", help="comma-separated: gradcheck,bench")
    parser.add_argument("--plans", default="0-", help="indices into PLANS, comma-separated, each I or I-J or I- "
                        "(J included); the first plan is always timed too, as the others' reference (default: all)")
    a = parser.parse_args()
    picked = set()
    for part in a.plans.split(","):
        start, dash, end = part.partition("-")
        picked.update(range(int(start), int(end) + 1 if end else len(PLANS)) if dash else [int(start)])
    plans = [p for i, p in enumerate(PLANS) if i == 0 or i in picked]
    skip = set(a.skip.split(","))
    if a.dry_run:
        print("dry run (interpreter, CPU): B1 H2 N80 D32", flush=True)
        best = sweep(DRY_PLANS, (1, 2, 80, 32), torch.bfloat16, "cpu", a.budget, {},
                     lambda fn: (lambda t: (fn(), (time.perf_counter() - t) * 1e3)[1])(time.perf_counter()))
        print(f"  (CPU times: the interpreter's, nothing about a GPU) best {[(c, p.label()) for c, p in best.items()]}")
        if "gradcheck" not in skip:
            gradcheck("cpu")
        return
    import triton
    from triton.testing import do_bench
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    shape = (4, 16, 4096, 128)
    refused = precompile(plans, a.jobs, a.budget * 0.4, (1, 2, 256, 128))
    best = sweep(plans, shape, torch.bfloat16, "cuda", a.budget * 0.7, refused,
                 lambda fn: do_bench(fn, warmup=10, rep=60, return_mode="median"))
    if "gradcheck" not in skip:
        gradcheck("cuda")
    if "bench" not in skip:
        bench_and_grade(best, a.budget)
    print(f"\n(total {time.monotonic() - START:.0f} s)")


if __name__ == "__main__":
    main()
