"""Issue 32: check and time `attention_backward_gluon` on a Hopper GPU (H100/H200), against the package's Triton
backward, float64 autograd, and SDPA's FlashAttention and cuDNN backwards.

    PYTHONPATH=. python tools/check_gluon_backward.py [--budget SECONDS] [--variants ws,plain]
                                                      [--time-only ws+plain,plain+ws]
    PYTHONPATH=. python tools/check_gluon_backward.py --compile-only      # any machine: the sm_90 compile alone

Variants (`VARIANTS`): which passes are warp-specialised (ws, plain, ws+plain, plain+ws, default) and the causal
CTAs' order (grid: the 2-D grid, head by head; per-head: the same order on one axis; grouped: longest first across 8
heads).

1. Every Gluon kernel (dK/dV and dQ; warp-specialised and plain; causal and not; D 128 and 64) is compiled for
   sm_90 (`compile_for_hopper`: no GPU needed) and its registers, spills, shared memory and setmaxnreg printed.
   Without a GPU the script stops there: it says so and exits 1 (so a CPU run is the compile check).
2. On the GPU, in this process: the package's Triton backward, SDPA flash and cuDNN timed at B4 H16 N4096 D128
   bf16, causal and not (`do_bench` medians, L2 cleared).
3. Each Gluon variant in a process of its own, with a timeout: a wrong mbarrier phase hangs a kernel, and a
   hung or faulting kernel takes its CUDA context down with it. There: gradients against float64 autograd and
   the Triton backward's (N = 128, 1024, 4096; causal and not; D 128 and 64), each launch announced before it
   runs, so that a hang names its case; then the same timing.

TFLOP/s count the backward as 10·B·H·N²·D (five N×N×D products), half causal, as docs/flash-backward-h200.md.
A Gluon case is right if its gradients are finite and no further from float64 than 2× the Triton backward's
distance plus 1e-3 of the largest gradient (and, at the timed shape, within 2 % of the Triton backward's).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tune_backward as tb  # noqa: E402 - its inputs and its gradient check

from gpuprinciples.course.kernels import attention_backward as ab  # noqa: E402

TIMED = (4, 16, 4096, 128)
# (B, H, N, D) checked against float64 autograd; the float64 scores of one head at N = 4096 are 128 MiB
CHECKED = [(1, 2, 128, 128), (2, 3, 1024, 128), (2, 2, 1024, 64), (1, 1, 4096, 128)]
START = time.monotonic()


def left(budget: float) -> float:
    return budget - (time.monotonic() - START)


def flops(shape, causal: bool) -> float:
    B, H, N, D = shape
    return 10 * B * H * N * N * D / (2 if causal else 1)


# -------------------------------------------------------------------------------------------------
# 1. The compile
# -------------------------------------------------------------------------------------------------


def compile_all() -> int:
    """Print one row per kernel and configuration; the number that failed to compile."""
    import triton

    from gpuprinciples.course.kernels import attention_backward_gluon as g
    print(f"== sm_90 compile (Triton {triton.__version__}, no GPU needed)", flush=True)
    print(f"  {'kernel':<16} {'D':>4} {'causal':>6} {'regs':>5} {'spills':>6} {'smem B':>8}  setmaxnreg", flush=True)
    failed = 0
    for D in (128, 64):
        for causal in (False, True):
            for ws in (True, False):
                started = time.monotonic()
                try:
                    rows = g.compile_for_hopper(D, causal, ws)
                except Exception as exc:  # noqa: BLE001 - the compiler's refusal, reported
                    failed += 2
                    print(f"  {'ws' if ws else 'plain'} D={D} causal={causal}: FAILED {type(exc).__name__}: "
                          f"{str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else ''}", flush=True)
                    continue
                for r in rows:
                    if not r["ok"]:
                        failed += 1
                        print(f"  {r['kernel']:<16} {D:>4} {causal!s:>6}  REFUSED: {r['error']}", flush=True)
                        continue
                    print(f"  {r['kernel']:<16} {D:>4} {causal!s:>6} {r['registers']!s:>5} {r['spills']!s:>6} "
                          f"{r['shared_bytes']:>8}  {', '.join(r['setmaxnreg']) or '-'}"
                          f"{'' if r['wgmma'] else '  (no wgmma!)'}", flush=True)
                print(f"    ({time.monotonic() - started:.0f} s)", flush=True)
    return failed


# -------------------------------------------------------------------------------------------------
# 2. Baselines, in this process
# -------------------------------------------------------------------------------------------------


def bench(fn) -> float:
    from triton.testing import do_bench
    return do_bench(fn, warmup=10, rep=60, return_mode="median")


def baselines(budget: float) -> dict:
    """{causal: {name: ms}} of the Triton backward and SDPA's at the timed shape."""
    from gpuprinciples.course.exercises.backward import sdpa_backward
    times = {}
    for causal in (False, True):
        if left(budget) < 30:
            print("  (baselines: out of time)", flush=True)
            break
        args = tb.inputs(TIMED, torch.bfloat16, "cuda", causal)
        row = {"triton": bench(lambda args=args: ab.attention_backward(*args, causal))}
        for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
            fn = sdpa_backward(name)
            try:
                fn(*args, causal)
                row[name.split("_")[0].lower()] = bench(lambda fn=fn, args=args: fn(*args, causal))
            except Exception as exc:  # noqa: BLE001 - a backend this build lacks
                print(f"  sdpa {name}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
        times[causal] = row
        print("  " + "  ".join(f"{n} {ms:.3f} ms ({flops(TIMED, causal) / ms / 1e9:.0f} TFLOP/s)"
                               for n, ms in row.items()) + f"   causal={causal}", flush=True)
        del args
        torch.cuda.empty_cache()
    return times


# -------------------------------------------------------------------------------------------------
# 3. One Gluon variant, in a child process
# -------------------------------------------------------------------------------------------------


def reference64(q, k, v, do, causal: bool):
    """Float64 autograd of softmax(Q Kᵀ/√D [+ causal mask]) V."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    s = q64 @ k64.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    out = torch.softmax(s, dim=-1) @ v64
    return torch.autograd.grad(out, (q64, k64, v64), do.double())


def distances(got, want) -> list[float]:
    return [(g.double() - w.double()).abs().max().item() for g, w in zip(got, want)]


# name -> keyword arguments of `attention_backward_gluon.attention_backward`: `ws` (dK/dV pass, dQ pass) warp-
# specialised; `causal_group`, the causal CTAs' order (1: head by head on one program axis, the 2-D grid's order;
# 8: the longest CTAs of 8 heads first); the rest as the package's defaults
VARIANTS = {"ws": {"ws": (True, True)}, "plain": {"ws": (False, False)}, "ws+plain": {"ws": (True, False)},
            "plain+ws": {"ws": (False, True)}, "default": {}, "grid": {"causal_group": 0},
            "per-head": {"causal_group": 1}, "grouped": {"causal_group": 8}}


def cases(variant: str, shapes, budget: float, reserve: float, what: str):
    """(shape, causal, inputs) of each shape, not causal then causal, announced before it runs (a hang names
    its case); none once fewer than `reserve` seconds of `budget` are left."""
    for shape in shapes:
        for causal in (False, True):
            if left(budget) < reserve:
                print(f"  ({what}: out of time)", flush=True)
                return
            print(f"  launching {variant} {shape} causal={causal} ...", flush=True)
            yield shape, causal, tb.inputs(shape, torch.bfloat16, "cuda", causal)
            torch.cuda.empty_cache()


def child(variant: str, budget: float, check: bool) -> None:
    """Check (unless not `check`), then time, one variant; a line "RESULT {json}" per outcome, for the parent."""
    from gpuprinciples.course.kernels import attention_backward_gluon as g
    chosen = VARIANTS[variant]

    def run(args, causal, compiled=None):
        return g.attention_backward(*args, causal, compiled=compiled, **chosen)

    ok = True
    for shape, causal, args in cases(variant, CHECKED if check else (), budget, 20, "checks"):
        compiled = []
        got = run(args, causal, compiled)
        torch.cuda.synchronize()
        ref = reference64(args[0], args[1], args[2], args[5], causal)
        tri = ab.attention_backward(*args, causal)
        dg, dt = distances(got, ref), distances(tri, ref)
        tops = [r.abs().max().item() for r in ref]
        finite = all(torch.isfinite(t).all().item() for t in got)
        right = finite and all(a <= 2 * b + 1e-3 * top for a, b, top in zip(dg, dt, tops))
        ok &= right
        print(f"  {'ok   ' if right else 'WRONG'} {variant} {shape} causal={causal}: |gluon − f64| "
              f"dq {dg[0]:.2e} dk {dg[1]:.2e} dv {dg[2]:.2e}; |triton − f64| dq {dt[0]:.2e} dk {dt[1]:.2e} "
              f"dv {dt[2]:.2e}; largest {max(tops):.2e}" + ("" if finite else "; NaN/inf"), flush=True)
        for c in compiled:
            print(f"    {c.name}: {c.n_regs} registers, {c.n_spills} spills, {c.metadata.shared} B shared",
                  flush=True)
        print("RESULT " + json.dumps({"variant": variant, "shape": shape, "causal": causal, "right": right}),
              flush=True)
        del args, got, ref, tri
    for _, causal, args in cases(variant, (TIMED,), budget, 15, "timing"):
        problem = tb.wrong(run(args, causal), ab.attention_backward(*args, causal))
        ms = None if problem else bench(lambda args=args: run(args, causal))
        print(f"  {variant} {TIMED} causal={causal}: " + (f"WRONG against the Triton backward: {problem}"
              if problem else f"{ms:.3f} ms ({flops(TIMED, causal) / ms / 1e9:.0f} TFLOP/s)"), flush=True)
        print("RESULT " + json.dumps({"variant": variant, "timed": True, "causal": causal, "ms": ms,
                                      "problem": problem}), flush=True)
        del args
    sys.exit(0 if ok else 2)


def spawn(variant: str, timeout: float, check: bool) -> list[dict]:
    """Run `child(variant)` in a process of its own, echoing its lines; killed (by its id) after `timeout` s."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", variant, "--budget", f"{timeout - 5:.0f}"] + \
        ([] if check else ["--time-only", variant])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] + [lines.put(None)],
                              daemon=True)
    reader.start()
    results, last = [], ""
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            proc.kill()
            print(f"  {variant}: KILLED after {timeout:.0f} s; its last line: {last!r} (a hang: an mbarrier "
                  "wait that never completes?)", flush=True)
            break
        if line is None:
            break
        line = line.rstrip("\n")
        if line.startswith("RESULT "):
            results.append(json.loads(line[7:]))
        else:
            print(line, flush=True)
            last = line
    code = proc.wait()
    if code not in (0, 2, -9):
        print(f"  {variant}: exited {code} (a fault takes its CUDA context, and the cases after it, down)",
              flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=540.0, help="seconds; past it the rest is skipped")
    parser.add_argument("--variants", default="ws,plain", help=f"Gluon variants, comma-separated: {', '.join(VARIANTS)}"
                        " (ws+plain: the dK/dV pass warp-specialised, the dQ pass plain; default: the package's)")
    parser.add_argument("--time-only", default="", help="variants timed (and compared at the timed shape) unchecked")
    parser.add_argument("--compile-only", action="store_true", help="the sm_90 compile alone, then exit")
    parser.add_argument("--skip-compile", action="store_true", help="on a GPU: no CPU-side compile table first")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    a = parser.parse_args()
    unchecked = [v for v in a.time_only.split(",") if v]
    if a.child:
        child(a.child, a.budget, a.child not in unchecked)
        return
    failed = 0 if a.skip_compile and torch.cuda.is_available() else compile_all()
    if a.compile_only or not torch.cuda.is_available():
        if not torch.cuda.is_available():
            print("\nThe checks and timings need a Hopper GPU (H100/H200); this machine has none: compile only.")
        print(f"{failed} kernel(s) failed to compile." if failed else "Every kernel compiled for sm_90.")
        sys.exit(1 if failed or not torch.cuda.is_available() else 0)
    import triton
    print(f"\n== {torch.cuda.get_device_name()}, torch {torch.__version__}, Triton {triton.__version__}; "
          f"B{TIMED[0]} H{TIMED[1]} N{TIMED[2]} D{TIMED[3]} bf16", flush=True)
    if torch.cuda.get_device_capability()[0] != 9:
        print("  not a Hopper GPU (sm_90): the Gluon kernels use wgmma; stopping.")
        sys.exit(1)
    base = baselines(a.budget * 0.35)
    gluon = {}
    variants = a.variants.split(",")
    variants += [v for v in unchecked if v not in variants]
    for i, variant in enumerate(variants):
        print(f"\n== Gluon, {variant}", flush=True)
        for r in spawn(variant, max((left(a.budget) - 5) / (len(variants) - i), 20),
                       variant not in unchecked):
            if r.get("timed") and r["ms"]:
                gluon.setdefault(variant, {})[r["causal"]] = r["ms"]
    print(f"\n== Summary, B{TIMED[0]} H{TIMED[1]} N{TIMED[2]} D{TIMED[3]} bf16: ms (TFLOP/s), ratios to cuDNN and "
          "SDPA flash; target ≥ 0.8× cuDNN")
    for causal in (False, True):
        row = base.get(causal, {})
        for name, ms in [(f"gluon {v}", t[causal]) for v, t in gluon.items() if causal in t] + list(row.items()):
            ratios = "  ".join(f"{row[b] / ms:.2f}x {b}" for b in ("cudnn", "flash") if b in row and b != name)
            print(f"  causal={causal!s:<5} {name:<12} {ms:7.3f} ms ({flops(TIMED, causal) / ms / 1e9:4.0f})  {ratios}")
    print(f"\n(total {time.monotonic() - START:.0f} s)")


if __name__ == "__main__":
    main()
