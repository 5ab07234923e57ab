"""Lesson 11 (memory hierarchy): wrong matmuls fail `hierarchy.matmul` for the right reason, and a tutorial-style
one passes.

Each file in tests/submissions/hierarchy/ is one mistake (its docstring says which). They are graded two at a
time (each grade runs in its own child process)."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, PASSED
from gpuprinciples.machine import runtime
from gpuprinciples.sandbox.submission import from_path

HIERARCHY = Path(__file__).parent / "submissions" / "hierarchy"
SEED = 11  # fixed, so a failure here can be reproduced; the grader draws fresh seeds otherwise

# file -> phrases that must all appear in the reasons (lower case)
EXPECTED = {
    "calls_mm.py": ["pytorch operators did work", "mm ×1"],
    "wrong_tail.py": ["values wrong ("],
    "one_k_tile.py": ["values wrong ("],  # right only while K fits one tile of 512
    "no_tensor_cores.py": ["no kernel multiplied bf16 or fp16 tiles with tl.dot", "tensor cores"],
}
if runtime.INTERPRETER:  # loads are traced under the interpreter only
    EXPECTED["reloads.py"] = ["what its tiles imply", "at most 1.25× allowed"]
    EXPECTED["calls_mm.py"].append("every element of a and b must pass through the kernel")
    EXPECTED["wrong_tail.py"].append("every element of a and b must pass through the kernel")
    EXPECTED["one_k_tile.py"].append("k past one tile of 512")  # the CPU's regime case

MUST_PASS = ["tutorial_style.py"]


@pytest.fixture(scope="module")
def reports():
    names = sorted(EXPECTED) + MUST_PASS
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = pool.map(lambda n: grade("hierarchy.matmul", from_path(f"{HIERARCHY / n}:matmul"), seed=SEED), names)
        return dict(zip(names, done))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_mistake_fails_for_the_right_reason(reports, name):
    report = reports[name]
    text = " ".join(report.reasons).lower()
    assert report.status == FAILED, report.reasons
    for phrase in EXPECTED[name]:
        assert phrase in text, (name, phrase, report.reasons)


def test_only_the_reloads_are_wrong_in_reloads(reports):
    if runtime.INTERPRETER:
        text = " ".join(reports["reloads.py"].reasons).lower()
        assert "values wrong" not in text and "wgmma" not in text


def test_no_tensor_cores_has_the_right_values(reports):
    text = " ".join(reports["no_tensor_cores.py"].reasons).lower()
    assert "values wrong" not in text and "what its tiles imply" not in text


@pytest.mark.parametrize("name", MUST_PASS)
def test_a_tutorial_style_kernel_passes(reports, name):
    assert reports[name].status == PASSED, reports[name].reasons
