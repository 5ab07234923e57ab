"""Issue 31 on a GPU, in one run: the attention forward's and the matmul's configurations against the libraries,
then `gpuprinciples bench`'s rows for both exercises and the two references graded on this GPU.

    PYTHONPATH=. python tools/tune_roof.py [--budget SECONDS]

1. attention B4 H16 N4096 D128 bf16 (not causal): every configuration below (`attention(..., blocks=...)`, each
   checked against SDPA first), SDPA flash and cuDNN; TFLOP/s and the ratios to both;
2. matmul at 8192³ and at the ragged 8191×8200×8184: each configuration against torch.mm (cuBLAS);
3. `bench.bench_exercise` for flash.attention and hierarchy.matmul (both shapes), the matmul's defaults set to
   the best configuration of item 2 for each shape (printed; the package's defaults are what was committed);
4. `gpuprinciples grade` of both references on this GPU (JSON: status, speedups, roof).

Timings of items 1-2: `triton.testing.do_bench` medians (L2 cleared before each call); item 3: bench's own
interleaved rounds. Past the budget the remaining items are skipped and say so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace

import torch
import triton
from triton.testing import do_bench

from gpuprinciples import calibrate
from gpuprinciples.course import catalog
from gpuprinciples.course.kernels import attention as at
from gpuprinciples.course.kernels import matmul as mm
from gpuprinciples.instructor import bench

START = time.monotonic()
ATTENTION = [  # BLOCK_M, BLOCK_N, num_stages, num_warps, warp-specialised
    (128, 64, 3, 4, False), (128, 64, 4, 8, False), (128, 128, 2, 8, False), (128, 128, 3, 8, False),
    (128, 128, 2, 4, True), (128, 64, 3, 4, True), (128, 64, 2, 4, True), (128, 64, 4, 4, True),
    (256, 64, 3, 8, False)]
C = mm.GPU_CONFIG
MATMUL = [("default", C), ("BK128 s2 C/2", replace(C, BK=128, num_stages=2, split_c=2)),
          ("s4 C/2", replace(C, num_stages=4, split_c=2)), ("256x128", replace(C, BM=256, BN=128)),
          ("256x128 s4 C/2", replace(C, BM=256, BN=128, num_stages=4, split_c=2)),
          ("GROUP_M 16", replace(C, GROUP_M=16)), ("A by pointers", replace(C, desc="bc")),
          ("BK128 s2 C/2 256x128", replace(C, BM=256, BN=128, BK=128, num_stages=2, split_c=2))]


def left(budget: float) -> float:
    return budget - (time.monotonic() - START)


def ms_of(fn) -> float:
    return do_bench(fn, warmup=15, rep=60, return_mode="median")


def attention_sweep(budget: float) -> None:
    B, H, N, D = 4, 16, 4096, 128
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4 * B * H * N * N * D
    want = at.sdpa("FLASH_ATTENTION")(q, k, v)
    libs = {name: ms_of(lambda f=at.sdpa(name): f(q, k, v)) for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION")}
    flash, cudnn = libs["FLASH_ATTENTION"], libs["CUDNN_ATTENTION"]
    print(f"\n== attention B{B} H{H} N{N} D{D} bf16: sdpa flash {flash:.3f} ms {flops / flash / 1e9:.0f} TFLOP/s, "
          f"cuDNN {cudnn:.3f} ms {flops / cudnn / 1e9:.0f} TFLOP/s", flush=True)
    rows = []
    for bm, bn, s, w, ws in ATTENTION:
        if left(budget) < 0:
            print("  (out of time: the rest skipped)")
            break
        blocks = {"BLOCK_M": bm, "BLOCK_N": bn, "num_stages": s, "num_warps": w, "WARP_SPECIALIZE": ws}
        label = f"{bm}x{bn} s{s} w{w}{' ws' if ws else ''}"
        try:
            err = (at.attention(q, k, v, blocks=blocks).float() - want.float()).abs().max().item()
            ms = ms_of(lambda: at.attention(q, k, v, blocks=blocks))
        except Exception as exc:  # noqa: BLE001 - out of resources, a compiler refusal
            print(f"  {label:<22} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}", flush=True)
            continue
        rows.append((ms, label))
        print(f"  {label:<22} {ms:.3f} ms {flops / ms / 1e9:5.0f} TFLOP/s  {cudnn / ms:.2f}x cuDNN  "
              f"{flash / ms:.2f}x flash  max|err| vs flash {err:.1e}", flush=True)
    ms = ms_of(lambda: at.attention(q, k, v))
    print(f"  {'package default (autotuned)':<22} {ms:.3f} ms {flops / ms / 1e9:5.0f} TFLOP/s  {cudnn / ms:.2f}x cuDNN"
          f"  {flash / ms:.2f}x flash; picked {getattr(at.attention_kernel_tuned, 'best_config', None)}", flush=True)


def matmul_sweep(budget: float) -> dict:
    best = {}
    for label, (M, N, K) in (("8192³", (8192, 8192, 8192)), ("ragged", (8191, 8200, 8184))):
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=gen)
        want = torch.mm(a, b).float()
        cublas = ms_of(lambda: torch.mm(a, b))
        flops = 2 * M * N * K
        print(f"\n== matmul {label} M={M} N={N} K={K} bf16: cuBLAS {cublas:.3f} ms {flops / cublas / 1e9:.0f} TFLOP/s",
              flush=True)
        rows = []
        for name, cfg in MATMUL:
            if left(budget) < 0:
                print("  (out of time: the rest skipped)")
                break
            try:
                err = ((mm.matmul(a, b, cfg).float() - want).abs().max() / want.abs().max()).item()
                ms = ms_of(lambda: mm.matmul(a, b, cfg))
            except Exception as exc:  # noqa: BLE001
                print(f"  {name:<16} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}", flush=True)
                continue
            rows.append((ms, name, cfg))
            print(f"  {name:<16} {cfg.label():<44} {ms:.3f} ms {flops / ms / 1e9:5.0f} TFLOP/s "
                  f"{cublas / ms:.3f}x cuBLAS  err {err:.1e}", flush=True)
        if rows:
            best[label] = min(rows, key=lambda r: r[0])
            print(f"  best: {best[label][1]}", flush=True)
    return best


def bench_rows(best: dict) -> None:
    if "8192³" in best:
        mm.GPU_CONFIG = best["8192³"][2]
    if "ragged" in best:
        mm.RAGGED_GPU_CONFIG = best["ragged"][2]
    print(f"\n== gpuprinciples bench rows (matmul defaults: aligned {mm.GPU_CONFIG.label()}, ragged "
          f"{mm.RAGGED_GPU_CONFIG.label()})", flush=True)
    ceilings = calibrate.ceilings()
    print(f"{torch.cuda.get_device_name()}: {ceilings}", flush=True)
    for ex_id in ("flash.attention", "hierarchy.matmul"):
        ex = catalog.get(ex_id)
        for spec in ex.timing.each():
            bench._print(bench.bench_exercise(ex, ceilings, spec=spec))
            torch.cuda.empty_cache()


def grade(budget: float) -> None:
    for ex_id, ref in (("flash.attention", "gpuprinciples/course/kernels/attention.py:attention"),
                       ("hierarchy.matmul", "gpuprinciples/course/kernels/matmul.py:matmul")):
        if left(budget) < 20:
            print(f"\n== grade {ex_id}: skipped (out of time)")
            continue
        started = time.monotonic()
        try:
            run = subprocess.run([sys.executable, "-m", "gpuprinciples.cli", "grade", ex_id, ref, "--json"],
                                 capture_output=True, text=True, timeout=max(left(budget), 20))
        except subprocess.TimeoutExpired:
            print(f"\n== grade {ex_id}: out of time after {time.monotonic() - started:.0f} s")
            continue
        try:
            report = json.loads(run.stdout)
            m = report.get("measurements", {})
            keep = {k: m.get(k) for k in ("time_ms", "TFLOPps", "speedup", "roof")}
            extra = {k: {kk: v.get(kk) for kk in ("time_ms", "speedup", "roof")} for k, v in m.items()
                     if k.startswith("timing ") and isinstance(v, dict)}
            print(f"\n== grade {ex_id} (exit {run.returncode}, {time.monotonic() - started:.0f} s): "
                  f"{report.get('status')} {json.dumps(keep)} {json.dumps(extra)}")
            for r in report.get("reasons", [])[:3]:
                print("   reason:", r[:300])
        except (json.JSONDecodeError, AttributeError):
            print(f"\n== grade {ex_id} (exit {run.returncode}): {run.stdout[-600:]} {run.stderr[-600:]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=210.0)
    parser.add_argument("--skip", default="", help="comma-separated: attention,matmul,bench,grade")
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    if "attention" not in skip:
        attention_sweep(args.budget * 0.25)
    best = matmul_sweep(args.budget * 0.55) if "matmul" not in skip else {}
    if "bench" not in skip and left(args.budget) > 60:
        bench_rows(best)
    if "grade" not in skip:
        grade(args.budget)
    print(f"\n(total {time.monotonic() - START:.0f} s)")


if __name__ == "__main__":
    main()
