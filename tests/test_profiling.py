"""Lesson 03 (profiling): reading real profiles, the generated ones, and adversarial submissions."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from gpuprinciples import profiling
from gpuprinciples.course.exercises import profiling as ex
from gpuprinciples.course.kernels.profiling import bottleneck, sgd_momentum
from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, PASSED
from gpuprinciples.sandbox.submission import Submission

# ---- real profiles as rows ----------------------------------------------------------------------


def _real_table():
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    x = torch.randn(16, 32)
    model(x).sum().backward()  # warm-up outside the profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("forward"):
            y = model(x)
        y.sum().backward()
    return profiling.rows(prof)


def test_rows_of_a_real_cpu_profile():
    table = _real_table()
    assert set(profiling.ROW_KEYS) <= set(table[0])
    kinds = {r["name"]: r["kind"] for r in table}
    assert kinds["aten::addmm"] == "op" and kinds["forward"] == "annotation"
    linear = next(r for r in table if r["name"] == "aten::linear")
    assert linear["calls"] == 2 and linear["cpu_total_us"] >= linear["self_cpu_us"]
    assert not profiling.has_device_times(table)
    # the reference reads a real table too, and names an operator of it
    assert kinds[bottleneck(table)] == "op"
    summary = profiling.step_summary(table)
    assert summary["op_calls"] > 10 and summary["kernel_launches"] == 0


# A profile recorded on an H200 (torch 2.11.0+cu130, 2026-12-04, tools/profile_figures.py): three steps of
# record_function("forward") around x.cos().cos() and a bf16 matmul, as key_averages() rows with the fields
# profiling.rows reads. PyTorch's cos kernel is named "...cos_kernel_cuda(...)::{lambda()#1}...".
RECORDED_PROFILE = Path(__file__).parent / "fixtures" / "profiles" / "h200_torch211.json"


def _recorded_table():
    recorded = json.loads(RECORDED_PROFILE.read_text())
    return profiling.rows([SimpleNamespace(**row) for row in recorded["rows"]])


def test_a_recorded_gpu_profile_keeps_pytorchs_kernels_whose_names_hold_a_hash():
    table = _recorded_table()
    kernels = {r["name"]: r for r in table if r["kind"] == "kernel"}
    cos = [name for name in kernels if "cos_kernel_cuda" in name]
    assert len(cos) == 1 and "#" in cos[0]  # the name that a '#' rule took for an annotation
    assert kernels[cos[0]]["calls"] == 6  # two cos per step, three steps
    assert any(name.startswith("nvjet") for name in kernels)  # the matmul: 3 calls
    assert profiling.step_summary(table)["kernel_launches"] == 9
    # the record_function range has a row on each timeline: both are annotations, neither a kernel nor an op
    forward = [r for r in table if r["name"] == "forward"]
    assert len(forward) == 2 and {r["kind"] for r in forward} == {"annotation"}
    kinds = {r["name"]: r["kind"] for r in table}
    assert kinds["aten::cos"] == kinds["aten::mm"] == "op"
    assert kinds["cudaLaunchKernel"] == kinds["cuLaunchKernelEx"] == "runtime"
    assert kinds["Activity Buffer Request"] == "runtime"  # the profiler's own host work: not an annotation
    # its kernel time is every kernel's: the cos launches are most of it at this size
    summary = profiling.step_summary(table)
    assert summary["kernel_time_us"] == pytest.approx(sum(r["self_device_us"] for r in kernels.values()))
    assert kernels[cos[0]]["self_device_us"] > 0


def test_a_hash_in_a_name_does_not_decide_the_kind():
    def row(key, device, annotation):
        return SimpleNamespace(key=key, device_type=device, is_user_annotation=annotation, count=1,
                               self_cpu_time_total=0, cpu_time_total=0, self_device_time_total=1,
                               device_time_total=1)
    table = profiling.rows([row("void k<{lambda()#1}>", "DeviceType.CUDA", False),
                            row("Optimizer.step#SGD.step", "DeviceType.CPU", True),
                            row("Optimizer.step#SGD.step", "DeviceType.CUDA", True),
                            row("ProfilerStep#2", "DeviceType.CPU", True)])
    assert [r["kind"] for r in table] == ["kernel", "annotation", "annotation", "annotation"]
    # a torch that does not say what is an annotation: a CPU label without '::' is taken for one
    old = SimpleNamespace(key="forward", device_type="DeviceType.CPU", count=1, self_cpu_time_total=1,
                          cpu_time_total=1, self_device_time_total=0, device_time_total=0)
    assert profiling.rows([old])[0]["kind"] == "annotation"


def test_plot_top_draws_one_bar_per_row():
    import matplotlib
    matplotlib.use("Agg")
    ax = profiling.plot_top(_real_table(), n=5)
    assert len(ax.patches) == 5


def test_ncu_csv_is_parsed():
    out = ('==PROF== Connected to process\n"ID","Kernel Name","dram__bytes.sum.per_second",'
           '"sm__warps_active.avg.pct_of_peak_sustained_active"\n"","","Tbyte/s","%"\n'
           '"0","vectorized_elementwise_kernel","3.91","87.5"\n')
    got = profiling._parse_ncu_csv(out)
    assert got["kernel"] == "vectorized_elementwise_kernel"
    assert got["dram__bytes.sum.per_second"] == (3.91, "Tbyte/s")
    with pytest.raises(RuntimeError, match="ERR_NVGPUCTRPERM"):
        profiling._parse_ncu_csv("", "==ERROR== ERR_NVGPUCTRPERM - no permission")


# ---- generated profiles: the traps are really there ----------------------------------------------


def test_generated_profiles_hold_their_traps():
    for seed in range(15):
        for case in ex._bottleneck_cases(torch.Generator().manual_seed(seed), "cpu"):
            (table,) = case.args
            answer = ex._bottleneck_reference(table)
            ops = [r for r in table if r["kind"] == "op"]
            device = profiling.has_device_times(table)
            key = "self_device_us" if device else "self_cpu_us"
            first, second = sorted((r[key] for r in ops), reverse=True)[:2]
            assert first >= 1.2 * second, case.label  # no near-ties
            assert max(table, key=lambda r: r["cpu_total_us"])["kind"] == "annotation"
            if device:
                assert max(ops, key=lambda r: r["self_cpu_us"])["name"] != answer
                assert max(table, key=lambda r: r[key])["kind"] == "kernel"


def test_tensor_core_answers():
    assert grade("profiling.tensor_cores", {0, 2, 4, 6}).status == PASSED
    assert grade("profiling.tensor_cores", [ex.KERNEL_NAMES[i] for i in (0, 2, 4, 6)]).status == PASSED
    report = grade("profiling.tensor_cores", {0, 1, 2, 4, 6})
    assert report.status == FAILED and "1 of 11" in report.reasons[0]
    # "xmma" alone is not a Tensor Core kernel: the fp32 ffma one seen on an H200 runs on the CUDA cores
    everything_xmma = {i for i, name in enumerate(ex.KERNEL_NAMES) if "xmma" in name or i in (2, 4)}
    assert grade("profiling.tensor_cores", everything_xmma).status == FAILED
    assert "neither an index" in grade("profiling.tensor_cores", {42}).reasons[0]


def test_the_loop_and_the_foreach_update_agree():
    gen = torch.Generator().manual_seed(0)
    shapes = [(3,), (4, 5), (7,)]
    params, grads, bufs = ([torch.randn(s, generator=gen) for s in shapes] for _ in range(3))
    want = ex.sgd_momentum_loop(params, grads, bufs, 0.1, 0.9)
    got = sgd_momentum(params, grads, bufs, 0.1, 0.9)
    for a, b in zip(want[0] + want[1], got[0] + got[1]):
        torch.testing.assert_close(a, b)


def test_foreach_solution_dispatches_three_times_for_any_number_of_tensors():
    """The reference passes its own check (tests/test_grader_core.py) in so many dispatches; the mistakes
    fail for their reasons (their headers under tests/submissions/, tests/test_submissions.py)."""
    solution = Submission("from gpuprinciples.course.kernels.profiling import sgd_momentum\n", "sgd_momentum",
                          "gpuprinciples.course.kernels.profiling:sgd_momentum")
    counts = grade("profiling.foreach_sgd", solution).measurements["counts"]
    assert sum(counts["torch_compute_ops"].values()) == 3
