"""Lesson 11 on a GPU: check the matmul in bf16, sweep its configurations against cuBLAS, and measure the
memory hierarchy (bandwidth against working set, latency, bytes in flight, a wave-quantisation pair).

    PYTHONPATH=. python tools/tune_matmul.py                 # everything (the first version took 59 s without grade)
    PYTHONPATH=. python tools/tune_matmul.py sweep rows grade    # only some sections

Sections: check (bf16 correctness, every loading path), sweep (configurations at 8192³ and at the ragged
8191×8200×8184, each against torch.mm timed in the same run), rows (the ragged shape with its rows padded to
128 bytes, and 8192³ with rows of 8200: is it the row alignment?), cublas (the kernels cuBLAS picks),
memory (bandwidth curves, latency, Little's law), waves (132 tiles against 143), compiled (registers and
shared memory the GPU reports against the sm_90 compile made without it), grade (the exercises graded on
this GPU, both timed shapes). Each item catches its own errors, so one failure does not hide the rest. A
JSON copy of everything goes to $OUT/tune_matmul.json when $OUT is set.
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

from gpuprinciples.course.exercises import hierarchy
from gpuprinciples.course.kernels import bandwidth
from gpuprinciples.course.kernels import matmul as mm
from gpuprinciples.machine import runtime
from gpuprinciples.measure import calibrate, timing

SQUARE = (8192, 8192, 8192)
RAGGED = hierarchy.RAGGED  # M odd; N and K multiples of 8 (16-byte rows) but of no tile size, nor of 64
C = mm.GPU_CONFIG  # persistent, one 128×256 program per SM
PER_TILE = replace(C, programs_per_sm=0)
CONFIGS = [  # (label, Config): the defaults first, then one knob at a time, then a few combinations
    ("default (persistent 1/SM)", C),
    ("one program per tile", PER_TILE),
    ("s4, C stored in halves", replace(C, num_stages=4, split_c=2)),
    ("one per tile, s4, C in halves", replace(PER_TILE, num_stages=4, split_c=2)),
    ("flattened persistent loop", replace(C, flatten=True)),
    ("256x128", replace(C, BM=256, BN=128)),
    ("128x128 w4 s4 persistent 2/SM", replace(C, BN=128, num_warps=4, num_stages=4, programs_per_sm=2)),
    ("GROUP_M 1 (row-major)", replace(C, GROUP_M=1)),
    ("GROUP_M 16", replace(C, GROUP_M=16)),
    ("pointer loads", replace(C, desc="")),
    ("pointer loads, one per tile", replace(PER_TILE, desc="")),
    ("pointer loads, no 16-byte hint", replace(C, desc="", align_hint=False)),
    ("A by pointers, B and C by TMA", replace(C, desc="bc")),
    ("B by pointers, A and C by TMA", replace(C, desc="ac")),
    ("pointer loads, s4", replace(C, desc="", num_stages=4)),
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
    shapes = [(1, 8, 8), (37, 72, 88), (4097, 4104, 520)]
    variants = [("default", C), ("one per tile", PER_TILE), ("pointer loads", replace(C, desc="")),
                ("A by pointers", replace(C, desc="bc")), ("B by pointers", replace(C, desc="ac")),
                ("s4, C in halves", replace(C, num_stages=4, split_c=2)), ("flattened", replace(C, flatten=True)),
                ("small-problem config", mm.SMALL_GPU_CONFIG), ("auto (default_config)", None)]
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


def padded(shape, seed, row):
    """A [rows, cols] bf16 view whose rows are `row` elements apart (row >= cols)."""
    return bf16((shape[0], row), seed)[:, :shape[1]]


def _time_vs_cublas(M, N, K, label, cfg, budget_s=0.3, rows=None):
    """Ours against torch.mm in the same run. `rows`: (A's, B's, C's) row strides, when not contiguous."""
    if rows:
        a, b = padded((M, K), 5, rows[0]), padded((K, N), 6, rows[1])
        c = padded((M, N), 7, rows[2])
        ours, theirs = (lambda x, y: mm.matmul(x, y, cfg, out=c)), (lambda x, y: torch.mm(x, y, out=c))
    else:
        a, b = bf16((M, K), 5), bf16((K, N), 6)
        ours, theirs = (lambda x, y: mm.matmul(x, y, cfg)), torch.mm
    flops = 2 * M * N * K
    ours(a, b)  # compile outside the timing
    result = timing.compare({"triton": ours, "torch.mm": theirs}, args=(a, b),
                            device="cuda", budget_s=budget_s, min_rounds=10)
    s = result.speedup("triton", "torch.mm")
    return {"tflops": flops / result.timings["triton"].median / 1e12,
            "cublas_tflops": flops / result.timings["torch.mm"].median / 1e12,
            "of_cublas": [s.ratio, s.ci_low, s.ci_high], "rounds": len(result.rounds),
            "config": None if cfg is None else asdict(cfg)}


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
            print(f"  {label:32} {cfg.label():46} {r['tflops']:6.0f} {r['cublas_tflops']:6.0f}   "
                  f"{ratio:5.2f} [{low:.2f}, {high:.2f}]", flush=True)
        best = max((r for r in rows if "error" not in r[2]), key=lambda r: r[2]["of_cublas"][0], default=None)
        if best:
            print(f"  best: {best[0]} ({best[1].label()}), {best[2]['of_cublas'][0]:.2f} of cuBLAS", flush=True)
            default = rows[0][2]
            line = hierarchy.MIN_SPEEDUP if shape_name == "8192³" else hierarchy.MIN_SPEEDUP_RAGGED
            which = "GPU_CONFIG" if shape_name == "8192³" else "RAGGED_GPU_CONFIG (rows not 128-byte aligned)"
            if "error" not in default:
                print(f"  the default's lower end {default['of_cublas'][1]:.2f} against the pass line {line:g}; "
                      f"{which} could be {best[1]}", flush=True)
        torch.cuda.empty_cache()


def section_rows():
    """Is the ragged shape slow for its row alignment? The same shapes, the rows laid out differently."""
    print("\n== rows: the ragged shape with rows padded to 128 bytes, 8192³ with rows of 8200 (TFLOP/s; the padded "
          "C written in place by both)", flush=True)
    layouts = [("ragged, contiguous (rows of 16368, 16400 bytes)", RAGGED, None),
               ("ragged, rows padded to 128 B (8192, 8256, 8256)", RAGGED, (8192, 8256, 8256)),
               ("8192³, contiguous", SQUARE, None),
               ("8192³, rows of 8200 (16,400 bytes)", SQUARE, (8200, 8200, 8200))]
    for label, (m, n, k), rows in layouts:
        for cfg_label, cfg in (("default", None), ("pointer loads", replace(C, desc=""))):
            r = item("rows", f"{label}, {cfg_label}")(
                lambda m=m, n=n, k=k, rows=rows, cfg=cfg: _time_vs_cublas(m, n, k, label, cfg, rows=rows))
            if "error" not in r:
                ratio, low, high = r["of_cublas"]
                print(f"  {label:50} {cfg_label:14} {r['tflops']:6.0f} {r['cublas_tflops']:6.0f}   {ratio:5.2f} "
                      f"[{low:.2f}, {high:.2f}]", flush=True)
        torch.cuda.empty_cache()


def section_cublas():
    from gpuprinciples.instructor.figures import _kernel_names
    print("\n== cublas: the kernels torch.mm runs (torch.profiler)", flush=True)
    for label, (m, n, k), rows in (("8192³", SQUARE, None), ("ragged", RAGGED, None),
                                   ("ragged, rows padded to 128 B", RAGGED, (8192, 8256, 8256))):
        def run(m=m, n=n, k=k, rows=rows):
            if rows:
                a, b, c = padded((m, k), 1, rows[0]), padded((k, n), 2, rows[1]), padded((m, n), 3, rows[2])
                return {"kernels": _kernel_names(lambda: torch.mm(a, b, out=c))}
            a, b = bf16((m, k), 1), bf16((k, n), 2)
            return {"kernels": _kernel_names(lambda: torch.mm(a, b))}
        r = item("cublas", label)(run)
        print(f"  {label}: {r.get('kernels', r.get('error'))}", flush=True)
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
                                ("L2 16 MiB .cg", 16 * 2**20, ".cg"), ("HBM 1 GiB .cg", 2**30, ".cg")):
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
    print(f"\n== waves: 128x256 tiles, one program per tile, N={N}, K={K} ({sms} SMs); TFLOP/s", flush=True)
    for M in (1536, 1537):
        tiles = math.ceil(M / 128) * math.ceil(N / 256)
        r = item("waves", f"M={M}")(lambda M=M: _time_vs_cublas(M, N, K, "waves", PER_TILE, budget_s=0.5))
        if "error" not in r:
            print(f"  M={M}: {tiles} tiles ({tiles / sms:.2f} waves): triton {r['tflops']:5.0f}, "
                  f"cuBLAS {r['cublas_tflops']:5.0f}", flush=True)


def section_compiled():
    from gpuprinciples.toolchain import gpucompile
    print("\n== compiled: the kernel as launched here (256² bf16, strides divisible by 16; and the ragged shape) "
          "against the one compiled from a hand-written signature (gpucompile.compile_kernel: integers of unknown "
          "divisibility, no hint)", flush=True)
    sig = {"A": "*bf16", "B": "*bf16", "C": "*bf16", "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
           "stride_bk": "i32", "stride_cm": "i32"}
    a = bf16((256, 256), 7)
    c = torch.empty_like(a)
    M, N, K = RAGGED
    ra, rb, rc = bf16((M, K), 8), bf16((K, N), 9), torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    for label, cfg in (("128x256x64 w8 s3 desc", C), ("128x256x64 w8 s4 desc C/2", replace(C, num_stages=4, split_c=2)),
                       ("128x128x64 w4 s4 desc", replace(C, BN=128, num_warps=4, num_stages=4)),
                       ("128x256x64 w8 s3 ptr", replace(C, desc="")),
                       ("128x256x64 w8 s3 ptr no-hint", replace(C, desc="", align_hint=False))):
        def run(cfg=cfg):
            def launched(x, y, z):
                kernel = mm.matmul_kernel.warmup(x, y, z, x.shape[0], y.shape[1], x.shape[1], x.stride(0),
                                                 y.stride(0), z.stride(0), **mm.launch_constexprs(cfg, x, y, z),
                                                 grid=(1,))
                kernel[(1, 1, 1)]  # loads it: the driver's register count
                return {"regs": kernel.n_regs, "spills": kernel.n_spills, "shared": kernel.metadata.shared,
                        "cp.async": kernel.asm["ptx"].count("cp.async.cg"),
                        "2-byte loads": kernel.asm["ptx"].count("ld.global.b16")}
            info = gpucompile.compile_kernel(mm.matmul_kernel, sig, mm.kernel_constexprs(cfg), num_warps=cfg.num_warps,
                                             num_stages=cfg.num_stages)
            return {"as_launched": launched(a, a, c), "ragged_as_launched": launched(ra, rb, rc),
                    "hand_signature": {"regs": info.registers, "spills": info.spills, "shared": info.shared_bytes,
                                       "wgmma": info.wgmma, "ok": info.ok}}
        r = item("compiled", label)(run)
        print(f"  {label}: {r}", flush=True)


def section_grade():
    from gpuprinciples.grader.grading import grade
    from gpuprinciples.sandbox.submission import Submission, from_path
    print("\n== grade: the exercises on this GPU (hierarchy.matmul: timed at 8192³ and on the ragged shape)",
          flush=True)
    here = os.path.dirname(os.path.abspath(__file__))
    per_tile = ("import dataclasses\nfrom gpuprinciples.course.kernels import matmul as mm\n"
                "CFG = dataclasses.replace(mm.GPU_CONFIG, programs_per_sm=0)\n"
                "def matmul(a, b):\n    return mm.matmul(a, b, CFG)\n")
    subs = {"hierarchy.matmul (reference)": ("hierarchy.matmul", Submission(
                source="from gpuprinciples.course.kernels.matmul import matmul\n", name="matmul", origin="reference")),
            "hierarchy.matmul (one program per tile)": ("hierarchy.matmul", Submission(
                source=per_tile, name="matmul", origin="reference variant")),
            "hierarchy.matmul (tutorial style)": ("hierarchy.matmul", from_path(
                os.path.join(here, "..", "tests", "submissions", "hierarchy", "tutorial_style.py") + ":matmul")),
            "hierarchy.occupancy (reference)": ("hierarchy.occupancy", Submission(
                source="from gpuprinciples.machine.occupancy import resident_warps\n", name="resident_warps",
                origin="reference"))}
    for label, (exercise, sub) in subs.items():
        def run(exercise=exercise, sub=sub):
            report = grade(exercise, sub)
            return {"status": report.status, "reasons": report.reasons,
                    "checks": [[c.name, c.passed, c.detail] for c in report.checks if c.name.startswith("speed")],
                    "measurements": {k: v for k, v in report.measurements.items() if k != "counts"}}
        r = item("grade", label)(run)
        print(f"  {label}: {r.get('status', r.get('error'))} {r.get('reasons', '')}", flush=True)
        for name, passed, detail in r.get("checks", []):
            print(f"    {name}: {passed} {detail}", flush=True)
    r = item("grade", "hierarchy.l2_cliff (96)")(lambda: {"status": grade("hierarchy.l2_cliff", 96).status})
    print(f"  hierarchy.l2_cliff answered 96: {r.get('status', r.get('error'))}", flush=True)


SECTIONS = {"check": section_check, "sweep": section_sweep, "rows": section_rows, "cublas": section_cublas,
            "memory": section_memory, "waves": section_waves, "compiled": section_compiled, "grade": section_grade}


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
          f"{torch.__version__}, Triton {triton.__version__}; {calibrate.ceilings()}", flush=True)
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
