"""Lesson 08 (FlashAttention): what the fixtures under tests/submissions/flash/ must show beyond their verdict.

Each file there states its verdict and the words the learner sees (tests/test_submissions.py grades it); the
tests below read the same reports, and grade two of them again on the exercise's earlier stages."""

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import pytest
from submission_headers import FOLDER, header, report, submission

from gpuprinciples import runtime
from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, PASSED

FLASH = FOLDER / "flash"

# (file, stage): a kernel right up to a stage passes it and fails the next one
STAGES = [("last_tile.py", "flash.attention_tiles", True), ("last_tile.py", "flash.attention_tails", False),
          ("ignores_causal.py", "flash.attention_tails", True), ("ignores_causal.py", "flash.attention_causal", False)]


@lru_cache(maxsize=1)
def _stages() -> dict:
    def one(job):
        name, stage, _ = job
        return (name, stage), grade(stage, submission(FLASH / name), seed=int(header(FLASH / name)["seed"]))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, STAGES))


def test_values_right_but_kv_read_twice_is_still_correct():
    if runtime.INTERPRETER:
        graded = report(FLASH / "kv_twice.py")
        assert graded.correct is False  # the re-reads are reported with the values (not "values wrong": its header)


@pytest.mark.parametrize("name,stage,passes", STAGES, ids=[f"{n}-{s}" for n, s, _ in STAGES])
def test_each_stage_checks_what_it_adds(name, stage, passes):
    graded = _stages()[(name, stage)]
    assert graded.status == (PASSED if passes else FAILED), graded.reasons
    if not passes:
        assert "values wrong (" in " ".join(graded.reasons)
