"""The repository's lessons/ is what `gpuprinciples release` makes from solutions/, and no notebook
is committed with outputs."""

import re
from pathlib import Path

import pytest

from gpuprinciples.instructor import notebooks

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "lessons").glob("*.ipynb"))


def test_lessons_are_fresh():
    stale = notebooks.release(ROOT / "solutions", ROOT / "lessons", check=True)
    assert stale == [], f"lessons/ is stale; run `gpuprinciples release`: {stale}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_without_outputs(path):
    assert not notebooks.has_outputs(path), f"{path} carries outputs; run notebooks.strip_outputs on it"


def _branches():
    import importlib.util
    spec = importlib.util.spec_from_file_location("lesson_branches", ROOT / "tests" / "lesson_branches.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_unsolved_branch_of_every_lesson_is_listed_with_its_words():
    """Each "if you have not done X" cell of lessons/ is in tests/lesson_branches.py (whose words the root
    conftest.py checks as CI runs the lesson unsolved); the words are the cell's own, and the function they
    name is an exercise stub above the cell, so that the branch is the one taken."""
    b = _branches()
    seen = set()
    for path in sorted((ROOT / "lessons").glob("*.ipynb")):
        cells = [c for c in notebooks.read(path).cells if c.cell_type == "code"]
        for index, cell in enumerate(cells):
            listed = b.expected(path.stem, cell.source)
            if b.is_branch(cell.source):
                assert listed, f"lessons/{path.name}: a branch on an unsolved exercise is not listed in " \
                               f"lesson_branches.py:\n{cell.source[:300]}"
            if not listed:
                continue
            marker, words = listed
            seen.add((path.stem, marker))
            if words is None or words == "not attempted yet":  # the check's own report says it
                continue
            assert words in cell.source, (path.name, marker, words)
            named = re.search(r"(\w+)\(?\)? is not written yet|write (\w+)", words)
            if named:
                name = named.group(1) or named.group(2)
                stub = [c for c in cells[:index] if f"def {name}(" in c.source]
                assert stub and "raise NotImplementedError" in stub[-1].source, (path.name, name)
    missing = {(lesson, marker) for lesson, marker, _ in b.BRANCHES} - seen
    assert not missing, f"listed in lesson_branches.py, found in no lesson cell: {missing}"


def test_a_branch_that_shows_the_wrong_words_is_caught():
    b = _branches()
    source = next(c.source for c in notebooks.read(ROOT / "lessons" / "10-decoding.ipynb").cells
                  if "if runtime.INTERPRETER and written(decode_attention):" in c.source)
    wrong = [{"output_type": "stream", "name": "stdout",
              "text": "Tracing needs the interpreter: restart with GPUPRINCIPLES_FORCE_CPU=1 to draw here.\n"}]
    assert "decode_attention is not written yet" in b.problem("10-decoding", source, wrong)
    right = [{"output_type": "stream", "name": "stdout",
              "text": "decode_attention is not written yet: do the exercise above, then run this cell again to "
                      "see which positions each split reads.\n"}]
    assert b.problem("10-decoding", source, right) is None
    report = [{"output_type": "display_data", "data": {"text/html": "<div>NOT ATTEMPTED not attempted yet</div>"}}]
    assert b.problem("03-profiling", 'check("profiling.tensor_cores", tensor_core_kernels)', report) is None
