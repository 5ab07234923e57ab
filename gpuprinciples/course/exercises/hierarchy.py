"""Lesson 11, the memory hierarchy: occupancy, the L2 cliff, and a tiled matmul on Tensor Cores.

Five exercises:

* `hierarchy.occupancy`: warps per SM of an H100/H200 for a kernel's registers, shared memory and warps
  (exact, the rules of NVIDIA's occupancy calculator; `gpuprinciples.machine.occupancy` is the reference);
* `hierarchy.l2_cliff`: which of a few working-set sizes falls off the L2 cliff (a prediction, graded against
  a measurement made during the check on a GPU, and against the one recorded on an H200 without one);
* `hierarchy.l1_working_set`: a decision from the H200's recorded L1 sweep, which the lesson does not read for
  the learner: the largest working set per SM still read within 10 % of the best (each wrong size says why);
* `hierarchy.tiles_fp32`: a decision from the compiled kernel: a float32 (TF32) launch of the package's matmul
  that fits shared memory, spills nothing, runs wgmma, keeps 3 stages, with the largest tile intensity (the
  check compiles the answer for sm_90; each broken rule says what the compiler reported and what to change);
* `hierarchy.matmul`: C = A @ B in Triton, fp32 accumulation, in the inputs' dtype.

How `hierarchy.matmul` is judged:

* Values, against float64, at bf16 precision everywhere: |C - C_ref| ≤ 2⁻⁷·|C_ref| + 2⁻¹⁰·√((A∘A)(B∘B)). The
  first term is the output's rounding to bf16 (twice its worst case), the second 2⁻¹⁰ of the root-sum-square
  of the K products: an fp32 accumulator's error (about K·2⁻²⁴ of one product) is far inside it; a bf16
  accumulator's (about K·2⁻⁹ of one) is far outside, and so is one term of the sum left out while K is
  below about 10⁴ (beyond that, one rounding of C to bf16 is larger than a term).
* On a GPU the inputs are bf16. Under the interpreter most cases are float32 tensors that hold bf16 values
  (the same products as on the GPU): Triton's interpreter keeps bf16 as raw 16-bit integers and does not
  support arithmetic on it (Triton's debugging guide; triton-lang/triton#11584, where `tl.dot` multiplied the
  bit patterns). gpuprinciples widens bf16 `tl.dot` operands (toolchain/interpreter.py), but a kernel's other bf16
  arithmetic would still be wrong there and right on a GPU. One CPU case is bf16: its values are graded too,
  and its launch is what the compile-for-sm_90 step turns into PTX, where the dot must be a `wgmma`.
* K and N are multiples of 16 bytes (8 bf16, 4 float32 elements; lesson 06's rule, and what TMA needs), M is
  anything, and none of them is a multiple of a block size except by chance.
* Under the interpreter the loads and stores are traced: every tile the kernel stores into C (a BM×BN store)
  implies that its program read a BM×K strip of A and a K×BN strip of B. All Triton loads (and PyTorch
  copies) together must stay within 1.25× of the sum of those strips: a kernel that re-reads its tiles does
  not. Every element of C is stored once (a tile stored twice would count its strips twice), and every
  element of A and B is read by the kernel.
* On a GPU it is timed against `torch.mm` (cuBLAS), in the same run, at 8192³ and at 8191×8200×8184 in bf16
  (rows 16-byte aligned, as TMA needs, but not 128-byte aligned), each shape judged on its own.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from ...machine import occupancy as occ
from ...machine import runtime
from ...measure import counters
from ...toolchain import compiling
from ..kit import (
    H200_SMS,
    Case,
    FunctionExercise,
    LaunchesTriton,
    MaxLaunches,
    NoTorchCompute,
    Regime,
    Timing,
    UsesTensorCores,
    ValueExercise,
    regime_specs,
)
from ..kit.compare import _fmt_bytes
from . import _hierarchy_recorded as RECORDED

# -------------------------------------------------------------------------------------------------
# hierarchy.occupancy
# -------------------------------------------------------------------------------------------------

# one case per group of (registers, shared memory, warps) triples, drawn afresh for every check
_OCCUPANCY_GROUPS = ("registers", "granularity", "shared memory", "warp slots and blocks", "does not fit", "mixed")


def _occupancy_triples(gen: torch.Generator, group: str) -> list[tuple[int, int, int]]:
    def pick(values):
        return values[int(torch.randint(0, len(values), (1,), generator=gen))]

    def between(low, high):
        return int(torch.randint(low, high + 1, (1,), generator=gen))

    warps = (1, 2, 4, 8, 16, 32)
    out = []
    for _ in range(8):
        if group == "registers":  # registers decide; little shared memory
            out.append((between(64, 255), between(0, 8) * 1024, pick(warps[:5])))
        elif group == "granularity":  # one register more than a multiple of 8: a whole unit of 256 more per warp
            out.append((8 * between(4, 31) + pick((0, 1)), 0, pick(warps[:4])))
        elif group == "shared memory":
            out.append((between(16, 64), between(20_000, 232_448), pick(warps[:4])))
        elif group == "warp slots and blocks":  # few registers, no shared memory: slots and the 32-block cap
            out.append((between(8, 32), between(0, 2) * 128, pick(warps)))
        elif group == "does not fit":  # registers per block above 64 K, or shared memory above 227 KiB
            if pick((0, 1)):
                out.append((between(129, 255), 0, pick((16, 32))))
            else:
                out.append((between(16, 64), between(232_449, 260_000), pick(warps[:4])))
        else:
            out.append((between(1, 255), between(0, 232_448), pick(warps)))
    return out


def _occupancy_cases(gen: torch.Generator, mode: str) -> list[Case]:
    return [Case(group, (_occupancy_triples(gen, group),)) for group in _OCCUPANCY_GROUPS]


def _occupancy_run(fn, args, kwargs):
    (triples,) = args
    return [fn(*t) for t in triples]


def _occupancy_reference(triples):
    return [occ.resident_warps(*t) for t in triples]


def _why(triple) -> str:
    o = occ.occupancy(*triple)
    limits = ", ".join(o.limited_by)
    return (f"{o.blocks} block(s) of {triple[2]} warps: limited by {limits} (registers allow {o.by_registers} "
            f"blocks at {o.registers_per_warp} registers per warp, shared memory {o.by_shared} at "
            f"{o.shared_per_block:,} bytes per block, warp slots {o.by_warps}, the block cap {o.by_blocks})")


def _compare_occupancy(got, want, case) -> list[str]:
    where = f" (case {case.label})"
    if not isinstance(got, (list, tuple)) or len(got) != len(want):
        return [f"the grader collected {type(got).__name__}; expected one number per call{where}"]
    for triple, g, w in zip(case.args[0], got, want):
        call = f"occupancy{tuple(triple)}"
        if isinstance(g, bool) or not isinstance(g, numbers.Real) or (isinstance(g, float) and not g.is_integer()):
            return [f"{call} returned {g!r}: expected a whole number of warps per SM{where}"]
        if int(g) != w:
            return [f"{call} returned {g}; an H100/H200 SM holds {w} warps{where}: {_why(triple)}"]
    return []


OCCUPANCY = FunctionExercise(
    id="hierarchy.occupancy",
    title="Occupancy of an H100/H200 SM",
    signature=("occupancy(regs_per_thread: int, smem_per_block: int, num_warps: int) -> int  # resident warps "
               "per SM (0 when a block does not fit); smem in bytes, as Triton's compiled kernel reports it"),
    cases=_occupancy_cases,
    reference=_occupancy_reference,
    run=_occupancy_run,
    compare=_compare_occupancy,
    timeout_s=60.0,
    solution="gpuprinciples.machine.occupancy:resident_warps",
    hints=(
        "Four limits, in blocks per SM: 64 // num_warps warp slots; 32 blocks; registers; shared memory. "
        "The answer is the smallest, times num_warps.",
        "Registers go to a warp in units of 256: per_warp = ceil(regs * 32 / 256) * 256.",
        "The 65536 registers are four quarters of 16384, one per scheduler; a warp lives in one quarter: "
        "warps = 4 * (16384 // per_warp), blocks = warps // num_warps.",
        "A block that needs more than 65536 registers (count its warps rounded up to a multiple of 4), or more "
        "than 227 KiB of shared memory, does not fit at all: 0.",
        "Shared memory per block: (smem + 1024 reserved) rounded up to 128 bytes; 228 KiB per SM.",
    ),
)

# -------------------------------------------------------------------------------------------------
# hierarchy.l2_cliff
# -------------------------------------------------------------------------------------------------

CLIFF_SIZES_MIB = (8, 24, 96, 384)


def cliff_from_bandwidths(bandwidths: dict[int, float], hbm: float) -> int:
    """The smallest size (MiB) above the fastest one whose bandwidth is nearer HBM's than the fastest's
    (geometric middle). The fastest, not the smallest: a small buffer is read in few bytes per pass and does
    not reach L2's rate (on the H200, 8 MiB read at 7.4 TB/s and 24 MiB at 9.8)."""
    best = max(bandwidths, key=bandwidths.get)
    middle = math.sqrt(bandwidths[best] * hbm)
    off = [size for size, bw in sorted(bandwidths.items()) if size > best and bw < middle]
    return off[0] if off else max(bandwidths) * 4


def measure_cliff(sizes_mib=CLIFF_SIZES_MIB) -> dict:
    """On this GPU: read bandwidth at each size, HBM's (a buffer 16× the L2), and the size off the cliff."""
    from ..kernels.bandwidth import working_set_bandwidth
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    bandwidths = {s: working_set_bandwidth(s * 2**20)["bandwidth"] for s in sizes_mib}
    hbm = working_set_bandwidth(16 * l2)["bandwidth"]
    return {"bandwidths": bandwidths, "hbm": hbm, "l2_bytes": l2, "cliff": cliff_from_bandwidths(bandwidths, hbm)}


def _cliff_expected():
    if runtime.HAS_CUDA:  # measured now, on this GPU
        return measure_cliff()["cliff"]
    # no GPU: what the same measurement gave on an H200 (RECORDED.SOURCE)
    return cliff_from_bandwidths(RECORDED.CLIFF["bandwidths"], RECORDED.CLIFF["hbm"])


L2_CLIFF = ValueExercise(
    id="hierarchy.l2_cliff",
    prediction=True,
    title="Predict: which working set falls off the L2 cliff?",
    question=("A kernel spread over every SM reads a buffer again and again (each pass reads what another SM "
              f"read the pass before, cached in L2 only). Of the buffer sizes {', '.join(map(str, CLIFF_SIZES_MIB))} "
              "MiB, which is the smallest whose bandwidth falls to HBM's? Answer the size in MiB. On a GPU the "
              "answer is measured on that GPU when you check; without one, it is what the same measurement "
              "gave on an H200 (2026-12-03)."),
    expected=_cliff_expected,
    rel_tol=0.0,
    hints=("torch.cuda.get_device_properties(0).L2_cache_size is the L2 in bytes: 50 MiB on an H100 SXM "
           "(NVIDIA's whitepaper); the H200 this lesson was measured on reported 60 MiB.",
           "A buffer that fits stays in L2 after the first pass; one that does not is evicted before it is read "
           "again, so every pass comes from HBM. Between the two the fall is spread out: the L2 is two "
           "partitions, and no cache replaces its lines perfectly."),
)

# -------------------------------------------------------------------------------------------------
# hierarchy.l1_working_set: a decision from a curve the lesson has not read for the learner
# -------------------------------------------------------------------------------------------------

L1_KEEP = 0.9  # "at L1 speed": within 10 % of the best bandwidth the sweep reached


def l1_curve_kib() -> dict[int, float]:
    """The H200's recorded L1 sweep (RECORDED.L1_CURVE): KiB per SM → bytes/s. Every program re-reads its own
    chunk with loads cached in L1; the same data on every machine, so the verdict is the same everywhere."""
    return {nbytes // 1024: bw for nbytes, bw in RECORDED.L1_CURVE}


def _l1_working_set() -> int:
    curve = l1_curve_kib()
    best = max(curve.values())
    return max(kib for kib, bw in curve.items() if bw >= L1_KEEP * best)


def _tbs(kib: int) -> str:
    curve = l1_curve_kib()
    return f"{curve[kib] / 1e12:.1f} TB/s ({curve[kib] / max(curve.values()):.0%} of the best)"


def _compare_l1(got, want: int) -> list[str]:
    """A wrong size fails with what it gets wrong: past the cliff, a spec sheet's size, or room left unused."""
    curve = l1_curve_kib()
    if isinstance(got, bool) or not isinstance(got, numbers.Real) or got != int(got):
        return [f"answered {got!r}: the answer is a working set per SM in KiB, one of the measured sizes "
                f"{list(curve)}"]
    got = int(got)
    if got not in curve:
        if got % 1024 == 0 and got // 1024 in curve:
            return [f"answered {got:,}: that is bytes; answer in KiB ({got // 1024})"]
        return [f"{got} KiB per SM was not measured: between two measured sizes the bandwidth is not known, so "
                f"choose one of {list(curve)}"]
    peak = max(curve, key=curve.get)
    if got > want:
        spec = (" 256 KB is what the spec sheet gives an SM for L1 and shared memory together (the table at the "
                "top), not the working set served at L1's speed." if got == 256 else "")
        return [f"at {got} KiB per SM the sweep read {_tbs(got)}: past the cliff.{spec} The best was "
                f"{curve[peak] / 1e12:.1f} TB/s at {peak} KiB: which sizes to its right are still within 10 % of it? "
                "Read the size off the curve, not off the capacity"]
    if got < want:
        slow = (f"; below the line because so small a chunk is too little work per pass to keep the SM's loads "
                f"busy, not because of the cache (the curve climbs until {peak} KiB)"
                if curve[got] < L1_KEEP * curve[peak] else "")
        return [f"at {got} KiB per SM the sweep read {_tbs(got)}{slow}. At {want} KiB it still read {_tbs(want)}: a "
                f"kernel can keep {want} KiB per SM at L1's speed, and every byte it keeps there is one it does not "
                "fetch from L2 again"]
    return []


L1_WORKING_SET = ValueExercise(
    id="hierarchy.l1_working_set",
    title="Decide: how much data per SM a kernel can keep re-reading from L1",
    question=("A kernel re-reads its own data on every SM many times, loads cached in L1. From the L1 sweep "
              "recorded on the course's H200 (hierarchy.l1_curve_kib(): KiB per SM → bytes/s), what is the largest "
              "working set per SM, one of the measured sizes in KiB, that is still read within 10 % of the best "
              "bandwidth the sweep reached?"),
    expected=_l1_working_set,
    compare=_compare_l1,
    hints=("Find the best bandwidth of the sweep first; 90 % of it is the line.",
           "The small sizes are slow for another reason (too little work per pass): the question is how far "
           "right of the best point the curve stays above the line."),
)

# -------------------------------------------------------------------------------------------------
# hierarchy.tiles_fp32: a decision from what the sm_90 compile reports
# -------------------------------------------------------------------------------------------------

TILE_KEYS = ("BM", "BN", "BK", "num_warps", "num_stages")
TILE_CHOICES = {"BM": (16, 32, 64, 128, 256), "BN": (16, 32, 64, 128, 256), "BK": (8, 16, 32, 64, 128),
                "num_warps": (1, 2, 4, 8), "num_stages": (1, 2, 3, 4, 5, 6)}  # 16 warps: ptxas refuses big tiles
MIN_STAGES = 3  # the copies of the next two K steps in flight while the current one is multiplied (lesson 11 §4, §6)
FP32_SIGNATURE = {"A": "*fp32", "B": "*fp32", "C": "*fp32", "M": "i32", "N": "i32", "K": "i32",
                  "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}
# The largest tile intensity BM·BN/(BM + BN) a launch within the rules reaches: 128×256 (or 256×128) with BK = 16,
# 8 warps, 3 stages compiles in 204,848 bytes without spilling (tests/test_hierarchy.py compiles it); no 256×256
# launch fits, as its float32 output tile staged for the TMA store is 262,144 bytes on its own.
BEST_FP32_INTENSITY = 128 * 256 / (128 + 256)


def _intensity(bm: int, bn: int) -> float:
    return bm * bn / (bm + bn)


def _launch_of(got) -> dict | str:
    """The five numbers of an answer (a dict, a kernels.matmul.Config, or a tuple in TILE_KEYS' order), or why not."""
    if isinstance(got, dict):
        values = {k: got.get(k) for k in TILE_KEYS}
    elif all(hasattr(got, k) for k in TILE_KEYS):
        values = {k: getattr(got, k) for k in TILE_KEYS}
    elif isinstance(got, (tuple, list)) and len(got) == len(TILE_KEYS):
        values = dict(zip(TILE_KEYS, got))
    else:
        return (f"answered {got!r}: the answer is a launch, a dict with keys {list(TILE_KEYS)} (or a tuple of "
                "those five numbers)")
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value not in TILE_CHOICES[key]:
            return f"{key} = {value!r}: choose it from {list(TILE_CHOICES[key])}"
    return {k: int(v) for k, v in values.items()}


def compile_fp32_launch(launch: dict):
    """The package's matmul kernel (descriptors for A, B and C, GROUP_M 8) compiled for float32 operands."""
    from dataclasses import replace

    from ...toolchain import gpucompile
    from ..kernels import matmul as mm
    cfg = replace(mm.Config(), **launch)
    return gpucompile.compile_kernel(mm.matmul_kernel, FP32_SIGNATURE, mm.kernel_constexprs(cfg),
                                     num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def _compare_tiles(got, best: float) -> list[str]:
    """Each rule a launch breaks fails with what the compiled kernel says and what to change."""
    launch = _launch_of(got)
    if isinstance(launch, str):
        return [launch]
    bm, bn, bk, warps, stages = (launch[k] for k in TILE_KEYS)
    name = f"{bm}×{bn}×{bk}, {warps} warps, {stages} stages"
    info = compile_fp32_launch(launch)
    if info.shared_bytes is not None and info.shared_bytes > compiling.max_shared_bytes():
        stage, out = (bm * bk + bk * bn) * 4, bm * bn * 4
        return [f"{name}: the compiled kernel needs {info.shared_bytes:,} bytes of shared memory per block, more than "
                f"the {compiling.max_shared_bytes():,} one block may have on {info.target or 'this GPU'}. In float32 a "
                f"stage of A and B tiles is ({bm}·{bk} + {bk}·{bn})·4 = {stage:,} bytes, {stages} of them "
                f"{stages * stage:,}, and the output tile staged for its TMA store {bm}·{bn}·4 = {out:,}: twice what "
                "the same launch takes in bf16. Give way where it costs least: BK shrinks a stage without shrinking "
                "the tile"]
    if not info.ok:
        return [f"{name}: {info.error}"]
    if info.spills:
        return [f"{name}: {info.spills} words per thread spilled to local memory ({info.registers} registers per "
                f"thread). The float32 accumulator alone is {bm}·{bn} / ({warps}·32) = {bm * bn // (warps * 32)} "
                "registers per thread, of the 255 a thread may have: more warps share it"]
    if not info.wgmma:
        return [f"{name}: its tl.dot compiled to the older mma, not Hopper's wgmma (the Tensor Cores' warpgroup "
                "instruction): wgmma takes warpgroups of 4 warps (num_warps a multiple of 4) and BM a multiple of 64"]
    if stages < MIN_STAGES:
        ahead = "nothing of the next K step is" if stages == 1 else "only the next K step's tiles are"
        return [f"{name}: it fits ({info.shared_bytes:,} bytes, no spills), but with {stages} stage"
                f"{'s' if stages > 1 else ''} {ahead} in flight while the Tensor Cores use the current ones; the "
                f"exercise asks for {MIN_STAGES}, as the bf16 launch of section 4 keeps"]
    if _intensity(bm, bn) < best - 1e-9:
        return [f"{name}: it fits ({info.shared_bytes:,} bytes, {info.registers} registers, no spills), but a "
                f"{bm}×{bn} tile does {_intensity(bm, bn):.1f} FLOPs per element it loads, and a launch within the "
                f"same rules reaches {best:.1f}: keep the tile large and let something else in a stage give way"]
    return []


TILES_FP32 = ValueExercise(
    id="hierarchy.tiles_fp32",
    title="Decide: tiles for a float32 matmul, from the compiled kernel",
    question=("The package's matmul kernel (kernels/matmul.py: descriptors for A, B and C, GROUP_M 8) on float32 "
              "tensors (tl.dot runs them on Tensor Cores as TF32), for an H100/H200. Choose a launch "
              f"{{'BM', 'BN', 'BK', 'num_warps', 'num_stages'}} that compiles for sm_90 within one block's shared "
              f"memory, spills no registers, runs its dot as wgmma, keeps at least {MIN_STAGES} stages, and has the "
              "largest tile intensity BM·BN/(BM + BN) such a launch can have. The check compiles your launch."),
    expected=lambda: BEST_FP32_INTENSITY,
    compare=_compare_tiles,
    hints=("Compile candidates as the table of section 4 does, with every '*bf16' of its signature made '*fp32', "
           "and read shared_bytes, spills and wgmma.",
           "Shared memory: stages × (BM·BK + BK·BN) × 4 bytes, plus BM·BN × 4 for the output tile. Which term can "
           "shrink without shrinking the tile?"),
)

# -------------------------------------------------------------------------------------------------
# hierarchy.matmul
# -------------------------------------------------------------------------------------------------

RTOL, SCALE_TOL = 2.0**-7, 2.0**-10  # bf16 output rounding; of the products' root-sum-square (module docstring)
LOAD_FACTOR = 1.25  # loads may exceed what the stored tiles imply by this factor
# GPU: the lower end of the interval of (torch.mm time / yours), each shape timed against cuBLAS in the same run.
# On an H200 (2026-12-03, RECORDED.SWEEP) the reference reached 1.00 at 8192³ and 0.82 on the ragged shape,
# the best of its sweep there; one program per tile reached 0.97 and 0.75. The issue asked for 0.9 on a ragged
# shape: no Triton configuration swept reached it (ten more, BK 32-128, 256×128, GROUP_M 4 and 16, 4 stages, all
# 0.48-0.79 in a later run), so the line is set with the margin hosts need below what was reached. The rows are the
# cause: the same numbers stored with rows padded to 128 bytes ran at 1.00 of cuBLAS (RECORDED.ROWS; lesson 11).
MIN_SPEEDUP = 0.8  # 8192³
RAGGED = (8191, 8200, 8184)  # M odd; N and K multiples of 8 (16-byte rows) but of no tile, nor of 64 (128 bytes)
MIN_SPEEDUP_RAGGED = 0.7


def _multiple(gen, unit: int, low: int, high: int) -> int:
    """unit × an odd number, in [low, high]: aligned rows (16 bytes), yet no power-of-two tile above unit divides it."""
    k = int(torch.randint(max(low // unit, 1), max(high // unit, 2) + 1, (1,), generator=gen))
    return unit * (k | 1)


def _odd(gen, low: int, high: int) -> int:
    return int(torch.randint(low, high + 1, (1,), generator=gen)) | 1


def _values(gen, shape, kind: str, dtype: torch.dtype) -> torch.Tensor:
    x = torch.randn(shape, generator=gen)
    if kind == "large":  # large, yet every C stays inside fp16's range: a kernel rounding through fp16 still passes
        x = x * 16
    elif kind == "offset":  # all positive: no cancellation, C grows with K
        x = 1 + 0.5 * x
    # bf16 values: on a GPU in bf16, under the interpreter as float32 holding the same values
    return x.to(torch.bfloat16).to(dtype)


# The regimes an H200's cases reach (K up to 3000, 1024² and more): K over several tiles, past one tile of 512
# that holds a whole small K; more tiles than SMs, where a persistent grid starts its second wave. (M, N, K).
MATMUL_REGIMES = (
    Regime("K past one tile of 512", lambda gen: (_odd(gen, 20, 60), _multiple(gen, 4, 20, 60),
                                                   _multiple(gen, 4, 516, 560))),
    Regime(f"more 64×64 tiles than an H200's {H200_SMS} SMs", lambda gen: (
        _odd(gen, 11 * 64 + 1, 12 * 64), _multiple(gen, 4, 11 * 64 + 4, 12 * 64 - 4), _multiple(gen, 4, 8, 24))),
)


def _matmul_cases(gen: torch.Generator, mode: str) -> list[Case]:
    if mode == "cpu":
        dtype, unit = torch.float32, 4  # 16-byte rows
        specs = [((1, 4, 4), "normal"),
                 ((_odd(gen, 20, 60), _multiple(gen, unit, 20, 70), _multiple(gen, unit, 20, 70)), "normal"),
                 ((_odd(gen, 100, 180), _multiple(gen, unit, 100, 200), _multiple(gen, unit, 150, 300)), "normal"),
                 ((_odd(gen, 60, 120), _multiple(gen, unit, 60, 120), _multiple(gen, unit, 60, 150)), "offset"),
                 ((_odd(gen, 40, 90), _multiple(gen, unit, 40, 90), _multiple(gen, unit, 200, 400)), "large"),
                 ((_odd(gen, 200, 300), _multiple(gen, unit, 8, 40), _multiple(gen, unit, 30, 60)), "normal"),
                 ((128, 128, 128), "normal")]
    else:
        dtype, unit = torch.bfloat16, 8
        specs = [((1, 8, 8), "normal"),
                 ((_odd(gen, 100, 300), _multiple(gen, unit, 100, 300), _multiple(gen, unit, 100, 300)), "normal"),
                 ((_odd(gen, 1000, 1500), _multiple(gen, unit, 1000, 1500), _multiple(gen, unit, 1000, 2000)),
                  "normal"),
                 ((_odd(gen, 300, 600), _multiple(gen, unit, 300, 600), _multiple(gen, unit, 500, 1000)), "offset"),
                 ((_odd(gen, 200, 500), _multiple(gen, unit, 200, 500), _multiple(gen, unit, 1500, 3000)), "large"),
                 ((_odd(gen, 3000, 5000), _multiple(gen, unit, 16, 64), _multiple(gen, unit, 200, 500)), "normal"),
                 ((1024, 1024, 1024), "normal")]
    cases = []
    for (m, n, k), kind in specs:
        def make(kind=kind, m=m, n=n, k=k):
            return _values(gen, (m, k), kind, dtype), _values(gen, (k, n), kind, dtype)
        label = f"M={m} N={n} K={k} {kind} {str(dtype).replace('torch.', '')}"
        cases.append(Case(label, make(), decoy=make("normal")))
    if mode == "cpu":  # in bf16, as on a GPU: the launch compiled for sm_90 is this one's
        m, n, k = _odd(gen, 30, 90), _multiple(gen, 8, 30, 100), _multiple(gen, 8, 30, 100)

        def make_bf16(kind="normal", m=m, n=n, k=k):
            return _values(gen, (m, k), kind, torch.bfloat16), _values(gen, (k, n), kind, torch.bfloat16)
        cases.append(Case(f"M={m} N={n} K={k} normal bfloat16 (compiled for sm_90)", make_bf16(), decoy=make_bf16()))
    for (m, n, k), regime in regime_specs(MATMUL_REGIMES, gen, mode):  # after the others: their draws stay as they were
        def make_regime(kind="normal", m=m, n=n, k=k):
            return _values(gen, (m, k), kind, dtype), _values(gen, (k, n), kind, dtype)
        cases.append(Case(f"M={m} N={n} K={k} normal float32 ({regime})", make_regime(), decoy=make_regime()))
    return cases


def _matmul_reference(a, b):
    return a.double() @ b.double()


def strip_bytes(rec: counters.Recording, out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> dict:
    """From a traced run: the tiles stored into `out`, the A and B strips they imply, and what was loaded."""
    start = out.data_ptr()
    end = start + out.numel() * out.element_size()
    n_cols = out.shape[1]
    K = a.shape[1]
    tiles: Counter = Counter()
    implied = stored = 0
    for access in rec.accesses:
        if access.op != "store":
            continue
        inside = access.addresses[(access.addresses >= start) & (access.addresses < end)]
        if inside.size == 0:
            continue
        stored += inside.size * access.itemsize
        if len(access.shape) == 2:  # a [rows, cols] block of C: its shape, masked lanes included, is the tile
            rows, cols = access.shape
        else:  # a flat block: the rows and columns it really wrote
            elements = (inside - start) // access.itemsize
            rows, cols = np.unique(elements // n_cols).size, np.unique(elements % n_cols).size
        tiles[(int(rows), int(cols))] += 1
        implied += rows * K * a.element_size() + cols * K * b.element_size()

    def distinct(t):
        seen = [ops["load"] for ops in counters.touched(rec, t).values() if ops["load"].size]
        return int(np.unique(np.concatenate(seen)).size) if seen else 0

    return {"tiles": [[r, c, n] for (r, c), n in tiles.most_common()], "implied": int(implied),
            "stored": int(stored), "loaded": int(rec.load_bytes), "torch_bytes": int(rec.torch_bytes),
            "a_read": distinct(a), "b_read": distinct(b)}


def _matmul_run(fn, args, kwargs):
    a, b = args
    if not runtime.INTERPRETER:
        out = fn(a, b)
        return {"out": out, "device": getattr(getattr(out, "device", None), "type", None), "loads": None}
    with counters.record(trace=True) as rec:
        out = fn(a, b)
    loads = strip_bytes(rec, out, a, b) if type(out) is torch.Tensor and out.ndim == 2 else None
    del rec
    return {"out": out, "device": getattr(getattr(out, "device", None), "type", None), "loads": loads}


def matmul_tolerance(a: torch.Tensor, b: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Per element of C: what bf16 rounding of the output and fp32 accumulation may cost (module docstring)."""
    a64, b64 = a.double(), b.double()
    scale = ((a64 * a64) @ (b64 * b64)).sqrt()
    return RTOL * want.abs() + SCALE_TOL * scale + 1e-30


def _compare_values(out: torch.Tensor, want: torch.Tensor, case: Case, where: str) -> list[str]:
    a, b = case.args
    got = out.double().cpu()
    if not bool(torch.isfinite(got).all()):
        bad = int((~torch.isfinite(got)).sum())
        return [f"{bad:,} NaN or Inf values in C{where}, where every value is finite"]
    err = (got - want).abs()
    allowed = matmul_tolerance(a, b, want)
    wrong = err > allowed
    if bool(wrong.any()):
        i, j = (int(v) for v in torch.nonzero(wrong)[0])
        rows_wrong = wrong.any(dim=1).nonzero().flatten()
        cols_wrong = wrong.any(dim=0).nonzero().flatten()
        return [f"{int(wrong.sum()):,} of {want.numel():,} values wrong{where}; first at C[{i}, {j}]: got "
                f"{got[i, j].item():.6g}, expected {want[i, j].item():.6g} (allowed error {allowed[i, j].item():.3g}); "
                f"wrong values in rows {int(rows_wrong[0])}–{int(rows_wrong[-1])} and columns "
                f"{int(cols_wrong[0])}–{int(cols_wrong[-1])} of {tuple(want.shape)}"]
    return []


def _compare_loads(loads: dict, case: Case, where: str) -> list[str]:
    a, b = case.args
    reasons = []
    if not loads["tiles"]:
        return [f"no Triton store wrote into the returned C{where}: each program must store its tile of C "
                f"with tl.store or a tensor descriptor's store"]
    if loads["a_read"] < a.numel() or loads["b_read"] < b.numel():
        return [f"the kernel read {loads['a_read']:,} of A's {a.numel():,} elements and {loads['b_read']:,} of "
                f"B's {b.numel():,}{where}: every element of A and B must pass through the kernel"]
    c_bytes = case.args[0].shape[0] * case.args[1].shape[1] * case.args[0].element_size()
    if loads["stored"] > c_bytes:  # a tile stored twice would also count its strips twice
        reasons.append(f"stored {_fmt_bytes(loads['stored'])} into C{where}, which is {_fmt_bytes(c_bytes)}: each "
                       "element of C must be written once, when its tile is done")
    moved = loads["loaded"] + loads["torch_bytes"]
    allowed = LOAD_FACTOR * loads["implied"]
    if moved > allowed:
        shown = ", ".join(f"{n}× {r}×{c}" for r, c, n in loads["tiles"][:3])
        reasons.append(
            f"loaded {_fmt_bytes(loads['loaded'])}"
            + (f" (+ {_fmt_bytes(loads['torch_bytes'])} of PyTorch copies)" if loads["torch_bytes"] else "")
            + f"{where}, {moved / loads['implied']:.2f}× what its tiles imply ({shown} tiles of C stored: each reads "
            f"a BM×K strip of A and a K×BN strip of B once, {_fmt_bytes(loads['implied'])} in all; at most "
            f"{LOAD_FACTOR:g}× allowed). Is a tile of A or B loaded more than once per step, or loaded again "
            f"for part of the output tile?")
    return reasons


def _compare_matmul(got, want, case: Case) -> list[str]:
    where = f" (case {case.label})"
    a, _ = case.args
    out = got["out"]
    if type(out) is not torch.Tensor:
        return [f"returned {out if isinstance(out, str) else type(out).__name__}, not a torch.Tensor{where}"]
    if got["device"] != runtime.DEVICE:
        return [f"returned a tensor on {got['device']}, expected it on {runtime.DEVICE}{where}"]
    if tuple(out.shape) != tuple(want.shape):
        return [f"shape {tuple(out.shape)}, expected {tuple(want.shape)}{where}"]
    if out.dtype != a.dtype:
        return [f"dtype {out.dtype}, expected {a.dtype} (the inputs' dtype){where}"]
    reasons = _compare_values(out, want, case, where)
    if got["loads"] is not None:
        reasons += _compare_loads(got["loads"], case, where)
    return reasons


@dataclass(frozen=True)
class BF16DotOnTensorCores(UsesTensorCores):
    """UsesTensorCores, judged where the inputs are bf16: every case on a GPU, the bf16 case under the
    interpreter (its float32 cases compile to an fp32 tl.dot, which is not the question). Without the
    compiled evidence it fails: a requirement never passes unjudged."""

    def describe(self) -> str:
        return "its bf16 tl.dot compiles to wgmma for sm_90 (Hopper's Tensor Cores)"

    def evaluate(self, counts, case):
        if case.args[0].dtype != torch.bfloat16:
            return None
        if counts.get("compiled") is None:
            return (f"no compiled kernel was recorded for case {case.label}: whether the product runs on "
                    "Tensor Cores is not known")
        return super().evaluate(counts, case)


def _timing_inputs(gen, device):
    n = 8192
    return (torch.randn(n, n, generator=gen, device=device, dtype=torch.bfloat16),
            torch.randn(n, n, generator=gen, device=device, dtype=torch.bfloat16))


def _ragged_inputs(gen, device):
    M, N, K = RAGGED
    return (torch.randn(M, K, generator=gen, device=device, dtype=torch.bfloat16),
            torch.randn(K, N, generator=gen, device=device, dtype=torch.bfloat16))


def _matmul_bytes(args) -> int:
    return (args[0].numel() + args[1].numel() + args[0].shape[0] * args[1].shape[1]) * args[0].element_size()


def _matmul_flops(args) -> int:
    return 2 * args[0].shape[0] * args[0].shape[1] * args[1].shape[1]


def _cublas(a, b):
    return torch.mm(a, b)


MATMUL = FunctionExercise(
    id="hierarchy.matmul",
    title="A tiled matmul on Tensor Cores",
    signature=("matmul(a: Tensor[M, K], b: Tensor[K, N]) -> Tensor[M, N]  # contiguous; bf16 on a GPU (under the "
               "interpreter float32 holding bf16 values, and one bf16 case); returned in the inputs' dtype; fp32 "
               "accumulation; K and N multiples of 16 bytes, M anything"),
    cases=_matmul_cases,
    reference=_matmul_reference,
    run=_matmul_run,
    compare=_compare_matmul,
    requirements=(LaunchesTriton(), MaxLaunches(1), NoTorchCompute(), BF16DotOnTensorCores()),
    timing=Timing(
        inputs=_timing_inputs, baselines={"torch.mm": _cublas}, min_bytes=_matmul_bytes, flops=_matmul_flops,
        min_speedup={"torch.mm": MIN_SPEEDUP}, label="8192³",
        also=(Timing(inputs=_ragged_inputs, baselines={"torch.mm": _cublas}, min_bytes=_matmul_bytes,
                     flops=_matmul_flops, min_speedup={"torch.mm": MIN_SPEEDUP_RAGGED},
                     label="×".join(map(str, RAGGED))),),
    ),
    timeout_s=300.0,
    solution="gpuprinciples.course.kernels.matmul:matmul",
    judges=((("cpu", "gpu"), "values at bf16 precision against float64"),
            (("cpu",), f"loads within {LOAD_FACTOR:g}× of the A and B strips its stored tiles imply; C stored "
                       "once; every element of A and B read")),
    hints=(
        "One program per BM×BN tile of C: acc = tl.zeros((BM, BN), tl.float32); for k in range(0, K, BK): "
        "acc = tl.dot(a_tile, b_tile, acc); store acc.to(the output dtype) once.",
        "Tails: M, N and K are not multiples of your blocks. Mask the loads (other=0.0) and the store, or use "
        "tensor descriptors (tl.make_tensor_descriptor), which read zeros past the edges and never write there.",
        "Order the tiles in groups of GROUP_M rows (pid → pid_m, pid_n), so tiles running together share A rows "
        "and B columns in L2.",
        "On a GPU: BM=128, BN=256, BK=64, num_warps=8, num_stages=3 is a start (a 4th stage does not fit beside "
        "the output tile's 64 KiB); check the compiled kernel's registers and shared memory against the SM's "
        "budget. A persistent grid, one program per SM walking tiles (tile, tile + programs, ...), evens the "
        "last wave.",
        "The ragged shape (N = 8200, K = 8184: multiples of 8, not of 16) is timed too. Triton's JIT specialises "
        "integer arguments divisible by 16 only: with pointer loads it cannot prove 16-byte rows there and loads "
        "2 bytes at a time. Tensor descriptors do not care; for pointers, K // 8 * 8 in the kernel tells the "
        "compiler what you know.",
    ),
)

EXERCISES = (OCCUPANCY, L2_CLIFF, L1_WORKING_SET, TILES_FP32, MATMUL)
