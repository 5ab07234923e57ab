"""The roof of a timed training step: what `roofline.fraction_of_roof` needs for the whole-program exercises
(amp.train_step, tensorcores.pad_model, checkpoint.fit_budget), whose GPU case times a step in the child.

A step's least work is its matmul FLOPs (forward and backward, counted by PyTorch's FLOP counter on a model
built on the meta device: no memory, no time) and its least bytes: each trainable weight read once and its
gradient written once, plus what an optimizer update must read and write. The roof is the slower of the FLOPs
at the matmul rate measured for the step's matmul dtype and the bytes at the measured copy bandwidth; the
report states the learner's step's fraction of it, beside the verdict (the speedup over its baseline).

Each such exercise declares a `TimedRoof`: how to count the work of its timed case, and which of the timed
run's entries is the learner's.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

import torch

ADAMW_BYTES = 28  # per fp32 parameter: reads parameter, gradient and both moments, writes parameter and moments


@dataclass(frozen=True)
class StepWork:
    flops: float  # matmul FLOPs, forward and backward
    bytes: float  # least bytes a step moves
    dtype: str  # its matmuls' operand dtype: "bf16", "fp16" or "fp32"


@dataclass(frozen=True)
class TimedRoof:
    work: Callable[[dict], StepWork]  # the timed case's recipe -> its least work
    timed: str = "yours"  # the learner's entry in the timed run's rounds


def recipe_step_work(recipe: dict, dtype: str, *, frozen_embedding: bool = False, optimizer_bytes: int = 0,
                     param_bytes: int = 4) -> StepWork:
    """The least work of one forward and backward of `models.from_recipe`'s model on its batch. `dtype`: the
    matmuls' dtype; `param_bytes`: bytes per stored weight (and gradient); `optimizer_bytes`: per trainable
    parameter, for an update in the step (ADAMW_BYTES)."""
    from torch.utils.flop_counter import FlopCounterMode

    from .models import TinyLM, lm_loss

    with torch.device("meta"):
        model = TinyLM(recipe["vocab"], recipe["d_model"], recipe["hidden"], recipe["n_layers"])
        tokens = torch.zeros(recipe["batch"], recipe["seq"], dtype=torch.long)
    if frozen_embedding:
        model.embed.weight.requires_grad_(False)
    with FlopCounterMode(display=False) as counter:
        lm_loss(model(tokens), tokens, recipe["vocab"]).backward()
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    every = sum(p.numel() for p in model.parameters())
    least = every * param_bytes + trainable * (param_bytes + optimizer_bytes)  # weights read, gradients written
    return StepWork(float(counter.get_total_flops()), float(least), dtype)


def step_peak(ceilings, dtype: str) -> float | None:
    """The measured matmul rate for a PyTorch step in `dtype`: fp32 at TF32's rate only where PyTorch is set to
    use TF32 (it is not by default), else plain fp32."""
    from ...measure.calibrate import tf32_enabled
    from . import roofline
    if dtype == "fp32":
        tf32 = tf32_enabled()
        for key in (("tf32", "fp32") if tf32 else ("fp32",)):
            try:
                return ceilings.flops(key)
            except ValueError:
                continue
        return None
    return roofline.matmul_peak(ceilings, {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype])


def timed_roof(roof: TimedRoof, recipe: dict, rounds, ceilings) -> tuple[dict, str] | None:
    """(measurements["roof"], its sentence) for the learner's median step in `rounds`; None when the rounds do
    not hold it."""
    from . import roofline
    try:
        seconds = statistics.median(r[roof.timed] for r in rounds)
    except (TypeError, KeyError, statistics.StatisticsError):
        return None
    if not seconds > 0:
        return None
    work = roof.work(recipe)
    peak = step_peak(ceilings, work.dtype)
    fraction, bound, roof_s = roofline.fraction_of_roof(seconds, work.flops, work.bytes, peak,
                                                        ceilings.copy_bandwidth)
    sentence = roofline.describe_roof(fraction, bound, roof_s, work.flops, work.bytes, peak, ceilings.copy_bandwidth)
    return ({"fraction": round(fraction, 3), "bound": bound, "roof_ms": round(roof_s * 1e3, 4),
             "matmul_dtype": work.dtype}, sentence)
