"""Lesson 05: checkpoint.fit_budget graded by counted activation bytes and recomputed FLOPs, and the
ways of getting checkpointing wrong failed for the right reason."""

import runpy
from pathlib import Path

import torch

from gpuprinciples.course.exercises import checkpoint as ck
from gpuprinciples.grader.grading import grade
from gpuprinciples.sandbox.submission import from_path

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


def test_every_grade_judges_the_same_shapes():
    """A step's memory and FLOPs, as fractions of the plain step's, follow the shapes, not the values: the seed
    draws only the weights and tokens, so no scheme's verdict depends on which seed a grade drew."""
    def shapes(seed):
        cases = ck._cases(torch.Generator().manual_seed(seed), "cpu")
        return [{k: v for k, v in c.args[0].items() if k != "seed"} for c in cases]

    assert shapes(1) == shapes(2) == shapes(SEED)
    assert len({c.args[0]["seed"] for c in ck._cases(torch.Generator().manual_seed(1), "cpu")}) > 1


def test_a_scheme_near_the_budget_gets_one_verdict_for_every_seed():
    """The alternation with a selective policy that also saves fc2's output peaks at 38-55% of the plain step's,
    by shape: it used to pass or fail by the seed's draw. Now it fails with every seed, for the same reasons,
    and is not told to avoid one segment (it has none)."""
    fixture = from_path(f"{SUBMISSIONS / 'selective_saves_fc2.py'}:fit_budget")
    reports = [grade("checkpoint.fit_budget", fixture, seed=seed) for seed in (1, 2, SEED)]
    assert [r.status for r in reports] == ["failed"] * 3, [r.reasons for r in reports]
    assert reports[0].reasons == reports[1].reasons == reports[2].reasons  # the same bytes counted every time
    said = " ".join(reports[0].reasons)
    assert "55% of the plain step's" in said and "the budget is 50%" in said and "one segment" not in said
