"""machine/specs.py and measure/calibrate.py: datasheets, name matching, CPU ceilings and the cache."""

import json
import time

import pytest
import torch

from gpuprinciples.machine import specs
from gpuprinciples.machine.specs import SPECS, spec_for_device_name
from gpuprinciples.measure import calibrate
from gpuprinciples.measure.calibrate import Ceilings


def test_specs_are_sane_dense_figures():
    for key in ("A100", "H100", "H200", "L4", "B200"):
        spec = SPECS[key]
        assert spec.source.startswith("https://")
        assert spec.ridge_point("bf16") > 0 and spec.ridge_point("fp32") > 0
        # dense tensor-core rates sit above the tf32 and the plain fp32 rates
        assert spec.flops("bf16") > spec.flops("tf32") > spec.flops("fp32")
        # the headline sparse figure is twice the dense one, and never what we use
        assert spec.dense_bf16_tflops < spec.sparse_bf16_tflops
        assert spec.sparse_bf16_tflops == pytest.approx(2 * spec.dense_bf16_tflops, rel=0.01)
    assert SPECS["H200"].bandwidth > SPECS["H100"].bandwidth > SPECS["A100"].bandwidth
    assert SPECS["H200"].flops("bf16") == SPECS["H100"].flops("bf16")  # same compute, more memory
    assert SPECS["H100"].ridge_point() == pytest.approx(989.4e12 / 3.35e12)
    assert SPECS["A100"].flops(torch.bfloat16) == 312e12
    assert SPECS["A100"].flops("fp16") == SPECS["A100"].flops(torch.float16)
    with pytest.raises(ValueError):
        SPECS["A100"].flops("int8")


@pytest.mark.parametrize("name, key", [
    ("NVIDIA H200", "H200"),
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA B200", "B200"),
])
def test_device_names_match(name, key):
    assert spec_for_device_name(name) is SPECS[key]


@pytest.mark.parametrize("name", [
    "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GH200 480GB",
    "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA L40S", "NVIDIA GeForce RTX 4090",
])
def test_other_boards_get_no_sheet(name):
    assert spec_for_device_name(name) is None


def test_cpu_ceilings_are_measured_and_labelled():
    c = calibrate.measure_cpu_ceilings(quick=True)
    assert c.device == "cpu" and c.device_name.startswith("CPU")
    assert c.copy_bandwidth > 1e8  # > 0.1 GB/s: any machine that runs torch
    assert c.fp32_flops > 1e8
    assert c.bf16_flops is None and c.tf32_flops is None  # not measured here, and not pretended
    assert c.flops() == c.fp32_flops and c.default_dtype == "fp32"
    with pytest.raises(ValueError, match="no bf16"):
        c.flops("bf16")
    assert "cpu" in str(c)


def test_measure_ceilings_on_cpu_is_the_cpu_measurement():
    assert calibrate.measure_ceilings("cpu", quick=True).device == "cpu"


def test_tf32_switch_restores_the_previous_setting():
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    with calibrate.tf32_matmul(True):
        assert matmul.fp32_precision == "tf32"
        with calibrate.tf32_matmul(False):
            assert matmul.fp32_precision == "ieee"
        assert matmul.fp32_precision == "tf32"
    assert matmul.fp32_precision == before


def test_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPRINCIPLES_CACHE_DIR", str(tmp_path))
    c = Ceilings("cuda", "NVIDIA H200", 4.27e12, 51e12, 688e12, 362e12, time.time())
    path = calibrate.save_ceilings(c)
    assert path.parent == tmp_path
    assert calibrate.load_ceilings("NVIDIA H200") == c
    assert calibrate.load_ceilings("NVIDIA H100 80GB HBM3") is None  # keyed by GPU name
    stale = Ceilings("cuda", "NVIDIA H200", 4.27e12, 51e12, 688e12, 362e12, time.time() - 13 * 3600)
    calibrate.save_ceilings(stale)
    assert calibrate.load_ceilings("NVIDIA H200") is None  # older than 12 hours
    path.write_text("{not json")
    assert calibrate.load_ceilings("NVIDIA H200") is None


def test_ceilings_measures_once_then_reuses(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPRINCIPLES_CACHE_DIR", str(tmp_path))
    first = calibrate.ceilings(device="cpu", quick=True)
    assert len(list(tmp_path.glob("ceilings-*.json"))) == 1
    assert calibrate.ceilings(device="cpu", quick=True) == first  # from the cache
    again = calibrate.ceilings(device="cpu", quick=True, refresh=True)
    assert again.measured_at > first.measured_at
    saved = json.loads(next(tmp_path.glob("ceilings-*.json")).read_text())
    assert saved["measured_at"] == again.measured_at and saved["device"] == "cpu"


def test_a_judgement_on_ceilings_that_read_low_is_made_again_on_ceilings_measured_now(monkeypatch):
    asked = []
    monkeypatch.setattr(calibrate, "ceilings", lambda refresh=False: asked.append(refresh) or ("fresh" if refresh
                                                                                               else "cached"))
    assert calibrate.judged(lambda c: f"judged on {c}", lambda result: False) == "judged on cached"
    assert asked == [False]
    asked.clear()
    assert calibrate.judged(lambda c: f"judged on {c}", lambda result: result.endswith("cached")) == "judged on fresh"
    assert asked == [False, True]


def test_a_timed_exercise_measures_its_ceilings_before_the_learners_code_runs(monkeypatch):
    from gpuprinciples.course.catalog import get
    from gpuprinciples.grader import grading
    asked = []
    monkeypatch.setattr(calibrate, "ceilings", lambda: asked.append("measured"))
    for mode in ("cpu", "gpu"):
        monkeypatch.setattr(grading.runtime, "MODE", mode)
        for exercise in ("fusion.cos_cos", "amp.train_step", "checkpoint.fit_budget", "flash.merge"):
            grading._ceilings_before_the_child(get(exercise))
    assert asked == ["measured"] * 3  # on a GPU, the timed kernel and the two timed steps; never on a CPU


def test_the_memory_this_process_caches_goes_back_before_the_learners_code_runs(monkeypatch):
    from gpuprinciples.grader import grading
    emptied = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(grading.runtime.MODE))
    for mode, initialized in (("cpu", False), ("gpu", False), ("gpu", True)):
        monkeypatch.setattr(grading.runtime, "MODE", mode)
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialized)
        grading._memory_for_the_child()
    assert emptied == ["gpu"]  # only where this process has a CUDA context to give memory back from


def test_l2_comes_from_the_gpu_and_the_table_only_from_a_published_sheet(monkeypatch):
    assert specs.SPECS["H200"].l2_mib is None  # no NVIDIA datasheet states the H200's L2
    assert specs.SPECS["H100"].l2_mib == 50  # the H100 whitepaper's, SXM5
    if not torch.cuda.is_available():
        assert specs.l2_bytes() is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: type("Props", (), {"L2_cache_size": 62_914_560})())
    assert specs.l2_bytes() == 62_914_560  # what the course's H200 reported
