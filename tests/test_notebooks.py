"""Solutions -> lessons: the markers, the tags, release() and its --check."""

import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from gpuprinciples.instructor import notebooks
from gpuprinciples.instructor.notebooks import RAISE_STUB, make_lesson, release

FIXTURES = Path(__file__).parent / "fixtures"


def nb_of(*cells):
    nb = new_notebook()
    nb.cells = list(cells)
    for i, cell in enumerate(nb.cells):
        cell.id = f"c{i}"
    return nb


def lesson_sources(*cells):
    return [c.source for c in make_lesson(nb_of(*cells), name="t.ipynb").cells]


# --- code regions ----------------------------------------------------------------------------


def test_region_in_function_keeps_indentation_and_surroundings():
    src = ("def f(x):\n"
           "    y = x * 2\n"
           "    ### BEGIN SOLUTION\n"
           "    z = y + 1\n"
           "    return z\n"
           "    ### END SOLUTION\n"
           "\n"
           "print('after')")
    (out,) = lesson_sources(new_code_cell(src))
    assert out == f"def f(x):\n    y = x * 2\n    {RAISE_STUB}\n\nprint('after')"
    compile(out, "lesson", "exec")


def test_nested_indentation_and_several_regions():
    src = ("class K:\n"
           "    def a(self):\n"
           "        for i in range(3):\n"
           "            ### BEGIN SOLUTION\n"
           "            pass\n"
           "            ### END SOLUTION\n"
           "    def b(self):\n"
           "        ### BEGIN SOLUTION\n"
           "        return 2\n"
           "        ### END SOLUTION\n")
    (out,) = lesson_sources(new_code_cell(src))
    assert out.splitlines() == [
        "class K:",
        "    def a(self):",
        "        for i in range(3):",
        f"            {RAISE_STUB}",
        "    def b(self):",
        f"        {RAISE_STUB}",
    ]
    assert "pass" not in out and "return 2" not in out
    namespace = {}
    exec(compile(out, "lesson", "exec"), namespace)  # defining the class runs fine
    with pytest.raises(NotImplementedError):
        namespace["K"]().b()


def test_top_level_stub_assignment_runs_on():
    src = ("### BEGIN SOLUTION\nintensity = 2 / 8\n### END SOLUTION\n"
           "# STUB: intensity = None  # your answer here\ncheck = 1")
    (out,) = lesson_sources(new_code_cell(src))
    assert out == "intensity = None  # your answer here\ncheck = 1"
    namespace = {}
    exec(out, namespace)
    assert namespace["intensity"] is None


def test_multi_line_stub_is_reindented():
    src = ("if True:\n"
           "    ### BEGIN SOLUTION\n"
           "    def f():\n"
           "        return 1\n"
           "    ### END SOLUTION\n"
           "    # STUB: def f():\n"
           "    # STUB:     return None")
    (out,) = lesson_sources(new_code_cell(src))
    assert out == "if True:\n    def f():\n        return None"


def test_top_level_region_without_stub_is_refused_unless_tagged():
    cell = new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION")
    with pytest.raises(ValueError, match=r"t\.ipynb, cell 0.*STUB"):
        lesson_sources(cell)
    cell.metadata["tags"] = ["raises-exception"]
    (out,) = lesson_sources(cell)
    assert out == RAISE_STUB


@pytest.mark.parametrize("src, words", [
    ("### BEGIN SOLUTION\nx = 1", "has no"),
    ("x = 1\n### END SOLUTION", "without"),
    ("def f():\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n    ### END SOLUTION", "inside"),
    ("# STUB: x = None", "directly after"),
    ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n# STUB: x = (", "not valid Python"),
])
def test_unbalanced_code_markers_name_the_notebook_and_cell(src, words):
    nb = nb_of(new_markdown_cell("intro"), new_code_cell(src))
    with pytest.raises(ValueError, match=words) as info:
        make_lesson(nb, name="solutions/09-x.ipynb")
    assert "solutions/09-x.ipynb, cell 1" in str(info.value)


# --- markdown, tags, outputs, metadata --------------------------------------------------------


def test_markdown_regions_removed_and_empty_cells_dropped():
    md = "Predict first.\n\n<!-- BEGIN SOLUTION -->\nThe answer is 8.\n<!-- END SOLUTION -->\n\nThen measure."
    inline = "A <!-- BEGIN SOLUTION -->secret <!-- END SOLUTION -->word."
    only = "<!-- BEGIN SOLUTION -->\nAll of it.\n<!-- END SOLUTION -->"
    untouched = "\nKeep *this* as it is.\n\n\n"
    out = lesson_sources(new_markdown_cell(md), new_markdown_cell(inline), new_markdown_cell(only),
                         new_markdown_cell(untouched))
    assert out == ["Predict first.\n\nThen measure.", "A word.", untouched]


@pytest.mark.parametrize("md", ["<!-- BEGIN SOLUTION -->\nx", "x\n<!-- END SOLUTION -->",
                                "<!-- BEGIN SOLUTION --><!-- BEGIN SOLUTION --><!-- END SOLUTION -->"])
def test_unbalanced_markdown_markers(md):
    with pytest.raises(ValueError, match=r"t\.ipynb, cell 0"):
        lesson_sources(new_markdown_cell(md))


def test_tagged_cells_dropped_outputs_cleared_metadata_minimal():
    run = new_code_cell("print(1)", execution_count=3, outputs=[new_output("stream", text="1\n")],
                        metadata={"tags": ["hint", "solution-free"], "scrolled": True, "collapsed": False})
    nb = nb_of(new_code_cell("secret()", metadata={"tags": ["solution"]}),
               new_markdown_cell("notes", metadata={"tags": ["instructor"]}),
               run,
               new_code_cell("x = 2", metadata={"tags": ["solution", "hint"]}))
    nb.metadata = {"kernelspec": notebooks.DEFAULT_KERNELSPEC, "widgets": {"state": 1},
                   "language_info": {"name": "python", "version": "3.12.1"}}
    lesson = make_lesson(nb)
    nbformat.validate(lesson)
    assert [c.source for c in lesson.cells] == ["print(1)"]
    (cell,) = lesson.cells
    assert cell.outputs == [] and cell.execution_count is None
    assert cell.metadata == {"tags": ["hint", "solution-free"]}
    assert cell.id == "c2"
    assert lesson.metadata == {"kernelspec": notebooks.DEFAULT_KERNELSPEC, "language_info": {"name": "python"}}
    assert nb.cells[2].outputs, "make_lesson must not change the solution"


# --- files -------------------------------------------------------------------------------------


@pytest.fixture
def course(tmp_path):
    shutil.copytree(FIXTURES / "solutions", tmp_path / "solutions")
    return tmp_path


def test_release_round_trip_and_check(course):
    sol, les = course / "solutions", course / "lessons"
    assert release(sol, les, check=True) == [str(les / "01-demo.ipynb")]  # missing
    assert not les.exists(), "check must write nothing"

    assert release(sol, les) == [str(les / "01-demo.ipynb")]
    text = (les / "01-demo.ipynb").read_text()
    assert text.endswith("}\n") and "bytes_per_element = 4 + 4" not in text and "instructor sees" not in text
    assert release(sol, les, check=True) == []
    assert release(sol, les) == []  # idempotent: same bytes
    assert (les / "01-demo.ipynb").read_text() == text

    # the solution changes: the lesson is stale
    nb = nbformat.read(sol / "01-demo.ipynb", as_version=4)
    nb.cells[1].source = "import math, os"
    nbformat.write(nb, sol / "01-demo.ipynb")
    assert release(sol, les, check=True) == [str(les / "01-demo.ipynb")]
    # a hand edit to a lesson is stale too
    release(sol, les)
    (les / "01-demo.ipynb").write_text(text.replace("import math", "import maths"))
    assert release(sol, les, check=True) == [str(les / "01-demo.ipynb")]
    release(sol, les)

    # a lesson without a solution is extra, and removed
    (les / "99-orphan.ipynb").write_text(text)
    (les / "README.md").write_text("not a lesson")
    assert release(sol, les, check=True) == [str(les / "99-orphan.ipynb")]
    assert release(sol, les) == [str(les / "99-orphan.ipynb")]
    assert sorted(p.name for p in les.iterdir()) == ["01-demo.ipynb", "README.md"]


def test_release_refuses_a_broken_solution(course):
    bad = nb_of(new_code_cell("### BEGIN SOLUTION\nx = 1"))
    nbformat.write(bad, course / "solutions" / "02-bad.ipynb")
    with pytest.raises(ValueError, match="02-bad.ipynb, cell 0"):
        release(course / "solutions", course / "lessons")


def test_strip_and_has_outputs(tmp_path):
    path = tmp_path / "n.ipynb"
    nb = nb_of(new_code_cell("1", execution_count=1, outputs=[new_output("execute_result", {"text/plain": "1"},
                                                                          execution_count=1)]))
    nbformat.write(nb, path)
    assert notebooks.has_outputs(path)
    assert notebooks.strip_outputs(path) is True
    assert not notebooks.has_outputs(path)
    assert notebooks.strip_outputs(path) is False
    stripped = nbformat.read(path, as_version=4)
    assert stripped.cells[0].source == "1" and stripped.cells[0].outputs == []

    nb = nb_of(new_code_cell("1"))
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
    nbformat.write(nb, path)
    assert notebooks.has_outputs(path)


def test_lesson_executes_with_stubs(course):
    release(course / "solutions", course / "lessons")
    nb = notebooks.execute(course / "lessons" / "01-demo.ipynb", timeout=120)
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert printed == "None Exercise: write your solution here\n"
    solved = notebooks.execute(course / "solutions" / "01-demo.ipynb", timeout=120)
    printed = "".join(o.get("text", "") for c in solved.cells if c.cell_type == "code" for o in c.outputs)
    assert "8 [2, 3]" in printed
