"""`gpuprinciples figures`: measure on this GPU every figure the lessons quote, and write them as a page.

The lessons state numbers measured on a GPU that a learner on a laptop cannot measure: the copy
bandwidth, the matmul rates per dtype, what a misaligned K costs, what fusing cos∘cos gains, the
launch floor, attention's rates and memory. They cite them from `docs/measured.md`, and this module
writes that page: one section per subject with a stable anchor (`measured.md#launch`), one row per
figure, and how each was measured, with the package's own timing (`timing.time_fn` and
`timing.compare`: CUDA events, medians of many calls) and the GPU, driver, torch and Triton versions.

    gpuprinciples figures --write docs/measured.md     # on a GPU: measure (about 2 minutes on an H200)
    gpuprinciples figures --json run.json              # keep the raw measurements too
    gpuprinciples figures --from run.json --write docs/measured.md   # render a saved run, any machine

`measure()` returns plain data (what `--json` writes); `render()` turns it into the page, so the
page's format is tested on a CPU with made-up measurements (tests/test_figures.py).
"""

from __future__ import annotations

import json
import math
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch

ATTENTION_SHAPE = (4, 16, 4096, 128)  # B, H, N, D: the shape lessons 07-08 quote
K_VALUES = (4096, 4088, 4095)  # lesson 06: a multiple of 8, 8 fewer, 1 fewer
LAUNCH_SIZES = tuple(4**k for k in range(9))  # 1 ... 65536 elements: all far below any bandwidth limit
LOOP_ADDS = 1000


# -------------------------------------------------------------------------------------------------
# Measuring (GPU only)
# -------------------------------------------------------------------------------------------------


def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _git_commit() -> str | None:
    from pathlib import Path
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _meta() -> dict:
    import triton

    from ..machine.specs import cpu_name
    props = torch.cuda.get_device_properties(0)
    return {"gpu": torch.cuda.get_device_name(0), "sms": props.multi_processor_count,
            "driver": _driver_version(), "cuda": torch.version.cuda, "torch": torch.__version__,
            "triton": triton.__version__, "python": platform.python_version(), "cpu": cpu_name(),
            "date": time.strftime("%Y-%m-%d", time.gmtime()), "commit": _git_commit()}


def _tflops(flops: float, seconds: float) -> float:
    return flops / seconds / 1e12


def _measure_bandwidth() -> dict:
    from ..measure.calibrate import _copy_rate
    return {"copy_tbs": _copy_rate(2**30, "cuda", 1.0) / 1e12}


def _measure_matmul(n: int = 8192) -> dict:
    from ..measure.calibrate import _matmul_rate, tf32_matmul  # random data: constants let a GPU draw less power
    rates = {}
    for key, dtype, tf32 in (("bf16", torch.bfloat16, False), ("fp16", torch.float16, False),
                             ("tf32", torch.float32, True), ("fp32", torch.float32, False)):
        with tf32_matmul(tf32):
            rates[key] = _matmul_rate(n, dtype, "cuda", budget_s=1.0) / 1e12
    return {"n": n, "tflops": rates}


def _kernel_names(fn) -> list[str]:
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.key for e in prof.key_averages() if e.device_type.name == "CUDA"})


def _measure_k_alignment(m: int = 4096, n: int = 4096) -> dict:
    from ..measure import timing
    rows = {}
    for k in K_VALUES:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        t = timing.time_fn(torch.mm, args=(a, b), device="cuda", budget_s=0.5)
        rows[str(k)] = {"tflops": _tflops(2 * m * n * k, t.median), "kernels": _kernel_names(lambda: a @ b)}
    return {"m": m, "n": n, "k": rows}


def _naive_cos_cos():
    """The first fused kernel a learner writes (lesson 01): 1024-element blocks, Triton's default warps."""
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask))), mask=mask)

    def naive(x):
        y = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
    return naive


def _measure_cos_cos(n: int = 2**28) -> dict:
    from ..course.kernels.cos_cos import cos_cos
    from ..measure import timing
    x = torch.randn(n, device="cuda")

    def eager(v):
        return v.cos().cos()

    fns = {"eager": eager, "torch.compile": torch.compile(eager), "naive Triton": _naive_cos_cos(),
           "course kernel": cos_cos}
    want = eager(x)
    for name, fn in fns.items():  # compiles, and checks every version computes the same thing
        torch.testing.assert_close(fn(x), want, msg=lambda m, name=name: f"{name}: {m}")
    del want
    result = timing.compare(fns, args=(x,), device="cuda", budget_s=2.0)
    return {"n": n, "ms": {k: t.median * 1e3 for k, t in result.timings.items()}}


def _measure_launch() -> dict:
    from ..measure import timing
    tiny = {}
    for n in LAUNCH_SIZES:
        zeros = torch.zeros(n, device="cuda")
        # flush=False: the GPU is idle when each call starts, so the host's launch is in the time
        tiny[str(n)] = timing.time_fn(torch.add, args=(zeros, 1), device="cuda", budget_s=0.05,
                                      flush=False).median * 1e6
    big = torch.zeros(2**24, device="cuda")
    add_big = timing.time_fn(torch.add, args=(big, 1), device="cuda", budget_s=0.2, flush=False).median * 1e6
    one = torch.zeros(1, device="cuda")

    def dependent_adds():
        y = one
        for _ in range(LOOP_ADDS):
            y = y + 1  # each add needs the last one's result: nothing overlaps on the GPU side
        return y

    loop = timing.time_fn(dependent_adds, device="cuda", budget_s=0.5, flush=False).median
    times = sorted(tiny.values())
    return {"tiny_us": tiny, "tiny_range_us": [times[0], times[-1]],
            "floor_us": float(sorted(list(tiny.values())[:5])[2]),  # lesson 02's: median of the five smallest
            "add_2_24_us": add_big, "loop_us_per_add": loop / LOOP_ADDS * 1e6}


def _extra_memory_gib(fn, *args) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn(*args)
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**30


def _measure_attention() -> dict:
    from ..course.kernels.attention import attention, naive_attention, sdpa
    from ..measure import timing
    B, H, N, D = ATTENTION_SHAPE
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(ATTENTION_SHAPE, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fns: dict[str, Callable] = {
        "naive": naive_attention, "SDPA flash": sdpa("FLASH_ATTENTION"),
        "SDPA efficient": sdpa("EFFICIENT_ATTENTION"), "SDPA cuDNN": sdpa("CUDNN_ATTENTION"),
        "course Triton kernel, autotuned": attention,
        "course Triton kernel, 32×32 tiles, no pipelining":
            lambda q, k, v: attention(q, k, v, blocks={"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4,
                                                      "num_stages": 1}),
    }
    want = sdpa("FLASH_ATTENTION")(q, k, v).float()
    unavailable = {}
    for name in list(fns):
        try:
            err = (fns[name](q, k, v).float() - want).abs().max().item()  # also compiles and autotunes
            if not err < 5e-2:
                raise RuntimeError(f"differs from SDPA's flash backend by {err:.2g}")
        except RuntimeError as exc:  # a backend this build or GPU lacks
            unavailable[name] = str(exc).splitlines()[0][:120]
            del fns[name]
    del want
    extra = {name: _extra_memory_gib(fns[name], q, k, v) for name in ("naive", "SDPA flash") if name in fns}
    result = timing.compare(fns, args=(q, k, v), device="cuda", budget_s=3.0)
    flops = 4 * B * H * N * N * D
    return {"shape": list(ATTENTION_SHAPE), "tflops": {n: _tflops(flops, t.median) for n, t in result.timings.items()},
            "extra_gib": extra, "unavailable": unavailable}


def _measure_attention_l2() -> dict:
    from ..course.kernels.attention import l2_sweep
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(ATTENTION_SHAPE, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    return {"shape": list(ATTENTION_SHAPE), "rows": l2_sweep(q, k, v)}


MEASUREMENTS = (("bandwidth", _measure_bandwidth), ("matmul", _measure_matmul),
                ("k_alignment", _measure_k_alignment), ("cos_cos", _measure_cos_cos),
                ("launch", _measure_launch), ("attention", _measure_attention),
                ("attention_l2", _measure_attention_l2))


def measure(progress: Callable[[str], None] = lambda s: None) -> dict:
    """Every figure, measured on this GPU now: plain data, JSON-able (what `render` reads)."""
    from ..machine import runtime
    if not runtime.HAS_CUDA:
        raise RuntimeError("no CUDA GPU is visible")
    start = time.perf_counter()
    run = {"meta": _meta()}
    for key, fn in MEASUREMENTS:
        progress(f"measuring {key} ...")
        t0 = time.perf_counter()
        run[key] = fn()
        torch.cuda.empty_cache()
        progress(f"  {key}: {time.perf_counter() - t0:.0f} s")
    run["meta"]["seconds"] = round(time.perf_counter() - start)
    return run


# -------------------------------------------------------------------------------------------------
# The page
# -------------------------------------------------------------------------------------------------

MISSING = "not measured"


def _num(value, digits: int = 4) -> str:
    """A figure to at most `digits` significant digits, trailing zeros dropped, thousands separated."""
    if value is None:
        return MISSING
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(value)))))
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _fig(value, unit: str, digits: int = 4) -> str:
    """A figure with its unit, or MISSING alone."""
    return MISSING if value is None else f"{_num(value, digits)} {unit}"


def _ratio(a, b) -> str | None:
    return None if a is None or b is None or b == 0 else f"{a / b:.1f}×"


def _get(run: dict, *path):
    for key in path:
        if not isinstance(run, dict) or key not in run:
            return None
        run = run[key]
    return run


@dataclass(frozen=True)
class Section:
    anchor: str  # stable: lessons link to measured.md#anchor
    title: str
    how: str
    rows: Callable[[dict], list[tuple[str, str, str]]]  # (what, figure, what a lesson says with it)


def _datasheet(run: dict):
    from ..machine.specs import spec_for_device_name
    return spec_for_device_name(_get(run, "meta", "gpu") or "")


def _bandwidth_rows(run):
    tbs, spec = _get(run, "bandwidth", "copy_tbs"), _datasheet(run)
    sheet = f"{tbs * 1e12 / spec.bandwidth:.0%} of the datasheet's {spec.bandwidth_tbs} TB/s" if tbs and spec else ""
    return [("device-to-device copy of 1 GiB, bytes read + written", _fig(tbs, "TB/s"),
             "the memory ceiling" + (f": {sheet}" if sheet else ""))]


def _matmul_rows(run):
    rates, spec = _get(run, "matmul", "tflops") or {}, _datasheet(run)
    n = _get(run, "matmul", "n") or 8192
    bf16, tf32, fp32 = rates.get("bf16"), rates.get("tf32"), rates.get("fp32")
    sheet = (f": {bf16 * 1e12 / spec.flops('bf16'):.0%} of the datasheet's {spec.dense_bf16_tflops:g} dense"
             if bf16 and spec else "")
    return [
        (f"bf16 matmul {n}³", _fig(bf16, "TFLOP/s"), "the compute ceiling" + sheet),
        (f"fp16 matmul {n}³", _fig(rates.get("fp16"), "TFLOP/s"), "Tensor Cores, as bf16"),
        (f"fp32 matmul {n}³, TF32 on", _fig(tf32, "TFLOP/s"),
         f"{_ratio(tf32, fp32)} fp32's from one flag" if _ratio(tf32, fp32) else ""),
        (f"fp32 matmul {n}³, TF32 off", _fig(fp32, "TFLOP/s"),
         f"CUDA cores: bf16 is {_ratio(bf16, fp32)} faster" if _ratio(bf16, fp32) else "CUDA cores"),
    ]


def _k_rows(run):
    ks = _get(run, "k_alignment", "k") or {}
    m, n = _get(run, "k_alignment", "m") or 4096, _get(run, "k_alignment", "n") or 4096
    base = _get(ks, "4096", "tflops")
    rows = []
    for k in K_VALUES:
        rate = _get(ks, str(k), "tflops")
        note = "a multiple of 8: aligned rows" if k % 8 == 0 else "rows start on 2-byte boundaries"
        if k != 4096 and rate and base:
            slower = (k / 4096) * base / rate  # time over K = 4096's time, for fewer FLOPs
            note += f"; {slower:.1f}× the time of K = 4096, with fewer FLOPs" if slower > 1.2 else "; as fast"
        names = _get(ks, str(k), "kernels")
        if names:
            note += "; kernels: " + ", ".join(f"`{name}`" for name in names)
        rows.append((f"fp16 matmul {m}×K by K×{n}, K = {k}", _fig(rate, "TFLOP/s"), note))
    return rows


def _cos_rows(run):
    ms = _get(run, "cos_cos", "ms") or {}
    n = _get(run, "cos_cos", "n") or 2**28
    eager = ms.get("eager")
    rows = []
    for name in ("eager", "torch.compile", "naive Triton", "course kernel"):
        t = ms.get(name)
        note = {"eager": "two kernels: x read, a temporary written and read back, y written",
                "torch.compile": "one generated Triton kernel",
                "naive Triton": "one kernel, 1024-element blocks (lesson 01's)",
                "course kernel": "one kernel, 4096-element blocks, 8 warps (`kernels/cos_cos.py`)"}[name]
        if t:
            note += f"; {2 * 4 * n / (t * 1e-3) / 1e12:.2f} TB/s of x and y"
            if name != "eager" and eager:
                note += f"; {eager / t:.2f}× eager"
        rows.append((f"`x.cos().cos()`, 2^{int(math.log2(n))} fp32, {name}", _fig(t, "ms"), note))
    return rows


def _launch_rows(run):
    lo, hi = _get(run, "launch", "tiny_range_us") or (None, None)
    floor, loop = _get(run, "launch", "floor_us"), _get(run, "launch", "loop_us_per_add")
    tiny = f"{_num(lo, 2)}–{_num(hi, 2)} µs" if lo is not None and hi is not None else MISSING
    rows = [(f"tiny `t + 1`, n = 1 … {LAUNCH_SIZES[-1]:,}, GPU idle at each call", tiny,
             "the launch floor: the time does not grow with n"),
            ("lesson 02's launch floor: median of the five smallest sizes", _fig(floor, "µs", 2),
             "what lesson 02 prints as the floor of the machine it runs on"),
            ("`t + 1`, n = 2^24", _fig(_get(run, "launch", "add_2_24_us"), "µs", 2),
             "past the floor: the time grows with n from here"),
            (f"a Python loop of {LOOP_ADDS} dependent tiny adds", _fig(loop, "µs per add", 2),
             f"overhead-bound: {_ratio(loop, floor)} the floor, the CPU cannot keep the GPU fed"
             if _ratio(loop, floor) else "overhead-bound: the CPU cannot keep the GPU fed")]
    return rows


def _attention_rows(run):
    rates = _get(run, "attention", "tflops") or {}
    extra = _get(run, "attention", "extra_gib") or {}
    gone = _get(run, "attention", "unavailable") or {}
    B, H, N, D = _get(run, "attention", "shape") or ATTENTION_SHAPE
    naive = rates.get("naive")
    rows = []
    for name in ("naive", "SDPA flash", "SDPA efficient", "SDPA cuDNN", "course Triton kernel, autotuned",
                 "course Triton kernel, 32×32 tiles, no pipelining"):
        rate = rates.get(name)
        note = f"{rate / naive:.1f}× naive" if rate and naive and name != "naive" else ""
        if name in gone:
            note = f"unavailable here: {gone[name]}"
        rows.append((f"attention B={B} H={H} N={N} D={D} bf16, {name}", _fig(rate, "TFLOP/s"), note))
    for name, note in (("naive", "S and P, N×N each, in memory"), ("SDPA flash", "the N×N matrix never materialised")):
        rows.append((f"extra memory during that attention, {name}", _fig(extra.get(name), "GiB", 3), note))
    return rows


def _attention_l2_rows(run):
    copy = _get(run, "bandwidth", "copy_tbs")
    B, H, N, D = _get(run, "attention_l2", "shape") or ATTENTION_SHAPE
    rows = []
    for r in _get(run, "attention_l2", "rows") or []:
        needed = r["needed"] / 1e12
        note = (f"{r['tflops']:.0f} TFLOP/s; from HBM alone its K/V re-reads would need {needed:.1f} TB/s"
                + (f", {needed / copy:.1f}× the copy ceiling" if copy else ""))
        rows.append((f"attention B={B} H={H} N={N} D={D} bf16, course kernel, BLOCK_M = {r['block_m']}, "
                     f"programs {r['order']}", _fig(r["seconds"] * 1e3, "ms"), note))
    return rows or [(f"attention B={B} H={H} N={N} D={D}, course kernel by program order", MISSING, "")]


SECTIONS = (
    Section("bandwidth", "Memory bandwidth",
            "`calibrate._copy_rate`: `dst.copy_(src)` of 2^28 float32 (1 GiB), timed with `timing.time_fn` "
            "(CUDA events, L2 flushed, median over about 1 s); bytes read plus bytes written over the median.",
            _bandwidth_rows),
    Section("matmul", "Matmul rates by dtype",
            "`calibrate._matmul_rate`: `torch.mm` of two random N×N matrices (random data: constant data lets "
            "a GPU draw less power and clock higher), `timing.time_fn` over about 1 s each; 2N³ FLOPs over the "
            "median. TF32 on and off with `calibrate.tf32_matmul`.", _matmul_rows),
    Section("k-alignment", "K alignment (lesson 06)",
            "fp16 `torch.mm` of random 4096×K and K×4096 matrices, `timing.time_fn` over about 0.5 s, 2·M·N·K "
            "FLOPs over the median; the kernels that ran, by name, from `torch.profiler`.", _k_rows),
    Section("cos-cos", "Fusing cos∘cos (lessons 01, 02, 07)",
            "`timing.compare` of the four versions on the same 2^28 float32 tensor, interleaved rounds, L2 "
            "flushed before every call, after checking they agree; TB/s counts x read and y written once.",
            _cos_rows),
    Section("launch", "The launch floor and overhead (lesson 02)",
            "`timing.time_fn(torch.add, args=(t, 1), flush=False)`: no flush and no hold, the GPU idle when each "
            "call starts, so the host's launch cost is in the time, as lesson 02 times it. The loop is timed "
            "whole and divided by its length. These figures depend on the host (CPU, driver, load) as much "
            "as on the GPU.", _launch_rows),
    Section("attention", "Attention (lessons 07, 08)",
            "Random bf16 Q, K, V; every version checked against SDPA's flash backend first; `timing.compare`, "
            "interleaved, L2 flushed; 4·B·H·N²·D FLOPs over the median. Extra memory: "
            "`torch.cuda.max_memory_allocated` during one call, above what was allocated before it.",
            _attention_rows),
    Section("attention-l2", "FlashAttention's K/V re-reads and the L2 (lesson 08)",
            "`kernels.attention.l2_sweep`: the course kernel (not causal), its programs in two orders: tile by "
            "tile (programs running together share one head's K and V, 2 MiB, which stay in L2) and head by head "
            "(programs running together are on different heads, whose K and V compete for L2); `timing.compare`, "
            "interleaved, L2 flushed before every call. Each query tile re-reads the head's K and V: "
            "4·N·D·(1 + N/BLOCK_M) bytes per head in bf16 (`hbm_bytes_without_cache`), over the median, is the "
            "bandwidth HBM alone would have had to deliver.", _attention_l2_rows),
)


def render(run: dict) -> str:
    """The page for one run: a header saying where and how it was measured, then one section per subject."""
    meta = run.get("meta", {})
    lines = ["# What the course measured on a GPU", "",
             "The lessons quote these figures and link here. Machines and hosts differ, so a lesson that makes "
             "a claim on a GPU measures it again in the same session; these are what it is compared with.", ""]
    if meta.get("source"):  # figures copied from earlier runs, not measured by this module
        lines += [f"> **Where these figures come from.** {meta['source']}", ""]
    else:
        lines += [f"Measured and written by `gpuprinciples figures --write docs/measured.md` in one run of "
                  f"{_fig(meta.get('seconds'), 's', 2)}: each figure is a median taken with the package's own timing "
                  "(`gpuprinciples.measure.timing`), as each section's *How* says. Regenerate it on a GPU with the "
                  "same command.", ""]
    lines += ["| | |", "| --- | --- |"]
    for key, label in (("gpu", "GPU"), ("sms", "SMs"), ("driver", "driver"), ("cuda", "CUDA (torch's)"),
                       ("torch", "torch"), ("triton", "Triton"), ("python", "Python"), ("cpu", "host CPU"),
                       ("date", "date (UTC)"), ("commit", "gpuprinciples commit")):
        if meta.get(key) is not None:
            lines.append(f"| {label} | {meta[key]} |")
    for section in SECTIONS:
        lines += ["", f'<a id="{section.anchor}"></a>', "", f"## {section.title}", "", f"How: {section.how}", "",
                  "| what | figure | what a lesson can say with it |", "| --- | --- | --- |"]
        lines += [f"| {what} | {figure} | {note} |" for what, figure, note in section.rows(run)]
        for note in _get(run, "notes", section.anchor) or []:
            lines += ["", f"* {note}"]
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------------------------
# The command
# -------------------------------------------------------------------------------------------------

NO_GPU = ("gpuprinciples figures measures a GPU, and no CUDA GPU is visible here: there is nothing to measure. "
          "Run it on the GPU whose figures the lessons should quote (or render a saved run with --from).")


def main(write: str | None = None, json_path: str | None = None, from_json: str | None = None) -> int:
    from pathlib import Path

    from ..machine import runtime
    if from_json:
        run = json.loads(Path(from_json).read_text())
    elif not runtime.HAS_CUDA:
        print(NO_GPU, file=sys.stderr)
        return 1
    else:
        run = measure(progress=lambda s: print(s, file=sys.stderr, flush=True))
        if json_path:
            Path(json_path).write_text(json.dumps(run, indent=1) + "\n")
    page = render(run)
    if write:
        Path(write).write_text(page, encoding="utf-8")
        print(f"wrote {write}", file=sys.stderr)
    else:
        print(page, end="")
    return 0
