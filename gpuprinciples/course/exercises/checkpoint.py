"""Lesson 05, activation checkpointing: keep less for backward, recompute the rest.

The learner writes `fit_budget(model, x, y) -> loss`: the same loss as `model.loss(x, y)`, computed
so that the training step holds at most `BUDGET` of the activation memory the plain step holds while
backward recomputes at most `MAX_RECOMPUTE` of a forward's matmul FLOPs. Checkpointing every block
meets the memory budget but reruns every block's first matmul, about half a forward: the learner has
to choose which blocks to checkpoint whole and which to keep their expensive output in (selective
checkpointing, or a checkpoint around the cheap part of a block only).
The model is a TinyLM being fine-tuned: its embedding is frozen, so the blocks' input does not
require grad (the case where `use_reentrant=True` silently drops the blocks' gradients).

Memory is counted without a clock or an allocator, the same on a CPU and a GPU (`ActivationMemory`):
a dispatch mode sees every tensor PyTorch creates during the step and keeps a weak reference to its
storage; after each operator it sums the storages still alive (views and in-place results add
nothing; parameter gradients are left out: every version of the step must hold them). That gives

* `held`: bytes alive when the forward returns, i.e. what the step keeps for backward;
* `peak`: the most bytes alive after any operator, forward or backward (recomputation included).

Counting what autograd's saved-tensor hooks see would miss what `torch.utils.checkpoint` keeps by
reference (each segment's input) and count nothing of a recomputation: live storages see both.
Matmul FLOPs are counted in the same mode, per phase, so recomputation is counted exactly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from gpuprinciples.course.kit import Case, FunctionExercise, ValueExercise
from gpuprinciples.course.lab.models import from_recipe
from gpuprinciples.course.lab.steproof import TimedRoof, recipe_step_work
from gpuprinciples.measure import timing
from gpuprinciples.measure.counters import tensors_in

_compare_timed = timing.compare  # bound when the grader imports this, before the learner's module loads

# The grader's five case shapes (`_cases`, the same in every grade), measured with the reference (the alternating
# scheme below): held ≤ 42%, peak ≤ 48%, recomputed ≤ 0.27 of a forward; checkpointing every block recomputes
# 0.46-0.48; saving fc1's output in every block holds 56-61%. A scheme between those can land near the budget on
# some shape (the reference's alternation with fc2's output saved too peaks at 55%): it gets that shape's verdict
# in every grade.
BUDGET = 0.50  # held and peak activation bytes, as a fraction of the plain step's
MAX_RECOMPUTE = 0.30  # extra backward matmul FLOPs, as a fraction of one plain forward's
GPU_PEAK_BUDGET = 0.6  # on a GPU: torch.cuda.max_memory_allocated above the step's start, vs plain
MAX_SLOWDOWN = 2.0  # on a GPU: the median step time, vs plain
# A peak this close to the plain step's with little held after the forward: one checkpoint around all the blocks
# or nearly all (86-94% on the cases below); shorter regions and selective policies over the budget peak lower.
ONE_SEGMENT_PEAK = 0.8


def fit_budget(model, x, y):
    """The reference solution: every other block checkpointed whole (its fc1 is rerun in backward);
    in the others fc1 runs normally, so its input and output stay, and only gelu and fc2 are
    checkpointed (backward reruns gelu, no matmul). Non-reentrant; embedding and head as usual."""
    from torch.utils.checkpoint import checkpoint
    h = model.embed(x)
    for i, block in enumerate(model.blocks):
        if i % 2 == 0:
            h = checkpoint(block, h, use_reentrant=False)
        else:
            u = block.fc1(h)
            h = h + checkpoint(lambda u, b=block: b.fc2(F.gelu(u)), u, use_reentrant=False)
    return F.cross_entropy(model.head(h).flatten(0, 1).float(), y.flatten())


def plain_loss(model, x, y):
    """The step the learner starts from."""
    return model.loss(x, y)


# -------------------------------------------------------------------------------------------------
# Counting live activation bytes and FLOPs
# -------------------------------------------------------------------------------------------------


class ActivationMemory(TorchDispatchMode):
    """Bytes of tensors created in the block that are still alive, after every operator.

        with ActivationMemory(model.parameters()) as mem:
            loss = step(model, x, y)
            mem.end_forward()
            loss.backward()
        mem.held, mem.peak, mem.forward_flops, mem.backward_flops
    """

    def __init__(self, params=()):
        super().__init__()
        self.params = [p for p in params if p.requires_grad]
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.peak = 0
        self.held = None
        self.flops = 0
        self.forward_flops = None

    def current(self) -> int:
        """Bytes alive now, created in the block, not parameter gradients."""
        grads = {p.grad.untyped_storage()._cdata for p in self.params if p.grad is not None}
        for key in [k for k, (ref, _) in self.live.items() if ref.expired()]:
            del self.live[key]
        return sum(n for key, (_, n) in self.live.items() if key not in grads)

    def end_forward(self) -> None:
        self.held = self.current()
        self.forward_flops, self.flops = self.flops, 0

    @property
    def backward_flops(self) -> int:
        return self.flops

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = {t.untyped_storage()._cdata for t in tensors_in((args, kwargs))}
        for t in tensors_in(out):
            storage = t.untyped_storage()
            if storage._cdata not in inputs and t.device.type != "meta":  # a view or in-place op allocates nothing
                self.live[storage._cdata] = (StorageWeakRef(storage), storage.nbytes())
        if func.overloadpacket.__name__ in ("mm", "addmm", "bmm", "baddbmm"):
            from torch.utils.flop_counter import flop_registry
            self.flops += int(flop_registry[func.overloadpacket](*args, **kwargs, out_val=out))
        self.peak = max(self.peak, self.current())
        return out


# -------------------------------------------------------------------------------------------------
# One step from a recipe
# -------------------------------------------------------------------------------------------------


def build(recipe: dict, device: str):
    model, x, y = from_recipe(recipe, device)
    model.embed.weight.requires_grad_(False)  # fine-tuning: the embedding is frozen
    return model, x, y


def measure(loss_fn, recipe: dict, device: str = "cpu") -> dict:
    """Run forward (loss_fn) and backward once; the loss, the gradients and what it cost."""
    model, x, y = build(recipe, device)
    with ActivationMemory(model.parameters()) as mem:
        loss = loss_fn(model, x, y)
        mem.end_forward()
        if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
            what = "a tensor without grad" if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise TypeError(f"fit_budget must return the loss as a tensor that requires grad (got {what})")
        loss.backward()
    return {
        "loss": loss.detach().item(),
        "grads": {n: (p.grad.detach().cpu().clone() if p.grad is not None else None)
                  for n, p in model.named_parameters() if p.requires_grad},
        "held": mem.held,
        "peak": mem.peak,
        "forward_flops": mem.forward_flops,
        "backward_flops": mem.backward_flops,
    }


def measure_each(loss_fns: dict, recipe: dict, device: str = "cpu", progress: bool = True) -> dict:
    """`measure` for each named loss function, with a progress bar: {name: measurement}."""
    from gpuprinciples.course.lab.progress import bar
    return {name: measure(fn, recipe, device)
            for name, fn in bar(loss_fns.items(), "forward + backward, bytes counted", total=len(loss_fns),
                                enabled=progress)}


def _run(fn, args, kwargs):
    from gpuprinciples.machine import runtime
    (recipe,) = args
    if kwargs.get("timed"):
        return _measure_on_gpu(fn, recipe)
    return measure(fn, recipe, runtime.DEVICE)


def _measure_on_gpu(fn, recipe: dict) -> dict:
    """Peak memory (the CUDA allocator's) and time of the plain step and the learner's, same process."""
    from torch.utils._python_dispatch import _disable_current_modes

    def step(loss_fn, model, x, y):
        loss = loss_fn(model, x, y)
        loss.backward()
        model.zero_grad(set_to_none=True)

    out = {}
    with _disable_current_modes():  # the grader's op counters would slow every op
        for name, loss_fn in (("plain", plain_loss), ("yours", fn)):
            model, x, y = build(recipe, "cuda")
            step(loss_fn, model, x, y)  # warm-up: cuBLAS workspaces, autotuning
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            start = torch.cuda.memory_allocated()
            step(loss_fn, model, x, y)
            torch.cuda.synchronize()
            out[f"{name}_peak_bytes"] = torch.cuda.max_memory_allocated() - start
            del model, x, y
        models = {name: build(recipe, "cuda") for name in ("plain", "yours")}
        comparison = _compare_timed({"yours": lambda: step(fn, *models["yours"]),
                                     "plain": lambda: step(plain_loss, *models["plain"])},
                                    device="cuda", budget_s=2.0, flush=False)
    out["rounds"] = [dict(r) for r in comparison.rounds]  # raw: the grader computes every statistic
    return out


def measure_on_gpu(fn, recipe: dict) -> dict:
    """Lesson 05's GPU measurement, as the grader's timed case takes it: each step's peak memory above its start
    ("plain_peak_bytes", "yours_peak_bytes"), each step's median time ("median_ms": {"plain": ms, "yours": ms}) and
    the learner's step's slowdown over the plain one ("slowdown": [ratio, 95% low, 95% high])."""
    raw = _measure_on_gpu(fn, recipe)
    return {**{k: raw[k] for k in ("plain_peak_bytes", "yours_peak_bytes")}, **slowdown(raw)}


def slowdown(raw: dict) -> dict:
    """What the raw rounds of `_measure_on_gpu` say (`timing.summarize_rounds`), the figures both the lesson and the
    grader read: {"median_ms": ..., "slowdown": [ratio, 95% low, 95% high]}, > 1 when the learner's step is slower.
    Raises ValueError on rounds that are not positive times of both steps."""
    summary = timing.summarize_rounds(raw.get("rounds"), "plain", "yours")
    return {"median_ms": summary["median_ms"], "slowdown": summary["speedup"]}


def _reference(recipe: dict, timed: bool = False):
    return None if timed else measure(plain_loss, recipe, "cpu")


# -------------------------------------------------------------------------------------------------
# Judging
# -------------------------------------------------------------------------------------------------


def _mib(n: float) -> str:
    return f"{n / 2**20:.2f} MiB"


def _share(part: float, whole: float) -> str:
    """part / whole in percent: one decimal where a whole percent would show a share over the budget as the
    budget itself ("50% of the plain step's; the budget is 50%")."""
    share = part / whole
    return f"{share:.1%}" if share > BUDGET and round(share, 2) <= BUDGET else f"{share:.0%}"


def _compare(got, want, case: Case) -> list[str]:
    where = f" (case {case.label})"
    if case.kwargs.get("timed"):
        return _compare_gpu(got, where)
    if not isinstance(got, dict) or "grads" not in got:
        return [f"the step returned nothing the grader can read{where}"]
    reasons = []
    if abs(got["loss"] - want["loss"]) > 1e-5 * abs(want["loss"]) + 1e-6:
        reasons.append(f"the loss is {got['loss']:.6f} where the plain step gives {want['loss']:.6f}{where}")
    missing = [n for n, g in got["grads"].items() if g is None]
    if missing:
        reasons.append(f"{len(missing)} parameters got no gradient{where}, {', '.join(missing[:3])} among them: "
                       "the graph was cut. use_reentrant=True does that when a segment's input does not require "
                       "grad (here the embedding is frozen), and so do no_grad and detach: use use_reentrant=False")
    else:
        for name, w in want["grads"].items():
            g = got["grads"][name]
            err = float((g.double() - w.double()).norm() / w.double().norm().clamp_min(1e-30))
            if not err <= 1e-4:
                reasons.append(f"the gradient of {name} differs from the plain step's by {err:.2g} (relative)"
                               f"{where}: checkpointing must not change the gradients")
                break
    held_fits = got["held"] <= BUDGET * want["held"]
    for what, explain in (("held", "kept for backward when the forward returns"),
                          ("peak", "alive at the worst moment of forward and backward")):
        if got[what] > BUDGET * want[what]:
            if what == "held":
                extra = (" To fit, checkpoint more of the blocks whole or keep less in the others: backward reads "
                         "fc1's output (for GELU) but never fc2's, which only feeds the residual addition.")
            elif not held_fits:
                extra = ""  # the held sentence says what to do, and keeping less lowers the peak too
            elif got["peak"] >= ONE_SEGMENT_PEAK * want["peak"]:
                extra = (" Checkpointing everything as one segment keeps little during the forward but recomputes "
                         "all of it at once in backward: the peak is unchanged.")
            else:  # the peak is what the forward keeps plus what backward rebuilds on top of it
                extra = (f" The forward keeps {_share(got['held'], want['held'])}, and backward rebuilds each "
                         "checkpointed region on top of that: rebuild less at once (regions of one block), or keep "
                         "less after the forward (backward never reads fc2's output).")
            reasons.append(f"activation bytes {explain}: {_mib(got[what])}, {_share(got[what], want[what])} of the "
                           f"plain step's {_mib(want[what])}{where}; the budget is {BUDGET:.0%}.{extra}")
    if got["forward_flops"] > 1.01 * want["forward_flops"]:
        reasons.append(f"the forward did {got['forward_flops'] / want['forward_flops']:.2f}× the plain forward's "
                       f"matmul FLOPs{where}: run each layer once in the forward")
    recompute = (got["backward_flops"] - want["backward_flops"]) / want["forward_flops"]
    if recompute > MAX_RECOMPUTE + 0.01:
        why = ("nested checkpoints recompute the inner layers twice" if recompute > 1.01 else
               "backward reruns each checkpointed region up to the last value it needs (checkpointing every "
               "block reruns every block's fc1, about half a forward); keep fc1's output in some blocks (a "
               "selective policy, or a checkpoint around gelu and fc2 only) and checkpoint the others whole")
        reasons.append(f"backward recomputed {recompute:.2f}× a whole forward's matmul FLOPs{where}, at most "
                       f"{MAX_RECOMPUTE:g}× allowed: {why}")
    return reasons


def _compare_gpu(got, where: str) -> list[str]:
    if not isinstance(got, dict) or "plain_peak_bytes" not in got:
        return [f"the GPU measurement returned nothing the grader can read{where}"]
    reasons = []
    ratio = got["yours_peak_bytes"] / got["plain_peak_bytes"]
    if ratio > GPU_PEAK_BUDGET:
        reasons.append(f"on this GPU the step's peak memory is {_mib(got['yours_peak_bytes'])}, {ratio:.0%} of the "
                       f"plain step's {_mib(got['plain_peak_bytes'])}{where}; at most {GPU_PEAK_BUDGET:.0%}")
    try:  # > 1: yours is slower
        slow, low, high = slowdown(got)["slowdown"]
    except (ValueError, AttributeError):
        return reasons + [f"the GPU measurement returned nothing the grader can read{where}"]
    if low > MAX_SLOWDOWN:
        reasons.append(f"on this GPU the step takes {slow:.2f}× the plain step's time (95% interval {low:.2f}–"
                       f"{high:.2f}×){where}; recomputing at most {MAX_RECOMPUTE:g} of a forward should cost far less")
    return reasons


def _cases(gen: torch.Generator, mode: str) -> list[Case]:
    def seed():
        return int(torch.randint(0, 2**31 - 1, (1,), generator=gen))

    # The shapes are fixed and every grade judges all of them; the seed draws only the weights and tokens.
    # What a scheme keeps, as a fraction of the plain step's, depends on the shapes (hidden / d_model, the
    # vocabulary, the number of blocks), not on the values: when one shape was drawn per grade, a scheme near the
    # budget (whole blocks alternating with a selective policy that also saves fc2's output: a peak of 38-55% of
    # the plain step's, by shape) passed one grade and failed the next. These span what used to be drawn, the
    # hardest draws included, so a verdict is the same for every seed.
    base = dict(vocab=256, d_model=64, hidden=256, n_layers=12, batch=4, seq=128)
    recipes = [dict(base, seed=seed()),  # the lesson's model
               dict(base, seed=seed(), n_layers=10, d_model=80, hidden=192),  # narrow hidden: the most memory kept
               dict(base, seed=seed(), n_layers=9, d_model=48, hidden=320),  # an odd count: the most recomputed
               dict(base, seed=seed(), n_layers=16, d_model=80, hidden=192),  # the most blocks
               dict(base, seed=seed(), vocab=500, batch=2, seq=100)]  # a large head on few tokens
    cases = [Case(f"{r['n_layers']} layers d={r['d_model']} hidden={r['hidden']} vocab={r['vocab']} "
                  f"tokens={r['batch'] * r['seq']}", (r,)) for r in recipes]
    if mode == "gpu":
        big = dict(vocab=8192, d_model=1024, hidden=4096, n_layers=16, batch=8, seq=1024, seed=seed())
        cases.append(Case("16 layers d=1024 hidden=4096 tokens=8192 (GPU memory and time)", (big,),
                          {"timed": True}))
    return cases


FIT_BUDGET = FunctionExercise(
    id="checkpoint.fit_budget",
    title="Half the activation memory for at most 0.3 of a forward recomputed",
    signature="fit_budget(model, x, y) -> loss  # the loss of model.loss(x, y); the grader calls backward",
    cases=_cases,
    reference=_reference,
    compare=_compare,
    run=_run,
    timeout_s=300.0,
    solution="gpuprinciples.course.exercises.checkpoint:fit_budget",
    # the least work is the plain step's: recomputing activations adds FLOPs; fp32 matmuls, the embedding frozen
    timed_roof=TimedRoof(lambda r: recipe_step_work(r, "fp32", frozen_embedding=True)),
    judges=((("cpu", "gpu"), f"held and peak activation bytes ≤ {BUDGET:.0%} of the plain step's (counted)"),
            (("cpu", "gpu"), f"recomputed matmul FLOPs ≤ {MAX_RECOMPUTE:g}× one forward's"),
            (("gpu",), f"a larger step on the GPU: peak memory ≤ {GPU_PEAK_BUDGET:.0%} and time ≤ {MAX_SLOWDOWN:g}× "
                       "the plain step's")),
    hints=(
        "model.embed, model.blocks (a ModuleList) and model.head are the pieces of model.loss.",
        "torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False) keeps only h for that block, and "
        "backward reruns its fc1: about half of that block's forward FLOPs.",
        "Checkpointing every block fits the memory but recomputes about half a forward. In some blocks keep "
        "fc1's output (run fc1 outside the checkpoint and checkpoint only gelu and fc2, or use a selective "
        "policy that saves it): nothing is rerun there but a GELU. Mix the two kinds of block.",
        "One checkpoint around all the blocks keeps almost nothing during the forward, but backward then "
        "recomputes every block at once: the peak is what it was.",
    ),
)

BLOCK_SAVED_BYTES = ValueExercise(
    id="checkpoint.block_saved_bytes",
    title="What one MLP block keeps for backward",
    question="x + fc2(gelu(fc1(x))) on 512 tokens, d_model=64, hidden=256, float32: how many bytes of activations "
             "does autograd save for backward (weights aside)?",
    expected=lambda: 4 * 512 * (64 + 256 + 256),  # fc1's input, gelu's input, fc2's input
    rel_tol=0.0,
    hints=("A Linear keeps its input (for the weight's gradient) and its weight (already in memory).",
           "gelu keeps its input; an addition keeps nothing."),
)

EXERCISES = (FIT_BUDGET, BLOCK_SAVED_BYTES)
