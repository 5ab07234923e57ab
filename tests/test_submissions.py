"""Every submission fixture gets the verdict its header states, and tells the learner what it says.

The fixtures under tests/submissions/ each state what they are graded on (tests/submission_headers.py has
the format); this one test grades each of them once on this machine (the `gpu`-marked one is the same on
a GPU). Tests that assert more about a fixture read the same report (`submission_headers.report`).
"""

from __future__ import annotations

import json
import os

import pytest
from run_log import log
from submission_headers import (
    FOLDER,
    MutantError,
    graded_files,
    header,
    materialise,
    report,
    runs_on,
    timed_on_a_gpu,
    verdict_on,
)

from gpuprinciples import runtime

FILES = graded_files()


def _id(path) -> str:
    return f"{path.parent.name}/{path.stem}"


def check(path) -> None:
    h = header(path)
    graded = report(path)
    log("fixtures.jsonl", json.dumps({"fixture": _id(path), "status": graded.status, "reasons": graded.reasons}),
        echo=False)
    reasons = " | ".join(graded.reasons).lower()
    if "known-gap" in h and graded.status == "passed":  # when the grader learns to catch it, it fails as stated
        pytest.xfail(f"grader gap: {h['known-gap']}")
    assert graded.status == verdict_on(path, runtime.MODE), (_id(path), graded.status, graded.reasons)
    for fragment in h["says"] + h[f"{runtime.MODE}-says"]:
        assert fragment in reasons, (_id(path), fragment, graded.reasons)
    for fragment in h["not-says"] + h[f"{runtime.MODE}-not-says"]:
        assert fragment not in reasons, (_id(path), fragment, graded.reasons)


def test_every_fixture_states_its_verdict_or_why_it_has_none():
    assert len(FILES) >= 130
    for path in sorted(FOLDER.glob("*/*.py")):
        if path.name.startswith("_"):
            continue
        h = header(path)
        if "verdict" not in h:
            assert "graded-by" in h or "not-graded" in h, f"{_id(path)}: no `# verdict:` and no reason why"
            if "graded-by" in h:
                test = FOLDER.parent / h["graded-by"]
                assert test.is_file() and path.stem in test.read_text(), (_id(path), h["graded-by"])
            continue
        assert {"exercise", "function"} <= h.keys(), _id(path)
        assert h["verdict"] in ("passed", "failed"), _id(path)
        for mode in ("cpu", "gpu"):  # a machine's own verdict differs from the common one, and the file says why
            own = h.get(f"{mode}-verdict")
            assert own in (None, "passed", "failed") and own != h["verdict"], (_id(path), f"{mode}-verdict")
        for mode in h["modes"].split():  # a failure says why, on each machine it is graded on
            assert verdict_on(path, mode) == "passed" or h["says"] or h[f"{mode}-says"] or "known-gap" in h, \
                (_id(path), mode)


def test_every_mutant_differs_from_its_twin():
    """A mutant's hunks apply (materialise raises otherwise) and change something."""
    mutants = [p for p in FOLDER.glob("*/*.py") if "mutant-of" in header(p)]
    assert mutants
    for path in mutants:
        twin = FOLDER / header(path)["mutant-of"]
        assert materialise(path) != materialise(twin), _id(path)


@pytest.mark.parametrize("old", ["    return y_not_in_the_twin", "#"])
def test_a_hunk_that_does_not_fit_its_twin_stops_the_mutant(tmp_path, old):
    """Old lines found nowhere in the twin, or in several places (a bare `#`: every empty line), raise:
    never the twin's text graded under the mutant's verdict."""
    mutant = tmp_path / "m.py"
    mutant.write_text(f"# mutant-of: trust/good_cos_cos.py\n# @@\n{old if old == '#' else '# -' + old}\n# +    pass\n")
    with pytest.raises(MutantError, match="not once"):
        materialise(mutant)


@pytest.mark.skipif(runtime.HAS_CUDA, reason="the CPU's verdicts; a GPU runs test_on_a_gpu")
@pytest.mark.parametrize("path", [p for p in FILES if runs_on(p, "cpu")], ids=_id)
def test_on_a_cpu(path):
    check(path)


@pytest.mark.gpu
@pytest.mark.parametrize("path", [p for p in FILES if runs_on(p, "gpu")], ids=_id)
def test_on_a_gpu(path):
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:  # each worker grades six at a time, on one GPU
        pytest.fail("grade the GPU fixtures in one pytest process (no -n): on an H100, -n 6 ran out of GPU memory "
                    "and timed a slow fixture as passing (2026-12-07); graded again in one process, each of those "
                    "got its stated verdict")
    check(path)


def test_a_verdict_reached_by_timing_is_graded_alone():
    fusion = FOLDER / "fusion"
    assert timed_on_a_gpu(fusion / "cos_cos_module_device.py")  # right, but fails its speed target on a GPU
    assert timed_on_a_gpu(fusion / "cos_cos_device_cuda.py")  # passes on a GPU: timed
    assert not timed_on_a_gpu(fusion / "cos_cos_no_mask.py")  # fails before it is timed
