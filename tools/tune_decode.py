"""Check and tune lesson 10's kernels and model on a GPU, and time them against PyTorch; compact tables.

    PYTHONPATH=. python tools/tune_decode.py              # on the H200: about 3-4 minutes
    PYTHONPATH=. python tools/tune_decode.py --dry-run    # anywhere: every item at toy sizes (a CPU runs the
                                                          # interpreter: checks the script, times nothing real)
    PYTHONPATH=. python tools/tune_decode.py --only 2,3 --model 8b   # items 2 and 3 at LLAMA_8B's shapes: the
                                                          # matrix-vector tiles for decode_step.TUNED (issue 31);
                                                          # --only 3 alone builds the model itself (about 35 s)

Items, in order (each catches its own errors, so one failure does not hide the rest; past the time budget the
remaining items are skipped and say so):

1. correctness in bf16/fp16 on this GPU: both attention kernels on the exercises' GPU cases; fused_linear on the
   model's five weight shapes with the prologue and epilogue the fused step gives each (bf16, int8, fp8); the tiny
   model's decode against its prefill, with PyTorch's kernels and with the fused ones; CUDA-graph steps against
   eager ones;
2. the model (LLAMA_1B) at batch 1 with 4096 positions: prefill TFLOP/s and its kernels by group; the decode step
   eager and as a CUDA graph, with PyTorch's kernels and with the fused ones (kernels/decode_step.py), SDPA over the
   whole static cache, int8 and fp8 weights; tokens/s against the bandwidth roofline; where each graphed step's
   time goes (torch.profiler, kernels by group);
3. the matrix-vector products of a batch-1 step on the model's five weight shapes, 16 calls on 16 distinct weights
   per CUDA graph (2 for the head), as in a step: fused_linear's tiles against cuBLAS bf16 and a copy of the same
   bytes (bf16, then int8); the best tiles per shape as a `decode_step.TUNED` table, and item 2's fused step timed
   with them (what the lesson would print with that table in the package);
4. the two kernel exercises graded end to end with their pass lines (decode attention also on ragged lengths): the
   package's solutions, and on a GPU two submissions of tests/submissions/decoding/ that must fail on speed alone
   (K/V read once per query head; every position read, past the lengths too);
5. decode attention at the long-context case (B 8, Hq 32, Hkv 8, S 32768, D 128): the default plan against
   neighbouring splits and tiles, every SDPA form that runs (packed GQA and enable_gqa), a copy of the same bytes;
6. paged attention (pages of 16) at the long-context case: splits and tiles, against gather + SDPA and the
   contiguous kernel;
7. decode attention at the model's shapes (D 64): batch 1 at 4096, 16 and 64 at 1024;
8. the batch sweep at 1024 positions: graphed steps with PyTorch's kernels at batch 1 to 256, fused ones at 1 to 8;
9. PDL (issue 31): the fused step of LLAMA_1B and LLAMA_8B at batch 1 and 4096 positions, graphed, with
   Programmatic Dependent Launch off and on (the default; `decode_step.pdl`), timed off, on, off, on; one step's
   logits and a graph replay's token with it on against off; where the 1B step's time goes, each way. Alone:
   `--only 9` (about 2 minutes: it builds both models);
10. the split rule in the step: the graphed fused step of LLAMA_1B and LLAMA_8B at batch 1 and 4096 positions
   with decode attention's splits at least GPU_MIN_BLOCKS tiles long for 4, 2 (the default) and 1 (more, shorter
   splits: more programs for a cache that is little to read), timed in turns; each's logits against the default's;
11. the fused step's attention in one launch (`kernels/rope_attention.py`; `decode_step.
   one_launch_attention`) against three (rope_and_cache, decode attention's split kernel and its merge), as item 9
   times PDL: LLAMA_1B and LLAMA_8B graphed at batch 1 and 4096 positions, off, on, off, on, with PDL on;
12. the step's attention in five forms, timed in turns: three launches, and rope_attention with its first K/V tile
   loaded before or after its PDL wait, the splits merged by its last program or by decode_attention's merge kernel;
13. decode attention's plan inside the graphed step (LLAMA_1B, LLAMA_8B, batch 1, 4096 positions), timed in turns:
   K/V through tensor descriptors always or plain loads for splits under `DESCRIPTOR_MIN_TILES` tiles (the default),
   splits at least 4 or 2 (the default) tiles long, 4 stages;
14. decode attention alone, K/V through tensor descriptors or plain loads: the long context (the exercise's timed
   case) and batch 1 at LLAMA_1B's and LLAMA_8B's head dims (64, 128) from 4096 positions;
15. where fused_linear lets the next kernel launch (`decode_step.EARLY_TRIGGER`): after its weight loop, or right
   after its PDL wait for grids of at most 8 (the default) or 16 programs per SM, or for every grid; the graphed step
   of LLAMA_1B and LLAMA_8B, in turns;
16. LLAMA_1B's tuned tiles (`decode_step.TUNED`) against the rule's (`gpu_config`: one wave of longer programs),
   with fused_linear's launch trigger after the wait for one-wave grids, every grid, or none;
17. the step's two ends (the token's embedding and the cache length; the argmax, the token's copy and the length's
   increment) as PyTorch's five launches or as three Triton kernels with PDL (`decode_step.FUSED_ENDS`, the default);
18. what each kind of kernel costs inside the step (`--model`): the graphed step with one kind left out (the rotary
   embedding and cache write, decode attention's merge, the whole attention, one of the four products, the head), in
   turns. The logits are wrong without it; the time it saves is that kernel's share of the step, its overlap with
   the others included (then the profile of the whole step);
19. what a dependent launch costs on this GPU with nothing to move: a CUDA graph of 116 kernels (LLAMA_1B's step
   launches 116), each reading one value per program that the kernel before wrote and writing it + 1, for grids
   of 1 to 4,224 programs of 4 warps, without and with PDL (each kernel waiting with `gdc_wait`, letting the next
   launch after its load), and the PDL form launched without PDL's attribute: µs a launch, the floor of a step of
   that many launches in a row;
20. LLAMA_1B's bf16 tiles in the graphed step (`decode_step.TUNED`: four weight rows a program on the H200) against
   the earlier ones (`EARLIER_TILES`: two rows, but w2's four × 1,024), for every shape and for one shape at a time,
   in turns;
21. LLAMA_1B's bf16 tiles in the graphed step, one shape at a time: every four-row tile (`FOUR_ROW_TILES`: BLOCK_K
   512, 1,024 or 2,048; 1 to 3 stages) in place of the table's, the others as the table has them, in turns.

Every time: `gpuprinciples.measure.timing` (CUDA events, L2 flushed before each call, the variants interleaved),
medians.
`--out FILE` (default $OUT/tune_decode.json when OUT is set) keeps every row as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from unittest import mock

import torch

from gpuprinciples.course.exercises import decoding as ex
from gpuprinciples.course.kernels import decode_attention as dk
from gpuprinciples.course.kernels import decode_step as ds
from gpuprinciples.course.kernels import paged_attention as pk
from gpuprinciples.course.kernels import rope_attention as ra
from gpuprinciples.course.kernels import weight_only_matmul as wk
from gpuprinciples.course.lab.decoder import (
    LLAMA_1B,
    LLAMA_8B,
    TINY,
    Decoder,
    by_group,
    decode_step_bytes,
    decode_step_flops,
    profile_kernels,
    time_step,
)
from gpuprinciples.machine import runtime
from gpuprinciples.measure import calibrate, timing

# isort: split
import triton  # after the package, which on a CPU turns Triton's interpreter on before triton is imported
import triton.language as tl

F = torch.nn.functional
START = time.monotonic()
RESULTS: dict = {}
ARGS = argparse.Namespace(dry_run=False, budget=215.0, only=None, model="1b")
MODELS = {"1b": LLAMA_1B, "8b": LLAMA_8B}  # --model: the shapes of items 2 and 3
DEV = runtime.DEVICE
STATE: dict = {}  # the LLAMA_1B model of item 2, reused by item 3


def weight_shapes(config) -> dict[str, tuple[int, int]]:
    """The step's matrix-vector weights, [out, in]: one layer's four and the head."""
    return {**config.layer_shapes(), "head": (config.vocab, config.d_model)}


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
    return calibrate.ceilings().copy_bandwidth if DEV == "cuda" else 1e10


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
          flush: bool = True, top: int | None = None, per_call: int = 1) -> list[dict]:
    """Time `fns` interleaved on `args`; print fastest first: median (divided by `per_call`, the calls one
    function makes), TB/s and share of copy for `least_bytes` (per call), TFLOP/s when `flops`, speedup over the
    first entry with its 95 % interval. With `top`, only the `top` fastest "cfg" rows are printed."""
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
    shown = 0
    for name, t in ordered:
        s = result.speedup(name, base) if name != base else None
        seconds = t.median / per_call
        row = {"name": name, "us": seconds * 1e6, "TBps": least_bytes / seconds / 1e12,
               "of_copy": least_bytes / seconds / copy, "spread": t.spread}
        if flops:
            row["TFLOPps"] = flops / seconds / 1e12
        if s is not None:
            row["speedup"] = [s.ratio, s.ci_low, s.ci_high]
        rows.append(row)
        is_cfg = name.startswith("cfg")
        if top is None or not is_cfg or shown < top:
            shown += is_cfg
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


def sdpa_forms(packed_only: bool = False, backends=("FLASH_ATTENTION", "CUDNN_ATTENTION", None)) -> dict:
    """SDPA backends on (q, k, v, seq_lens) with full caches: the packed GQA form, and the enable_gqa form."""
    fns = {}
    for backend in backends:
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


def graphs(fns: dict) -> dict:
    """Each zero-argument function captured as a CUDA graph (eager on a CPU dry run), as a function of
    (*ignored); the ones that fail to capture are printed and left out."""
    out = {}
    for name, fn in fns.items():
        try:
            replay = ds.capture(fn) if DEV == "cuda" else fn
            out[name] = (lambda r: lambda *args: r())(replay)
        except Exception as exc:  # noqa: BLE001
            print(f"   {name}: unavailable ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
    return out


# -------------------------------------------------------------------------------------------------
# 1. correctness
# -------------------------------------------------------------------------------------------------


def fused_linear_cases(config, fmt, gen, dtype):
    """(label, function of nothing -> (got, want in float64)) for each of the step's five weight shapes with the
    prologue and epilogue the fused step gives it."""
    shapes = weight_shapes(config)
    cases = []
    for name, (n, k) in shapes.items():
        w = torch.randn(n, k, generator=gen, device=DEV, dtype=dtype) * 0.02
        packed = (w, None) if fmt is None else wk.quantize(w, fmt)
        wide = packed[0].double() * (1 if packed[1] is None else packed[1].double()[:, None])
        for m in ((1, 3) if fmt is None and name in ("wqkv", "w2") else (1,)):
            x = torch.randn(m, 2 * k if name == "w2" else k, generator=gen, device=DEV, dtype=dtype)
            res = torch.randn(m, n, generator=gen, device=DEV, dtype=dtype)
            norm = 1 + 0.1 * torch.randn(k, generator=gen, device=DEV, dtype=dtype)
            xd = x.double()
            if name in ("wqkv", "w13", "head"):
                kw = {"norm": norm, "eps": config.norm_eps}
                h = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + config.norm_eps) * norm.double()
                want = h @ wide.T
            elif name == "wo":
                kw = {"residual": res}
                want = res.double() + xd @ wide.T
            else:
                kw = {"swiglu": True, "residual": res}
                want = res.double() + (F.silu(xd[:, :k]) * xd[:, k:]) @ wide.T
            cases.append((f"{name} [{n}, {k}] M={m} {sorted(kw)}",
                          (lambda x=x, p=packed, kw=kw, want=want: (ds.fused_linear(x, *p, **kw), want))))
    return cases


@item
def correctness():
    """1. correctness on this device (the exercises' GPU cases, fused_linear, the model, CUDA graphs)"""
    from gpuprinciples.grader.worker import _to_device
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
    for fmt in (None, torch.int8, torch.float8_e4m3fn) if DEV == "cuda" else (None, torch.int8):
        worst = []
        for label, run in fused_linear_cases(sizes(LLAMA_1B, TINY), fmt, gen, dtype):
            got, want = run()
            rel = float((got.double() - want).abs().max() / want.abs().max())
            worst.append((rel, label))
            report[f"fused_linear {fmt or dtype} {label}"] = rel
        rel, label = max(worst)
        print(f"   fused_linear, {str(fmt or dtype)[6:]} weights, {len(worst)} shapes/prologues: largest |error| "
              f"{rel:.2e} of the largest |output| ({label})")
    prompt = torch.randint(0, TINY.vocab, (2, 9), generator=torch.Generator().manual_seed(1)).to(DEV)
    nxt = torch.randint(0, TINY.vocab, (2,), generator=torch.Generator().manual_seed(2)).to(DEV)
    want = Decoder(TINY, batch=2, max_seq=24).prefill(torch.cat([prompt, nxt[:, None]], 1)).float()
    for fused in (False, True):
        m = Decoder(TINY, batch=2, max_seq=24, fused=fused)
        m.prefill(prompt)
        got = m.decode(nxt, torch.full((2,), 9, dtype=torch.int32, device=DEV)).float()
        kind = "fused" if fused else "PyTorch"
        print(f"   tiny model, {kind} kernels: decode after prefill vs prefill of one more token: max |logit "
              f"difference| {(got - want).abs().max():.3e} (logits up to {want.abs().max():.2f})")
        report[f"model decode vs prefill, {kind}"] = float((got - want).abs().max())
        if DEV == "cuda":
            tokens, lens = nxt.clone(), torch.full((2,), 9, dtype=torch.int32, device=DEV)
            eager_tokens, eager_lens = tokens.clone(), lens.clone()
            replay = m.graphed_step(tokens, lens)
            same = []
            for _ in range(3):
                replay()
                eager_tokens.copy_(m.decode(eager_tokens, eager_lens).argmax(-1))  # the same cache, eagerly
                eager_lens.add_(1)
                same.append(bool(torch.equal(tokens, eager_tokens)))
            print(f"   tiny model, {kind} kernels: CUDA-graph steps give the eager steps' tokens: {same}")
            report[f"graph == eager, {kind}"] = same
    return report


# -------------------------------------------------------------------------------------------------
# 5. decode attention, long context
# -------------------------------------------------------------------------------------------------


@item
def long_context():
    """5. decode attention, long context (B 8, Hq 32, Hkv 8, S 32768, D 128, bf16): default plan, splits, tiles, SDPA"""
    c = sizes(ex.LONG_CONTEXT, {"B": 2, "Hq": 8, "Hkv": 2, "S": 300, "D": 64})
    args = attention_args(c["B"], c["Hq"], c["Hkv"], c["S"], c["D"])
    least = ex.decode_min_bytes(args)
    default = dk.plan(args[0], c["Hkv"], c["S"])
    print(f"   default plan: {default}")
    tiles = {k: default[k] for k in ("block_n", "num_warps", "num_stages")}
    variants = [{**tiles, "splits": n} for n in sizes((4, 6, 7, 9, 10, 12, 16), (1, 3))]
    variants += [dict(block_n=bn, num_warps=4, num_stages=st, splits=default["splits"])
                 for bn, st in sizes(((32, 2), (64, 3), (128, 2)), ((32, 2),))]
    fns = {"default": decode_fn(dk.decode_attention, {}),
           **{cfg_name(v): decode_fn(dk.decode_attention, v) for v in variants},
           **sdpa_forms(), "sdpa_efficient_attention": sdpa_forms(True, ("EFFICIENT_ATTENTION",))[
               "sdpa_efficient_attention"], "copy of the same bytes": copy_of(least)}
    rows = table("against SDPA and copy", fns, args, least, budget_s=sizes(3.0, 0.2),
                 flops=4 * c["B"] * c["Hq"] * c["S"] * c["D"])
    return {"default_plan": default, "rows": rows}


# -------------------------------------------------------------------------------------------------
# 2. the model
# -------------------------------------------------------------------------------------------------


def filled_model(config, batch: int, context: int, fused: bool = False) -> Decoder:
    """A model with room past `context` positions and its cache filled with noise (what the cache holds does not
    change a step's time)."""
    m = Decoder(config, batch=batch, max_seq=context + sizes(1024, 300), fused=fused)
    m.k_cache.normal_()
    m.v_cache.normal_()
    return m


def graph_time(m: Decoder, batch: int, context: int, rounds: int = 60) -> float:
    """Median seconds of one graphed step (eager on a CPU dry run), every call from `context` positions."""
    return time_step(m, batch, context, graph=DEV == "cuda", max_rounds=rounds if DEV == "cuda" else 2)


def print_profile(title: str, run, seconds: float, calls: int = 10) -> dict:
    """The kernels of `calls` calls of run(), by group, against the call's measured time."""
    rows = profile_kernels(run, calls=calls)
    if not rows:
        print(f"   {title}: the profiler saw no kernels")
        return {}
    groups = by_group(rows)
    busy = sum(g["us"] for g in groups.values())
    print(f"   {title}: {sum(g['launches'] for g in groups.values()):.0f} kernels, {busy:.0f} us of kernel time in "
          f"{seconds * 1e6:.0f} us ({seconds * 1e6 - busy:.0f} us between kernels)")
    for group, g in groups.items():
        print(f"     {group:58}{g['launches']:6.0f} kernels{g['us']:9.0f} us{g['us'] / (seconds * 1e6):6.0%}")
    for r in rows[:6]:
        print(f"       {r['name'][:70]:72}{r['launches']:5.0f}x{r['us']:8.0f} us")
    return {"groups": groups, "top": rows[:12], "kernel_us": busy, "us": seconds * 1e6}


def profile_step(title: str, m: Decoder, context: int, step_s: float) -> dict:
    """print_profile of 10 graphed steps of `m` at batch 1 from `context` positions."""
    tokens = torch.zeros(1, dtype=torch.long, device=DEV)
    lens = torch.full((1,), context, dtype=torch.int32, device=DEV)
    return print_profile(title, m.graphed_step(tokens, lens), step_s)


@item
def model():
    """2. the model: prefill; decode steps at 4096 positions, eager and graphed, PyTorch's or fused kernels; profiles"""
    config = sizes(MODELS[ARGS.model], TINY)
    context, prompt_len = sizes((4096, 2048), (32, 16))
    m = Decoder(config, batch=1, max_seq=context + sizes(1024, 600))
    STATE["model"], STATE["context"] = m, context
    copy = copy_ceiling()
    prompt = torch.randint(0, config.vocab, (1, prompt_len), device=DEV)
    t = timing.time_fn(m.prefill, args=(prompt,), device=DEV, budget_s=sizes(1.0, 0.1), max_rounds=sizes(50, 2))
    attention = 2 * config.n_layers * config.n_heads * config.head_dim * prompt_len ** 2  # causal: half of 4·N²·D
    flops = 2 * config.matmul_params() * prompt_len + attention
    peak = calibrate.ceilings().bf16_flops if DEV == "cuda" else None
    print(f"   prefill {prompt_len} tokens: {t.median * 1e3:.2f} ms, {flops / t.median / 1e12:.0f} TFLOP/s"
          + (f" ({flops / t.median / peak:.0%} of the measured bf16 rate)" if peak else ""))
    rows = {"prefill_ms": t.median * 1e3, "prefill_TFLOPps": flops / t.median / 1e12}
    if DEV == "cuda":
        rows["prefill profile"] = print_profile(f"prefill of {prompt_len} tokens", lambda: m.prefill(prompt), t.median,
                                                calls=3)
    m.prefill(torch.randint(0, config.vocab, (1, context), device=DEV))
    lens = torch.full((1,), context, dtype=torch.int32, device=DEV)
    token = torch.zeros(1, dtype=torch.long, device=DEV)
    plain = m.decode(token, lens).float()
    m.fused = True
    fused = m.decode(token, lens).float()
    print(f"   one step from the same cache, fused against PyTorch's kernels: max |logit difference| "
          f"{(fused - plain).abs().max():.2e} (logits up to {plain.abs().max():.2f}); same argmax: "
          f"{bool(torch.equal(fused.argmax(-1), plain.argmax(-1)))}")
    need = decode_step_bytes(config, 1, context)
    steps, profiles = {}, {}
    for fused_step in (False, True):
        m.fused = fused_step
        kind = "fused kernels" if fused_step else "PyTorch kernels"
        steps[f"eager, {kind}"] = (time_step(m, 1, context, graph=False, max_rounds=sizes(60, 2)), need)
        steps[f"CUDA graph, {kind}"] = (graph_time(m, 1, context), need)
        if DEV == "cuda":
            profiles[kind] = profile_step(f"graphed step, {kind}", m, context, steps[f"CUDA graph, {kind}"][0])
    m.fused = False
    m.attention = "sdpa"  # the whole static cache, masked, every step
    steps[f"CUDA graph, PyTorch kernels, SDPA over all {m.max_seq} positions"] = (
        graph_time(m, 1, context), decode_step_bytes(config, 1, m.max_seq))
    m.attention = "triton"
    for fmt in (torch.int8, torch.float8_e4m3fn) if DEV == "cuda" else (torch.int8,):
        try:
            m.quantize(fmt)
            nbytes = m.weight_bytes() + decode_step_bytes(config, 1, context) - decode_step_bytes(config, 1, 0)
            for fused_step in ((True, False) if fmt == torch.int8 else (True,)):
                m.fused = fused_step
                kind = "fused kernels" if fused_step else "PyTorch + weight_only_matmul"
                steps[f"CUDA graph, {kind}, {str(fmt)[6:]} weights"] = (graph_time(m, 1, context), nbytes)
        except Exception as exc:  # noqa: BLE001
            print(f"   {fmt} weights: FAILED ({type(exc).__name__}: {str(exc)[:200]})")
    m.quantized.clear()
    m.weight_format, m.fused = m.dtype, False
    print(f"   {'decode step, batch 1, ' + str(context) + ' positions':56}{'ms':>8}{'tokens/s':>10}{'GB read':>9}"
          f"{'TB/s':>7}{'of copy':>8}")
    for name, (seconds, nbytes) in steps.items():
        print(f"   {name:56}{seconds * 1e3:8.3f}{1 / seconds:10,.0f}{nbytes / 1e9:9.3f}{nbytes / seconds / 1e12:7.2f}"
              f"{nbytes / seconds / copy:8.0%}")
        rows[name] = {"ms": seconds * 1e3, "tokens_per_s": 1 / seconds, "bytes": nbytes}
    rows["profiles"] = profiles
    return rows


# -------------------------------------------------------------------------------------------------
# 3. the matrix-vector products
# -------------------------------------------------------------------------------------------------

# (BLOCK_N, BLOCK_K, STAGES) at 4 warps, a few at 8: one to 32 rows per program, 2-32 KB weight tiles, the loop
# pipelined through shared memory (STAGES ≥ 2: cp.async) or plain loads (STAGES = 1)
MATVEC_TILES = [ds.tiles(*tile) for tile in (
    (1, 2048, 3), (2, 1024, 1), (2, 1024, 3), (2, 2048, 3), (4, 512, 3), (4, 1024, 1), (4, 1024, 3), (4, 2048, 3),
    (8, 256, 3), (8, 512, 1), (8, 512, 3), (8, 1024, 3), (16, 256, 3), (16, 512, 3), (32, 256, 3))] + [
    ds.tiles(bn, bk, 3, num_warps=8) for bn, bk in ((4, 2048), (8, 1024), (16, 512))]
# LLAMA_8B's weights (K 4096 or 14336): fewer, for the time; weight tiles of 4-16 KB, one to 8 rows per program
MATVEC_TILES_8B = [t for t in MATVEC_TILES if 2048 <= t["BLOCK_N"] * t["BLOCK_K"] <= 8192 and t["BLOCK_N"] <= 8]


def matvec_table(name, n, k, wdtype, tiles, gen, x, dtype):
    """fused_linear at M = 1 on [n, k] weights of `wdtype`, `reps` distinct ones per graph, against cuBLAS on bf16
    ones and a copy of the same bytes (of `wdtype` weights)."""
    reps = sizes(16 if name != "head" else 2, 2)
    bf16 = [torch.randn(n, k, generator=gen, device=DEV, dtype=dtype) * 0.02 for _ in range(reps)]
    packed = [(w, None) for w in bf16] if wdtype is None else [wk.quantize(w, wdtype) for w in bf16]
    per = n * k * packed[0][0].element_size() + (0 if wdtype is None else 4 * n) + 2 * (n + k)
    fns = {"cuBLAS bf16 (F.linear)": lambda: [F.linear(x, w) for w in bf16],
           "fused_linear, the package's tiles": lambda: [ds.fused_linear(x, *p) for p in packed],
           **{cfg_name(t): (lambda t=t: [ds.fused_linear(x, *p, config=t) for p in packed]) for t in tiles}}
    if DEV == "cuda":
        fns["copy of the same bytes"] = None
    fns = graphs({k_: v for k_, v in fns.items() if v is not None})
    if DEV == "cuda":
        fns["copy of the same bytes"] = (lambda r: lambda *a: r())(ds.copies(per, reps))
    label = "bf16" if wdtype is None else str(wdtype)[6:]
    rows = table(f"{name} [{n}, {k}], {label} weights, {reps} per graph (TB/s: the {label} weight's bytes)", fns, (),
                 per, budget_s=sizes(0.6, 0.05), top=5, per_call=reps)
    return rows


def best_tiles(rows, default: dict | None = None) -> dict | None:
    """The tiles of the fastest row among the "cfg" rows (and the default tiles, when given and faster)."""
    for r in rows:
        if r["name"].startswith("cfg"):
            return {kv.split("=")[0]: int(kv.split("=")[1]) for kv in r["name"][4:].split()}
        if default is not None and r["name"] == "fused_linear, the package's tiles":
            return dict(default)
    return None


@item
def matvec():
    """3. batch-1 matrix-vector products in graphs: fused_linear's tiles, cuBLAS, copy; the step with the best tiles"""
    config = sizes(MODELS[ARGS.model], TINY)
    shapes = weight_shapes(config)
    dtype = torch.bfloat16 if DEV == "cuda" else torch.float32
    gen = torch.Generator(device=DEV).manual_seed(0)
    tuned, out = {}, {}
    for name, (n, k) in shapes.items():
        if time.monotonic() - START > ARGS.budget:
            print(f"   {name}: skipped (time budget spent)")
            continue
        x = torch.randn(1, k, generator=gen, device=DEV, dtype=dtype)
        every = MATVEC_TILES_8B if ARGS.model == "8b" else MATVEC_TILES
        tiles = [t for t in sizes(every, [ds.tiles(8, 64, 1)])
                 if t["BLOCK_K"] <= max(64, triton.next_power_of_2(k))]
        rows = matvec_table(name, n, k, None, tiles, gen, x, dtype)
        out[f"{name} bf16"] = rows
        best = best_tiles(rows, ds.config_for(x, torch.empty(n, k, dtype=dtype, device=DEV)))
        if best:
            tuned[(n, k, dtype.itemsize)] = best
        ranked = [best_tiles([r]) for r in rows if r["name"].startswith("cfg")][:sizes(3, 1)]
        rows8 = matvec_table(name, n, k, torch.int8, ranked, gen, x, dtype)
        out[f"{name} int8"] = rows8
        best8 = best_tiles(rows8, ds.config_for(x, torch.empty(n, k, dtype=torch.int8, device=DEV)))
        if best8:
            tuned[(n, k, 1)] = best8
    print("   the best tiles, as kernels/decode_step.py's table:\n   TUNED = {")
    for key, cfg in tuned.items():
        print(f"       {key}: {cfg},")
    print("   }")
    out["TUNED"] = {str(k): v for k, v in tuned.items()}
    m, context = STATE.get("model"), STATE.get("context")
    if m is None:  # item 2 did not run (--only 3): the model and its cache, without item 2's timings
        context = sizes(4096, 32)
        m = Decoder(config, batch=1, max_seq=context + sizes(1024, 600))
        m.prefill(torch.randint(0, config.vocab, (1, context), device=DEV))
    copy = copy_ceiling()
    saved = dict(ds.TUNED)
    steps = {}
    m.fused = True
    for label, table_ in (("the package's tiles", saved), ("tuned tiles", {**saved, **tuned})):
        ds.TUNED.clear()
        ds.TUNED.update(table_)
        for fmt in (None, torch.int8):
            if fmt is not None:
                m.quantize(fmt)
            nbytes = m.weight_bytes() + decode_step_bytes(config, 1, context) - decode_step_bytes(config, 1, 0)
            steps[f"CUDA graph, fused kernels, {label}, {'bf16' if fmt is None else 'int8'} weights"] = (
                graph_time(m, 1, context), nbytes)
            m.quantized.clear()
            m.weight_format = m.dtype
    if DEV == "cuda":
        out["profile, tuned"] = profile_step("graphed step, fused kernels, tuned tiles, bf16", m, context,
                                             steps["CUDA graph, fused kernels, tuned tiles, bf16 weights"][0])
    ds.TUNED.clear()
    ds.TUNED.update(saved)
    m.fused = False
    print(f"   {'decode step, batch 1, ' + str(context) + ' positions':64}{'ms':>8}{'tokens/s':>10}{'TB/s':>7}"
          f"{'of copy':>8}")
    for name, (seconds, nbytes) in steps.items():
        print(f"   {name:64}{seconds * 1e3:8.3f}{1 / seconds:10,.0f}{nbytes / seconds / 1e12:7.2f}"
              f"{nbytes / seconds / copy:8.0%}")
        out[name] = {"ms": seconds * 1e3, "tokens_per_s": 1 / seconds, "of_copy": nbytes / seconds / copy}
    return out


# -------------------------------------------------------------------------------------------------
# 7. decode attention at the model's shapes
# -------------------------------------------------------------------------------------------------


@item
def model_shapes():
    """7. decode attention at LLAMA_1B's shapes (Hq 32, Hkv 8, D 64): batch 1 at 4096, 16 and 64 at 1024"""
    rows = {}
    for B, S, splits in sizes(((1, 4096, (8, 16, 32, 64)), (16, 1024, (1, 2, 4, 8)), (64, 1024, (1, 2, 4))),
                              ((1, 100, (1, 2)),)):
        args = attention_args(B, 32, 8, S, 64) if not ARGS.dry_run else attention_args(B, 4, 2, S, 32)
        least = ex.decode_min_bytes(args)
        default = dk.plan(args[0], args[1].shape[1], S)
        print(f"   B={B} S={S}: default plan {default}")
        grid = [dict(block_n=64, splits=n, num_warps=4, num_stages=st) for n in splits for st in (2, 3)]
        fns = {"default": decode_fn(dk.decode_attention, {}),
               **{cfg_name(c): decode_fn(dk.decode_attention, c) for c in grid},
               **sdpa_forms(packed_only=True, backends=("FLASH_ATTENTION",)),
               "sdpa_default_gqa": sdpa_forms(backends=(None,))["sdpa_default_gqa"],
               "copy of the same bytes": copy_of(least)}
        rows[f"B{B} S{S}"] = {"default_plan": default,
                              "rows": table(f"B={B} S={S}", fns, args, least, budget_s=sizes(1.0, 0.1), top=4)}
    return rows


# -------------------------------------------------------------------------------------------------
# 6. paged attention
# -------------------------------------------------------------------------------------------------


@item
def paged():
    """6. paged decode attention, pages of 16, long context: splits, tiles, gather + SDPA, the contiguous kernel"""
    if ARGS.dry_run:
        case = ex._paged_cases(torch.Generator().manual_seed(1), "cpu")[1]
        args = case.args
    else:
        args = ex.paged_timing_inputs(torch.Generator(device=DEV).manual_seed(0), DEV)
    least = ex.paged_min_bytes(args)
    default = dk.plan(args[0], args[1].shape[1], args[3].shape[1] * args[1].shape[2], tiles=pk.GPU_TILES)
    print(f"   default plan: {default}")
    contiguous = ex._paged_as_contiguous(*args)  # the same content, contiguous (made once, outside the timing)
    variants = [{**pk.GPU_TILES, "splits": n} for n in sizes((4, 6, 12, 16), (1,))]
    variants += [dict(block_n=bn, num_warps=4, num_stages=st) for bn, st in sizes(((32, 2), (32, 3), (128, 2)), ())]
    fns = {"default": decode_fn(pk.paged_decode_attention, {}),
           **{cfg_name(t): decode_fn(pk.paged_decode_attention, t) for t in variants},
           "gather + sdpa flash": ex.gather_then_sdpa,
           "contiguous kernel on a contiguous copy": lambda q, kp, vp, t, n: dk.decode_attention(*contiguous),
           "copy of the same bytes": copy_of(least)}
    return {"default_plan": default, "rows": table("paged, pages of 16", fns, args, least, budget_s=sizes(2.0, 0.1))}


# -------------------------------------------------------------------------------------------------
# 8. the batch sweep
# -------------------------------------------------------------------------------------------------


@item
def batch_sweep():
    """8. batch sweep: LLAMA_1B graphed steps at 1024 positions, PyTorch's kernels at batch 1-256, fused at 1-8"""
    config, context = sizes((LLAMA_1B, 1024), (TINY, 16))
    batches = sizes((1, 4, 16, 64, 128, 256), (1, 2))
    m = filled_model(config, max(batches), context)
    copy = copy_ceiling()
    peak = calibrate.ceilings().bf16_flops if DEV == "cuda" else 1e12
    rows = []
    print(f"   {'kernels':>8}{'batch':>6}{'ms':>9}{'tokens/s':>11}{'TB/s':>7}{'of copy':>8}{'TFLOP/s':>9}"
          f"{'of bf16':>8}")
    for fused, chosen in ((False, batches), (True, sizes((1, 4, 8), (1, 2)))):
        m.fused = fused
        for batch in chosen:
            seconds = graph_time(m, batch, context, rounds=30)
            nbytes, flops = decode_step_bytes(config, batch, context), decode_step_flops(config, batch, context)
            rows.append({"fused": fused, "batch": batch, "ms": seconds * 1e3, "tokens_per_s": batch / seconds,
                         "of_copy": nbytes / seconds / copy, "of_bf16": flops / seconds / peak})
            print(f"   {'fused' if fused else 'PyTorch':>8}{batch:>6}{seconds * 1e3:>9.3f}{batch / seconds:>11,.0f}"
                  f"{nbytes / seconds / 1e12:>7.2f}{nbytes / seconds / copy:>8.0%}{flops / seconds / 1e12:>9.1f}"
                  f"{flops / seconds / peak:>8.0%}", flush=True)
    return rows


# -------------------------------------------------------------------------------------------------
# 9. Programmatic Dependent Launch
# -------------------------------------------------------------------------------------------------


def switch_values(m: Decoder, context: int, switch, what: str) -> dict:
    """One fused step from the same cache with `switch` off and on: the largest logit difference (eager), and
    whether a graph captured with it on replays to the token the step without it chooses."""
    lens = torch.full((1,), context, dtype=torch.int32, device=DEV)
    token = torch.zeros(1, dtype=torch.long, device=DEV)
    with switch(False):
        off = m.decode(token, lens).float()
    with switch(True):
        on = m.decode(token, lens).float()
        if DEV == "cuda":
            replay = m.graphed_step(token, lens)
            replay()
            torch.cuda.synchronize()
    graph_token = int(token[0]) if DEV == "cuda" else int(on.argmax(-1)[0])
    out = {"max_logit_difference": float((on - off).abs().max()),
           "graph_token_same": graph_token == int(off.argmax(-1)[0])}
    print(f"   values, {what} on against off: max |logit difference| {out['max_logit_difference']:.2e}; the "
          f"{'graphed step' if DEV == 'cuda' else 'step (eager: no graph on a CPU)'} with {what} chooses the same "
          f"token: {out['graph_token_same']}")
    return out


def pdl_graph_dump(m: Decoder, lens: torch.Tensor) -> int | None:
    """The step captured with PDL on, written as a DOT file (cudaGraphDebugDotPrint, through torch) to $OUT:
    whether stream capture kept the programmatic edges is in it. Prints how many of its lines say
    'programmatic' (what CUDA's DOT calls such an edge is not documented: read the file)."""
    import tempfile
    token, step_lens = torch.zeros(1, dtype=torch.long, device=DEV), lens.clone()  # the capture's own buffers
    path = os.path.join(os.environ.get("OUT") or tempfile.gettempdir(), f"decode_step_pdl_{m.config.n_layers}.dot")
    try:
        graph = torch.cuda.CUDAGraph()
        graph.enable_debug_mode()
        with ds.pdl(True), torch.cuda.graph(graph):
            m.step(token, step_lens)
        graph.debug_dump(path)
        with open(path) as f:
            lines = f.read().lower().splitlines()
    except Exception as exc:  # noqa: BLE001 - information only
        print(f"   the graph's DOT file: unavailable ({type(exc).__name__}: {str(exc)[:160]})")
        return None
    count = sum("programmatic" in line for line in lines)
    print(f"   the graph captured with PDL on: {path}, {len(lines)} lines, {count} saying 'programmatic'")
    return count


def switch_off_and_on(switch, what: str, dump=None) -> dict:
    """The fused step of LLAMA_1B and LLAMA_8B graphed at batch 1 from 4096 positions, `switch` off, on, off, on;
    the values each way; where the 1B step's time goes, each way."""
    context = sizes(4096, 32)
    copy = copy_ceiling()
    rows = {}
    for label, config in sizes((("LLAMA_1B", LLAMA_1B), ("LLAMA_8B", LLAMA_8B)), (("TINY", TINY),)):
        m = filled(config, context)
        rows[label] = {"values": switch_values(m, context, switch, what)}
        if dump and DEV == "cuda":
            rows[label]["values"]["dump"] = dump(m, torch.full((1,), context, dtype=torch.int32, device=DEV))
        need = decode_step_bytes(config, 1, context)
        print(f"   {label + ', decode step, batch 1, ' + str(context) + ' positions':56}{'ms':>8}{'tokens/s':>10}"
              f"{'GB read':>9}{'TB/s':>7}{'of copy':>8}")
        times = {False: [], True: []}
        for on in (False, True, False, True):  # interleaved: a drift of the GPU's clock shows as a spread
            with switch(on):
                seconds = graph_time(m, 1, context)
            times[on].append(seconds)
            name = f"CUDA graph, fused kernels, {what} {'on' if on else 'off'} (run {len(times[on])})"
            print(f"   {name:56}{seconds * 1e3:8.3f}{1 / seconds:10,.0f}{need / 1e9:9.3f}{need / seconds / 1e12:7.2f}"
                  f"{need / seconds / copy:8.0%}", flush=True)
            rows[label][name] = {"ms": seconds * 1e3, "tokens_per_s": 1 / seconds, "bytes": need,
                                 "of_copy": need / seconds / copy}
        best = {on: min(t) for on, t in times.items()}
        rows[label]["on_over_off"] = best[True] / best[False]
        print(f"   {label}: {what} on / off, fastest run each: {best[True] / best[False]:.3f} "
              f"({best[False] * 1e3:.3f} -> {best[True] * 1e3:.3f} ms; {need / best[False] / copy:.0%} -> "
              f"{need / best[True] / copy:.0%} of copy)")
        if DEV == "cuda" and label == "LLAMA_1B":
            for on in (False, True):
                with switch(on):
                    rows[label][f"profile, {what} {'on' if on else 'off'}"] = profile_step(
                        f"graphed step, fused kernels, {what} {'on' if on else 'off'}", m, context, best[on])
    return rows


FILLED: dict = {}


def filled(config, context: int) -> Decoder:
    """The fused model at batch 1 with `context` positions cached, built once for every item that times it
    (16 GB at LLAMA_8B: building it is most of such an item's time)."""
    if (config, context) not in FILLED:
        FILLED[config, context] = filled_model(config, 1, context, fused=True)
    return FILLED[config, context]


@item
def pdl():
    """9. PDL: the fused step of LLAMA_1B and LLAMA_8B graphed, Programmatic Dependent Launch off and on"""
    return switch_off_and_on(ds.pdl, "PDL", dump=pdl_graph_dump)


# -------------------------------------------------------------------------------------------------
# 10. the split rule inside the step
# -------------------------------------------------------------------------------------------------


def step_variants(variants: dict, models=None) -> dict:
    """The graphed fused step of LLAMA_1B and LLAMA_8B (or `models`: (label, config) pairs) at batch 1 from 4096
    positions under each of `variants` (name -> a context manager factory; the first is the baseline), two rounds in
    turns (a drift of the GPU's clock shows as a spread): ms of each round, share of copy, logits against the
    baseline's."""
    context = sizes(4096, 32)
    copy = copy_ceiling()
    rows = {}
    models = models or sizes((("LLAMA_1B", LLAMA_1B), ("LLAMA_8B", LLAMA_8B)), (("TINY", TINY),))
    for label, config in models:
        m = filled(config, context)
        need = decode_step_bytes(config, 1, context)
        lens = torch.full((1,), context, dtype=torch.int32, device=DEV)
        token = torch.zeros(1, dtype=torch.long, device=DEV)
        times, logits = {}, {}
        for _ in range(2):
            for name, variant in variants.items():
                with variant():
                    if name not in logits:
                        logits[name] = m.decode(token, lens.clone()).float()
                    times.setdefault(name, []).append(graph_time(m, 1, context))
        base = logits[next(iter(variants))]
        rows[label] = {name: {"ms": [t * 1e3 for t in ts], "of_copy": need / min(ts) / copy,
                              "max_logit_difference": (logits[name] - base).abs().max().item()}
                       for name, ts in times.items()}
        for name, row in rows[label].items():
            print(f"   {label}: {name:66} {' / '.join(f'{t:.3f}' for t in row['ms'])} ms, {row['of_copy']:.0%} of "
                  f"copy, logits off by {row['max_logit_difference']:.1e}", flush=True)
    return rows


def least_blocks(least: int):
    """Decode attention's splits at least `least` tiles long."""
    return mock.patch.object(dk, "GPU_MIN_BLOCKS", least)


@item
def step_splits():
    """10. splits in the step: the graphed fused step at batch 1, decode attention's GPU_MIN_BLOCKS 4, 2, 1"""
    return step_variants({f"splits of at least {least} tiles": (lambda least=least: least_blocks(least))
                          for least in (4, 2, 1)})


@item
def one_launch():
    """11. the step's attention in one launch (rope_attention) against three (rope_and_cache, split, merge)"""
    return switch_off_and_on(ds.one_launch_attention, "one-launch attention")


def attention_form(one_launch: bool, early_tile: bool = True, merge_in_kernel: bool = True):
    """The fused step's attention: three launches, or rope_attention with its two options."""
    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.multiple(ra, EARLY_TILE=early_tile, MERGE_IN_KERNEL=merge_in_kernel))
    stack.enter_context(ds.one_launch_attention(one_launch))
    return stack


ATTENTION_FORMS = {  # name -> attention_form's arguments
    "three launches (rope_and_cache, split, merge)": (False,),
    "rope_attention, first tile early, merged in the kernel": (True, True, True),
    "rope_attention, first tile after the wait, merged in the kernel": (True, False, True),
    "rope_attention, first tile early, merge kernel after": (True, True, False),
    "rope_attention, first tile after the wait, merge kernel after": (True, False, False),
}


@item
def attention_forms():
    """12. the step's attention: three launches against rope_attention's four forms, in turns"""
    return step_variants({name: (lambda form=form: attention_form(*form)) for name, form in ATTENTION_FORMS.items()})


def attention_plan(descriptor_min_tiles: int, least: int, stages: int | None):
    """Decode attention's GPU plan: descriptors from splits of `descriptor_min_tiles` tiles (0: always), splits
    at least `least` tiles, `stages` (None: the rule's)."""
    return mock.patch.multiple(dk, DESCRIPTOR_MIN_TILES=descriptor_min_tiles, GPU_MIN_BLOCKS=least,
                               **({"gpu_stages": lambda head_dim: stages} if stages else {}))


ATTENTION_PLANS = {  # name -> attention_plan's arguments
    "descriptors always, splits >= 4 tiles (the plan before)": (0, 4, None),
    "plain loads below 16 tiles a split, splits >= 4 tiles": (16, 4, None),
    "plain loads below 16 tiles a split, splits >= 2 tiles (the default)": (16, 2, None),
    "plain loads below 16 tiles, splits >= 2 tiles, 4 stages": (16, 2, 4),
}


@item
def attention_plans():
    """13. decode attention's plan in the step: descriptors or plain loads, split length, stages"""
    return step_variants({name: (lambda plan=plan: attention_plan(*plan)) for name, plan in ATTENTION_PLANS.items()})


@item
def attention_loads():
    """14. decode attention alone: tensor descriptors against plain loads, long context and batch 1"""
    out = {}
    long = sizes(ex.LONG_CONTEXT, {"B": 2, "Hq": 8, "Hkv": 2, "S": 300, "D": 64})
    cases = {"long context": long, **{f"batch 1, D {d}": {"B": 1, "Hq": 32, "Hkv": 8, "S": sizes(4096, 256), "D": d}
                                      for d in (64, 128)}}
    for label, c in cases.items():
        args = attention_args(c["B"], c["Hq"], c["Hkv"], c["S"], c["D"])
        least = ex.decode_min_bytes(args)
        fns = {"descriptors": decode_fn(dk.decode_attention, {"descriptors": True}),
               "plain loads": decode_fn(dk.decode_attention, {"descriptors": False}),
               "copy of the same bytes": copy_of(least)}
        out[label] = table(label, fns, args, least, budget_s=sizes(2.0, 0.2))
    return out


def trigger_name(most: int | None) -> str:
    if most is None:
        return "next kernel launched after the weight loop"
    return f"after the wait, grids of at most {most} programs an SM"


@item
def early_trigger():
    """15. fused_linear lets the next kernel launch after its wait, not after its weight loop, for grids this small"""
    return step_variants({trigger_name(most): (lambda most=most: ds.switched("EARLY_TRIGGER", most))
                          for most in (None, 8, 16, 1 << 20)})  # 1 << 20: every grid


def tiles_and_trigger(tuned: bool, most: int | None):
    """fused_linear with the tuned tile table (else the rule's tiles for every shape), EARLY_TRIGGER = `most`."""
    stack = contextlib.ExitStack()
    stack.enter_context(ds.switched("EARLY_TRIGGER", most))
    if not tuned:
        stack.enter_context(mock.patch.object(ds, "TUNED", {}))
    return stack


TILES = {True: "the tuned", False: "the rule's"}


@item
def rule_tiles_and_trigger():
    """16. LLAMA_1B's tuned tiles against the rule's (one wave of longer programs), with each launch trigger"""
    return step_variants({f"{TILES[tuned]} tiles, {trigger_name(most)}":
                          (lambda tuned=tuned, most=most: tiles_and_trigger(tuned, most))
                          for tuned, most in ((True, 8), (False, 8), (False, 1 << 20), (False, None))})


@item
def step_ends():
    """17. the step's ends (embedding, argmax, the length) as PyTorch's five launches or three Triton ones with PDL"""
    return step_variants({f"the step's ends {'in Triton, with PDL' if on else 'in PyTorch'}":
                          (lambda on=on: ds.switched("FUSED_ENDS", on)) for on in (False, True)})


def without(vocab: int, *left_out: str):
    """The fused step with these kernels left out: "rope" (rope_and_cache: q read from the q/k/v row, nothing
    cached), "merge" (decode attention's merge kernel: its output left unwritten), "attention" (the split kernel
    and merge: q passed on), or one product: "qkv", "output", "gate/up", "down", "head" (the one with `vocab` rows;
    its input passed on, or its residual)."""
    from gpuprinciples.course.lab import decoder as dec
    stack = contextlib.ExitStack()
    if "rope" in left_out:
        def rope(qkv, cos, sin, positions, k_cache, v_cache, n_heads):
            return qkv[:, :n_heads * k_cache.shape[3]].view(qkv.shape[0], n_heads, k_cache.shape[3])
        stack.enter_context(mock.patch.object(dec, "rope_and_cache", rope))
    if "attention" in left_out:
        stack.enter_context(mock.patch.object(dec, "decode_attention", lambda q, *args, **kw: q))
    if "merge" in left_out:
        class NoLaunch:
            def __getitem__(self, grid):
                return lambda *args, **kw: None
        stack.enter_context(mock.patch.object(dk, "merge_splits_kernel", NoLaunch()))
    products = {"qkv", "output", "gate/up", "down", "head"} & set(left_out)
    if products:
        linear = ds.fused_linear

        def fused_linear(x, w, scale=None, **kw):
            n, k = w.shape
            role = ("down" if kw.get("swiglu") else "output" if kw.get("residual") is not None
                    else "head" if n == vocab else "gate/up" if n > 2 * k else "qkv")
            if role not in products:
                return linear(x, w, scale, **kw)
            if kw.get("residual") is not None:
                return kw["residual"]
            return x[:, :n] if x.shape[1] >= n else x.repeat(1, -(-n // x.shape[1]))[:, :n]
        stack.enter_context(mock.patch.object(dec, "fused_linear", fused_linear))
    return stack


LEFT_OUT = ((), ("rope",), ("merge",), ("attention",), ("rope", "attention"), ("qkv",), ("output",), ("gate/up",),
            ("down",), ("head",))


@item
def left_out():
    """18. each kind of kernel's share of the graphed step (--model): the step with it left out, in turns"""
    label, config = sizes((f"LLAMA_{ARGS.model.upper()}", MODELS[ARGS.model]), ("TINY", TINY))
    rows = step_variants({"without " + (" and ".join(names) or "nothing"):
                          (lambda names=names: without(config.vocab, *names)) for names in LEFT_OUT},
                         models=((label, config),))[label]
    base = rows["without nothing"]["ms"]
    for name, row in rows.items():
        print(f"   {label}: {name:40} saves {(min(base) - min(row['ms'])) * 1e3:7.1f} us a step", flush=True)
    if DEV == "cuda":
        rows["profile"] = profile_step("the whole step", filled(config, 4096), 4096, min(base) / 1e3)
    return rows


HOPS = 116  # LLAMA_1B's graphed fused step: 16 layers of 7 launches, the head and the step's ends


@triton.jit
def hop_kernel(Src, Dst, PDL: tl.constexpr = False):
    """One link of a chain: Dst[p] = Src[p] + 1, Src written by the kernel before (with PDL: read after the wait)."""
    p = tl.program_id(0)
    if PDL:
        tl.extra.cuda.gdc_wait()
    v = tl.load(Src + p)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(Dst + p, v + 1)


@item
def hops():
    """19. a dependent launch with nothing to move: a graph of 116 chained kernels, grids of 1 to 4,224 programs"""
    out = {}
    for programs in sizes((1, 132, 528, 1056, 4224), (1, 4)):
        bufs = [torch.zeros(programs, dtype=torch.int32, device=DEV) for _ in range(2)]
        fns = {}
        for on in (False, True, "form"):
            options = dk.pdl_options(bool(on), bufs[0])
            if on == "form" and options:  # the PDL form (wait, trigger) launched without PDL's attribute
                options["launch_pdl"] = False

            def chain(options=options):
                for i in range(HOPS):
                    hop_kernel[(programs,)](bufs[i % 2], bufs[1 - i % 2], num_warps=4, **options)
            fns[f"{programs} programs, PDL {({False: 'off', True: 'on'}).get(on, on)}"] = chain
        fns = graphs(fns)
        result = timing.compare(fns, args=(), device=DEV, budget_s=sizes(0.5, 0.05), flush=False, max_rounds=100)
        for name, t in result.timings.items():
            us = t.median / HOPS * 1e6
            out[name] = {"us_a_launch": us, "step_floor_us": us * HOPS}
            print(f"   {name:30} {us:6.2f} us a launch; {HOPS} in a row: {us * HOPS:6.1f} us", flush=True)
    return out


def with_tiles(changes: dict):
    """A variant for step_variants: fused_linear's table with `changes` ((n, k, 2) -> tiles(...)) in place."""
    return lambda: mock.patch.object(ds, "TUNED", {**ds.TUNED, **changes})


# LLAMA_1B's bf16 tiles before the twelfth pass: (BLOCK_N, BLOCK_K, STAGES), 4 warps
EARLIER_TILES = {(3072, 2048, 2): (2, 1024, 1), (2048, 2048, 2): (2, 1024, 1), (16384, 2048, 2): (2, 1024, 1),
                 (2048, 8192, 2): (4, 1024, 3), (128256, 2048, 2): (2, 1024, 1)}


@item
def earlier_tiles():
    """20. LLAMA_1B's bf16 tiles: the table's against the earlier ones, for every shape and one shape at a time"""
    earlier = {key: ds.tiles(*tile) for key, tile in EARLIER_TILES.items()}
    names = {(n, k, 2): name for name, (n, k) in weight_shapes(LLAMA_1B).items()}
    variants = {"the table's tiles": contextlib.nullcontext,
                "the earlier tiles for every shape": with_tiles(earlier)}
    for key, cfg in earlier.items():
        variants[f"the earlier tiles for {names[key]}"] = with_tiles({key: cfg})
    return step_variants(variants, models=sizes((("LLAMA_1B", LLAMA_1B),), (("TINY", TINY),)))


# every four-row tile: the twelfth pass's sweep tuned each weight alone, where one shape's best may differ in the step
FOUR_ROW_TILES = [(4, block_k, stages) for block_k in (512, 1024, 2048) for stages in (1, 2, 3)]


@item
def four_row_tiles():
    """21. LLAMA_1B's bf16 tiles in the step, one shape at a time (four rows a program, BLOCK_K 512-2048,
    1-3 stages), then each shape's fastest together"""
    models = sizes((("LLAMA_1B", LLAMA_1B),), (("TINY", TINY),))
    variants, changes = {"the table's tiles": contextlib.nullcontext}, {}
    for name, (n, k) in weight_shapes(LLAMA_1B).items():
        for tile in sizes(FOUR_ROW_TILES, FOUR_ROW_TILES[:1]):
            if ds.TUNED[(n, k, 2)] != ds.tiles(*tile):
                variants[f"{name} at {tile}"] = with_tiles({(n, k, 2): ds.tiles(*tile)})
                changes[f"{name} at {tile}"] = (name, (n, k, 2), tile)
    rows = step_variants(variants, models)
    # then each shape's fastest tile, where it beat the table's by more than 0.5 %, all at once
    best_ms = {name: min(row["ms"]) for name, row in next(iter(rows.values())).items()}
    table_ms = best_ms.pop("the table's tiles")
    best = {}
    for variant, ms in sorted(best_ms.items(), key=lambda kv: kv[1]):
        shape, key, tile = changes[variant]
        if ms < table_ms * 0.995 and key not in best:
            best[key] = (shape, tile)
    if not best:
        print("   no shape's tile beat the table's by 0.5 %", flush=True)
        return {"one_at_a_time": rows}
    together = " and ".join(f"{shape} at {tile}" for shape, tile in best.values())
    both = step_variants({"the table's tiles": contextlib.nullcontext,
                          together: with_tiles({key: ds.tiles(*tile) for key, (_, tile) in best.items()})}, models)
    return {"one_at_a_time": rows, "together": both}


# -------------------------------------------------------------------------------------------------
# 4. the graded exercises
# -------------------------------------------------------------------------------------------------


SPEED_SUBMISSIONS = (  # tests/submissions/decoding/: right values, read wrongly: on a GPU speed alone must fail them
    ("kv_per_query_head.py", ex.DECODE_ATTENTION), ("reads_whole_cache.py", ex.DECODE_ATTENTION))


def print_grade(label: str, report) -> dict:
    wanted = ("time_ms", "bandwidth_TBps", "copy_ceiling_TBps", "speedup", "TFLOPps")
    keep = {k: v for k, v in report.measurements.items() if k in wanted or k.startswith("timing")}
    checks = [f"{c.name}: {c.detail}" for c in report.checks if "speed" in c.name or "copy" in c.name]
    print(f"   {label}: {report.status}; {keep}" + "".join(f"\n     . {c}" for c in checks)
          + "".join(f"\n     - {r[:300]}" for r in report.reasons))
    return {"status": report.status, **keep, "checks": checks, "reasons": report.reasons}


@item
def graded():
    """4. the two kernel exercises graded: the package's solutions, and (GPU) two submissions that must fail"""
    from pathlib import Path

    from gpuprinciples.grader.grading import grade
    from gpuprinciples.sandbox.submission import Submission, from_path
    out = {}
    for exercise in (ex.DECODE_ATTENTION, ex.PAGED_DECODE_ATTENTION):
        module, name = exercise.solution.split(":")
        report = grade(exercise.id, Submission(f"from {module} import {name}\n", name, exercise.solution))
        out[exercise.id] = print_grade(f"{exercise.id}, the package's solution", report)
    here = Path(__file__).resolve().parent.parent / "tests" / "submissions" / "decoding"
    for file, exercise in SPEED_SUBMISSIONS if DEV == "cuda" else ():
        report = grade(exercise.id, from_path(f"{here / file}:decode_attention"), seed=10)
        out[file] = print_grade(f"{exercise.id}, tests/submissions/decoding/{file}", report)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="toy sizes, any device: checks the script runs")
    parser.add_argument("--budget", type=float, default=215.0, help="seconds; items past it are skipped")
    parser.add_argument("--only", default=None, help="item numbers to run, e.g. 2,5")
    parser.add_argument("--model", choices=sorted(MODELS), default="1b", help="the model of items 2, 3 and 18")
    parser.add_argument("--out", default=os.path.join(os.environ["OUT"], "tune_decode.json") if os.environ.get("OUT")
                        else None)
    parsed = parser.parse_args(argv)
    ARGS.dry_run, ARGS.budget, ARGS.model = parsed.dry_run, parsed.budget, parsed.model
    ARGS.only = set(parsed.only.split(",")) if parsed.only else None
    if DEV != "cuda" and not ARGS.dry_run:
        print("tools/tune_decode.py times kernels on a CUDA GPU; without one, run it with --dry-run", file=sys.stderr)
        return 1
    print(f"{torch.cuda.get_device_name() if DEV == 'cuda' else 'CPU (dry run)'}; torch {torch.__version__}, "
          f"triton {triton.__version__}" + (f"; {calibrate.ceilings()}" if DEV == "cuda" else ""), flush=True)
    for run in (correctness, model, matvec, graded, long_context, paged, model_shapes, batch_sweep, pdl,
                step_splits, one_launch, attention_forms, attention_plans, attention_loads, early_trigger,
                rule_tiles_and_trigger, step_ends, left_out, hops, earlier_tiles, four_row_tiles):
        run()
    print(f"\ndone in {time.monotonic() - START:.0f} s")
    if parsed.out:
        with open(parsed.out, "w") as f:
            json.dump(RESULTS, f, indent=1, default=str)
        print(f"rows kept in {parsed.out}")
    return 0 if not any(isinstance(v, dict) and "error" in v for v in RESULTS.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
