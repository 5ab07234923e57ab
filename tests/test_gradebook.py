"""The instructor's gradebook: real notebooks, executed in real kernels, graded by the real grader."""

import csv
import json
import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from gpuprinciples import cli, runtime
from gpuprinciples.grader.grading import check
from gpuprinciples.instructor import gradebook

IMPORTS = "import os\nimport torch, triton\nimport triton.language as tl\nfrom gpuprinciples import check"
KERNEL = '''
@triton.jit
def add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    z = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, z, x.numel(), BLOCK=1024)
    return z
'''
NO_KERNEL = "def vector_add(x, y):\n    return x + y\n"


def write_notebook(path: Path, *cells: str) -> None:
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


@pytest.fixture
def submissions(tmp_path):
    root = tmp_path / "submissions"
    write_notebook(root / "alice" / "01.ipynb", IMPORTS, "open('scratch.txt', 'w').write('mine')",
                   'check("factory.intensity", 1 / 12)', KERNEL + '\ncheck("fusion.vector_add", vector_add)',
                   'check("factory.eager_bytes", 16)')
    write_notebook(root / "bob" / "01.ipynb", IMPORTS, 'check("factory.intensity", 0.5)',
                   NO_KERNEL + '\ncheck("fusion.vector_add", vector_add)',
                   '1 / 0\ncheck("factory.eager_bytes", 16)')
    write_notebook(root / "bob" / "02.ipynb", 'print("nothing graded here")')
    return root


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_gradebook_grades_a_class_and_leaves_submissions_untouched(submissions, tmp_path, capsys, monkeypatch):
    before = snapshot(submissions)
    out = tmp_path / "out"
    monkeypatch.setenv("GPUPRINCIPLES_CACHE_DIR", str(tmp_path / "instructor-cache"))
    assert cli.main(["gradebook", str(submissions), "--out", str(out), "--timeout", "300"]) == 0
    assert snapshot(submissions) == before  # same files, same bytes, same mtimes (scratch.txt went to the copy)
    assert not (tmp_path / "instructor-cache" / "hints.json").exists()  # alice's passes unlock nobody's solutions

    rows = {(r["learner"], r["exercise"]): r for r in csv.DictReader(open(out / "gradebook.csv", encoding="utf-8"))}
    assert rows[("alice", "factory.intensity")]["status"] == "passed"
    assert rows[("alice", "fusion.vector_add")]["status"] == "passed"
    alice_add = rows[("alice", "fusion.vector_add")]
    if runtime.HAS_CUDA:  # timed on the GPU, ranked by time; no bytes are counted there
        assert float(alice_add["time_ms"]) > 0 and "×" in alice_add["speedups"] and alice_add["bytes_ratio"] == ""
    else:
        assert float(alice_add["bytes_ratio"]) <= 1.1  # counted under the interpreter
    assert rows[("alice", "factory.eager_bytes")]["status"] == "passed"
    assert rows[("bob", "factory.intensity")]["status"] == "failed"
    bob_add = rows[("bob", "fusion.vector_add")]
    assert bob_add["status"] == "failed" and "no Triton kernel was launched" in bob_add["reasons"]
    assert rows[("bob", "factory.eager_bytes")]["status"] == "not checked"  # the cell raised before its check

    page = (out / "gradebook.html").read_text(encoding="utf-8")
    assert "ZeroDivisionError" in page and "no Triton kernel was launched" in page
    # the leaderboard ranks by GPU time, else (a CPU) by counted bytes
    assert ("median time on the GPU (ms)" if runtime.HAS_CUDA else "bytes moved / minimum") in page
    runs = json.loads((out / "gradebook.json").read_text())
    assert {(r["learner"], r["notebook"], r["status"]) for r in runs} == {
        ("alice", "01.ipynb", "ok"), ("bob", "01.ipynb", "cell errors"), ("bob", "02.ipynb", "ok")}
    executed = nbformat.read(str(out / "executed" / "alice" / "01.ipynb"), as_version=4)
    assert any("gp-report" in str(o) for c in executed.cells for o in c.get("outputs", []))


def test_one_worker_per_device_each_with_its_own_cuda_visible_devices(tmp_path):
    root = tmp_path / "submissions"
    for learner in ("ann", "ben"):
        write_notebook(root / learner / "a.ipynb", 'import os\nprint("CVD=" + os.environ["CUDA_VISIBLE_DEVICES"])',
                       'from gpuprinciples import check\ncheck("factory.intensity", 1 / 12)')
    runs = gradebook.run_all(root, devices=["0", "1"], executed_dir=tmp_path / "executed", timeout=120)
    assert [r.learner for r in runs] == ["ann", "ben"]
    assert {r.device for r in runs} == {"0", "1"} and all(r.status == "ok" for r in runs)
    for run in runs:
        nb = nbformat.read(str(tmp_path / "executed" / run.learner / "a.ipynb"), as_version=4)
        assert f"CVD={run.device}" in nb.cells[0].outputs[0]["text"]
        assert [r["exercise"] for r in run.reports] == ["factory.intensity"] and run.reports[0]["passed"]


def test_check_appends_one_json_line_per_report_when_asked(tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("GPUPRINCIPLES_REPORT_LOG", str(log))
    monkeypatch.setenv("GPUPRINCIPLES_HINTS", "off")
    check("factory.intensity", 1 / 12, show=False)
    check("factory.intensity", 7, show=False)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["exercise"], r["passed"]) for r in lines] == [("factory.intensity", True), ("factory.intensity", False)]
    monkeypatch.delenv("GPUPRINCIPLES_REPORT_LOG")
    check("factory.intensity", 1 / 12, show=False)
    assert len(log.read_text().splitlines()) == 2


def test_leaderboard_prefers_gpu_time():
    rows = [gradebook.Row(who, "x", status, "gpu", time_ms=ms)
            for who, status, ms in [("a", "passed", 2.0), ("b", "passed", 1.0), ("c", "failed", 0.5)]]
    what, board = gradebook.leaderboard(rows, "x")
    assert "GPU" in what and [r.learner for r in board] == ["b", "a"]


def test_usage_errors(tmp_path, capsys):
    assert cli.main(["gradebook", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "empty" / "learner").mkdir(parents=True)
    (tmp_path / "empty" / "learner" / "notes.txt").write_text("no notebook")
    capsys.readouterr()
    assert cli.main(["gradebook", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    assert "learner/notes.txt: not a notebook" in capsys.readouterr().err  # what it found instead, and why
    assert cli.main(["gradebook", str(tmp_path / "empty"), "--out", str(tmp_path / "o"), "--jobs", "0"]) == 2


def test_exercises_listing_says_what_a_cpu_grades(capsys):
    assert cli.main(["exercises", "--markdown"]) == 0
    table = capsys.readouterr().out
    assert "| `fusion.vector_add` | function |" in table and "moves at most 1.1 × the minimum bytes" in table
    assert os.linesep.join(table.splitlines()[:2]).startswith("| exercise |")
    assert "a larger step timed: speedup over the fp32 step" in table  # judged in compare, declared as data


def test_the_workshop_guide_shows_the_table_the_registry_makes(tmp_path):
    guide = Path(__file__).resolve().parent.parent / "docs" / "workshop.md"
    copy = tmp_path / "workshop.md"
    copy.write_text(guide.read_text().replace("| `fusion.vector_add` |", "| `fusion.pasted_by_hand` |"))
    assert cli.main(["exercises", "--write", str(copy)]) == 0
    assert copy.read_text() == guide.read_text(), "regenerate it: gpuprinciples exercises --write docs/workshop.md"


def test_a_page_without_the_markers_is_refused_and_left_alone(tmp_path, capsys):
    page = tmp_path / "notes.md"
    page.write_text("# notes\n")
    assert cli.main(["exercises", "--write", str(page)]) == 2
    assert page.read_text() == "# notes\n" and gradebook.TABLE_BEGIN in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# Layouts, files left out, the page, --jobs
# ---------------------------------------------------------------------------------------------

from gpuprinciples.instructor import intake  # noqa: E402

PASSING = 'from gpuprinciples import check\ncheck("factory.intensity", 1 / 12)'
FAILING = 'from gpuprinciples import check\ncheck("factory.intensity", 0.5)'


def _found(root):
    found = intake.find(root)
    try:
        return found.layout, sorted((n.learner, n.label) for n in found.notebooks), dict(found.skipped)
    finally:
        found.close()


def test_nbgrader_layout_and_every_skipped_file_with_why(tmp_path):
    root = tmp_path / "course"
    write_notebook(root / "submitted" / "alice" / "ps1" / "01.ipynb", PASSING)
    write_notebook(root / "submitted" / "alice" / "ps2" / "01.ipynb", PASSING)  # same name, other assignment
    write_notebook(root / "submitted" / "bob" / "ps1" / "01.ipynb", FAILING)
    write_notebook(root / "submitted" / "bob" / "ps1" / ".ipynb_checkpoints" / "01-checkpoint.ipynb", PASSING)
    (root / "submitted" / "bob" / "ps1" / "timestamp.txt").write_text("2026-12-04 10:00:00")
    (root / "submitted" / "bob" / "ps1" / "broken.ipynb").write_text("{not json")
    layout, notebooks, skipped = _found(root)
    assert layout.startswith("nbgrader")
    assert notebooks == [("alice", "ps1/01.ipynb"), ("alice", "ps2/01.ipynb"), ("bob", "ps1/01.ipynb")]
    assert "Jupyter checkpoint" in skipped["bob/ps1/.ipynb_checkpoints/01-checkpoint.ipynb"]
    assert "not a notebook (.ipynb)" in skipped["bob/ps1/timestamp.txt"]
    assert "not a notebook Jupyter can open" in skipped["bob/ps1/broken.ipynb"]
    assert _found(root / "submitted")[1] == notebooks  # the submitted/ folder itself, too


def test_a_folder_of_learner_lesson_files(tmp_path):
    root = tmp_path / "flat"
    write_notebook(root / "alice_01-factory.ipynb", PASSING)
    write_notebook(root / "bob_01-factory.ipynb", FAILING)
    write_notebook(root / "untitled.ipynb", PASSING)
    layout, notebooks, skipped = _found(root)
    assert layout.startswith("one folder of <learner>_<lesson>.ipynb")
    assert notebooks == [("alice", "alice_01-factory.ipynb"), ("bob", "bob_01-factory.ipynb")]
    assert "no learner in its name" in skipped["untitled.ipynb"]


def test_a_zip_from_an_lms(tmp_path):
    import zipfile
    staged = tmp_path / "staged"
    write_notebook(staged / "alice_1_assignsubmission_file_" / "01.ipynb", PASSING)  # Moodle's folder names
    write_notebook(staged / "bob_2_assignsubmission_file_" / "01.ipynb", FAILING)
    archive = tmp_path / "lesson01.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in staged.rglob("*.ipynb"):
            z.write(path, "Lesson 01 (assignment)/" + str(path.relative_to(staged)))
        z.writestr("../escape.ipynb", "{}")
        z.writestr("__MACOSX/._01.ipynb", "junk")
    layout, notebooks, skipped = _found(archive)
    assert layout.startswith("zip")
    assert notebooks == [("alice", "01.ipynb"), ("bob", "01.ipynb")]
    assert "outside the zip" in skipped["lesson01.zip:../escape.ipynb"]
    assert any("__MACOSX" in f for f in skipped)
    bad = tmp_path / "bad.zip"
    bad.write_text("not a zip")
    assert "not a zip file that can be read" in _found(bad)[2][str(bad)]


def test_the_page_shortens_long_reasons_lists_skipped_files_and_plots_the_class():
    long_reason = "the Triton kernel read 0 B of the 4 B of input " + "and so on " * 60
    rows = [gradebook.Row("ann", "fusion.cos_cos", "failed", "cpu", "01.ipynb", reasons=long_reason),
            gradebook.Row("ben", "fusion.cos_cos", "passed", "gpu", "01.ipynb", time_ms=1.0,
                          speedups="eager 1.93× [1.85–2.01]; torch.compile 1.02× [0.99–1.05]"),
            gradebook.Row("cy", "fusion.cos_cos", "passed", "gpu", "01.ipynb", time_ms=1.2,
                          speedups="eager 1.50× [1.40–1.60]")]
    runs = [gradebook.Run(r.learner, "01.ipynb") for r in rows]
    page = gradebook.render_html(runs, rows, [("bob/notes.txt", "not a notebook (.ipynb)")])
    assert "<details><summary>the Triton kernel read 0 B" in page and long_reason.strip() in page
    assert page.count(long_reason.strip()) == 1  # the full text once, behind the click
    assert "bob/notes.txt" in page and "not a notebook (.ipynb)" in page and "Files left out (1)" in page
    assert "<svg" in page and "speedup over the first baseline" in page
    assert "FAILED" in page and "PASSED" in page and "✅" not in page
    evil = gradebook.Row("<script>alert(1)</script>", "x", "failed", reasons="<b>")
    page = gradebook.render_html([], [evil])
    assert "<script>alert" not in page and "&lt;script&gt;" in page  # escaped by the template


def test_jobs_runs_notebooks_in_parallel_processes_on_a_cpu(tmp_path, capsys, monkeypatch):
    from gpuprinciples.machine import runtime
    if runtime.HAS_CUDA:
        pytest.skip("the CPU path: with a GPU, workers are one per GPU (test above)")
    root = tmp_path / "class"
    write_notebook(root / "ann_01.ipynb", "import os\nprint('PID', os.getppid())", PASSING)
    write_notebook(root / "ben_01.ipynb", "import os\nprint('PID', os.getppid())", FAILING)
    (root / "notes.txt").write_text("not a notebook")
    out = tmp_path / "out"
    monkeypatch.setenv("GPUPRINCIPLES_CACHE_DIR", str(tmp_path / "cache"))
    assert cli.main(["gradebook", str(root), "--out", str(out), "--jobs", "2", "--timeout", "300"]) == 0
    captured = capsys.readouterr()
    assert "2 notebooks of 2 learners" in captured.out and "left out notes.txt: not a notebook" in captured.out
    assert "notebooks: 100%" in captured.err  # the progress bar
    rows = {(r["learner"], r["exercise"]): r["status"] for r in csv.DictReader(open(out / "gradebook.csv"))}
    assert rows == {("ann", "factory.intensity"): "passed", ("ben", "factory.intensity"): "failed"}
    parents = {nbformat.read(str(out / "executed" / who / f"{who}_01.ipynb"), as_version=4).cells[0].outputs[0]["text"]
               for who in ("ann", "ben")}
    assert len(parents) == 2  # each notebook's kernel was started by a worker process of its own
    assert "notes.txt" in (out / "skipped.csv").read_text()
