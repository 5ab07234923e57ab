"""Every GPU report carries its fraction of the roof: kernels through their `Timing` (test_roof.py), and the
whole-program exercises that time a step in their own run (amp, tensorcores, checkpoint) through `TimedRoof`."""


import pytest
import torch

from gpuprinciples import calibrate, roofline, runtime
from gpuprinciples.course import catalog
from gpuprinciples.course.lab import steproof
from gpuprinciples.grader import grading
from gpuprinciples.grader.report import Report
from gpuprinciples.measure.calibrate import Ceilings

H200ISH = Ceilings("cuda", "test GPU", copy_bandwidth=4e12, fp32_flops=50e12, bf16_flops=800e12, tf32_flops=400e12)


def _timed_cases(ex):
    """The cases a GPU grades that the exercise's own run times (kwargs["timed"])."""
    return [c for c in ex.cases(torch.Generator().manual_seed(0), "gpu") if c.kwargs.get("timed")]


# every function exercise without a Timing (test_roof.py covers those): any GPU time comes from its own run
SELF_TIMED = [ex for ex in catalog.all_exercises().values()
              if ex.kind == "function" and getattr(ex, "timing", None) is None]


@pytest.mark.parametrize("ex", SELF_TIMED, ids=[ex.id for ex in SELF_TIMED])
def test_every_exercise_timed_on_a_gpu_declares_how_to_count_its_work(ex):
    if not _timed_cases(ex):
        assert ex.timed_roof is None, f"{ex.id} declares a roof but times nothing on a GPU"
        return
    assert isinstance(ex.timed_roof, steproof.TimedRoof), f"{ex.id} times a GPU case but reports no roof for it"


ROOFED = [ex for ex in SELF_TIMED if ex.timed_roof is not None]


def test_the_three_timed_training_steps_are_covered():
    assert {ex.id for ex in ROOFED} >= {"amp.train_step", "tensorcores.pad_model", "checkpoint.fit_budget"}


@pytest.mark.parametrize("ex", ROOFED, ids=[ex.id for ex in ROOFED])
def test_a_timed_step_reports_its_fraction_of_the_roof(ex, monkeypatch):
    (case,) = _timed_cases(ex)
    recipe = case.args[0]
    work = ex.timed_roof.work(recipe)
    assert work.flops > 1e12 and work.bytes > 1e8  # steps large enough that the matmuls set the time
    peak = steproof.step_peak(H200ISH, work.dtype)
    _, bound, roof_s = roofline.fraction_of_roof(1.0, work.flops, work.bytes, peak, H200ISH.copy_bandwidth)
    assert bound == "compute"
    rounds = [{ex.timed_roof.timed: roof_s / 0.4, "baseline": roof_s / 0.2} for _ in range(5)]
    monkeypatch.setattr(runtime, "MODE", "gpu")
    monkeypatch.setattr(calibrate, "ceilings", lambda: H200ISH)
    report = Report(exercise=ex.id, title=ex.title, mode="gpu")
    grading._timed_case_roof(ex, case, {"rounds": rounds}, report)
    assert report.measurements["roof"]["fraction"] == pytest.approx(0.4, abs=2e-3)
    assert report.measurements["roof"]["bound"] == "compute"
    assert any("40% of this GPU's roof" in n for n in report.notes)


def test_the_work_counted_is_the_least_a_step_needs():
    recipe = dict(vocab=1000, d_model=64, hidden=256, n_layers=2, batch=2, seq=16)
    plain = steproof.recipe_step_work(recipe, "fp32")
    tokens = recipe["batch"] * recipe["seq"]
    # per layer's MLP, forward 2·T·d·h·2 and backward twice that; the head likewise with the vocabulary
    assert plain.flops >= 6 * tokens * (2 * recipe["n_layers"] * 64 * 256 + 64 * 1000)
    frozen = steproof.recipe_step_work(recipe, "fp32", frozen_embedding=True)
    assert frozen.bytes == plain.bytes - 1000 * 64 * 4  # no gradient written for the frozen embedding
    adamw = steproof.recipe_step_work(recipe, "bf16", optimizer_bytes=steproof.ADAMW_BYTES)
    assert adamw.bytes > plain.bytes and adamw.flops == plain.flops


def test_fp32_steps_meet_the_rate_pytorch_would_use():
    assert steproof.step_peak(H200ISH, "fp32") == 50e12  # PyTorch's default: no TF32 for matmuls
    torch.set_float32_matmul_precision("high")
    try:
        assert steproof.step_peak(H200ISH, "fp32") == 400e12
    finally:
        torch.set_float32_matmul_precision("highest")
    assert steproof.step_peak(H200ISH, "bf16") == 800e12


def test_the_rate_is_read_with_the_api_that_set_tf32():
    """The ceilings' own TF32 switch uses `torch.backends.cuda.matmul.fp32_precision`; once it has, PyTorch refuses
    the older `torch.get_float32_matmul_precision()` (a checkpoint grade on an H100 ended "the grader itself
    failed": its step's roof asked the older one after the ceilings were measured)."""
    from gpuprinciples.measure.calibrate import tf32_matmul
    for on, rate in ((True, 400e12), (False, 50e12)):
        with tf32_matmul(on):
            assert steproof.step_peak(H200ISH, "fp32") == rate


def test_no_roof_from_rounds_without_the_learners_step():
    roof = steproof.TimedRoof(lambda r: steproof.StepWork(1e12, 1e9, "bf16"), timed="yours")
    assert steproof.timed_roof(roof, {}, [{"fp32": 1.0}], H200ISH) is None
    assert steproof.timed_roof(roof, {}, None, H200ISH) is None


# On a GPU, tests/test_one_verdict.py's reference run checks that every timed report carries its roof
# fraction (one grade per reference serves both checks).


@pytest.mark.parametrize("ex", ROOFED, ids=[ex.id for ex in ROOFED])
def test_the_speed_check_and_the_roof_read_the_same_rounds(ex):
    """The timed run's output holds its rounds where the roof looks for them (`output["rounds"]`): amp's once sat
    one level down, so the H200 timed its step with no roof in the report. Fed the shape the roof reads, the
    exercise's own speed check must find its rounds (whatever it then says of the speed)."""
    (case,) = _timed_cases(ex)
    names = ("yours", "fp32", "padded", "original", "plain", ex.timed_roof.timed)
    output = {"rounds": [{name: 1e-3 for name in names} for _ in range(5)],
              "plain_peak_bytes": 1, "yours_peak_bytes": 1}
    said = " ".join(ex.compare(output, None, case))
    assert "nothing the grader can read" not in said, said
