"""Solutions -> lessons, and running notebooks.

`solutions/NN-name.ipynb` is the one source of a lesson; `release()` writes the learner's copy to
`lessons/NN-name.ipynb` with `make_lesson()`. The markers (nbgrader's, read by our own small code):

Code cells
    Every region from a line `### BEGIN SOLUTION` to a line `### END SOLUTION` (both included)
    is replaced by a stub at the indentation of the BEGIN line:

    * by default  `raise NotImplementedError("Exercise: write your solution here")`, so a stub inside
      a function body stays inside it and `check()` reports "not attempted yet";
    * if the lines directly after END SOLUTION are `# STUB: <statement>` lines, the stub is those
      statements instead (the `# STUB: ` prefix removed, re-indented to the BEGIN line). This is for
      value exercises answered at top level, where raising would stop the lesson::

          ### BEGIN SOLUTION
          intensity = 2 / 8
          ### END SOLUTION
          # STUB: intensity = None  # your answer here

      becomes `intensity = None  # your answer here`, and `check()` says "not attempted yet".

    A region at indentation 0 must have a STUB (the lesson must execute top to bottom), unless
    the cell is tagged `raises-exception` (nbclient and nbval then carry on past the error).

Markdown cells
    Text from `<!-- BEGIN SOLUTION -->` to `<!-- END SOLUTION -->` is removed; a markdown cell
    left empty is dropped.

Whole cells
    Cells tagged `solution` or `instructor` are dropped.

Everything
    Outputs and execution counts are cleared; cell metadata keeps only `tags` (without `solution`
    and `instructor`), `jupyter`, `editable` and `deletable`; notebook metadata keeps only the
    kernelspec and the language name. Cell ids are kept from the solution, so a lesson's bytes
    depend on its solution alone. A marker out of balance (or a STUB line out of place) raises
    ValueError naming the notebook and the cell.
"""

from __future__ import annotations

import copy
import hashlib
import re
import textwrap
from pathlib import Path

import nbformat

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB_PREFIX = "# STUB:"
RAISE_STUB = 'raise NotImplementedError("Exercise: write your solution here")'
MD_BEGIN = re.compile(r"<!--\s*BEGIN SOLUTION\s*-->")
MD_END = re.compile(r"<!--\s*END SOLUTION\s*-->")
DROP_TAGS = frozenset({"solution", "instructor"})
KEEP_CELL_METADATA = ("tags", "jupyter", "editable", "deletable")
DEFAULT_KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


# ---------------------------------------------------------------------------------------------
# One notebook
# ---------------------------------------------------------------------------------------------


def make_lesson(nb, name: str = "<notebook>"):
    """The learner's notebook made from a solution notebook (a new node; `nb` is unchanged)."""
    lesson = nbformat.v4.new_notebook()
    lesson.metadata = _notebook_metadata(nb.get("metadata", {}))
    for index, cell in enumerate(nb.cells):
        tags = set(cell.get("metadata", {}).get("tags", []))
        if tags & DROP_TAGS:
            continue
        where = f"{name}, cell {index}"
        source = _source(cell)
        if cell.cell_type == "code":
            source = _code_lesson(source, where, tags)
        elif cell.cell_type == "markdown":
            source = _markdown_lesson(source, where)
            if not source.strip():
                continue
        new = _new_cell(cell, source, index)
        lesson.cells.append(new)
    return lesson


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _code_lesson(source: str, where: str, tags: set) -> str:
    lines = source.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = line.strip()
        if marker == END:
            raise ValueError(f"{where}: '{END}' on line {i + 1} without a '{BEGIN}' before it")
        if marker.startswith(STUB_PREFIX):
            raise ValueError(f"{where}: '{STUB_PREFIX}' on line {i + 1} must come directly after '{END}'")
        if marker != BEGIN:
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        j = i + 1
        while j < len(lines) and lines[j].strip() != END:
            if lines[j].strip() == BEGIN:
                raise ValueError(f"{where}: '{BEGIN}' on line {j + 1} inside the region begun on line {i + 1}")
            j += 1
        if j == len(lines):
            raise ValueError(f"{where}: '{BEGIN}' on line {i + 1} has no '{END}'")
        stub, j = _stub_after(lines, j + 1)
        if stub is None:
            if not indent and "raises-exception" not in tags:
                raise ValueError(
                    f"{where}: the solution region on line {i + 1} is at top level, so its default stub "
                    f"would raise and stop the lesson; add a '{STUB_PREFIX} <statement>' line after "
                    f"'{END}' (for example '{STUB_PREFIX} answer = None'), or tag the cell raises-exception")
            stub = RAISE_STUB
        else:
            try:
                compile(stub, where, "exec")
            except SyntaxError as exc:
                raise ValueError(f"{where}: the STUB after line {i + 1} is not valid Python: {exc.msg}") from None
        out.extend(indent + s if s else s for s in stub.split("\n"))
        i = j
    return "\n".join(out)


def _stub_after(lines: list[str], j: int) -> tuple[str | None, int]:
    """The `# STUB:` lines starting at line j, joined (None when there are none), and the next line."""
    stub = []
    while j < len(lines) and lines[j].strip().startswith(STUB_PREFIX):
        text = lines[j].split(STUB_PREFIX, 1)[1]
        stub.append(text[1:] if text.startswith(" ") else text)
        j += 1
    return (textwrap.dedent("\n".join(stub)) if stub else None), j


def _markdown_lesson(source: str, where: str) -> str:
    if not (MD_BEGIN.search(source) or MD_END.search(source)):
        return source
    out, pos = [], 0
    while True:
        begin = MD_BEGIN.search(source, pos)
        end = MD_END.search(source, pos)
        if end and (not begin or end.start() < begin.start()):
            raise ValueError(f"{where}: '<!-- END SOLUTION -->' without a '<!-- BEGIN SOLUTION -->' before it")
        if not begin:
            out.append(source[pos:])
            break
        nested = MD_BEGIN.search(source, begin.end())
        if not end:
            raise ValueError(f"{where}: '<!-- BEGIN SOLUTION -->' has no '<!-- END SOLUTION -->'")
        if nested and nested.start() < end.start():
            raise ValueError(f"{where}: '<!-- BEGIN SOLUTION -->' inside another solution region")
        kept = source[pos:begin.start()]
        stop = end.end()
        # a region on lines of its own takes its line break with it
        if (not kept or kept.endswith("\n")) and source[stop:stop + 1] == "\n":
            stop += 1
        out.append(kept)
        pos = stop
    text = "".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def _new_cell(cell, source: str, index: int):
    if cell.cell_type == "code":
        new = nbformat.v4.new_code_cell(source)
    elif cell.cell_type == "markdown":
        new = nbformat.v4.new_markdown_cell(source)
        if "attachments" in cell:
            new.attachments = copy.deepcopy(cell.attachments)
    else:
        new = nbformat.v4.new_raw_cell(source)
    meta = cell.get("metadata", {})
    new.metadata = {k: copy.deepcopy(meta[k]) for k in KEEP_CELL_METADATA if k in meta}
    if "tags" in new.metadata:
        new.metadata["tags"] = [t for t in new.metadata["tags"] if t not in DROP_TAGS]
        if not new.metadata["tags"]:
            del new.metadata["tags"]
    new.id = cell.get("id") or hashlib.sha1(f"{index}:{source}".encode()).hexdigest()[:8]
    return new


def _notebook_metadata(meta) -> dict:
    kernelspec = meta.get("kernelspec") or DEFAULT_KERNELSPEC
    return {"kernelspec": dict(kernelspec), "language_info": {"name": "python"}}


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def dumps(nb) -> str:
    """Deterministic bytes: sorted keys, indent 1, a trailing newline (what Jupyter writes too)."""
    return nbformat.writes(nb, version=4, indent=1) + "\n"


def read(path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def release(solutions="solutions", lessons="lessons", check: bool = False) -> list[str]:
    """Write lessons/NAME.ipynb for every solutions/NAME.ipynb and remove lessons without a solution.

    Returns the lesson files that changed (were written or removed). With `check=True` nothing is
    written: the list is then of the lesson files that are stale, missing or extra.
    """
    solutions, lessons = Path(solutions), Path(lessons)
    wanted = {}
    for src in sorted(solutions.glob("*.ipynb")):
        wanted[lessons / src.name] = dumps(make_lesson(read(src), name=str(src)))
    changed = []
    for path, text in wanted.items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            changed.append(str(path))
            if not check:
                lessons.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8", newline="\n")
    for path in sorted(lessons.glob("*.ipynb")):
        if path not in wanted:
            changed.append(str(path))
            if not check:
                path.unlink()
    return changed


def has_outputs(path) -> bool:
    """Whether a notebook file carries outputs, execution counts or saved widget state."""
    nb = read(path)
    return "widgets" in nb.metadata or any(
        cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None) for cell in nb.cells)


def strip_outputs(path) -> bool:
    """Remove outputs, execution counts and saved widget state in place; return whether it changed."""
    path = Path(path)
    before = path.read_text(encoding="utf-8")
    nb = nbformat.reads(before, as_version=4)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
    after = dumps(nb)
    if after != before:
        path.write_text(after, encoding="utf-8", newline="\n")
    return after != before


def execute(path, timeout: int = 600, allow_errors: bool = False, cwd=None, nb=None):
    """Run a notebook top to bottom in a fresh kernel and return the executed node (file unchanged).

    A cell that raises stops the run with nbclient's CellExecutionError, unless `allow_errors` (or
    the cell is tagged `raises-exception`). `cwd` defaults to the notebook's folder. Pass `nb` (the
    file, read) to keep what ran so far when the run itself fails.
    """
    from nbclient import NotebookClient

    path = Path(path)
    nb = read(path) if nb is None else nb
    kernel = nb.metadata.get("kernelspec", {}).get("name", "python3")
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel, allow_errors=allow_errors,
                            resources={"metadata": {"path": str(cwd or path.parent)}})
    client.execute()
    return nb
