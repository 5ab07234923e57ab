"""Lesson 06: tensorcores.pad_model graded by recorded matmul shapes and unchanged logits, and wrong
paddings failed for the right reason."""

from pathlib import Path

import pytest
import torch

from gpuprinciples.course.exercises import tensorcores as tc
from gpuprinciples.course.lab.models import tiny_lm, token_batch
from gpuprinciples.grader.grading import grade
from gpuprinciples.sandbox.submission import from_path

SUBMISSIONS = Path(__file__).parent / "submissions" / "tensorcores"
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


@pytest.mark.parametrize("name, words", [
    ("unchanged.py", ["not aligned", "multiple of 8"]),
    ("pad_to_4.py", ["not aligned", "bfloat16", "multiple of 8"]),
    ("vocab_only.py", ["not aligned", "K="]),
    ("fresh_init.py", ["logits on the real vocabulary changed"]),
    ("upcast.py", ["computes in torch.float32", "keep the dtype"]),
])
def test_wrong_paddings_fail_for_the_right_reason(name, words):
    report = grade("tensorcores.pad_model", from_path(f"{SUBMISSIONS / name}:pad_model"), seed=SEED)
    assert not report.passed
    text = " ".join(report.reasons)
    for word in words:
        assert word in text, (word, report.reasons)
    if name == "pad_to_4.py":  # fp32 cases pass: 4 fp32 elements are 16 bytes
        assert "float32 vocab" not in text
