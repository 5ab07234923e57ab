"""Lesson 08 (FlashAttention): wrong answers fail `flash.attention` for the right reason.

Each file in tests/submissions/flash/ is one mistake (its docstring says which). They are graded
two at a time (each grade runs in its own child process) to keep this file quick."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpuprinciples import runtime
from gpuprinciples.grading import grade
from gpuprinciples.report import FAILED, PASSED
from gpuprinciples.submission import from_path

FLASH = Path(__file__).parent / "submissions" / "flash"
SEED = 8  # fixed, so a failure here can be reproduced; the grader draws fresh seeds otherwise

# file -> phrases that must all appear in the reasons (lower case)
EXPECTED = {
    "calls_sdpa.py": ["no triton kernel was launched", "pytorch operators did work", "scaled_dot_product"],
    "ignores_causal.py": ["values wrong (case", "causal"],
    "wrong_scale.py": ["values wrong (case"],
    "last_tile.py": ["values wrong (case", "full"],
    "no_rescale.py": ["nan or inf values", "subtract the running row maximum", "large"],
}
if runtime.INTERPRETER:  # bytes and per-program reads are counted under the interpreter only
    EXPECTED["kv_twice.py"] = ["read the same element of k or v 2 times"]
    EXPECTED["materialises.py"] = ["score matrix", "something else went to memory", "2 triton launches"]


@pytest.fixture(scope="module")
def reports():
    names = sorted(EXPECTED) + ["good_pointers.py"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = pool.map(lambda n: grade("flash.attention", from_path(f"{FLASH / n}:attention"), seed=SEED), names)
        return dict(zip(names, done))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_mistake_fails_for_the_right_reason(reports, name):
    report = reports[name]
    text = " ".join(report.reasons).lower()
    assert report.status == FAILED, report.reasons
    for phrase in EXPECTED[name]:
        assert phrase in text, (name, phrase, report.reasons)


def test_values_right_but_kv_read_twice_is_still_correct(reports):
    if runtime.INTERPRETER:
        assert reports["kv_twice.py"].correct is False  # the re-reads are reported with the values
        assert "values wrong" not in " ".join(reports["kv_twice.py"].reasons)


def test_a_plain_pointer_kernel_passes(reports):
    report = reports["good_pointers.py"]
    assert report.status == PASSED, report.reasons
