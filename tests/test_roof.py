"""The roof a kernel is measured against: bytes at the measured copy bandwidth or FLOPs at the measured
matmul rate for its dtype, whichever takes longer; every GPU verdict and `bench` row states its fraction."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from gpuprinciples.course import catalog
from gpuprinciples.course.exercises import decoding
from gpuprinciples.course.kit import Timing
from gpuprinciples.course.lab import roofline
from gpuprinciples.grader import judge
from gpuprinciples.measure.calibrate import Ceilings
from gpuprinciples.sandbox.channel import TimingResult

H200ISH = Ceilings("cuda", "test GPU", copy_bandwidth=4e12, fp32_flops=50e12, bf16_flops=800e12, tf32_flops=400e12)


def test_the_roof_is_the_slower_of_moving_and_computing():
    fraction, bound, roof_s = roofline.fraction_of_roof(2e-3, flops=0, bytes=4e9, peak_flops=None, bandwidth=4e12)
    assert (bound, roof_s, fraction) == ("memory", pytest.approx(1e-3), pytest.approx(0.5))
    fraction, bound, roof_s = roofline.fraction_of_roof(4e-3, flops=1.6e12, bytes=4e9, peak_flops=800e12,
                                                        bandwidth=4e12)
    assert (bound, roof_s, fraction) == ("compute", pytest.approx(2e-3), pytest.approx(0.5))


def test_each_dtype_meets_the_rate_measured_for_it():
    assert roofline.matmul_peak(H200ISH, torch.bfloat16) == roofline.matmul_peak(H200ISH, torch.float16) == 800e12
    assert roofline.matmul_peak(H200ISH, torch.float32) == 400e12  # tl.dot's default: TF32 Tensor Cores
    no_tf32 = Ceilings("cuda", "old", copy_bandwidth=1e12, fp32_flops=20e12)
    assert roofline.matmul_peak(no_tf32, torch.float32) == 20e12
    assert roofline.matmul_peak(no_tf32, torch.bfloat16) is None  # not measured: bytes alone set the roof
    assert roofline.inputs_peak(H200ISH, (3, torch.ones(2, dtype=torch.bfloat16))) == 800e12
    assert roofline.inputs_peak(H200ISH, (torch.ones(2, dtype=torch.int32),)) is None


def _fingerprints(out, k=3):
    return [judge.fingerprint(out, 7)] * k


def _verdict_at(spec, args, fraction):
    """judge_timing on made-up rounds in which the learner's median takes roof / `fraction`."""
    flops, nbytes = spec.flops(args), spec.min_bytes(args)
    _, _, roof_s = roofline.fraction_of_roof(1.0, flops, nbytes, roofline.inputs_peak(H200ISH, args),
                                             H200ISH.copy_bandwidth)
    out = torch.zeros(8)
    rounds = [{"yours": roof_s / fraction, **{b: 2 * roof_s / fraction for b in spec.baselines}} for _ in range(7)]
    result = TimingResult(rounds=rounds, fingerprints=_fingerprints(out, 8))
    return judge.judge_timing(spec, (), args, _fingerprints(out), result, H200ISH.copy_bandwidth,
                              peak_flops=roofline.inputs_peak(H200ISH, args))


def test_a_timing_verdict_states_its_fraction_of_the_roof_in_numbers_and_words():
    spec = Timing(inputs=None, baselines={"eager": None}, min_bytes=lambda args: 8_000_000)
    verdict = _verdict_at(spec, (torch.ones(4),), 0.62)
    assert verdict.measurements["roof"]["fraction"] == pytest.approx(0.62, abs=1e-3)
    assert verdict.measurements["roof"]["bound"] == "memory"
    assert verdict.roof.startswith("62% of this GPU's roof") and "4.00 TB/s copy" in verdict.roof


def test_a_call_far_below_the_roof_still_states_a_fraction():
    """bounds.fewer_dispatches on the H200: launch overhead, not bytes, sets its time, and its fraction sits
    below 0.1%: rounded to three decimals it read 0.0, as if the report stated none."""
    spec = Timing(inputs=None, baselines={"eager": None}, min_bytes=lambda args: 8_000_000)
    verdict = _verdict_at(spec, (torch.ones(4),), 0.00042)
    assert verdict.measurements["roof"]["fraction"] == pytest.approx(0.00042, rel=1e-2)
    assert verdict.roof.startswith("0.042% of this GPU's roof")


def _timing_args(spec, monkeypatch):
    """A timed input's arguments without its memory (fake tensors: shapes and dtypes only). Decode attention's
    least bytes count seq_lens' values, which fake tensors do not hold: its long context is made small instead."""
    with FakeTensorMode():
        try:
            args = spec.inputs(torch.Generator().manual_seed(0), "cpu")
            spec.min_bytes(args), spec.flops(args)
            return args
        except Exception:  # noqa: BLE001 - a data-dependent input
            pass
    monkeypatch.setattr(decoding, "LONG_CONTEXT", {"B": 2, "Hq": 8, "Hkv": 2, "S": 64, "D": 32})
    return spec.inputs(torch.Generator().manual_seed(0), "cpu")


TIMED = [(ex.id, k) for ex in catalog.all_exercises().values() if getattr(ex, "timing", None) is not None
         for k in range(len(ex.timing.each()))]


@pytest.mark.parametrize("exercise_id,which", TIMED, ids=[f"{e}[{k}]" for e, k in TIMED])
def test_every_timed_exercise_reports_its_fraction_of_the_roof(exercise_id, which, monkeypatch):
    spec = catalog.get(exercise_id).timing.each()[which]
    args = _timing_args(spec, monkeypatch)
    verdict = _verdict_at(spec, args, 0.5)
    assert not verdict.implausible, verdict.implausible
    assert verdict.measurements["roof"]["fraction"] == pytest.approx(0.5, abs=2e-3)
    assert "of this GPU's roof" in verdict.roof
