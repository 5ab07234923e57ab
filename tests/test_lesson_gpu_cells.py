"""The lessons' GPU-only cells, which CI's CPU never runs, against the package functions they call.

Lesson 05's GPU cell once read keys the package no longer returned (the grader had moved its statistics out of
the measurement), and only a GPU run of the notebook showed it. So: the lessons call the package's public names
only, and each cell that prints a GPU measurement runs here with `runtime.HAS_CUDA` on and the CUDA measurement
replaced by rounds timed on this CPU, in the raw form the grader judges.
"""

import json
import re
import textwrap
from pathlib import Path

import pytest
import torch

from gpuprinciples.course.exercises import amp, checkpoint
from gpuprinciples.course.kit import Case
from gpuprinciples.machine import runtime
from gpuprinciples.measure import timing

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
# `from gpuprinciples[.x] import a, b as c` and `import gpuprinciples.x as y`: the names a notebook binds
IMPORTED = re.compile(r"^\s*(?:from gpuprinciples[\w.]* import (.+)|import gpuprinciples[\w.]* as (\w+))", re.M)


def code_cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def package_names(source: str) -> set[str]:
    names = set()
    for listed, alias in IMPORTED.findall(source):
        names |= {alias} if alias else {part.split(" as ")[-1].strip(" ()") for part in listed.split(",")}
    return names


def private_uses(source: str) -> list[str]:
    """`name._private` where `name` is bound from the package."""
    names = package_names(source)
    return sorted({m.group(0) for m in re.finditer(r"\b(\w+)\._\w+", source) if m.group(1) in names})


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_lessons_call_only_the_packages_public_names(path):
    private = private_uses("\n".join(code_cells(path)))
    assert not private, f"{path.name} reaches into the package's private names: {private}"


def test_a_private_use_is_caught():
    source = ("from gpuprinciples import check, runtime as rt\n"
              "from gpuprinciples.course.exercises import checkpoint as ck\n"
              "ck._measure_on_gpu(f, r)\nrt._x\ntorch._foreach_add(x)\ncheck('a')")
    assert package_names(source) == {"check", "rt", "ck"}
    assert private_uses(source) == ["ck._measure_on_gpu", "rt._x"]


def gpu_branch(lesson: str, call: str) -> str:
    """The `if runtime.HAS_CUDA:` block around `call` in the solution notebook, dedented to run on its own."""
    cells = [c for c in code_cells(ROOT / "solutions" / f"{lesson}.ipynb") if call in c]
    assert len(cells) == 1, f"{lesson}: {len(cells)} code cells call {call}, where one should"
    (cell,) = cells
    lines = cell.splitlines()
    start = max(i for i, line in enumerate(lines[:[call in x for x in lines].index(True)])
                if line.strip() == "if runtime.HAS_CUDA:")
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) <= indent), len(lines))
    return textwrap.dedent("\n".join(lines[start + 1:end]))


def cpu_rounds(a: str, b: str) -> list[dict]:
    """Raw rounds of two real calls timed on this CPU, in the form the GPU measurement returns them."""
    x = torch.randn(256, 256)
    comparison = timing.compare({a: lambda: x @ x, b: lambda: (x @ x, x @ x)}, device="cpu", budget_s=0.2)
    return [dict(r) for r in comparison.rounds]


TIMED = Case("timed", (), {"timed": True})


def test_lesson_05s_gpu_cell_prints_what_measure_on_gpu_returns(monkeypatch, capsys):
    raw = {"plain_peak_bytes": 3 * 2**30, "yours_peak_bytes": 2**30, "rounds": cpu_rounds("plain", "yours")}
    assert not any("can read" in r for r in checkpoint._compare(raw, None, TIMED))  # the form the grader reads
    monkeypatch.setattr(checkpoint, "_measure_on_gpu", lambda fn, recipe: raw)
    monkeypatch.setattr(runtime, "HAS_CUDA", True)
    exec(gpu_branch("05-activation-checkpointing", "ck.measure_on_gpu("), {"ck": checkpoint, "per_block": None})
    out = capsys.readouterr().out
    assert "plain 3.00 GiB, every block checkpointed 1.00 GiB" in out
    ms, (slow, low, high) = checkpoint.slowdown(raw).values()
    assert f"plain {ms['plain']:.1f} ms, checkpointed {ms['yours']:.1f} ms: {slow:.2f}x the plain step's " \
           f"(95% {low:.2f}-{high:.2f})" in out, out


def test_lesson_04s_gpu_cell_prints_what_time_on_gpu_returns(monkeypatch, capsys):
    raw = {"rounds": cpu_rounds("yours", "fp32")}
    assert not any("can read" in r for r in amp._compare(raw, None, TIMED))
    monkeypatch.setattr(amp, "_time_on_gpu", lambda fn, recipe: raw)
    monkeypatch.setattr(runtime, "HAS_CUDA", True)
    exec(gpu_branch("04-mixed-precision", "amp.time_on_gpu("), {"amp": amp, "amp_step": None, "recipe": {}})
    ms, (ratio, low, high) = amp.speed(raw).values()
    out = capsys.readouterr().out
    assert f"fp32 {ms['fp32']:.1f} ms, yours {ms['yours']:.1f} ms: {ratio:.2f}x as fast (95% {low:.2f}-{high:.2f})" \
        in out, out
