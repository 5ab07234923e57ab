"""One verdict everywhere (issue 27): what a GPU refuses, a CPU refuses; what a CPU fails, a GPU fails.

The fixtures under tests/submissions/verdict/ state their expected verdict in header lines (tests/test_submissions.py
grades them with the rest); the gpu-marked tests grade every reference solution on the GPU, and compare the GPU's
requirement lines for the repo's fixtures with the CPU's (tests/fixtures/cpu_verdicts.json, written by
`python -m gpuprinciples.instructor.verdicts --write`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from run_log import log
from submission_headers import FOLDER, grade_fixture, report

from gpuprinciples import runtime
from gpuprinciples.course.kit import BytesWithin, Case
from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.judge import CaseVerdict, judge_requirements
from gpuprinciples.grader.report import FAILED, PASSED
from gpuprinciples.sandbox.submission import from_path


def test_a_persistent_autotuned_matmul_compiles_each_configuration_once():
    """24 configurations, each compiled once (54 s on a loaded 2-core machine; was over 300 s, blamed on "a loop
    that never ends"), and the report says which one ran (its verdict: its header, tests/test_submissions.py)."""
    graded = report(FOLDER / "verdict" / "matmul_persistent_autotuned.py")
    assert graded.duration_s < 90, graded.phases_s
    assert "the first a gpu accepts runs: configuration 1" in graded.output.lower()


def _bytes_case(torch_bytes: int):
    case = Case("(64, 100) strided", ())
    counts = {"torch_bytes": torch_bytes, "load_bytes": 0, "store_bytes": 0, "triton_launches": 1}
    verdict = CaseVerdict(case)
    verdict.counts = counts
    return verdict


def test_pytorch_copies_fail_the_byte_budget_where_loads_are_not_counted():
    """On a GPU (loads and stores uncounted) PyTorch's own copies still count: more than the budget's slack
    fails there as it fails on a CPU; less is 'not measured on this machine', never a tick."""
    rule = BytesWithin(minimum=lambda case: 51_200)
    copied, = judge_requirements((rule,), [_bytes_case(43_581)], "gpu")
    assert copied.passed is False and "pytorch copies 42.56 kib" in copied.detail.lower()
    clean, = judge_requirements((rule,), [_bytes_case(0)], "gpu")
    assert clean.passed is None and "not measured on this machine" in clean.detail
    cpu = _bytes_case(43_581)
    cpu.counts.update(load_bytes=25_600, store_bytes=25_600)
    counted, = judge_requirements((rule,), [cpu], "cpu")  # a CPU's sentence says why, as a GPU's does
    assert counted.passed is False and "x.contiguous() of a strided view" in counted.detail


def test_no_tick_without_evidence():
    """A plain-PyTorch answer compiled nothing: 'compiles for sm_90' is not judged, never '✓ on 7 of 7'."""
    from gpuprinciples.course.kit import CompilesForGPU
    verdict = _bytes_case(0)
    verdict.counts["compiled"] = []
    line, = judge_requirements((CompilesForGPU(),), [verdict], "cpu")
    assert line.passed is None and "no triton kernel was compiled" in line.detail.lower()
    verdict.counts["compiled"] = [{"ok": True}]
    line, = judge_requirements((CompilesForGPU(),), [verdict], "cpu")
    assert line.passed is True and line.detail == "on 1 of 1 cases"


def test_no_projection_of_nothing():
    import torch

    from gpuprinciples.course import catalog
    from gpuprinciples.grader.judge import byte_summary
    ex = catalog.get("fusion.cos_cos")
    case = ex.cases(torch.Generator().manual_seed(0), "cpu")[0]
    none = byte_summary(ex, case, {"load_bytes": 0, "store_bytes": 0, "torch_bytes": 0, "triton_launches": 0},
                        {"H200": 4.8e12})
    assert not any(k.startswith("projected") for k in none)
    tiny = byte_summary(ex, case, {"load_bytes": 20, "store_bytes": 20, "torch_bytes": 0, "triton_launches": 1},
                        {"H200": 4.8e12})
    assert tiny["projected_us (roofline, not measured)"]["H200"] > 0


# ---------------------------------------------------------------------------------------------
# On the GPU: every reference solution passes; the fixtures' requirement lines agree with the CPU's
# ---------------------------------------------------------------------------------------------

CPU_VERDICTS = Path(__file__).resolve().parent / "fixtures" / "cpu_verdicts.json"


def test_the_recorded_cpu_verdicts_cover_every_compared_fixture():
    """tests/fixtures/cpu_verdicts.json is re-recorded (python -m gpuprinciples.instructor.verdicts --write ...) when a
    fixture is added: otherwise the GPU's lines for it would be compared with nothing."""
    import json

    from gpuprinciples.instructor import verdicts
    recorded = json.loads(CPU_VERDICTS.read_text())
    assert recorded["mode"] == "cpu"
    assert sorted(recorded["fixtures"]) == sorted(path for path, _, _ in verdicts.fixtures())


def test_re_recording_a_few_fixtures_keeps_the_others_lines(tmp_path, monkeypatch, capsys):
    """`verdicts --write FILE --only PATH ...` grades only the fixtures a change touched and keeps every other
    fixture's lines as recorded (one whole recording grades every fixture: many minutes of CPU)."""
    import json

    from gpuprinciples.instructor import verdicts
    from gpuprinciples.machine import runtime
    every = [path for path, _, _ in verdicts.fixtures()]
    one, other = every[0], every[1]
    recorded = tmp_path / "cpu_verdicts.json"
    recorded.write_text(json.dumps({"mode": runtime.MODE, "seed": verdicts.SEED,
                                    "fixtures": {one: "old", other: "kept", "tests/submissions/gone.py": "x"}}))
    graded = []
    monkeypatch.setattr(verdicts, "grade_all", lambda entries, workers: {p: graded.append(p) or "new"
                                                                          for p, _, _ in entries})
    assert verdicts.main(["--write", str(recorded), "--only", one]) == 0
    assert graded == [one]
    assert json.loads(recorded.read_text())["fixtures"] == {one: "new", other: "kept"}  # a removed fixture goes
    assert "1 fixtures graded" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        verdicts.main(["--write", str(recorded), "--only", "tests/submissions/none.py"])


@pytest.mark.gpu
def test_every_reference_solution_passes_on_the_gpu():
    """What would have caught lesson 09 failing its own solutions on every GPU: each exercise's `solution`,
    graded on this GPU, timing included; and every report that timed something states its fraction of the
    roof (issue 31: a learner sees how close to the hardware, not only a speedup over a baseline)."""
    import importlib
    import time

    from gpuprinciples.course import catalog
    from gpuprinciples.sandbox.submission import from_function
    failed = {}
    for ex in catalog.all_exercises().values():
        if ex.kind != "function" or not getattr(ex, "solution", None):
            continue
        module, name = ex.solution.split(":")
        started = time.monotonic()
        report = grade(ex.id, from_function(getattr(importlib.import_module(module), name)))
        log("references.txt", f"{ex.id} | {report.status} | {time.monotonic() - started:.1f} s | "
                               f"{'; '.join(report.reasons)[:300]}")
        if report.status != PASSED:
            failed[ex.id] = report.reasons
        timed = getattr(ex, "timing", None) is not None or getattr(ex, "timed_roof", None) is not None
        if timed and not 0 < report.measurements.get("roof", {}).get("fraction", 0):
            failed[ex.id] = [f"timed, but the report states no roof fraction: {sorted(report.measurements)}"]
    assert not failed, failed


@pytest.mark.gpu
def test_the_gpu_judges_the_fixtures_as_the_cpu_did(monkeypatch):
    """Every requirement line both machines judge agrees (timing lines are the GPU's own; a line one
    machine cannot measure is listed in the table, not compared)."""
    import json

    from gpuprinciples.instructor import verdicts
    monkeypatch.setenv("GPUPRINCIPLES_UNTIMED", "1")  # the lines compared are not timed ones
    cpu = json.loads(CPU_VERDICTS.read_text())["fixtures"]
    entries = [(path, v["exercise"], v["function"]) for path, v in sorted(cpu.items())]
    gpu = verdicts.grade_all(entries, workers=8, log=lambda path, r: log(
        "verdict-diff-progress.txt", f"{path} | {r['status']} | {r['lines']} | {r['reasons'][:1]}"))
    rows, disagree = verdicts.compare(cpu, gpu)
    log("verdict-diff.txt", verdicts.table(rows) + "\n\n" + "\n".join(disagree or ["no disagreement"]))
    statuses = sum(cpu[p]["status"] == gpu[p]["status"] for p in gpu)
    log("verdict-diff.txt", f"{statuses} of {len(gpu)} fixtures have the same status on both machines; others:\n"
         + "\n".join(f"{p}: CPU {cpu[p]['status']} {cpu[p]['reasons'][:1]}, "
                      f"GPU {gpu[p]['status']} {gpu[p]['reasons'][:1]}"
                      for p in gpu if cpu[p]["status"] != gpu[p]["status"]))
    assert not disagree, "\n".join(disagree)


def test_the_compile_pass_says_which_gpu_generations_accept_the_kernels():
    from gpuprinciples.course.kernels.cos_cos import __file__ as kernel_file
    report = grade("fusion.cos_cos", from_path(f"{kernel_file}:cos_cos"))
    generations = report.measurements["compiles for (the GPU's cases, compiled here)"]
    assert set(generations) == {"sm_80 (A100)", "sm_90 (H100/H200)", "sm_100 (B200)"}
    assert all(v.startswith("compiles all") for v in generations.values()), generations
    line = next(c for c in report.checks if c.name.startswith("compiles for"))
    assert line.passed is True and "on the gpu's 7 cases" in line.detail.lower()


@pytest.mark.skipif(runtime.HAS_CUDA, reason="the compile pass is the CPU's (a GPU compiles what it runs)")
def test_a_check_that_failed_already_skips_the_compile_pass():
    """Host code that loops in Python over the GPU's sizes took two minutes in the compile pass (December 6),
    for a verdict the cases had already failed: the pass is skipped, and the line says what was not judged."""
    graded = grade_fixture(FOLDER / "exploits" / "ctypes_libm.py")  # alone: report() would grade its whole folder
    assert graded.status == FAILED and graded.phases_s["compile pass"] < 5, graded.phases_s
    line = next(c for c in graded.checks if c.name.startswith("compiles for"))
    assert line.passed is None and "not judged at the gpu's own sizes" in line.detail.lower()
    assert "compiles for (the GPU's cases, compiled here)" not in graded.measurements


def test_a_case_the_compiler_refused_fails_compiles_for_the_gpu_on_both_machines():
    """On a GPU a refused launch raises Triton's CompilationError and the case errs; the requirement line must
    say False there as on a CPU (whose compile pass meets the same refusal), not tick the cases that ran."""
    from gpuprinciples.course.kit import CompilesForGPU
    ran, refused = _bytes_case(0), CaseVerdict(Case("(1896,) normal bfloat16", ()))
    ran.counts["compiled"] = [{"ok": True}]
    refused.error = "kernel `k` does not compile for this GPU: the GPU compiler refuses it with \"Expected dtype\""
    for mode in ("cpu", "gpu"):
        line, = judge_requirements((CompilesForGPU(),), [ran, refused], mode)
        assert line.passed is False and "does not compile for this gpu" in line.detail.lower()


def test_a_gpu_out_of_resources_reads_like_the_cpus_refusal():
    """On a GPU a tile over shared memory raises OutOfResources at launch; its sentence says the kernel does
    not compile for the GPU, so 'compiles for the GPU' fails there as the CPU's compile pass fails it."""
    from triton.runtime.errors import OutOfResources

    from gpuprinciples.course.kit import CompilesForGPU
    from gpuprinciples.toolchain.gpucompile import compile_error_sentence
    sentence = compile_error_sentence(OutOfResources(393216, 232448, "shared memory"))
    assert "393,216 bytes of shared memory" in sentence and "232,448" in sentence
    assert CompilesForGPU().evaluate_error(sentence, None) == sentence
