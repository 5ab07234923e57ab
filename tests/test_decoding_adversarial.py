"""Lesson 10 (decoding): wrong kernels fail `decoding.decode_attention` and `decoding.paged_decode_attention` for
the right reason, and two correct designs other than the package's pass.

Each file in tests/submissions/decoding/ is one submission (its docstring says what it does). They are graded two
at a time (each grade runs in its own child process)."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, PASSED
from gpuprinciples.machine import runtime
from gpuprinciples.sandbox.submission import from_path

HERE = Path(__file__).parent / "submissions" / "decoding"
SEED = 10  # fixed, so a failure here can be reproduced; the grader draws fresh seeds otherwise
DECODE, PAGED = "decoding.decode_attention", "decoding.paged_decode_attention"

# file -> (exercise, phrases that must all appear in the reasons, lower case)
EXPECTED = {
    "calls_sdpa.py": (DECODE, ["no triton kernel was launched", "pytorch operators did work"]),
    "three_launches.py": (DECODE, ["3 triton launches", "at most 2 allowed"]),
    "ignores_seq_lens.py": (DECODE, ["values wrong ("]),
    "dot_float32_by_half.py": (DECODE, ["bfloat16", "does not compile for an h100/h200", "same dtype",
                                        "p.to(v.dtype)"]),
    "wrong_page.py": (PAGED, ["values wrong ("]),
    "short_context.py": (DECODE, ["values wrong ("]),  # right only while the context fits 512 positions
}
if runtime.INTERPRETER:  # per-element loads are counted under the interpreter only
    EXPECTED["ignores_seq_lens.py"][1].append("positions at or past seq_lens[b]")
    EXPECTED["reads_whole_cache.py"] = (DECODE, ["loaded elements that must not be read", "of k_cache (positions at "
                                                 "or past seq_lens[b]", "of v_cache (positions at or past"])
    EXPECTED["short_context.py"][1].append("a context past one tile of 1024 positions")  # the CPU's regime case
    EXPECTED["over_reads_v.py"] = (DECODE, ["loaded elements that must not be read", "of v_cache (positions at or "
                                            "past seq_lens[b]"])
    EXPECTED["kv_per_query_head.py"] = (DECODE, ["× over", "once per kv head, not once per query head"])
    EXPECTED["wrong_page.py"][1].extend(["pages the block table does not point to",
                                         "never loaded by a triton kernel", "of block_table"])
    EXPECTED["whole_table.py"] = (PAGED, ["entries past a sequence's last page", "pages the block table does not "
                                          "point to, or rows of a sequence's last page at or past its length"])
GOOD = {"good_pointers.py": DECODE, "good_paged.py": PAGED}
# right values, read wrongly: on a GPU, where loads are not counted, their speed must fail them (K/V read G = 4 times;
# on the ragged timing input every position read, twice the live bytes)
SLOW = {} if runtime.INTERPRETER else {"kv_per_query_head.py": DECODE, "reads_whole_cache.py": DECODE}
ENTRY = {DECODE: "decode_attention", PAGED: "paged_decode_attention"}


def _grade(name: str):
    exercise = EXPECTED[name][0] if name in EXPECTED else {**GOOD, **SLOW}[name]
    return grade(exercise, from_path(f"{HERE / name}:{ENTRY[exercise]}"), seed=SEED)


@pytest.fixture(scope="module")
def reports():
    names = sorted(EXPECTED) + sorted(GOOD) + sorted(SLOW)
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(names, pool.map(_grade, names)))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_mistake_fails_for_the_right_reason(reports, name):
    report = reports[name]
    text = " ".join(report.reasons).lower()
    assert report.status == FAILED, report.reasons
    for phrase in EXPECTED[name][1]:
        assert phrase in text, (name, phrase, report.reasons)


def test_right_values_read_wrongly_are_still_refused(reports):
    """Reading past the length or once per query head leaves the values right: the loads alone fail them."""
    if not runtime.INTERPRETER:
        pytest.skip("per-element loads are counted under the interpreter only")
    for name in ("reads_whole_cache.py", "kv_per_query_head.py", "whole_table.py", "over_reads_v.py"):
        assert "values wrong" not in " ".join(reports[name].reasons), (name, reports[name].reasons)
        assert reports[name].correct, (name, reports[name].checks)  # "9 of 9 cases match": the values are right


def test_an_over_read_leads_the_report(reports):
    """Issue 27: V loaded past seq_lens[b] and zeroed afterwards was told "0 of 9 values match"."""
    if not runtime.INTERPRETER:
        pytest.skip("per-element loads are counted under the interpreter only")
    report = reports["over_reads_v.py"]
    assert report.reasons[0].startswith("loaded elements that must not be read"), report.reasons
    assert [c.passed for c in report.checks if c.name == "loads"] == [False], report.checks
    assert [c.passed for c in report.checks if c.name == "correct"] == [True], report.checks


@pytest.mark.parametrize("name", sorted(GOOD))
def test_other_correct_designs_pass(reports, name):
    """Right, and read right. On a GPU they are timed too, and these plain designs need not be fast: there
    only a speed target may fail them."""
    report = reports[name]
    if runtime.INTERPRETER:
        assert report.status == PASSED, report.reasons
    else:
        assert report.correct and all("bandwidth" in r or "speedup" in r for r in report.reasons), report.reasons


@pytest.mark.parametrize("name", sorted(SLOW))
def test_slow_designs_fail_on_speed_alone_on_a_gpu(reports, name):
    report = reports[name]
    assert report.status == FAILED and report.correct, report.reasons
    assert all("bandwidth" in r or "speedup" in r for r in report.reasons), report.reasons
