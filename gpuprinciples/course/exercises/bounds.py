"""Lesson 02, the three bounds: compute, memory, overhead.

Also the lesson's catalogue of real ops (`OPS`): what each computes, its FLOPs and bytes counted
by `gpuprinciples.measure.counters` on meta tensors (no memory, no time), and its bound on a datasheet
roofline or, on a GPU, by measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from ...machine import runtime
from ..kit import Case, FunctionExercise, Requirement, Timing, ValueExercise
from ..lab import roofline

BOUNDS = ("compute", "memory", "overhead")

# -------------------------------------------------------------------------------------------------
# The catalogue of ops
# -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    name: str
    text: str  # what it computes, in words
    fn: Callable
    shapes: tuple[tuple[int, ...], ...]
    dtype: torch.dtype = torch.float32
    flops_per_element: float = 1.0  # for non-matmul ops: FLOPs per input element

    def inputs(self, device: str = "meta", generator: torch.Generator | None = None) -> tuple:
        if device == "meta":
            return tuple(torch.empty(s, dtype=self.dtype, device="meta") for s in self.shapes)
        return tuple(torch.randn(s, generator=generator, device=device).to(self.dtype) for s in self.shapes)


def _softmax(x):
    return torch.softmax(x, dim=-1)


OPS = (
    Op("add_tiny", "x + y, 1,024 fp32 elements", torch.add, ((1024,), (1024,))),
    Op("add_big", "x + y, 2^26 fp32 elements", torch.add, ((2**26,), (2**26,))),
    Op("sum_big", "x.sum(), 2^26 fp32 elements", torch.sum, ((2**26,),)),
    Op("softmax_big", "softmax over rows of an 8192×8192 fp32 matrix", _softmax, ((8192, 8192),),
       flops_per_element=5.0),  # max, subtract, exp, sum, divide
    Op("mm_tiny", "64×64 @ 64×64, bf16", torch.mm, ((64, 64), (64, 64)), torch.bfloat16),
    Op("mm_skinny", "8192×64 @ 64×8192, bf16", torch.mm, ((8192, 64), (64, 8192)), torch.bfloat16),
    Op("mm_big", "8192×8192 @ 8192×8192, bf16", torch.mm, ((8192, 8192), (8192, 8192)), torch.bfloat16),
)
OP_NAMES = tuple(op.name for op in OPS)


def work(op: Op) -> tuple[float, float]:
    """(FLOPs, bytes) of one call, counted by running it on meta tensors under the counters.

    Bytes: every input read once and every output written once (what the counters charge an
    operator). FLOPs: the counters' matmul FLOPs; for other ops, `flops_per_element` per input element.
    """
    from ...measure import counters

    args = op.inputs("meta")
    with counters.record() as rec:
        op.fn(*args)
    flops = sum(rec.flops_by_dtype.values())
    if not flops:
        flops = op.flops_per_element * max(a.numel() for a in args)
    return float(flops), float(rec.torch_bytes)


def datasheet_bound(op: Op, spec=None) -> str:
    """The bound the roofline gives on a GPU's datasheet (default: the H200), with the launch floor."""
    from ...machine import specs
    spec = spec or specs.SPECS["H200"]
    flops, nbytes = work(op)
    peak = spec.flops("bf16" if op.dtype in (torch.bfloat16, torch.float16) else "fp32")
    return roofline.bound(flops, nbytes, peak, spec.bandwidth, overhead_s=roofline.LAUNCH_FLOOR_S)


def measure(op: Op, budget_s: float = 0.2) -> float:
    """Median seconds of one call on this GPU (CUDA events), the GPU idle when each call starts: a
    tiny op's time then includes the host's launch cost, which is what makes it overhead-bound. (No
    L2 flush needed: every large op here moves far more than the L2 holds.)"""
    from ...measure import timing
    args = op.inputs(runtime.DEVICE, torch.Generator(device=runtime.DEVICE).manual_seed(0))
    seconds = timing.time_fn(op.fn, args=args, device=runtime.DEVICE, budget_s=budget_s, flush=False).median
    del args
    return seconds


def measured_bound(op: Op, seconds: float, ceilings=None) -> str:
    """The bound the measurement shows against this GPU's measured ceilings: overhead when neither
    roof explains the time (more than 3× the roofline time, or below the launch floor)."""
    from ...measure import calibrate
    ceilings = ceilings or calibrate.ceilings()
    flops, nbytes = work(op)
    peak = ceilings.flops("bf16" if op.dtype in (torch.bfloat16, torch.float16) else "fp32")
    return roofline.bound(flops, nbytes, peak, ceilings.copy_bandwidth, overhead_s=roofline.LAUNCH_FLOOR_S,
                          measured_s=seconds)


def expected_bounds() -> dict[str, str]:
    """The answer a prediction is graded against, on every machine: the roofline of the H200's
    datasheet with the launch floor, from counted FLOPs and bytes. Never a live timing: on a shared
    GPU another job's load can make a memory-bound op look overhead-bound, and a prediction is
    about the op (every GPU in `specs.SPECS` gives the same answers; tests/test_bounds.py)."""
    return {op.name: datasheet_bound(op) for op in OPS}


def _compare_bounds(answer, expected) -> list[str]:
    if not isinstance(answer, dict):
        return [f"answered a {type(answer).__name__}; expected a dict {{op name: 'compute'|'memory'|'overhead'}}"]
    missing = [n for n in expected if n not in answer]
    if missing:
        return [f"no answer for {', '.join(missing)}"]
    reasons = []
    for name, want in expected.items():
        said = str(answer[name]).strip().lower()
        if said not in BOUNDS:
            reasons.append(f"{name}: {answer[name]!r} is not one of {', '.join(BOUNDS)}")
        elif said != want:
            reasons.append(f"{name}: you said {said}; that is not what bounds it")
    if reasons:
        reasons.append(f"{len(expected) - len(reasons)} of {len(expected)} right, judged by the roofline: counted "
                       "FLOPs and bytes on the H200 datasheet, with the launch floor")
    return reasons


CLASSIFY = ValueExercise(
    id="bounds.classify",
    title="Which limit bounds each op?",
    question="For each op of `bounds.OPS`, answer 'compute', 'memory' or 'overhead' in a dict keyed by op name.",
    expected=expected_bounds,
    compare=_compare_bounds,
    hints=(
        "Intensity = FLOPs / bytes. Compare it with the ridge point: below is memory, above is compute.",
        "Then compare the roofline time with the launch floor (roofline.LAUNCH_FLOOR_S, 5 µs): work that would "
        "finish sooner than one launch is overhead-bound.",
        "A matmul is not automatically compute-bound: 8192×64 @ 64×8192 writes 128 MiB for few FLOPs.",
    ),
)

# -------------------------------------------------------------------------------------------------
# bounds.ridge_h100
# -------------------------------------------------------------------------------------------------


def _ridge_h100() -> float:
    from ...machine import specs
    return specs.SPECS["H100"].ridge_point("bf16")


def _compare_ridge(answer, expected) -> list[str]:
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return [f"answered {answer!r}: expected a number of FLOPs per byte"]
    if math.isclose(value, expected, rel_tol=0.02):
        return []
    if math.isclose(value, 2 * expected, rel_tol=0.03):
        return [f"answered {value:.4g}: that uses the 2:4-sparse headline figure; use the dense bf16 peak"]
    if math.isclose(value, expected / 1e3, rel_tol=0.03) or math.isclose(value, expected * 1e3, rel_tol=0.03):
        return [f"answered {value:.4g}: off by 1000, check TB/s against TFLOP/s"]
    return [f"answered {value:.4g} FLOP/byte; off by more than 2%"]


RIDGE = ValueExercise(
    id="bounds.ridge_h100",
    title="The ridge point of an H100 SXM, dense bf16",
    question="How many FLOPs per byte must a bf16 kernel do before the H100 SXM's compute, not its memory, limits it?",
    expected=_ridge_h100,
    compare=_compare_ridge,
    hints=("ridge = peak FLOP/s / bandwidth in bytes/s, from specs.SPECS['H100'], dense figures.",),
)

# -------------------------------------------------------------------------------------------------
# bounds.knee: the last batch size that is still overhead-bound
# -------------------------------------------------------------------------------------------------

KNEE_FACTOR = 1.5


def _knee_reference(batches, times) -> int:
    fastest = min(times)
    return int(max(b for b, t in zip(batches, times) if t <= KNEE_FACTOR * fastest))


def _knee_sweep(gen: torch.Generator, *, flat: int, n: int, cold_first: bool = False, spike: bool = False,
                shuffled: bool = False, odd_batches: bool = False) -> Case:
    """A measured-looking sweep: `flat` points near the floor, then times growing ~2× per step."""
    u = lambda lo, hi: lo + (hi - lo) * float(torch.rand((), generator=gen))  # noqa: E731
    t0 = 10 ** u(-5.5, -2.5)  # the overhead floor: 3 µs ... 3 ms
    batches = [2**i for i in range(n)]
    if odd_batches:
        batches = sorted({max(1, int(b * u(0.7, 1.3))) for b in batches} | {1})
        n = len(batches)
        flat = min(flat, n)
    times = [t0 * u(0.97, 1.12) for _ in range(flat)]
    level = u(1.7, 2.0)  # the first point past the knee: clearly above 1.5×, never near it
    for _ in range(n - flat):
        times.append(t0 * level)
        level *= u(1.8, 2.0)
    if spike and flat >= 3:  # one noisy outlier inside the flat part, as a real sweep shows
        times[int(torch.randint(1, flat - 1, (), generator=gen))] = t0 * u(2.2, 3.0)
    if cold_first and flat >= 2 and n > flat:  # the first measurement paid a warm-up
        times[0] = t0 * u(1.3, 1.4)
        times[flat] = t0 * u(1.75, 1.9)  # above 1.5× the floor, below 1.5× the cold first point
    pairs = list(zip(batches, times))
    if shuffled:
        order = torch.randperm(len(pairs), generator=gen).tolist()
        pairs = [pairs[i] for i in order]
    label = f"{len(pairs)} batches, {flat} flat" + "".join(
        f", {w}" for w, on in (("cold first", cold_first), ("a spike", spike), ("shuffled", shuffled),
                               ("uneven batches", odd_batches)) if on)
    return Case(label, ([b for b, _ in pairs], [t for _, t in pairs]))


def _knee_cases(gen: torch.Generator, mode: str) -> list[Case]:
    r = lambda lo, hi: int(torch.randint(lo, hi, (), generator=gen))  # noqa: E731
    return [
        _knee_sweep(gen, flat=r(4, 9), n=r(12, 16)),
        _knee_sweep(gen, flat=r(4, 8), n=r(11, 16), cold_first=True),
        _knee_sweep(gen, flat=r(5, 9), n=r(12, 16), spike=True),
        _knee_sweep(gen, flat=r(3, 9), n=r(12, 16), shuffled=True),
        _knee_sweep(gen, flat=r(4, 9), n=r(12, 16), odd_batches=True, shuffled=True),
        _knee_sweep(gen, flat=1, n=r(6, 10)),  # never overhead-bound past the smallest batch
        _knee_sweep(gen, flat=12, n=12),  # flat all the way: overhead-bound at every batch
    ]


def _compare_knee(got, expected, case) -> list[str]:
    if isinstance(got, bool) or not isinstance(got, int):
        return [f"returned {got!r} ({type(got).__name__}); expected a batch size, an int (case {case.label})"]
    batches, _ = case.args
    if got not in batches:
        return [f"returned {got}, which is not one of the batch sizes of the sweep (case {case.label})"]
    if got != expected:
        side = "too early" if got < expected else "too late"
        return [f"returned batch {got}, {side} (case {case.label})"]
    return []


KNEE = FunctionExercise(
    id="bounds.knee",
    title="Where does a step stop being overhead-bound?",
    signature=("knee(batches: list[int], times: list[float]) -> int  # the largest batch whose time is "
               "at most 1.5× the fastest time of the sweep"),
    cases=_knee_cases,
    reference=_knee_reference,
    compare=_compare_knee,
    timeout_s=60,
    solution="gpuprinciples.course.kernels.bounds:knee",
    hints=(
        "The floor is the fastest time of the whole sweep, not the first one: the first call may be cold.",
        "The pairs may come in any order; a noisy point may jump up inside the flat part. Do not stop at "
        "the first batch over the line: keep every batch under it and take the largest.",
    ),
)

# -------------------------------------------------------------------------------------------------
# bounds.fewer_dispatches: the same math in fewer operator dispatches
# -------------------------------------------------------------------------------------------------

GELU_C = math.sqrt(2 / math.pi)


def mlp_tail_written_out(x, w, b):
    """h = x @ w + b, then GELU (tanh form) written out: about a dozen operator dispatches."""
    h = x @ w + b
    return 0.5 * h * (1.0 + torch.tanh(GELU_C * (h + 0.044715 * h * h * h)))


def _mlp_tail_reference(x, w, b):
    h = x.double() @ w.double() + b.double()
    return 0.5 * h * (1.0 + torch.tanh(GELU_C * (h + 0.044715 * h**3)))


@dataclass(frozen=True)
class MaxDispatches(Requirement):
    """At most `n` dispatches that do work per call: PyTorch operators other than allocations and
    views (compute and copies), plus Triton launches. Counted in every mode."""

    n: int = 3

    def describe(self) -> str:
        return f"at most {self.n} operator dispatches per call"

    def evaluate(self, counts, case):
        from ...measure.counters import FREE_OPS
        # record_function's labels (lesson 03 teaches them; torch.optim's step adds its own) do no work
        working = {k: v for k, v in counts["torch_ops"].items() if k not in FREE_OPS and not k.startswith("profiler::")}
        total = sum(working.values()) + counts["triton_launches"]
        if total > self.n:
            listed = ", ".join(f"{k} ×{v}" for k, v in sorted(working.items(), key=lambda kv: -kv[1]))
            if counts["triton_launches"]:
                listed += f", Triton launches ×{counts['triton_launches']}"
            return (f"{total} operator dispatches per call ({listed}) in case {case.label}; at most {self.n} "
                    f"allowed: each one pays the launch overhead again (the grader counts operators as "
                    "PyTorch runs them, and under its counters a torch.compile'd function runs them one by one)")
        return None


def _mlp_cases(gen: torch.Generator, mode: str) -> list[Case]:
    def odd(lo, hi):
        v = int(torch.randint(lo, hi, (), generator=gen))
        return v + 1 if v % 8 == 0 else v
    cases = []
    for m, k, n, scale in ((1, odd(20, 60), odd(20, 60), 1.0), (odd(2, 9), odd(60, 130), odd(30, 100), 1.0),
                           (odd(16, 40), odd(100, 200), odd(60, 150), 3.0), (odd(30, 70), 64, 96, 0.3)):
        def make():
            x = torch.randn(m, k, generator=gen) * scale
            w = torch.randn(k, n, generator=gen) / math.sqrt(k)
            b = torch.randn(n, generator=gen)
            return x, w, b
        cases.append(Case(f"x {m}×{k}, w {k}×{n}, scale {scale:g}", make(), decoy=make()))
    return cases


FEWER_DISPATCHES = FunctionExercise(
    id="bounds.fewer_dispatches",
    title="An overhead-bound step in fewer dispatches",
    signature="mlp_tail(x: Tensor[M, K], w: Tensor[K, N], b: Tensor[N]) -> Tensor[M, N]  # gelu_tanh(x @ w + b)",
    cases=_mlp_cases,
    reference=_mlp_tail_reference,
    requirements=(MaxDispatches(3),),
    timing=Timing(
        inputs=lambda gen, device: (torch.randn(8, 512, generator=gen, device=device),
                                    torch.randn(512, 512, generator=gen, device=device) / 512**0.5,
                                    torch.randn(512, generator=gen, device=device)),
        baselines={"written out": mlp_tail_written_out},
        min_bytes=lambda args: sum(a.numel() * a.element_size() for a in args) + 8 * 512 * 4,
        flops=lambda args: 2 * 8 * 512 * 512,
        min_speedup={"written out": 1.5},
        flush=False,  # the cost is the host's dispatching: time it as a loop runs it
    ),
    solution="gpuprinciples.course.kernels.bounds:mlp_tail",
    hints=(
        "PyTorch has the tanh form of GELU as one operator: torch.nn.functional.gelu(h, approximate='tanh').",
        "torch.addmm(b, x, w) does the matmul and the bias add in one dispatch.",
    ),
)

EXERCISES = (RIDGE, CLASSIFY, KNEE, FEWER_DISPATCHES)
