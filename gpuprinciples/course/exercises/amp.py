"""Lesson 04, mixed precision: fp32 master weights, bf16/fp16 math, loss scaling for fp16.

The learner converts a given fp32 training step (`fp32_step`) to automatic mixed precision.
A case is a recipe (seeds, sizes, dtype, steps): the child builds the model, the optimizer and the
GradScaler from it, runs the learner's step `steps` times, and sends back what the grader judges:

* the loss curve, against the fp32 run the grader computes itself (within `LOSS_RTOL`);
* the gradients the first step used (what `optimizer.step()` saw, unscaled), against fp32's:
  loss scaling is what keeps fp16's small gradients from flushing to zero (within `GRAD_RTOL`);
* the share of matmul FLOPs done in bf16/fp16 (counted with PyTorch's FLOP formulas in a dispatch
  mode: it works on a CPU, where `torch.autocast("cpu", dtype=torch.bfloat16)` is real);
* master weights: every parameter and every optimizer state tensor is still float32;
* on a GPU, one larger case is also timed against the fp32 step (interleaved rounds, CUDA events),
  and the lower end of the speedup's interval must reach `MIN_SPEEDUP`.
"""

from __future__ import annotations

import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gpuprinciples.course.kit import Case, FunctionExercise, ValueExercise
from gpuprinciples.course.lab.models import from_recipe
from gpuprinciples.course.lab.steproof import ADAMW_BYTES, TimedRoof, recipe_step_work
from gpuprinciples.measure import timing

_compare_timed = timing.compare  # bound when the grader imports this, before the learner's module loads

LOW_PRECISION = ("bfloat16", "float16")
MIN_LOW_PRECISION_SHARE = 0.95
LOSS_RTOL = 0.01  # per step, relative to the fp32 loss
# per parameter, |g - g_fp32| / |g_fp32| of the first step's gradients. Measured on the CPU: bf16 0.016-0.025,
# fp16 with GradScaler 0.001-0.002, fp16 without it 0.19-0.36 (its small gradients flush to zero).
GRAD_RTOL = {"bfloat16": 0.06, "float16": 0.02}
MIN_SPEEDUP = 1.5  # on a GPU, the lower end of the 95 % interval over the fp32 step
MATMUL_OPS = frozenset({"mm", "bmm", "addmm", "baddbmm", "addbmm", "_scaled_mm"})


def fp32_step(model, optimizer, scaler, x, y, dtype):
    """The training step the learner converts: plain fp32, gradient clipping at norm 1."""
    optimizer.zero_grad(set_to_none=True)
    loss = model.loss(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.detach()


def amp_step(model, optimizer, scaler, x, y, dtype):
    """The reference solution: autocast the forward; scale, unscale before clipping, step, update."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=dtype):
        loss = model.loss(x, y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)  # skips the step if a gradient overflowed to inf/nan
    scaler.update()
    return loss.detach()


# -------------------------------------------------------------------------------------------------
# Counting matmul FLOPs by dtype (its own small mode: nesting counters.record() double-counts)
# -------------------------------------------------------------------------------------------------


class MatmulFlops(TorchDispatchMode):
    """Matmul FLOPs by the dtype of their operands, forward and backward (torch.utils.flop_counter)."""

    def __init__(self):
        super().__init__()
        self.by_dtype: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.overloadpacket.__name__ in MATMUL_OPS:
            from torch.utils.flop_counter import flop_registry
            count = flop_registry.get(func.overloadpacket)
            if count is not None:
                dtype = str(args[-1].dtype).replace("torch.", "")  # the operands (addmm's bias may differ)
                self.by_dtype[dtype] = self.by_dtype.get(dtype, 0) + int(count(*args, **kwargs, out_val=out))
        return out


def low_precision_share(by_dtype: dict) -> float:
    total = sum(by_dtype.values())
    return sum(by_dtype.get(d, 0) for d in LOW_PRECISION) / total if total else 0.0


# -------------------------------------------------------------------------------------------------
# One training run from a recipe (in the child for the learner, in the grader for fp32)
# -------------------------------------------------------------------------------------------------


_MATMUL_DTYPE = {"bfloat16": "bf16", "float16": "fp16"}  # the timed step's matmuls, for its roof


def _dtype(name: str) -> torch.dtype:
    return {"bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def build(recipe: dict, device: str):
    """Model, optimizer, scaler and batch from a recipe: the same on every machine for the same seeds."""
    model, x, y = from_recipe(recipe, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe["lr"])
    dtype = _dtype(recipe["dtype"])
    scaler = torch.amp.GradScaler(torch.device(device).type, enabled=dtype == torch.float16)
    return model, optimizer, scaler, x, y, dtype


def train(step, recipe: dict, device: str) -> dict:
    """Run `step` recipe["steps"] times; what the grader compares."""
    model, optimizer, scaler, x, y, dtype = build(recipe, device)
    names = [n for n, _ in model.named_parameters()]
    losses, grads, flops = [], None, MatmulFlops()

    def gradients():
        return {n: (p.grad.detach().float().cpu().clone() if p.grad is not None else None)
                for n, p in model.named_parameters()}

    # the gradients the first update used (unscaled, clipped), read as the optimizer steps: a step may zero them
    # after its update (set_to_none or not) as well as before it
    used: dict = {}

    def first_update(*_):
        if not used:
            used.update(gradients())

    hook = optimizer.register_step_pre_hook(first_update)
    try:
        for i in range(recipe["steps"]):
            with flops:
                loss = step(model, optimizer, scaler, x, y, dtype)
            losses.append(float(loss))
            if i == 0:  # (a first step GradScaler skipped for inf: the gradients after it, as they are)
                grads = dict(used) or gradients()
    finally:
        hook.remove()
    state_dtypes = sorted({str(t.dtype).replace("torch.", "") for s in optimizer.state.values()
                           for t in s.values() if isinstance(t, torch.Tensor) and t.is_floating_point()})
    return {
        "losses": losses,
        "grads": grads,
        "grad_names": names,
        "flops_by_dtype": flops.by_dtype,
        "param_dtypes": {n: str(p.dtype).replace("torch.", "") for n, p in model.named_parameters()},
        "state_dtypes": state_dtypes,
    }


def _run(fn, args, kwargs):
    from gpuprinciples.machine import runtime
    (recipe,) = args
    if kwargs.get("timed"):  # a GPU-only case: the small cases judge correctness, this one speed
        return _time_on_gpu(fn, recipe)  # {"rounds": ...}, the shape every timed step returns (its roof reads it)
    return train(fn, recipe, runtime.DEVICE)


def _time_on_gpu(fn, recipe: dict) -> dict:
    """fp32 step vs the learner's step, interleaved, each on its own copy of the model."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():  # the grader's op counters would make every op slow
        theirs = build(recipe, "cuda")
        ours = build(recipe, "cuda")
        comparison = _compare_timed({"yours": lambda: fn(*theirs), "fp32": lambda: fp32_step(*ours)},
                                    device="cuda", budget_s=2.0, flush=False)
    return {"rounds": [dict(r) for r in comparison.rounds]}  # raw: the grader computes every statistic


def time_on_gpu(fn, recipe: dict) -> dict:
    """Lesson 04's GPU timing: the learner's step against the fp32 step, as the grader's timed case measures it.
    {"median_ms": {"yours": ms, "fp32": ms}, "speedup": [ratio, 95% low, 95% high]}."""
    return speed(_time_on_gpu(fn, recipe))


def speed(raw: dict) -> dict:
    """What the raw rounds of `_time_on_gpu` say (`timing.summarize_rounds`): the figures both the lesson and the
    grader read. Raises ValueError on rounds that are not positive times of both steps."""
    return timing.summarize_rounds(raw.get("rounds"), "yours", "fp32")


def _reference(recipe: dict, timed: bool = False) -> dict | None:
    return None if timed else train(fp32_step, recipe, "cpu")


# -------------------------------------------------------------------------------------------------
# Judging
# -------------------------------------------------------------------------------------------------


def _compare(got, want, case: Case) -> list[str]:
    where = f" (case {case.label})"
    if case.kwargs.get("timed"):
        return _compare_speed(got, where)
    if not isinstance(got, dict) or "losses" not in got:
        return [f"the training run returned nothing the grader can read{where}"]
    reasons = []
    # master weights
    low = sorted(n for n, d in got["param_dtypes"].items() if d != "float32")
    if low:
        reasons.append(f"master weights are not float32 after training{where}: {', '.join(low[:3])}"
                       f"{' …' if len(low) > 3 else ''} became {got['param_dtypes'][low[0]]}. Keep the "
                       "parameters (and the optimizer's state) in float32 and let autocast cast copies")
    elif any(d != "float32" for d in got["state_dtypes"]):
        reasons.append(f"the optimizer's state is {', '.join(got['state_dtypes'])}{where}: master weights and "
                       "their Adam moments stay float32")
    # matmuls in low precision
    share = low_precision_share(got["flops_by_dtype"])
    if share < MIN_LOW_PRECISION_SHARE:
        counted = ", ".join(f"{d} {f / 1e6:.1f} MFLOP" for d, f in sorted(got["flops_by_dtype"].items()))
        reasons.append(f"only {share:.0%} of matmul FLOPs ran in bf16/fp16{where} (at least "
                       f"{MIN_LOW_PRECISION_SHARE:.0%} needed; counted: {counted or 'none'}): run the whole "
                       "forward, loss included, under torch.autocast")
    # the gradients of the first step
    for name in want["grad_names"]:
        g, w = got["grads"].get(name), want["grads"][name]
        if g is None:
            reasons.append(f"the first update used no gradient for {name}{where}: call backward on the scaled "
                           "loss before scaler.step(optimizer)")
            break
        err = float((g - w).norm() / w.norm().clamp_min(1e-30))
        tol = GRAD_RTOL[case.args[0]["dtype"]]
        if not math.isfinite(err) or err > tol:
            reasons.append(f"the gradient of {name} that the first update used is {err:.1%} away from fp32's"
                           f"{where}, where {tol:.0%} is allowed: in fp16, small gradients flush to zero "
                           "unless the loss is scaled (GradScaler), and clipping must see unscaled gradients "
                           "(scaler.unscale_ before clip_grad_norm_)")
            break
    # the loss curve
    losses, ref = got["losses"], want["losses"]
    if len(losses) != len(ref):
        reasons.append(f"{len(losses)} losses for {len(ref)} steps{where}")
    else:
        for i, (a, b) in enumerate(zip(losses, ref)):
            if not math.isfinite(a) or abs(a - b) > LOSS_RTOL * abs(b):
                reasons.append(f"the loss curve leaves fp32's at step {i + 1}{where}: {a:.4f} where fp32 has "
                               f"{b:.4f} (tolerance {LOSS_RTOL:.0%})")
                break
    return reasons


def _compare_speed(got, where: str) -> list[str]:
    if not isinstance(got, dict) or "rounds" not in got:
        return [f"the timed run returned nothing the grader can read{where}"]
    try:
        ratio, low, high = speed(got)["speedup"]
    except (ValueError, AttributeError):
        return [f"the timed run returned nothing the grader can read{where}"]
    if low < MIN_SPEEDUP:
        return [f"on this GPU the mixed-precision step is {ratio:.2f}× as fast as the fp32 step (95% interval "
                f"{low:.2f}–{high:.2f}×){where}; the interval must reach {MIN_SPEEDUP:g}×"]
    return []


def _cases(gen: torch.Generator, mode: str) -> list[Case]:
    def seed():
        return int(torch.randint(0, 2**31 - 1, (1,), generator=gen))

    def pick(*options):
        return options[int(torch.randint(0, len(options), (1,), generator=gen))]

    base = dict(vocab=512, d_model=32, hidden=128, n_layers=4, batch=4, seq=128, lr=3e-3, steps=5)
    recipes = [
        dict(base, seed=seed(), dtype="bfloat16", vocab=pick(256, 384, 512)),
        # 2048 tokens: the mean over them makes fp16's gradients small enough to need loss scaling
        dict(base, seed=seed(), dtype="float16", vocab=pick(256, 384, 512), batch=16),
        dict(base, seed=seed(), dtype="bfloat16", d_model=pick(24, 40), hidden=pick(96, 160), n_layers=3),
    ]
    cases = [Case(f"{r['dtype']} d={r['d_model']} hidden={r['hidden']} vocab={r['vocab']}", (r,)) for r in recipes]
    if mode == "gpu":  # large enough that the matmuls, not the launches, set the time
        big = dict(base, seed=seed(), dtype="bfloat16", vocab=32768, d_model=1024, hidden=4096, n_layers=4,
                   batch=8, seq=1024, steps=3)
        cases.append(Case("bfloat16 d=1024 hidden=4096 vocab=32768 (timed)", (big,), {"timed": True}))
    return cases


TRAIN_STEP = FunctionExercise(
    id="amp.train_step",
    title="Mixed-precision training step: bf16/fp16 math, fp32 master weights",
    signature="amp_step(model, optimizer, scaler, x, y, dtype) -> loss  # one training step, like fp32_step",
    cases=_cases,
    reference=_reference,
    compare=_compare,
    run=_run,
    timeout_s=300.0,
    solution="gpuprinciples.course.exercises.amp:amp_step",
    timed_roof=TimedRoof(lambda r: recipe_step_work(r, _MATMUL_DTYPE[r["dtype"]], optimizer_bytes=ADAMW_BYTES)),
    judges=((("cpu", "gpu"), f"≥ {MIN_LOW_PRECISION_SHARE:.0%} of matmul FLOPs in bf16/fp16 (counted)"),
            (("cpu", "gpu"), "parameters and optimizer state still float32"),
            (("gpu",), f"a larger step timed: speedup over the fp32 step ≥ {MIN_SPEEDUP:g}×")),
    hints=(
        "Wrap the forward and the loss in `with torch.autocast(x.device.type, dtype=dtype):`; "
        "backward and the optimizer step stay outside.",
        "Do not cast the model: autocast casts copies of the weights for each matmul, the fp32 parameters stay.",
        "`scaler.scale(loss).backward()`, then `scaler.unscale_(optimizer)` before clipping, then "
        "`scaler.step(optimizer)` and `scaler.update()`. With bf16 the scaler is disabled and these pass through.",
    ),
)

BYTES_PER_PARAM = ValueExercise(
    id="amp.bytes_per_param",
    title="Bytes per parameter of mixed-precision training with AdamW",
    question="With fp32 master weights and AdamW, how many bytes does training hold per parameter "
             "(weights, gradients, optimizer state; activations and autocast's temporary copies aside)?",
    expected=lambda: 16,  # fp32 weight 4 + fp32 gradient 4 + Adam's two fp32 moments 8
    rel_tol=0.0,
    hints=("The gradient has the dtype of its parameter.", "AdamW keeps two moments per parameter."),
)

EXERCISES = (TRAIN_STEP, BYTES_PER_PARAM)
