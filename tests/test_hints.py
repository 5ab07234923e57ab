"""Hints in tiers: one hint per call, the solution last (or once the check passed); off for graded sessions."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpuprinciples
from gpuprinciples.course import catalog, hints
from gpuprinciples.grader.grading import check

ROOT = Path(__file__).resolve().parent.parent
PASSES_A_CHECK = "tests/fixtures/hints/passes_a_check.ipynb"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPRINCIPLES_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("GPUPRINCIPLES_HINTS", raising=False)
    monkeypatch.delenv("GPUPRINCIPLES_REPORT_LOG", raising=False)
    return tmp_path


def test_tiers_in_order_then_the_solution_with_its_kernel(cache):
    tiers = catalog.get("fusion.softmax").hints
    assert len(tiers) >= 2
    for k, text in enumerate(tiers, 1):
        shown = hints.reveal("fusion.softmax")
        assert shown.kind == "hint"
        assert f"Hint {k} of {len(tiers)}" in shown.text and text in shown.text
    last = hints.reveal("fusion.softmax")
    assert last.kind == "solution" and "you have seen every hint" in last.text
    assert "def softmax(" in last.text and "@triton.jit" in last.text and "def softmax_kernel(" in last.text
    state = json.loads((cache / "hints.json").read_text())
    assert state["shown"]["fusion.softmax"] == len(tiers)
    # the tiers of one exercise do not move another's
    assert hints.reveal("fusion.cos_cos").text.startswith("Hint 1 of")


def test_a_passed_check_unlocks_the_solution_and_a_failed_one_does_not(cache):
    assert not check("factory.intensity", 0.5, show=False).passed
    assert hints.reveal("factory.intensity").kind == "hint"
    assert check("factory.intensity", 1 / 12, show=False).passed  # check() records the pass
    shown = hints.reveal("factory.intensity")
    assert shown.kind == "solution" and "your check passed" in shown.text and "0.0833333" in shown.text
    assert "factory.intensity" in json.loads((cache / "hints.json").read_text())["passed"]


def test_hints_off_for_a_graded_session(cache, monkeypatch, capsys):
    monkeypatch.setenv("GPUPRINCIPLES_HINTS", "off")
    shown = gpuprinciples.hint("fusion.softmax")
    assert shown.kind == "off" and "Hints are off" in capsys.readouterr().out
    assert check("factory.intensity", 1 / 12, show=False).passed
    assert not (cache / "hints.json").exists()  # nothing read or written


def test_unknown_exercise_says_so_with_suggestions():
    shown = hints.reveal("fusion.sofmax")
    assert shown.kind == "unknown" and "fusion.softmax" in shown.text


def test_top_level_hint_prints_the_first_tier(capsys):
    gpuprinciples.hint("fusion.vector_add")
    assert capsys.readouterr().out.startswith("Hint 1 of ")


def test_every_function_exercise_has_a_readable_solution():
    for ex in catalog.all_exercises().values():
        if ex.kind == "function":
            text = hints.solution_text(ex)
            assert "def " in text, ex.id


def test_a_pytest_run_of_notebooks_leaves_the_learners_hint_state_alone(tmp_path):
    """The README's test command runs every solution notebook, and each passes its checks: those passes
    must not unlock the solutions of whoever ran it. The repository's conftest.py gives the run a cache of
    its own; without it (--noconftest) the same run records the pass where the learner's hints look."""
    learner = tmp_path / ".cache" / "gpuprinciples"  # the default place, under this HOME
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GPUPRINCIPLES_"))}
    env["HOME"] = str(tmp_path)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", PASSES_A_CHECK]

    def run(*extra):
        done = subprocess.run([*cmd, *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    run()
    assert not (learner / "hints.json").exists()
    run("--noconftest")
    assert "factory.intensity" in json.loads((learner / "hints.json").read_text())["passed"]


def test_every_report_that_did_not_pass_offers_the_next_hint(cache):
    failed = check("factory.intensity", 0.5, show=False)
    tiers = len(catalog.get("factory.intensity").hints)
    assert failed.hint == 'Stuck? Run hint("factory.intensity") in a cell (from gpuprinciples import hint) ' \
                          f'for hint 1 of {tiers}, then the solution after the last.'
    assert failed.hint in str(failed) and failed.to_dict()["hint"] == failed.hint
    for _ in catalog.get("factory.intensity").hints:
        hints.reveal("factory.intensity")
    assert "the solution (you have seen every hint)" in check("factory.intensity", 0.5, show=False).hint
    unsolved = check("fusion.cos_cos", lambda_free_stub, show=False)
    assert unsolved.status == "not attempted" and 'hint("fusion.cos_cos")' in unsolved.hint
    assert check("factory.intensity", 1 / 12, show=False).hint == ""  # a pass offers nothing


def test_no_hint_is_offered_when_hints_are_off(cache, monkeypatch):
    monkeypatch.setenv("GPUPRINCIPLES_HINTS", "off")
    assert check("factory.intensity", 0.5, show=False).hint == ""


def lambda_free_stub(x):
    raise NotImplementedError("Exercise: write your solution here")


def test_lesson_01_says_how_to_ask_for_a_hint():
    """The tiers are no use if nobody finds them: the first lesson says how, in both forms."""
    from gpuprinciples.instructor import notebooks
    for folder in ("solutions", "lessons"):
        nb = notebooks.read(ROOT / folder / "01-factory-and-warehouse.ipynb")
        words = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert 'hint("factory.intensity")' in words and "gpuprinciples hint factory.intensity" in words, folder
        assert any("import calibrate, check, counters, hint," in c.source for c in nb.cells), folder  # at hand
