"""Issue 31 on a GPU, in one run: the attention forward's and the matmul's configurations against the libraries,
then `gpuprinciples bench`'s rows for both exercises and the two references graded on this GPU.

    PYTHONPATH=. python tools/tune_roof.py [--budget SECONDS] [--skip bench,grade --apply]

1. attention B4 H16 N4096 D128 bf16 (not causal): every variant of ATTENTION (tiles, warp specialisation, K/V
   descriptors made by the wrapper, the persistent kernel), each checked against SDPA flash first (a wrong or NaN
   one is reported, never chosen), then SDPA flash and cuDNN; TFLOP/s and the ratios to both;
2. matmul at 8192³ and at the ragged 8191×8200×8184: each configuration checked against torch.mm (cuBLAS), then all
   timed interleaved against it; on the ragged shape also the default kernel with A, B or C stored in rows of a
   multiple of 128 bytes (prepared outside the timing): which operand's rows make it slow;
   `--apply`: the winners written into this tree's defaults (the lines printed; a challenger must beat the
   default by 0.5 %);
3. `bench.bench_exercise` for flash.attention and hierarchy.matmul (both shapes): the package's defaults as this
   process imported them (run with `--skip attention,matmul` after an `--apply` run to bench the winners);
4. `gpuprinciples grade` of both references on this GPU (JSON: status, speedups, roof).

Timings of item 1: `triton.testing.do_bench` medians (L2 cleared before each call); items 2-3: interleaved rounds
(`timing.compare`). Past the budget the remaining items are skipped and say so.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

import torch
import triton
from triton.testing import do_bench

from gpuprinciples import calibrate
from gpuprinciples.course import catalog
from gpuprinciples.course.kernels import attention as at
from gpuprinciples.course.kernels import matmul as mm
from gpuprinciples.instructor import bench
from gpuprinciples.measure import timing

START = time.monotonic()
ROOT = Path(__file__).resolve().parents[1]
MARGIN = 0.995  # a challenger replaces a default only when its median is at least 0.5 % shorter
WS = {"num_warps": 4, "WARP_SPECIALIZE": True}  # 2 computing warpgroups + a producer (Triton 3.6: only at 4 warps)
ATTENTION = [  # label, persistent, host descriptors for K and V, blocks
    ("128x128 s2 ws", False, False, {"BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 2, **WS}),
    ("128x128 s2 ws host", False, True, {"BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 2, **WS}),
    ("persistent 128x128 s2 ws", True, False, {"BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 2, **WS}),
    ("persistent 128x128 s2 ws outer", True, False,
     {"BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 2, "OUTER": True, **WS}),
    ("64x64 s2 ws host", False, True, {"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 2, **WS}),
    ("128x64 s2 w4 host", False, True, {"BLOCK_M": 128, "BLOCK_N": 64, "num_stages": 2, "num_warps": 4}),
]
C = mm.GPU_CONFIG
WS4 = {"warp_specialize": "tiles", "num_warps": 4}  # as the attention's: 2 computing warpgroups + a producer
MATMUL_ALIGNED = [("default", C), ("ws tiles", replace(C, **WS4))]
MATMUL_RAGGED = [("default", C), ("ws tiles", replace(C, **WS4)),
                 ("ws k", replace(C, warp_specialize="k", num_warps=4)),
                 ("pad a", replace(C, pad="a")), ("pad b", replace(C, pad="b")), ("pad a,b", replace(C, pad="ab")),
                 ("pad a,b ws tiles", replace(C, pad="ab", **WS4))]


def left(budget: float) -> float:
    return budget - (time.monotonic() - START)


def ms_of(fn) -> float:
    return do_bench(fn, warmup=15, rep=60, return_mode="median")


def attention_sweep(budget: float) -> dict:
    """Each variant checked against SDPA flash (a wrong or NaN one is reported, never chosen), then timed."""
    B, H, N, D = 4, 16, 4096, 128
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4 * B * H * N * N * D
    want = at.sdpa("FLASH_ATTENTION")(q, k, v).float()
    libs = {name: ms_of(lambda f=at.sdpa(name): f(q, k, v)) for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION")}
    flash, cudnn = libs["FLASH_ATTENTION"], libs["CUDNN_ATTENTION"]
    print(f"\n== attention B{B} H{H} N{N} D{D} bf16: sdpa flash {flash:.3f} ms {flops / flash / 1e9:.0f} TFLOP/s, "
          f"cuDNN {cudnn:.3f} ms {flops / cudnn / 1e9:.0f} TFLOP/s", flush=True)
    rows = []
    for label, persistent, host, blocks in ATTENTION:
        if left(budget) < 0:
            print("  (out of time: the rest skipped)")
            break
        if persistent:
            fn = lambda blocks=blocks: at.attention_persistent(q, k, v, blocks=blocks)  # noqa: E731
        else:
            fn = lambda blocks=blocks, host=host: at.attention(q, k, v, blocks=blocks, host_desc=host)  # noqa: E731
        try:
            err = (fn().float() - want).abs().max().item()
            if not err < 2e-2:  # NaN fails this too
                print(f"  {label:<32} WRONG: max|err| vs flash {err:.1e} (not timed, never chosen)", flush=True)
                continue
            ms = ms_of(fn)
        except Exception as exc:  # noqa: BLE001 - out of resources, a compiler refusal
            print(f"  {label:<32} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}", flush=True)
            continue
        rows.append((ms, label, persistent, host, blocks))
        print(f"  {label:<32} {ms:.3f} ms {flops / ms / 1e9:5.0f} TFLOP/s  {cudnn / ms:.3f}x cuDNN  "
              f"{flash / ms:.2f}x flash  max|err| vs flash {err:.1e}", flush=True)
    if not rows:
        return {}
    best = min(rows, key=lambda r: r[0])
    times = {r[1]: r[0] for r in rows}
    baseline = min(t for (label, t) in times.items() if not label.startswith("persistent"))
    if best[2] and best[0] > MARGIN * baseline:
        best = min((r for r in rows if not r[2]), key=lambda r: r[0])  # persistence within noise: not worth it
    print(f"  best: {best[1]}", flush=True)
    choice = {"persistent": best[2], "blocks": best[4] if best[2] else None}
    if "128x128 s2 ws" in times and "128x128 s2 ws host" in times:  # the same kernel, descriptors made where
        choice["host"] = times["128x128 s2 ws host"] < MARGIN * times["128x128 s2 ws"]
    return choice


def padded(t: torch.Tensor) -> torch.Tensor:
    """The same numbers in rows of a multiple of 128 bytes (a view of a wider buffer)."""
    return mm.padded_rows(t)


def matmul_sweep(budget: float) -> dict:
    """Each configuration checked against cuBLAS, then all timed interleaved (timing.compare, L2 flushed); on the
    ragged shape also the default kernel on operands stored with 128-byte rows, one at a time (which one is slow)."""
    best = {}
    for label, (M, N, K), configs in (("8192³", (8192, 8192, 8192), MATMUL_ALIGNED),
                                      ("ragged", (8191, 8200, 8184), MATMUL_RAGGED)):
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=gen)
        want = torch.mm(a, b).float()
        flops = 2 * M * N * K
        fns = {"cuBLAS": lambda a, b: torch.mm(a, b)}
        cfgs = {}
        for name, cfg in configs:
            if left(budget) < 10:
                print(f"  {name}: skipped (out of time)")
                continue
            try:
                err = ((mm.matmul(a, b, cfg).float() - want).abs().max() / want.abs().max()).item()
            except Exception as exc:  # noqa: BLE001
                print(f"  {name:<18} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}", flush=True)
                continue
            if not err < 1e-2:
                print(f"  {name:<18} WRONG: error {err:.1e} (not timed, never chosen)", flush=True)
                continue
            fns[name] = lambda a, b, cfg=cfg: mm.matmul(a, b, cfg)
            cfgs[name] = cfg
        if label == "ragged" and left(budget) > 10:
            c_wide = padded(torch.empty(M, N, device="cuda", dtype=torch.bfloat16))
            a_wide, b_wide = padded(a), padded(b)
            fns["(A stored in 128-byte rows)"] = lambda a, b: mm.matmul(a_wide, b)
            fns["(B stored in 128-byte rows)"] = lambda a, b: mm.matmul(a, b_wide)
            fns["(C stored in 128-byte rows)"] = lambda a, b: mm.matmul(a, b, out=c_wide)
            fns["(A, B, C in 128-byte rows)"] = lambda a, b: mm.matmul(a_wide, b_wide, out=c_wide)
        cmp = timing.compare(fns, args=(a, b), device="cuda", budget_s=min(4.0, max(left(budget), 1.0)))
        cublas = cmp.timings["cuBLAS"].median
        print(f"\n== matmul {label} M={M} N={N} K={K} bf16: cuBLAS {cublas * 1e3:.3f} ms "
              f"{flops / cublas / 1e12:.0f} TFLOP/s ({len(cmp.rounds)} interleaved rounds)", flush=True)
        for name, t in sorted(cmp.timings.items(), key=lambda kv: kv[1].median):
            if name == "cuBLAS":
                continue
            s_ = cmp.speedup(name, "cuBLAS")
            extra = cfgs[name].label() if name in cfgs else "kernel only, operands prepared outside the timing"
            print(f"  {name:<28} {t.median * 1e3:.3f} ms {flops / t.median / 1e12:5.0f} TFLOP/s "
                  f"{s_.ratio:.3f}x cuBLAS [{s_.ci_low:.3f}, {s_.ci_high:.3f}]  {extra}", flush=True)
        if cfgs:
            name = min(cfgs, key=lambda n: cmp.timings[n].median)
            if "default" in cfgs and cmp.timings[name].median > MARGIN * cmp.timings["default"].median:
                name = "default"  # within noise of the default: keep it
            best[label] = (cmp.timings[name].median, name, cfgs[name])
            print(f"  best: {name}", flush=True)
        del a, b, want
        torch.cuda.empty_cache()
    return best


def _edit(path: Path, pattern: str, line: str) -> None:
    text = path.read_text()
    new, n = re.subn(pattern, lambda _: line, text, count=1, flags=re.M)
    assert n == 1, f"{pattern!r} not found in {path}"
    if new != text:
        path.write_text(new)
        print(f"  {path.relative_to(ROOT)}: {line}", flush=True)


def apply_defaults(att: dict, best: dict) -> None:
    """Make the sweep's winners the package's defaults in this working tree (the device's copy), for the bench and
    the grades that a fresh process runs next; the lines changed are printed, to be committed as they are."""
    print("\n== defaults applied", flush=True)
    attention = ROOT / "gpuprinciples/course/kernels/attention.py"
    if "persistent" in att:
        _edit(attention, r"^PERSISTENT = (True|False)", f"PERSISTENT = {att['persistent']}")
        if att["persistent"]:
            _edit(attention, r"^PERSISTENT_BLOCKS = .*$", f"PERSISTENT_BLOCKS = {att['blocks']!r}")
    if "host" in att:
        _edit(attention, r"^HOST_DESCRIPTORS = (True|False)", f"HOST_DESCRIPTORS = {att['host']}")
    matmul = ROOT / "gpuprinciples/course/kernels/matmul.py"
    for label, name in (("8192³", "GPU_CONFIG"), ("ragged", "RAGGED_GPU_CONFIG")):
        if label in best and best[label][1] != "default":
            cfg = best[label][2]
            changed = ", ".join(f"{f.name}={getattr(cfg, f.name)!r}" for f in fields(cfg)
                                if getattr(cfg, f.name) != f.default)
            _edit(matmul, rf"^{name} = .*$", f"{name} = Config({changed})")


def bench_rows() -> None:
    print(f"\n== gpuprinciples bench rows (attention: persistent {at.PERSISTENT}, host descriptors "
          f"{at.HOST_DESCRIPTORS}; matmul defaults: aligned {mm.GPU_CONFIG.label()}, ragged "
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
    parser.add_argument("--apply", action="store_true", help="write the sweeps' winners into this tree's defaults "
                        "(then bench and grade them in a new process)")
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    att = attention_sweep(args.budget * 0.4) if "attention" not in skip else {}
    best = matmul_sweep(args.budget * 0.95) if "matmul" not in skip else {}
    if args.apply:
        apply_defaults(att, best)
    if "bench" not in skip and left(args.budget) > 20:
        bench_rows()
    if "grade" not in skip:
        grade(args.budget)
    print(f"\n(total {time.monotonic() - START:.0f} s)")


if __name__ == "__main__":
    main()
