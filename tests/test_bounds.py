"""Lesson 02 (the three bounds): the op catalogue, the value exercises, and adversarial submissions."""


import torch

from gpuprinciples import calibrate, roofline, runtime, specs
from gpuprinciples.course.exercises import bounds
from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, NOT_ATTEMPTED, PASSED
from gpuprinciples.sandbox.submission import Submission

# ---- the catalogue ------------------------------------------------------------------------------


def test_work_is_counted_from_the_ops_themselves():
    by_name = {op.name: bounds.work(op) for op in bounds.OPS}
    assert by_name["add_big"] == (2**26, 3 * 2**26 * 4)  # read x and y, write x + y
    assert by_name["mm_big"] == (2 * 8192**3, 3 * 8192**2 * 2)
    flops, nbytes = by_name["mm_skinny"]
    assert flops == 2 * 8192 * 8192 * 64 and nbytes == (2 * 8192 * 64 + 8192**2) * 2
    # a matmul below the ridge: memory-bound although it is a matmul
    assert flops / nbytes < specs.SPECS["H200"].ridge_point("bf16")


def test_datasheet_bounds_cover_all_three_and_follow_the_roofline():
    got = {op.name: bounds.datasheet_bound(op) for op in bounds.OPS}
    assert set(got.values()) == {"compute", "memory", "overhead"}
    assert got["mm_big"] == "compute" and got["mm_skinny"] == "memory" and got["add_tiny"] == "overhead"
    # every datasheet agrees on every op: the answer is a property of the op, not of the chip
    for key, spec in specs.SPECS.items():
        assert got == {op.name: bounds.datasheet_bound(op, spec) for op in bounds.OPS}, key


def test_measured_bound_calls_a_slow_run_overhead():
    op = next(o for o in bounds.OPS if o.name == "add_big")
    ceilings = calibrate.Ceilings("cuda", "test", copy_bandwidth=4e12, fp32_flops=50e12, bf16_flops=700e12)
    model = bounds.work(op)[1] / 4e12
    assert bounds.measured_bound(op, model * 1.2, ceilings) == "memory"
    assert bounds.measured_bound(op, model * 10, ceilings) == "overhead"


# ---- value exercises ----------------------------------------------------------------------------


def test_classify_right_and_wrong():
    right = {op.name: bounds.datasheet_bound(op) for op in bounds.OPS}
    assert grade("bounds.classify", right).status == PASSED
    wrong = dict(right, mm_skinny="compute")
    report = grade("bounds.classify", wrong)
    assert report.status == FAILED and "mm_skinny: you said compute" in " ".join(report.reasons)
    assert "6 of 7 right, judged by the roofline" in report.reasons[-1]
    missing = {k: v for k, v in right.items() if k != "mm_big"}
    assert "no answer for mm_big" in grade("bounds.classify", missing).reasons[0]
    assert "not one of" in grade("bounds.classify", dict(right, add_tiny="latency")).reasons[0]
    assert grade("bounds.classify", None).status == NOT_ATTEMPTED


def test_classify_never_grades_against_a_live_timing(monkeypatch):
    """A prediction is graded by the roofline, on a GPU too: a timing under another job's load would
    flip a memory-bound op to overhead-bound and fail a right answer."""
    def no_timing(*args, **kwargs):
        raise AssertionError("bounds.classify timed an op")

    monkeypatch.setattr(bounds, "measure", no_timing)
    monkeypatch.setattr(runtime, "HAS_CUDA", True)
    assert bounds.expected_bounds() == {op.name: bounds.datasheet_bound(op) for op in bounds.OPS}
    # what a loaded GPU would have shown for add_big is not what the check expects
    op = next(o for o in bounds.OPS if o.name == "add_big")
    loaded = calibrate.Ceilings("cuda", "test", copy_bandwidth=4e12, fp32_flops=50e12, bf16_flops=700e12)
    assert bounds.measured_bound(op, 10 * bounds.work(op)[1] / 4e12, loaded) == "overhead"
    assert bounds.expected_bounds()["add_big"] == "memory"


def test_ridge_point_names_the_sparse_trap():
    spec = specs.SPECS["H100"]
    assert grade("bounds.ridge_h100", spec.dense_bf16_tflops / spec.bandwidth_tbs).status == PASSED
    sparse = grade("bounds.ridge_h100", spec.sparse_bf16_tflops / spec.bandwidth_tbs)
    assert sparse.status == FAILED and "sparse" in sparse.reasons[0]
    assert "off by 1000" in grade("bounds.ridge_h100", spec.dense_bf16_tflops / spec.bandwidth_tbs / 1e3).reasons[0]


def test_max_dispatches_counts_work_not_views():
    req = bounds.MaxDispatches(2)
    case = bounds.Case("c", ())
    views = {"torch_ops": {"view": 9, "t": 4, "addmm": 1, "gelu": 1}, "triton_launches": 0}
    assert req.evaluate(views, case) is None
    more = {"torch_ops": {"addmm": 1, "gelu": 1}, "triton_launches": 1}
    assert "3 operator dispatches" in req.evaluate(more, case)


def test_knee_cases_are_never_borderline():
    for seed in range(20):
        for case in bounds._knee_cases(torch.Generator().manual_seed(seed), "cpu"):
            batches, times = case.args
            line = bounds.KNEE_FACTOR * min(times)
            assert all(abs(t / line - 1) > 0.02 for t in times), case.label
            assert len(set(batches)) == len(batches)


def test_a_solution_counts_two_dispatches():
    """The reference passes its own check (tests/test_grader_core.py) in so many dispatches; the mistakes
    fail for their reasons (their headers under tests/submissions/, tests/test_submissions.py)."""
    solution = Submission("from gpuprinciples.course.kernels.bounds import mlp_tail\n", "mlp_tail",
                          "gpuprinciples.course.kernels.bounds:mlp_tail")
    counts = grade("bounds.fewer_dispatches", solution).measurements["counts"]
    assert counts["torch_compute_ops"] == {"addmm": 1, "gelu": 1}


def test_the_written_out_step_and_the_solution_agree():
    from gpuprinciples.course.kernels.bounds import mlp_tail
    gen = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(7, 33, generator=gen), torch.randn(33, 19, generator=gen), torch.randn(19, generator=gen)
    torch.testing.assert_close(mlp_tail(x, w, b), bounds.mlp_tail_written_out(x, w, b))
    assert roofline.LAUNCH_FLOOR_S > 0
