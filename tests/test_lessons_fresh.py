"""The repository's lessons/ is what `gpuprinciples release` makes from solutions/, and no notebook
is committed with outputs."""

from pathlib import Path

import pytest

from gpuprinciples import notebooks

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "lessons").glob("*.ipynb"))


def test_lessons_are_fresh():
    stale = notebooks.release(ROOT / "solutions", ROOT / "lessons", check=True)
    assert stale == [], f"lessons/ is stale; run `gpuprinciples release`: {stale}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_without_outputs(path):
    assert not notebooks.has_outputs(path), f"{path} carries outputs; run notebooks.strip_outputs on it"
