"""Lesson 06: tensorcores.pad_model graded by recorded matmul shapes and unchanged logits, and wrong
paddings failed for the right reason."""

import pytest
import torch

from gpuprinciples.course.exercises import tensorcores as tc
from gpuprinciples.course.lab.models import tiny_lm, token_batch
from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, PASSED

SEED = 20261202


def test_matmul_shapes_are_recorded_and_judged():
    model = tiny_lm(0, vocab=101, d_model=24, hidden=40, n_layers=1)
    x, _ = token_batch(1, 101, 2, 8)
    shapes = tc.MatmulShapes()
    with torch.no_grad(), shapes:
        model(x)
    # fc1, fc2, head: (op, M, K, N, dtype)
    assert shapes.calls == [("addmm", 16, 24, 40, "float32"), ("addmm", 16, 40, 24, "float32"),
                            ("mm", 16, 24, 101, "float32")]
    assert tc.misaligned(shapes.calls) == [("mm", 16, 24, 101, "float32")]
    assert tc.misaligned([("mm", 16, 12, 8, "float32")]) == []  # 16 bytes of fp32 is 4 elements
    assert tc.misaligned([("mm", 16, 12, 8, "bfloat16")]) != []  # of bf16, 8


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_padding_keeps_the_logits(dtype):
    model = tiny_lm(0, vocab=101, d_model=23, hidden=45, n_layers=2).to(dtype)
    x, y = token_batch(1, 101, 2, 8)
    padded = tc.pad_model(model)
    assert padded.embed.weight.shape == (104, 24) and padded.blocks[0].fc1.weight.shape == (48, 24)
    with torch.no_grad():
        assert torch.equal(padded(x)[..., :101], model(x))
        assert torch.equal(padded.loss(x, y), model.loss(x, y))


def test_reference_solution_passes():
    report = grade("tensorcores.pad_model", tc.pad_model, seed=SEED)
    assert report.passed, report.reasons


def test_padded_vocab_is_a_decision_from_the_sweep_and_each_wrong_one_says_why():
    from gpuprinciples.course.exercises.tensorcores import RECORDED_VOCAB_SWEEP
    fastest = min(RECORDED_VOCAB_SWEEP.values())
    assert RECORDED_VOCAB_SWEEP[50264] <= 1.02 * fastest < RECORDED_VOCAB_SWEEP[50260]  # the record decides it
    assert grade("tensorcores.padded_vocab", 50264).status == PASSED
    assert grade("tensorcores.padded_vocab", 50264.0).status == PASSED
    nanogpt = grade("tensorcores.padded_vocab", 50304)  # the folklore: fast, but 40 rows padded for nothing
    assert nanogpt.status == FAILED and "40 fewer rows" in nanogpt.reasons[0]
    slow = grade("tensorcores.padded_vocab", 50260)  # a multiple of 4 only
    assert slow.status == FAILED and "a multiple of 4" in slow.reasons[0] and "15.53 ms" in slow.reasons[0]
    assert "was not measured" in grade("tensorcores.padded_vocab", 50300).reasons[0]
    assert "vocabulary size" in grade("tensorcores.padded_vocab", "50264").reasons[0]
