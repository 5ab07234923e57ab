"""Lesson 08 (FlashAttention): wrong answers fail `flash.attention` for the right reason.

Each file in tests/submissions/flash/ is one mistake (its docstring says which), or a right kernel that
must pass. They are graded two at a time (each grade runs in its own child process) to keep this file quick."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, PASSED
from gpuprinciples.machine import runtime
from gpuprinciples.sandbox.submission import from_path

FLASH = Path(__file__).parent / "submissions" / "flash"
SEED = 8  # fixed, so a failure here can be reproduced; the grader draws fresh seeds otherwise

# file -> phrases that must all appear in the reasons (lower case)
EXPECTED = {
    "calls_sdpa.py": ["no triton kernel was launched", "pytorch operators did work", "scaled_dot_product"],
    "ignores_causal.py": ["values wrong (", "causal"],
    "wrong_scale.py": ["values wrong ("],
    "last_tile.py": ["values wrong (", "full"],
    "no_rescale.py": ["nan or inf values", "subtract the running row maximum", "large"],
    "same_strides.py": ["values wrong (", "packed_kv", "strides of their own"],
    # right in float32; the GPU's compiler refuses it in bf16/fp16, and a CPU compiles those cases for it too
    "dot_float32_by_half.py": ["bfloat16", "does not compile for an h100/h200", "same dtype", "p.to(v.dtype)"],
}
if runtime.INTERPRETER:  # bytes and per-program reads are counted under the interpreter only
    EXPECTED["kv_twice.py"] = ["read the same element of k or v 2 times"]
    EXPECTED["materialises.py"] = ["score matrix", "something else went to memory", "2 triton launches"]


RIGHT = ["good_pointers.py", "fa2_scratch.py"]  # must pass

# (file, stage): a kernel right up to a stage passes it and fails the next one
STAGES = [("last_tile.py", "flash.attention_tiles", True), ("last_tile.py", "flash.attention_tails", False),
          ("ignores_causal.py", "flash.attention_tails", True), ("ignores_causal.py", "flash.attention_causal", False)]


@pytest.fixture(scope="module")
def reports():
    jobs = [(n, "flash.attention") for n in sorted(EXPECTED) + RIGHT] + [(n, stage) for n, stage, _ in STAGES]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = pool.map(lambda job: grade(job[1], from_path(f"{FLASH / job[0]}:attention"), seed=SEED), jobs)
        return dict(zip(jobs, done))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_mistake_fails_for_the_right_reason(reports, name):
    report = reports[(name, "flash.attention")]
    text = " ".join(report.reasons).lower()
    assert report.status == FAILED, report.reasons
    for phrase in EXPECTED[name]:
        assert phrase in text, (name, phrase, report.reasons)


def test_values_right_but_kv_read_twice_is_still_correct(reports):
    if runtime.INTERPRETER:
        report = reports[("kv_twice.py", "flash.attention")]
        assert report.correct is False  # the re-reads are reported with the values
        assert "values wrong" not in " ".join(report.reasons)


@pytest.mark.parametrize("name", RIGHT)
def test_a_right_kernel_passes(reports, name):
    # fa2_scratch.py keeps a padded log-sum-exp and a scratch vector per K/V tile in memory: allowed
    report = reports[(name, "flash.attention")]
    assert report.status == PASSED, report.reasons


@pytest.mark.parametrize("name,stage,passes", STAGES, ids=[f"{n}-{s}" for n, s, _ in STAGES])
def test_each_stage_checks_what_it_adds(reports, name, stage, passes):
    report = reports[(name, stage)]
    assert report.status == (PASSED if passes else FAILED), report.reasons
    if not passes:
        assert "values wrong (" in " ".join(report.reasons)
