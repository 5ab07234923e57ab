"""Launches are counted where every launch passes, not on one wrapper.

`kernel[grid](...)`, a grid callable, the handle `kernel.warmup(...)` returns launched with
`handle[grid](...)` (Triton's fused-softmax tutorial does this), @triton.autotune with several
configurations, @triton.heuristics: each is one launch, on a GPU (Triton's launch enter hook) and under
the interpreter, and each records what the kernel compiled to. An autotuner's benchmark runs are not
the learner's launches. PyTorch work in a grid callable or a pre-run hook is the learner's.

The same tests run on a GPU; the ones marked `gpu` compare what the GPU compiled with what a CPU says.
On the H200 (a few minutes; the grading test times the tutorial softmax):
    pytest -q -p no:cacheprovider tests/test_launch_paths.py tests/test_gpucompile.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import launch_kernels as lk
import pytest
import torch
import triton
import triton.language as tl

from gpuprinciples import counters, gpucompile, runtime
from gpuprinciples.grader.report import PASSED

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("path", list(lk.PATHS))
def test_every_launch_path_is_one_launch_with_its_compiled_kernel(path):
    launch = lk.PATHS[path]
    x = torch.randn(1000, device=runtime.DEVICE)
    launch(x)  # as the grader's warm-up call does: compiles, autotunes
    with counters.record() as rec:
        y = launch(x)
        runtime.synchronize()
    assert torch.equal(y, 2 * x)
    assert rec.triton_launches == 1 and rec.kernel_names[0].startswith("double"), rec.kernel_names
    (compiled,) = rec.as_dict()["compiled"]
    assert compiled["ok"] and compiled["kernel"].startswith("double") and compiled["registers"] > 0
    block = int(re.search(r"BLOCK=(\d+)", compiled["signature"])[1])
    assert rec.launches[0].grid[0] == triton.cdiv(1000, block), rec.launches[0].grid  # what ran, a callable's too


def test_autotuning_inside_a_recording_counts_only_the_learners_launch():
    """A new size tunes again, here inside the recording: on a GPU the autotuner launches each
    configuration many times to time it; under the interpreter it compiles each. One launch counts."""
    x = torch.randn(777, device=runtime.DEVICE)
    with counters.record() as rec:
        y = lk.launch_autotuned(x)
        runtime.synchronize()
    assert torch.equal(y, 2 * x)
    assert rec.triton_launches == 1, rec.kernel_names
    assert rec.torch_compute_ops == {} and rec.torch_bytes == 0  # the benchmark's cache flushes are not counted
    assert len(rec.as_dict()["compiled"]) == 1


def test_pytorch_work_in_a_grid_callable_is_the_learners():
    x = torch.randn(1000, device=runtime.DEVICE)
    y = torch.empty_like(x)
    hidden = torch.empty_like(x)

    def grid(meta):
        hidden.copy_(x.cos())
        return (triton.cdiv(x.numel(), meta["BLOCK"]),)

    with counters.record() as rec:
        lk.double[grid](x, y, x.numel(), BLOCK=128)
    assert rec.torch_compute_ops.get("cos") == 1 and rec.torch_bytes >= 2 * x.numel() * 4


@triton.jit
def hooked(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, tl.load(src + at, mask=inside), mask=inside)


def test_pytorch_work_in_a_pre_run_hook_is_the_learners():
    seen = []
    hooked.add_pre_run_hook(lambda src, dst, n, **kwargs: seen.append(src.sin().sum()))
    x = torch.randn(100, device=runtime.DEVICE)
    with counters.record() as rec:
        hooked[(1,)](x, torch.empty_like(x), x.numel(), BLOCK=128)
    assert seen and rec.torch_compute_ops.get("sin") == 1


def test_one_compiled_entry_per_distinct_signature():
    x = torch.randn(1024, device=runtime.DEVICE)
    with counters.record() as rec:
        for n in (1000, 999, 1024, 1):  # 1000 and 999: not divisible by 16; 1024: divisible; 1: a constexpr
            lk.double[(triton.cdiv(n, 128),)](x, torch.empty_like(x), n, BLOCK=128)
    signatures = sorted(c["signature"] for c in rec.as_dict()["compiled"])
    assert rec.triton_launches == 4 and len(signatures) == 3, signatures
    assert any("n=1" in s for s in signatures)


def test_launches_outside_a_recording_are_not_counted_or_compiled():
    with counters.record() as rec:
        pass
    lk.launch_plain(torch.randn(10, device=runtime.DEVICE))
    assert rec.triton_launches == 0 and rec.as_dict()["compiled"] == []


# -------------------------------------------------------------------------------------------------
# Graded: upstream-style launch patterns pass, work hidden in a grid callable fails
# -------------------------------------------------------------------------------------------------

GRADED = {"tutorial_softmax": ("fusion.softmax", "softmax"), "autotuned_cos_cos": ("fusion.cos_cos", "cos_cos"),
          "heuristics_cos_cos": ("fusion.cos_cos", "cos_cos")}  # work hidden in a grid callable: grid_lambda_torch.py


@lru_cache(maxsize=None)
def _reports():
    return lk.grade_submissions(GRADED)


@pytest.mark.parametrize("stem", ["tutorial_softmax", "autotuned_cos_cos", "heuristics_cos_cos"])
def test_upstream_launch_patterns_pass(stem):
    report = _reports()[stem]
    assert "no triton kernel was launched" not in " ".join(report.reasons).lower()
    if runtime.HAS_CUDA:
        assert lk.counted_checks_hold(report), report.reasons
    else:
        assert report.status == PASSED, report.reasons
    counts = report.measurements["counts"]
    assert counts["triton_launches"] == 1 and len(counts["compiled"]) == 1 and counts["compiled"][0]["ok"]


# -------------------------------------------------------------------------------------------------
# On a GPU: the evidence is what the kernel that ran says, and the same as a CPU's compile
# -------------------------------------------------------------------------------------------------

EVIDENCE = ("ok", "num_warps", "num_stages", "shared_bytes", "registers", "spills", "wgmma", "dots", "target")


def _evidence(compiled: dict) -> dict:
    return {k: compiled[k] for k in EVIDENCE}


@pytest.mark.gpu
def test_gpu_evidence_is_the_launched_kernels_and_a_compile_for_this_gpu_agrees():
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    with counters.record() as rec:
        lk.double[(8,)](x, y, x.numel(), BLOCK=128, num_warps=2)
    (ran,) = rec.as_dict()["compiled"]
    again = gpucompile.compile_launch(lk.double, (x, y, x.numel()), {"BLOCK": 128, "num_warps": 2})
    assert _evidence(ran) == _evidence(again.as_dict()) and ran["num_warps"] == 2


@pytest.mark.gpu
def test_gpu_registers_and_spills_are_what_the_driver_says():
    x = torch.randn(1000, device="cuda")
    for kernel, kwargs in ((lk.double, {"BLOCK": 1024, "num_warps": 4}), (lk.tile_matmul, None)):
        if kwargs is None:
            a = torch.randn(128, 64, device="cuda", dtype=torch.bfloat16)
            handle = kernel.warmup(a, a, x, BM=128, BN=64, BK=64, PRECISION="tf32", num_warps=4, grid=(1,))
        else:
            handle = kernel.warmup(x, x, x.numel(), grid=(1,), **kwargs)
        handle._init_handles()
        info = gpucompile.from_compiled(handle)
        assert (info.registers, info.spills) == (handle.n_regs, handle.n_spills), info


@pytest.mark.gpu
def test_gpu_and_cpu_compile_the_same_kernel_the_same_way():
    """The interpreter (GPUPRINCIPLES_FORCE_CPU=1, on this machine) compiles for sm_90; the H200 is sm_90:
    registers, shared memory, warps and wgmma must be the same numbers in both modes."""
    probe = ("import json, gpuprinciples, torch\nfrom gpuprinciples import counters\nimport launch_kernels as lk\n"
             "with counters.record() as rec:\n    lk.matmul_tile(torch.bfloat16, 64, 'tf32')\n"
             "print(json.dumps(rec.as_dict()['compiled']))\n")
    env = {**os.environ, "GPUPRINCIPLES_FORCE_CPU": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (cpu,) = json.loads(done.stdout.strip().splitlines()[-1])
    with counters.record() as rec:
        lk.matmul_tile(torch.bfloat16, 64, "tf32")
    (gpu,) = rec.as_dict()["compiled"]
    assert _evidence(cpu) == _evidence(gpu) and gpu["wgmma"] and gpu["dots"] == ["bf16"]
