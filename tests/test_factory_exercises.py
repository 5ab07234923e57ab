"""Lesson 01's value exercises: the right answers pass, the near misses and the stubs do not."""

import pytest

from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, NOT_ATTEMPTED, PASSED
from gpuprinciples.machine import specs

H100 = specs.SPECS["H100"]


@pytest.mark.parametrize("exercise, right, wrong", [
    ("factory.intensity", 1 / 12, 1 / 8),  # 1/8 forgets y
    ("factory.predict_h100", 12 * 2**28 / 3.35e12, 8 * 2**28 / 3.35e12),
    ("factory.predict_h100", 12 * 2**28 / 3.35e12, 2**28 / H100.flops("fp32")),  # the compute time
    ("factory.matmul_intensity", 4096 / 3, 2 * 4096**3 / (3 * 4096**2 * 4)),  # fp32 bytes
    ("factory.matmul_bound", "Compute", "memory"),
    ("factory.eager_bytes", 16, 8),  # the fused count
])
def test_right_passes_wrong_fails(exercise, right, wrong):
    assert grade(exercise, right).status == PASSED
    report = grade(exercise, wrong)
    assert report.status == FAILED and report.reasons


@pytest.mark.parametrize("exercise", ["factory.intensity", "factory.predict_h100", "factory.matmul_intensity",
                                      "factory.matmul_bound", "factory.eager_bytes"])
def test_stub_is_not_attempted(exercise):
    assert grade(exercise, None).status == NOT_ATTEMPTED
