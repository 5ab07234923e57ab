"""Lesson 05: checkpoint.fit_budget graded by counted activation bytes and recomputed FLOPs, and the
ways of getting checkpointing wrong failed for the right reason."""

import runpy
from pathlib import Path

import torch

from gpuprinciples.course.exercises import checkpoint as ck
from gpuprinciples.grader.grading import grade

SUBMISSIONS = Path(__file__).parent / "submissions" / "checkpoint"
per_block = runpy.run_path(str(SUBMISSIONS / "per_block.py"))["fit_budget"]  # the old budget's answer
SEED = 20261202
RECIPE = dict(seed=3, vocab=128, d_model=32, hidden=128, n_layers=6, batch=2, seq=64)


def test_plain_step_holds_what_autograd_saves():
    model, x, y = ck.build(RECIPE, "cpu")
    saved = {}

    def pack(t):
        saved[t.untyped_storage()._cdata] = t.untyped_storage().nbytes()
        return t

    with ck.ActivationMemory(model.parameters()) as mem, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = ck.plain_loss(model, x, y)  # noqa: F841  (alive: its graph holds the saved tensors)
        mem.end_forward()
    params = {t.untyped_storage()._cdata for t in [*model.parameters(), x, y]}
    activations = sum(n for key, n in saved.items() if key not in params)
    # every saved activation is alive, and little else is (the loss, cross-entropy's scalars)
    assert activations <= mem.held <= activations + 1024
    tokens, d, h = 2 * 64, 32, 128
    per_block = 4 * tokens * (d + h + h)  # fc1's input, fc1's output (for gelu), gelu's output (for fc2)
    assert mem.held >= 6 * per_block


def test_checkpointing_every_block_trades_memory_for_one_partial_forward():
    plain = ck.measure(ck.plain_loss, RECIPE)
    mine = ck.measure(per_block, RECIPE)
    assert mine["loss"] == plain["loss"]
    for name, g in plain["grads"].items():
        assert torch.equal(mine["grads"][name], g), name  # recomputation is exact on a CPU
    assert mine["held"] < 0.4 * plain["held"] and mine["peak"] < 0.4 * plain["peak"]
    assert mine["forward_flops"] == plain["forward_flops"]
    extra = mine["backward_flops"] - plain["backward_flops"]
    # non-reentrant checkpoint stops recomputing once it has what backward needs: fc1 but not fc2
    tokens, d, h = 2 * 64, 32, 128
    assert extra == 6 * 2 * tokens * d * h
    assert extra > ck.MAX_RECOMPUTE * plain["forward_flops"]  # so it is no answer to the exercise


def test_the_reference_recomputes_only_the_fc1_of_every_other_block():
    plain = ck.measure(ck.plain_loss, RECIPE)
    mine = ck.measure(ck.fit_budget, RECIPE)
    for name, g in plain["grads"].items():
        assert torch.equal(mine["grads"][name], g), name
    tokens, d, h = 2 * 64, 32, 128
    assert mine["backward_flops"] - plain["backward_flops"] == 3 * 2 * tokens * d * h  # blocks 0, 2, 4
    assert mine["held"] <= ck.BUDGET * plain["held"] and mine["peak"] <= ck.BUDGET * plain["peak"]


def test_reference_solution_passes():
    report = grade("checkpoint.fit_budget", ck.fit_budget, seed=SEED)
    assert report.passed, report.reasons
