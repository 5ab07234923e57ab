"""Check and tune lesson 10's kernels and model on a GPU, and time them against PyTorch; compact tables.

    PYTHONPATH=. python tools/tune_decode.py              # on the H200: about 4-5 minutes
    PYTHONPATH=. python tools/tune_decode.py --dry-run    # anywhere: every item at toy sizes (a CPU runs the
                                                          # interpreter: checks the script, times nothing real)

Items, in order (each catches its own errors, so one failure does not hide the rest; past the time budget the
remaining items are skipped and say so):

1. correctness in bf16/fp16 on this GPU: both attention kernels on the exercises' GPU cases, the 8-bit matmul
   (int8 and fp8) on the model's shapes, the model's decode against its prefill, a CUDA-graph step against eager;
2. decode attention at the long-context case (B 8, Hq 32, Hkv 8, S 32768, D 128): tiles, warps and stages, then
   splits, against every SDPA backend (packed GQA and enable_gqa forms) and a copy of the same bytes;
3. the model (LLAMA_1B, bf16): prefill TFLOP/s; decode at 4096 positions eager, CUDA graph, SDPA over the whole
   static cache, int8 and fp8 weights; tokens/s against the bandwidth roofline;
4. the two kernel exercises graded end to end with their current (provisional) pass lines (decode attention
   also on ragged lengths against SDPA with a mask over the whole cache);
5. the 8-bit matmul on the model's five weight shapes at M = 1: tiles against cuBLAS bf16 (and
   torch._weight_int8pack_mm where it runs);
6. decode attention at the model's shapes (D 64): splits and tiles, against SDPA;
7. paged attention (pages of 16) at the long-context case: tiles, against gather + SDPA and the contiguous kernel;
8. the batch sweep: graphed steps at 1024 positions, batch 1 to 256.

Every time: `gpuprinciples.timing` (CUDA events, L2 flushed before each call, the variants interleaved), medians.
`--out FILE` (default $OUT/tune_decode.json when OUT is set) keeps every row as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import torch

from gpuprinciples import hardware, runtime, timing
from gpuprinciples.decoder import LLAMA_1B, TINY, Decoder, decode_step_bytes, decode_step_flops, time_step
from gpuprinciples.exercises import decoding as ex
from gpuprinciples.kernels import decode_attention as dk
from gpuprinciples.kernels import paged_attention as pk
from gpuprinciples.kernels import weight_only_matmul as wk

F = torch.nn.functional
START = time.monotonic()
RESULTS: dict = {}
ARGS = argparse.Namespace(dry_run=False, budget=285.0, only=None)
DEV = runtime.DEVICE


def sizes(real, dry):
    return dry if ARGS.dry_run else real


def item(fn):
    """Run one item: its title, its time, its error (caught and printed), its rows kept in RESULTS."""
    name = fn.__doc__.strip().splitlines()[0]

    def run():
        if ARGS.only and name.split(".")[0] not in ARGS.only:
            return
        spent = time.monotonic() - START
        if spent > ARGS.budget:
            print(f"\n== {name}: SKIPPED (time budget spent: {spent:.0f} s)", flush=True)
            RESULTS[name] = "skipped"
            return
        print(f"\n== {name}", flush=True)
        t0 = time.monotonic()
        try:
            RESULTS[name] = fn()
        except Exception as exc:  # noqa: BLE001 - one failure must not hide the other items
            RESULTS[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"   FAILED: {type(exc).__name__}: {str(exc)[:400]}")
            traceback.print_exc(limit=4)
        print(f"   ({time.monotonic() - t0:.1f} s; {time.monotonic() - START:.0f} s in all)", flush=True)
        if DEV == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    return run


def copy_ceiling() -> float:
    return hardware.ceilings().copy_bandwidth if DEV == "cuda" else 1e10


def usable(fns: dict, args: tuple) -> dict:
    """The functions that run on `args` (compiling them now); the others are printed with their error."""
    kept = {}
    for name, fn in fns.items():
        try:
            fn(*args)
            kept[name] = fn
        except Exception as exc:  # noqa: BLE001
            first = str(exc).splitlines()[0][:120] if str(exc) else ""
            print(f"   {name}: unavailable ({type(exc).__name__}: {first})")
    runtime.synchronize()
    return kept


def table(title: str, fns: dict, args: tuple, least_bytes: float, budget_s: float = 1.0, flops: float = 0.0,
          flush: bool = True, top: int | None = None) -> list[dict]:
    """Time `fns` interleaved on `args`; print fastest first: median, TB/s and share of copy for `least_bytes`,
    TFLOP/s when `flops`, speedup over the first entry with its 95 % interval."""
    fns = usable(fns, args)
    if not fns:
        print("   nothing ran")
        return []
    result = timing.compare(fns, args=args, device=DEV, budget_s=budget_s, flush=flush, max_rounds=100)
    base = next(iter(fns))
    copy = copy_ceiling()
    print(f"   {title}: {len(result.rounds)} rounds; speedup vs {base}")
    rows = []
    ordered = sorted(result.timings.items(), key=lambda kv: kv[1].median)
    for rank, (name, t) in enumerate(ordered):
        s = result.speedup(name, base) if name != base else None
        row = {"name": name, "us": t.median * 1e6, "TBps": least_bytes / t.median / 1e12,
               "of_copy": least_bytes / t.median / copy, "spread": t.spread}
        if flops:
            row["TFLOPps"] = flops / t.median / 1e12
        if s is not None:
            row["speedup"] = [s.ratio, s.ci_low, s.ci_high]
        rows.append(row)
        if top is None or rank < top or not name.startswith("cfg"):
            extra = f"{row['TFLOPps']:7.1f} TF/s" if flops else ""
            sp = f"{s.ratio:5.2f}x [{s.ci_low:.2f},{s.ci_high:.2f}]" if s else "    -"
            print(f"   {name:58}{row['us']:10.1f} us{row['TBps']:6.2f} TB/s{row['of_copy']:5.0%}{extra}  {sp}",
                  flush=True)
    return rows


def copy_of(nbytes: int):
    """A device-to-device copy moving `nbytes` in all (half read, half written): the practical ceiling."""
    src = torch.empty(max(nbytes // 4, 1), dtype=torch.int16, device=DEV)
    dst = torch.empty_like(src)
    return lambda *args: dst.copy_(src)


def cfg_name(cfg: dict) -> str:
    return "cfg " + " ".join(f"{k}={v}" for k, v in cfg.items())


def decode_fn(kernel, cfg: dict):
    return lambda *args: kernel(*args, **cfg)


def sdpa_baselines(packed_only: bool = False) -> dict:
    """Every SDPA backend on (q, k, v, seq_lens) with full caches: packed GQA form, and enable_gqa form."""
    fns = {}
    for backend in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH", None):
        for packed in ((True,) if packed_only else (True, False)):
            f = dk.sdpa_decode(backend, packed)
            fns[f.__name__] = (lambda f: lambda q, k, v, n: f(q, k, v, k.shape[2]))(f)
    return fns


def attention_args(B, Hq, Hkv, S, D, dtype=torch.bfloat16, length=None):
    gen = torch.Generator(device=DEV).manual_seed(0)
    dtype = dtype if DEV == "cuda" else torch.float32
    q = torch.randn(B, Hq, D, generator=gen, device=DEV, dtype=dtype)
    k, v = (torch.randn(B, Hkv, S, D, generator=gen, device=DEV, dtype=dtype) for _ in range(2))
    return q, k, v, torch.full((B,), length or S, dtype=torch.int32, device=DEV)


# -------------------------------------------------------------------------------------------------
# 1. correctness
# -------------------------------------------------------------------------------------------------


@item
def correctness():
    """1. correctness on this device (the exercises' GPU cases, the 8-bit matmul, the model, a CUDA graph)"""
    from gpuprinciples.worker import _to_device
    report = {}
    mode = "gpu" if DEV == "cuda" else "cpu"
    kernels = ((ex.DECODE_ATTENTION, dk.decode_attention), (ex.PAGED_DECODE_ATTENTION, pk.paged_decode_attention))
    for exercise, fn in kernels:
        bad = []
        cases = exercise.cases(torch.Generator().manual_seed(1), mode)
        for case in cases[:sizes(len(cases), 3)]:
            out = fn(*_to_device(case.args, DEV))
            got = {"out": out.cpu(), "device": DEV, "loads": None}
            why = exercise.compare(got, exercise.reference(*case.args), case)
            if why:
                bad.append(why[0][:200])
        checked = sizes(len(cases), 3)
        print(f"   {exercise.id}: {checked - len(bad)} of {checked} cases right" + "".join(f"\n     {b}" for b in bad))
        report[exercise.id] = bad
    gen = torch.Generator(device=DEV).manual_seed(0)
    dtype = torch.bfloat16 if DEV == "cuda" else torch.float32
    for fmt in (torch.int8, torch.float8_e4m3fn) if DEV == "cuda" else (torch.int8,):
        for name, (n, k) in LLAMA_1B.layer_shapes().items() if not ARGS.dry_run else [("toy", (96, 64))]:
            x = torch.randn(3, k, generator=gen, device=DEV, dtype=dtype)
            w8, scale = wk.quantize(torch.randn(n, k, generator=gen, device=DEV, dtype=dtype) * 0.02, fmt)
            err = (wk.weight_only_matmul(x, w8, scale).double() - wk.dequantized_linear(x.double(), w8.double(),
                                                                                         scale.double())).abs().max()
            print(f"   weight-only {str(fmt)[6:]} {name} [{n}, {k}]: max |error| {err:.2e}")
            report[f"{fmt} {name}"] = float(err)
    m = Decoder(TINY, batch=2, max_seq=24)
    prompt = torch.randint(0, TINY.vocab, (2, 9), generator=torch.Generator().manual_seed(1)).to(DEV)
    nxt = torch.randint(0, TINY.vocab, (2,), generator=torch.Generator().manual_seed(2)).to(DEV)
    m.prefill(prompt)
    got = m.decode(nxt, torch.full((2,), 9, dtype=torch.int32, device=DEV)).float()
    want = Decoder(TINY, batch=2, max_seq=24).prefill(torch.cat([prompt, nxt[:, None]], 1)).float()
    print(f"   model: decode after prefill vs prefill of one more token: max |logit difference| "
          f"{(got - want).abs().max():.3e} (logits up to {want.abs().max():.2f})")
    report["model decode vs prefill"] = float((got - want).abs().max())
    if DEV == "cuda":
        tokens, lens = nxt.clone(), torch.full((2,), 9, dtype=torch.int32, device=DEV)
        eager_tokens, eager_lens = tokens.clone(), lens.clone()
        replay = m.graphed_step(tokens, lens)
        same = []
        for _ in range(3):
            replay()
            m2_tokens = m.decode(eager_tokens, eager_lens).argmax(-1)  # the same cache, eagerly, one position behind
            eager_tokens.copy_(m2_tokens)
            eager_lens.add_(1)
            same.append(bool(torch.equal(tokens, eager_tokens)))
        print(f"   CUDA-graph steps give the eager steps' tokens: {same}")
        report["graph == eager"] = same
    return report


# -------------------------------------------------------------------------------------------------
# 2. decode attention, long context
# -------------------------------------------------------------------------------------------------


@item
def long_context():
    """2. decode attention, long context (B 8, Hq 32, Hkv 8, S 32768, D 128, bf16): tiles, splits, SDPA, copy"""
    c = sizes(ex.LONG_CONTEXT, {"B": 2, "Hq": 8, "Hkv": 2, "S": 300, "D": 64})
    args = attention_args(c["B"], c["Hq"], c["Hkv"], c["S"], c["D"])
    least = ex._decode_min_bytes(args)
    default = dk.plan(args[0], c["Hkv"], c["S"])
    print(f"   default plan: {default}")
    tiles = [dict(block_n=bn, num_warps=w, num_stages=s) for bn in (32, 64, 128) for w in (4, 8) for s in (2, 3, 4)]
    fns = {"default": decode_fn(dk.decode_attention, {}), **{cfg_name(t): decode_fn(dk.decode_attention, t)
                                                             for t in sizes(tiles, tiles[:3])}}
    rows = table("tiles at the default number of splits", fns, args, least, budget_s=sizes(3.0, 0.2), top=8)
    best = next((r for r in rows if r["name"].startswith("cfg")), None)
    tile = dict(tiles[[cfg_name(t) for t in tiles].index(best["name"])]) if best else {}
    splits = sizes((4, 8, 16, 32, 48, 64, 96, 128, 192, 256), (1, 2, 3))
    fns = {"default": decode_fn(dk.decode_attention, {}),
           **{cfg_name({**tile, "splits": n}): decode_fn(dk.decode_attention, {**tile, "splits": n}) for n in splits},
           **sdpa_baselines(), "copy of the same bytes": copy_of(least)}
    rows2 = table(f"splits at the best tiles {tile}, against SDPA and copy", fns, args, least,
                  budget_s=sizes(3.0, 0.2),
                  flops=4 * c["B"] * c["Hq"] * c["S"] * c["D"])
    return {"default_plan": default, "tiles": rows, "splits": rows2}


# -------------------------------------------------------------------------------------------------
# 3. the model
# -------------------------------------------------------------------------------------------------


def graph_time(m: Decoder, batch: int, context: int, rounds: int = 60) -> float:
    """Median seconds of one graphed step (eager on a CPU dry run), every call from `context` positions."""
    return time_step(m, batch, context, graph=DEV == "cuda", max_rounds=rounds if DEV == "cuda" else 2)


@item
def model():
    """3. the model: prefill; decode at 4096 positions eager, CUDA graph, SDPA over the static cache, int8, fp8"""
    config = sizes(LLAMA_1B, TINY)
    context, prompt_len = sizes((4096, 2048), (32, 16))
    m = Decoder(config, batch=1, max_seq=context + sizes(1024, 600))
    copy = copy_ceiling()
    prompt = torch.randint(0, config.vocab, (1, prompt_len), device=DEV)
    t = timing.time_fn(m.prefill, args=(prompt,), device=DEV, budget_s=sizes(1.0, 0.1), max_rounds=sizes(50, 2))
    attention = 2 * config.n_layers * config.n_heads * config.head_dim * prompt_len ** 2  # causal: half of 4·N²·D
    flops = 2 * config.matmul_params() * prompt_len + attention
    peak = hardware.ceilings().bf16_flops if DEV == "cuda" else None
    print(f"   prefill {prompt_len} tokens: {t.median * 1e3:.2f} ms, {flops / t.median / 1e12:.0f} TFLOP/s"
          + (f" ({flops / t.median / peak:.0%} of the measured bf16 rate)" if peak else ""))
    rows = {"prefill_ms": t.median * 1e3, "prefill_TFLOPps": flops / t.median / 1e12}
    m.prefill(torch.randint(0, config.vocab, (1, context), device=DEV))
    need = decode_step_bytes(config, 1, context)
    steps = {"eager (triton attention)": (time_step(m, 1, context, graph=False, max_rounds=sizes(60, 2)), need)}
    steps["CUDA graph (triton attention)"] = (graph_time(m, 1, context), need)
    m.attention = "sdpa"  # the whole static cache, masked, every step
    steps[f"CUDA graph (SDPA over all {m.max_seq} positions)"] = (
        graph_time(m, 1, context), decode_step_bytes(config, 1, m.max_seq))
    m.attention = "triton"
    for fmt in (torch.int8, torch.float8_e4m3fn) if DEV == "cuda" else (torch.int8,):
        try:
            m.quantize(fmt)
            steps[f"CUDA graph, {str(fmt)[6:]} weights"] = (graph_time(m, 1, context),
                                                            m.weight_bytes() + decode_step_bytes(config, 1, context)
                                                            - decode_step_bytes(config, 1, 0))
        except Exception as exc:  # noqa: BLE001
            print(f"   {fmt} weights: FAILED ({type(exc).__name__}: {str(exc)[:200]})")
    print(f"   {'decode step, batch 1, ' + str(context) + ' positions':52}{'ms':>8}{'tokens/s':>10}{'GB read':>9}"
          f"{'TB/s':>7}{'of copy':>8}")
    for name, (seconds, nbytes) in steps.items():
        print(f"   {name:52}{seconds * 1e3:8.3f}{1 / seconds:10,.0f}{nbytes / 1e9:9.3f}{nbytes / seconds / 1e12:7.2f}"
              f"{nbytes / seconds / copy:8.0%}")
        rows[name] = {"ms": seconds * 1e3, "tokens_per_s": 1 / seconds, "bytes": nbytes}
    return rows


# -------------------------------------------------------------------------------------------------
# 4. the 8-bit matmul
# -------------------------------------------------------------------------------------------------


@item
def weight_only():
    """5. the 8-bit weight-only matmul at M = 1 on the model's weight shapes: tiles against cuBLAS bf16"""
    shapes = sizes({**LLAMA_1B.layer_shapes(), "head": (LLAMA_1B.vocab, LLAMA_1B.d_model)}, {"toy": (300, 128)})
    dtype = torch.bfloat16 if DEV == "cuda" else torch.float32
    tiles = [dict(BLOCK_M=16, BLOCK_N=bn, BLOCK_K=bk, num_warps=w, num_stages=s)
             for bn in (16, 32, 64) for bk in (128, 256, 512) for w, s in ((4, 3), (4, 4), (8, 4))]
    rows = {}
    gen = torch.Generator(device=DEV).manual_seed(0)
    for name, (n, k) in shapes.items():
        w = torch.randn(n, k, generator=gen, device=DEV, dtype=dtype) * 0.02
        x = torch.randn(1, k, generator=gen, device=DEV, dtype=dtype)
        w8, scale = wk.quantize(w)
        fns = {"cuBLAS bf16 (F.linear)": lambda x, w=w: F.linear(x, w),
               "default int8": lambda x, w8=w8, s=scale: wk.weight_only_matmul(x, w8, s),
               **{cfg_name(t): (lambda x, t=t, w8=w8, s=scale: wk.weight_only_matmul(x, w8, s, t))
                  for t in sizes(tiles, tiles[:2])}}
        if DEV == "cuda":
            fns["torch._weight_int8pack_mm"] = lambda x, w8=w8, s=scale: torch._weight_int8pack_mm(x, w8, s.to(x.dtype))
            f8, s8 = wk.quantize(w, torch.float8_e4m3fn)
            fns["default fp8 (e4m3)"] = lambda x, f8=f8, s8=s8: wk.weight_only_matmul(x, f8, s8)
        int8_bytes = n * k + 4 * n + 2 * (k + n)  # the TB/s column counts these for every row
        rows[name] = table(f"{name} [{n}, {k}] (TB/s: the int8 weight's bytes)", fns, (x,), int8_bytes,
                           budget_s=sizes(0.8, 0.1), top=6)
        del w, w8
    return rows


# -------------------------------------------------------------------------------------------------
# 5. decode attention at the model's shapes
# -------------------------------------------------------------------------------------------------


@item
def model_shapes():
    """6. decode attention at LLAMA_1B's shapes (Hq 32, Hkv 8, D 64): batch 1 at 4096, batch 64 at 1024"""
    rows = {}
    for B, S in sizes(((1, 4096), (64, 1024)), ((1, 100),)):
        args = attention_args(B, 32, 8, S, 64) if not ARGS.dry_run else attention_args(B, 4, 2, S, 32)
        least = ex._decode_min_bytes(args)
        print(f"   B={B} S={S}: default plan {dk.plan(args[0], args[1].shape[1], S)}")
        grid = [dict(block_n=bn, splits=n, num_warps=4, num_stages=st)
                for bn in (32, 64) for n in (1, 2, 4, 8, 16, 32, 64) for st in (2, 3)]
        fns = {"default": decode_fn(dk.decode_attention, {}),
               **{cfg_name(c): decode_fn(dk.decode_attention, c) for c in sizes(grid, grid[:3])},
               **sdpa_baselines(packed_only=True), "copy of the same bytes": copy_of(least)}
        rows[f"B{B} S{S}"] = table(f"B={B} S={S}", fns, args, least, budget_s=sizes(1.5, 0.1), top=6)
    return rows


# -------------------------------------------------------------------------------------------------
# 6. paged attention
# -------------------------------------------------------------------------------------------------


@item
def paged():
    """7. paged decode attention, pages of 16, long context: tiles, against gather + SDPA and the contiguous kernel"""
    if ARGS.dry_run:
        case = ex._paged_cases(torch.Generator().manual_seed(1), "cpu")[1]
        args = case.args
    else:
        args = ex._paged_timing_inputs(torch.Generator(device=DEV).manual_seed(0), DEV)
    least = ex._paged_min_bytes(args)
    contiguous = ex._paged_as_contiguous(*args)  # the same content, contiguous (made once, outside the timing)
    tiles = [dict(block_n=bn, num_warps=w, num_stages=s) for bn in (32, 64, 128) for w in (4, 8) for s in (2, 3)]
    fns = {"default": decode_fn(pk.paged_decode_attention, {}),
           **{cfg_name(t): decode_fn(pk.paged_decode_attention, t) for t in sizes(tiles, tiles[:2])},
           "gather + sdpa flash": ex._gather_then_sdpa,
           "contiguous kernel on a contiguous copy": lambda q, kp, vp, t, n: dk.decode_attention(*contiguous),
           "copy of the same bytes": copy_of(least)}
    return table("paged, pages of 16", fns, args, least, budget_s=sizes(2.0, 0.1), top=6)


# -------------------------------------------------------------------------------------------------
# 7. the batch sweep
# -------------------------------------------------------------------------------------------------


@item
def batch_sweep():
    """8. batch sweep: LLAMA_1B graphed decode steps at 1024 positions, batch 1 to 256"""
    config, context = sizes((LLAMA_1B, 1024), (TINY, 16))
    batches = sizes((1, 4, 16, 64, 128, 256), (1, 2))
    m = Decoder(config, batch=max(batches), max_seq=context + sizes(1024, 300))
    m.k_cache.normal_()
    m.v_cache.normal_()
    copy = copy_ceiling()
    peak = hardware.ceilings().bf16_flops if DEV == "cuda" else 1e12
    rows = []
    print(f"   {'batch':>6}{'ms':>9}{'tokens/s':>11}{'TB/s':>7}{'of copy':>8}{'TFLOP/s':>9}{'of bf16':>8}")
    for batch in batches:
        seconds = graph_time(m, batch, context, rounds=30)
        nbytes, flops = decode_step_bytes(config, batch, context), decode_step_flops(config, batch, context)
        rows.append({"batch": batch, "ms": seconds * 1e3, "tokens_per_s": batch / seconds,
                     "of_copy": nbytes / seconds / copy, "of_bf16": flops / seconds / peak})
        print(f"   {batch:>6}{seconds * 1e3:>9.3f}{batch / seconds:>11,.0f}{nbytes / seconds / 1e12:>7.2f}"
              f"{nbytes / seconds / copy:>8.0%}{flops / seconds / 1e12:>9.1f}{flops / seconds / peak:>8.0%}",
              flush=True)
    return rows


# -------------------------------------------------------------------------------------------------
# 8. the graded exercises
# -------------------------------------------------------------------------------------------------


@item
def graded():
    """4. decoding.decode_attention and decoding.paged_decode_attention graded (package solutions, current lines)"""
    from gpuprinciples.grading import grade
    from gpuprinciples.submission import Submission
    out = {}
    for exercise in (ex.DECODE_ATTENTION, ex.PAGED_DECODE_ATTENTION):
        module, name = exercise.solution.split(":")
        report = grade(exercise.id, Submission(f"from {module} import {name}\n", name, exercise.solution))
        wanted = ("time_ms", "bandwidth_TBps", "copy_ceiling_TBps", "speedup", "TFLOPps")
        keep = {k: v for k, v in report.measurements.items() if k in wanted or k.startswith("timing")}
        checks = [f"{c.name}: {c.detail}" for c in report.checks if "speed" in c.name or "copy" in c.name]
        print(f"   {exercise.id}: {report.status}; {keep}" + "".join(f"\n     . {c}" for c in checks)
              + "".join(f"\n     - {r[:300]}" for r in report.reasons))
        out[exercise.id] = {"status": report.status, **keep, "checks": checks, "reasons": report.reasons}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="toy sizes, any device: checks the script runs")
    parser.add_argument("--budget", type=float, default=285.0, help="seconds; items past it are skipped")
    parser.add_argument("--only", default=None, help="item numbers to run, e.g. 2,5")
    parser.add_argument("--out", default=os.path.join(os.environ["OUT"], "tune_decode.json") if os.environ.get("OUT")
                        else None)
    parsed = parser.parse_args(argv)
    ARGS.dry_run, ARGS.budget = parsed.dry_run, parsed.budget
    ARGS.only = set(parsed.only.split(",")) if parsed.only else None
    if DEV != "cuda" and not ARGS.dry_run:
        print("tools/tune_decode.py times kernels on a CUDA GPU; without one, run it with --dry-run", file=sys.stderr)
        return 1
    import triton
    print(f"{torch.cuda.get_device_name() if DEV == 'cuda' else 'CPU (dry run)'}; torch {torch.__version__}, "
          f"triton {triton.__version__}" + (f"; {hardware.ceilings()}" if DEV == "cuda" else ""), flush=True)
    for run in (correctness, long_context, model, graded, weight_only, model_shapes, paged, batch_sweep):
        run()
    print(f"\ndone in {time.monotonic() - START:.0f} s")
    if parsed.out:
        with open(parsed.out, "w") as f:
            json.dump(RESULTS, f, indent=1, default=str)
        print(f"rows kept in {parsed.out}")
    return 0 if not any(isinstance(v, dict) and "error" in v for v in RESULTS.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
