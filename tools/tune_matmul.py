"""Lesson 11 on a GPU: check the matmul in bf16, sweep its configurations against cuBLAS, and measure the
memory hierarchy (bandwidth against working set, latency, bytes in flight, a wave-quantisation pair).

    PYTHONPATH=. python tools/tune_matmul.py                 # everything, about 4 minutes on an H200
    PYTHONPATH=. python tools/tune_matmul.py sweep memory    # only some sections

Sections: check (bf16 correctness, every loading path), sweep (configurations at 8192³ and a ragged shape,
each against torch.mm timed in the same run), memory (bandwidth curves, latency, Little's law), waves
(132 tiles against 143), compiled (registers and shared memory the GPU reports against the sm_90 compile
made without it), grade (the exercises graded on this GPU). Each item catches its own errors, so one failure
does not hide the rest. A JSON copy of everything goes to $OUT/tune_matmul.json when $OUT is set.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from dataclasses import asdict, replace

import torch

from gpuprinciples import hardware, runtime, timing
from gpuprinciples.exercises import hierarchy
from gpuprinciples.kernels import bandwidth
from gpuprinciples.kernels import matmul as mm

SQUARE = (8192, 8192, 8192)
RAGGED = (8191, 8200, 8184)  # M odd; N and K multiples of 8 (16-byte rows) but of no tile size
C = mm.GPU_CONFIG
CONFIGS = [  # (label, Config): the defaults first, then one knob at a time, then a few combinations
    ("default", C),
    ("stages 4", replace(C, num_stages=4)),
    ("256x128", replace(C, BM=256, BN=128)),
    ("128x128 w4 s4", replace(C, BN=128, num_warps=4, num_stages=4)),
    ("128x128 w8 s4", replace(C, BN=128, num_stages=4)),
    ("128x128x128 w8 s3", replace(C, BN=128, BK=128)),
    ("64x256 w4 s4", replace(C, BM=64, num_warps=4, num_stages=4)),
    ("GROUP_M 1 (row-major)", replace(C, GROUP_M=1)),
    ("GROUP_M 4", replace(C, GROUP_M=4)),
    ("GROUP_M 16", replace(C, GROUP_M=16)),
    ("pointer loads", replace(C, desc=False)),
    ("128x128 w4 s4 pointers", replace(C, BN=128, num_warps=4, num_stages=4, desc=False)),
    ("persistent 1/SM", replace(C, programs_per_sm=1)),
    ("128x128 w8 s4 persistent 1/SM", replace(C, BN=128, num_stages=4, programs_per_sm=1)),
    ("128x128 w4 s4 persistent 2/SM", replace(C, BN=128, num_warps=4, num_stages=4, programs_per_sm=2)),
]
RESULTS: dict = {}


def item(section: str, name: str):
    """Run one measurement; print and keep its error instead of stopping."""
    def wrap(fn):
        started = time.perf_counter()
        try:
            value = fn()
        except Exception as exc:  # noqa: BLE001 - one failure must not hide the rest
            value = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
            print(f"  [{section}] {name}: FAILED {value['error']}", flush=True)
            traceback.print_exc(limit=3, file=sys.stderr)
        RESULTS.setdefault(section, {})[name] = value
        if isinstance(value, dict):
            value.setdefault("seconds", round(time.perf_counter() - started, 2))
        return value
    return wrap


def bf16(shape, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, generator=gen, device="cuda", dtype=torch.bfloat16)


def within_tolerance(out, a, b) -> dict:
    """The grader's bf16 judge (exercises/hierarchy.py), on the GPU in float64."""
    want = a.double() @ b.double()
    allowed = hierarchy.matmul_tolerance(a, b, want)
    err = (out.double() - want).abs()
    return {"wrong": int((err > allowed).sum()), "max_err_over_allowed": float((err / allowed).max())}


# -------------------------------------------------------------------------------------------------


def section_check():
    print("\n== check: bf16 on this GPU, the grader's tolerance (wrong values / worst error ÷ allowed)", flush=True)
    # M odd, N and K ≡ 8 mod 16: one specialization (one compile) per configuration, and M = 1 another
    shapes = [(1, 8, 8), (37, 72, 88), (1023, 1000, 1528), (4097, 4104, 520)]
    variants = [("default", C), ("pointer loads", replace(C, desc=False)),
                ("persistent", dict(CONFIGS)["persistent 1/SM"]), ("small-problem config", mm.SMALL_GPU_CONFIG),
                ("auto (default_config)", None)]
    for label, cfg in variants:
        for M, N, K in shapes:
            @item("check", f"{label} {M}x{N}x{K}")
            def run(cfg=cfg, M=M, N=N, K=K):
                a, b = bf16((M, K), 1), bf16((K, N), 2)
                out = mm.matmul(a, b, cfg)
                assert out.dtype == torch.bfloat16 and out.shape == (M, N)
                return within_tolerance(out, a, b)
            print(f"  {label:>22} {M:>5}x{N:<5}x{K:<5} {run}", flush=True)
    a, b = bf16((300, 100), 3), bf16((100, 130), 4)  # rows of 200 and 260 bytes: not 16-byte aligned
    result = item("check", "unaligned rows (pointer fallback)")(lambda: within_tolerance(mm.matmul(a, b), a, b))
    print(f"  {'unaligned rows':>22} 300x130x100   {result}", flush=True)


def _time_vs_cublas(M, N, K, label, cfg, budget_s=0.3):
    a, b = bf16((M, K), 5), bf16((K, N), 6)
    flops = 2 * M * N * K
    mm.matmul(a, b, cfg)  # compile outside the timing
    result = timing.compare({"triton": lambda x, y: mm.matmul(x, y, cfg), "torch.mm": torch.mm}, args=(a, b),
                            device="cuda", budget_s=budget_s, min_rounds=10)
    s = result.speedup("triton", "torch.mm")
    return {"tflops": flops / result.timings["triton"].median / 1e12,
            "cublas_tflops": flops / result.timings["torch.mm"].median / 1e12,
            "of_cublas": [s.ratio, s.ci_low, s.ci_high], "rounds": len(result.rounds), "config": asdict(cfg)}


def section_sweep():
    for shape_name, (M, N, K) in (("8192³", SQUARE), ("ragged", RAGGED)):
        print(f"\n== sweep {shape_name} M={M} N={N} K={K} bf16: TFLOP/s, cuBLAS in the same run, "
              f"ours/cuBLAS [95% interval]", flush=True)
        rows = []
        for label, cfg in CONFIGS:
            r = item(f"sweep {shape_name}", label)(lambda cfg=cfg: _time_vs_cublas(M, N, K, label, cfg))
            rows.append((label, cfg, r))
            if "error" in r:
                continue
            ratio, low, high = r["of_cublas"]
            print(f"  {label:32} {cfg.label():38} {r['tflops']:6.0f} {r['cublas_tflops']:6.0f}   "
                  f"{ratio:5.2f} [{low:.2f}, {high:.2f}]", flush=True)
        best = max((r for r in rows if "error" not in r[2]), key=lambda r: r[2]["of_cublas"][0], default=None)
        if best:
            print(f"  best: {best[0]} ({best[1].label()}), {best[2]['of_cublas'][0]:.2f} of cuBLAS", flush=True)
        torch.cuda.empty_cache()


def section_memory():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"\n== memory: L2 {l2 / 2**20:.0f} MiB (from the device), {sms} SMs; read bandwidth, TB/s", flush=True)
    print("  rotating chunks, cached in L2 only (.cg), 4 programs per SM:", flush=True)
    for size in (1, 2, 4, 8, 16, 24, 32, 40, 48, 64, 96, 128, 256, 512, 1024):
        r = item("memory l2", f"{size} MiB")(lambda size=size: bandwidth.working_set_bandwidth(size * 2**20))
        if "error" not in r:
            print(f"    {r['bytes'] / 2**20:>7.1f} MiB: {r['bandwidth'] / 1e12:6.2f}  ({r['passes']} passes, spread "
                  f"{r['spread']:.0%})", flush=True)
    print("  own chunk, cached in L1 (.ca), per SM working set:", flush=True)
    for kib in (16, 32, 64, 96, 128, 160, 192, 256, 384, 512, 1024):
        r = item("memory l1", f"{kib} KiB/SM")(
            lambda kib=kib: bandwidth.working_set_bandwidth(kib * 1024 * sms, level="l1"))
        if "error" not in r:
            print(f"    {r['per_sm_bytes'] / 1024:>7.1f} KiB/SM: {r['bandwidth'] / 1e12:6.2f}", flush=True)
    print("  latency, one thread chasing a random cycle (ns per load):", flush=True)
    latency = {}
    for name, nbytes, cache in (("L1 16 KiB .ca", 16 * 1024, ".ca"), ("L2 4 MiB .cg", 4 * 2**20, ".cg"),
                                ("HBM 1 GiB .cg", 2**30, ".cg")):
        r = item("latency", name)(lambda nbytes=nbytes, cache=cache: {"seconds_per_load": bandwidth.pointer_chase(
            nbytes, cache=cache)})
        if "error" not in r:
            latency[name] = r["seconds_per_load"]
            print(f"    {name:>14}: {r['seconds_per_load'] * 1e9:6.0f}", flush=True)
    print("  bytes in flight (1 GiB buffer, from HBM): programs per SM × block → TB/s", flush=True)
    best = 0.0
    for per_sm in (1, 2, 4, 8):
        for block in (512, 2048, 8192):
            def run(per_sm=per_sm, block=block):
                return bandwidth.working_set_bandwidth(2**30, programs_per_sm=per_sm, block=block, min_bytes_read=2**30)
            r = item("in flight", f"{per_sm}x{block}")(run)
            if "error" not in r:
                best = max(best, r["bandwidth"])
                print(f"    {per_sm} × {block:>5} floats = {per_sm * block * 4 / 1024:6.0f} KiB/SM: "
                      f"{r['bandwidth'] / 1e12:5.2f}", flush=True)
    if best and "HBM 1 GiB .cg" in latency:
        flight = best * latency["HBM 1 GiB .cg"]
        RESULTS["littles_law"] = {"bandwidth": best, "latency": latency["HBM 1 GiB .cg"], "bytes_in_flight": flight}
        print(f"  Little's law: {best / 1e12:.2f} TB/s × {latency['HBM 1 GiB .cg'] * 1e9:.0f} ns = "
              f"{flight / 2**20:.1f} MiB in flight, {flight / sms / 1024:.0f} KiB per SM", flush=True)
    r = item("memory", "cliff (hierarchy.l2_cliff's measurement)")(hierarchy.measure_cliff)
    if "error" not in r:
        print(f"  l2_cliff sizes {list(r['bandwidths'])} MiB: " + ", ".join(
            f"{bw / 1e12:.2f}" for bw in r["bandwidths"].values()) + f" TB/s; HBM {r['hbm'] / 1e12:.2f}; "
            f"answer {r['cliff']} MiB", flush=True)


def section_waves():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    K, N = 8192, 2816
    print(f"\n== waves: 128x256 tiles, N={N}, K={K} ({sms} SMs); TFLOP/s", flush=True)
    for M in (1536, 1537):
        tiles = math.ceil(M / 128) * math.ceil(N / 256)
        r = item("waves", f"M={M}")(lambda M=M: _time_vs_cublas(M, N, K, "waves", C, budget_s=0.5))
        if "error" not in r:
            print(f"  M={M}: {tiles} tiles ({tiles / sms:.2f} waves): triton {r['tflops']:5.0f}, "
                  f"cuBLAS {r['cublas_tflops']:5.0f}", flush=True)


def section_compiled():
    from gpuprinciples import gpucompile
    print("\n== compiled: the kernel as launched here (256² bf16, strides divisible by 16) against the one compiled "
          "from a hand-written signature (gpucompile.compile_kernel: integers of unknown divisibility)", flush=True)
    sig = {"A": "*bf16", "B": "*bf16", "C": "*bf16", "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
           "stride_bk": "i32", "stride_cm": "i32"}
    a = bf16((256, 256), 7)
    c = torch.empty_like(a)
    for bm, bn, bk, warps, stages, desc in ((128, 256, 64, 8, 3, True), (128, 128, 64, 4, 4, True),
                                            (128, 256, 64, 8, 3, False)):
        def run(bm=bm, bn=bn, bk=bk, warps=warps, stages=stages, desc=desc):
            kernel = mm.matmul_kernel.warmup(a, a, c, 256, 256, 256, 256, 256, 256, BM=bm, BN=bn, BK=bk, GROUP_M=8,
                                             DESC=desc, num_warps=warps, num_stages=stages, grid=(1,))
            kernel[(1, 1, 1)]  # loads it: the driver's register count
            info = gpucompile.compile_kernel(mm.matmul_kernel, sig, {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8,
                                             "DESC": desc}, num_warps=warps, num_stages=stages)
            return {"as_launched": {"regs": kernel.n_regs, "spills": kernel.n_spills, "shared": kernel.metadata.shared},
                    "hand_signature": {"regs": info.registers, "spills": info.spills, "shared": info.shared_bytes,
                                       "wgmma": info.wgmma, "ok": info.ok}}
        r = item("compiled", f"{bm}x{bn}x{bk} w{warps} s{stages} {'desc' if desc else 'ptr'}")(run)
        print(f"  {bm}x{bn}x{bk} w{warps} s{stages} {'desc' if desc else 'ptr'}: {r}", flush=True)


def section_grade():
    from gpuprinciples.grading import grade
    from gpuprinciples.submission import Submission, from_path
    print("\n== grade: the exercises on this GPU", flush=True)
    here = os.path.dirname(os.path.abspath(__file__))
    subs = {"hierarchy.matmul (reference)": ("hierarchy.matmul", Submission(
                source="from gpuprinciples.kernels.matmul import matmul\n", name="matmul", origin="reference")),
            "hierarchy.matmul (tutorial style)": ("hierarchy.matmul", from_path(
                os.path.join(here, "..", "tests", "submissions", "hierarchy", "tutorial_style.py") + ":matmul")),
            "hierarchy.occupancy (reference)": ("hierarchy.occupancy", Submission(
                source="from gpuprinciples.occupancy import resident_warps\n", name="resident_warps",
                origin="reference"))}
    for label, (exercise, sub) in subs.items():
        def run(exercise=exercise, sub=sub):
            report = grade(exercise, sub)
            return {"status": report.status, "reasons": report.reasons,
                    "measurements": {k: v for k, v in report.measurements.items() if k != "counts"}}
        r = item("grade", label)(run)
        print(f"  {label}: {r.get('status', r.get('error'))} {r.get('reasons', '')}", flush=True)
        if "measurements" in r:
            m = r["measurements"]
            print(f"    time_ms {m.get('time_ms')}, TFLOP/s {m.get('TFLOPps')}, speedup {m.get('speedup')}", flush=True)


SECTIONS = {"check": section_check, "sweep": section_sweep, "memory": section_memory, "waves": section_waves,
            "compiled": section_compiled, "grade": section_grade}


def main(argv):
    if not runtime.HAS_CUDA:
        print("tools/tune_matmul.py needs a CUDA GPU.", file=sys.stderr)
        return 2
    wanted = argv or list(SECTIONS)
    unknown = [w for w in wanted if w not in SECTIONS]
    if unknown:
        print(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    props = torch.cuda.get_device_properties(0)
    import triton
    print(f"{props.name}, {props.multi_processor_count} SMs, L2 {props.L2_cache_size / 2**20:.0f} MiB; torch "
          f"{torch.__version__}, Triton {triton.__version__}; {hardware.ceilings()}", flush=True)
    RESULTS["device"] = {"name": props.name, "sms": props.multi_processor_count, "l2": props.L2_cache_size,
                         "torch": torch.__version__, "triton": triton.__version__}
    for name in wanted:
        t0 = time.perf_counter()
        try:
            SECTIONS[name]()
        except Exception as exc:  # noqa: BLE001
            print(f"section {name} FAILED: {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc()
        print(f"  ({name}: {time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"\ntotal {time.perf_counter() - started:.0f} s", flush=True)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "tune_matmul.json"), "w") as f:
            json.dump(RESULTS, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
