"""The instructor's gradebook: real notebooks, executed in real kernels, graded by the real grader."""

import csv
import json
import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from gpuprinciples import cli, gradebook
from gpuprinciples.grading import check

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
    assert float(rows[("alice", "fusion.vector_add")]["bytes_ratio"]) <= 1.1  # counted under the interpreter
    assert rows[("alice", "factory.eager_bytes")]["status"] == "passed"
    assert rows[("bob", "factory.intensity")]["status"] == "failed"
    bob_add = rows[("bob", "fusion.vector_add")]
    assert bob_add["status"] == "failed" and "no Triton kernel was launched" in bob_add["reasons"]
    assert rows[("bob", "factory.eager_bytes")]["status"] == "not checked"  # the cell raised before its check

    page = (out / "gradebook.html").read_text(encoding="utf-8")
    assert "ZeroDivisionError" in page and "no Triton kernel was launched" in page
    assert "bytes moved / minimum" in page  # the leaderboard on a CPU ranks by counted bytes
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
    assert cli.main(["gradebook", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2


def test_exercises_listing_says_what_a_cpu_grades(capsys):
    assert cli.main(["exercises", "--markdown"]) == 0
    table = capsys.readouterr().out
    assert "| `fusion.vector_add` | function |" in table and "moves at most 1.1 × the minimum bytes" in table
    assert os.linesep.join(table.splitlines()[:2]).startswith("| exercise |")
    assert "a larger step timed: speedup over the fp32 step" in table  # judged in compare, declared as data


def test_the_workshop_guide_shows_the_table_the_registry_makes():
    guide = (Path(__file__).resolve().parent.parent / "docs" / "workshop.md").read_text()
    assert gradebook.exercise_table() in guide, "regenerate it: gpuprinciples exercises --markdown"
