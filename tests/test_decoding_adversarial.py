"""Lesson 10 (decoding): what the fixtures under tests/submissions/decoding/ must show beyond their verdict.

Each file there states its verdict and the words the learner sees (tests/test_submissions.py grades it); the
tests below read the same reports (graded once, a folder at a time) and assert what a header cannot."""

import pytest
from submission_headers import FOLDER, report

from gpuprinciples import runtime
from gpuprinciples.grader.report import FAILED

HERE = FOLDER / "decoding"
# right values, read wrongly: on a GPU, where loads are not counted, their speed must fail them (K/V read G = 4 times;
# on the ragged timing input every position read, twice the live bytes)
SLOW = ("kv_per_query_head.py", "reads_whole_cache.py")


def test_right_values_read_wrongly_are_still_refused():
    """Reading past the length or once per query head leaves the values right: the loads alone fail them."""
    if not runtime.INTERPRETER:
        pytest.skip("per-element loads are counted under the interpreter only")
    for name in ("reads_whole_cache.py", "kv_per_query_head.py", "whole_table.py", "over_reads_v.py"):
        assert report(HERE / name).correct, (name, report(HERE / name).checks)  # "9 of 9 cases match"


def test_an_over_read_leads_the_report():
    """Issue 27: V loaded past seq_lens[b] and zeroed afterwards was told "0 of 9 values match"."""
    if not runtime.INTERPRETER:
        pytest.skip("per-element loads are counted under the interpreter only")
    graded = report(HERE / "over_reads_v.py")
    assert graded.reasons[0].startswith("loaded elements that must not be read"), graded.reasons
    assert [c.passed for c in graded.checks if c.name == "loads"] == [False], graded.checks
    assert [c.passed for c in graded.checks if c.name == "correct"] == [True], graded.checks


@pytest.mark.parametrize("name", ["good_pointers.py", "good_paged.py"])
def test_other_correct_designs_pass_on_a_gpu_but_for_speed(name):
    """Right, and read right (they pass on a CPU: their headers). On a GPU they are timed too, and these plain
    designs need not be fast: there only a speed target may fail them."""
    if runtime.INTERPRETER:
        pytest.skip("timed on a GPU only")
    graded = report(HERE / name)
    assert graded.correct and all("bandwidth" in r or "speedup" in r for r in graded.reasons), graded.reasons


@pytest.mark.parametrize("name", SLOW)
def test_slow_designs_fail_on_speed_alone_on_a_gpu(name):
    if runtime.INTERPRETER:
        pytest.skip("timed on a GPU only; on a CPU their loads fail them (their headers)")
    graded = report(HERE / name)
    assert graded.status == FAILED and graded.correct, graded.reasons
    assert all("bandwidth" in r or "speedup" in r for r in graded.reasons), graded.reasons
