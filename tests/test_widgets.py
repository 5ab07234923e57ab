"""The factory-and-warehouse model, exactly, and the widgets built on it (no display needed)."""

import math

import pytest

from gpuprinciples.course.lab import roofline
from gpuprinciples.course.lab.widgets import (
    PRECISIONS,
    as_preset,
    factory_time,
    factory_widget,
    roofline_point,
    roofline_widget,
)
from gpuprinciples.machine import specs
from gpuprinciples.measure import calibrate

# --- the model ---------------------------------------------------------------------------------


def test_memory_bound_elementwise_op():
    # fp32 y = x + 1 on 2**20 elements: 1 FLOP and 8 bytes per element, on 1e12 FLOP/s and 1e11 B/s
    r = factory_time(2**20, 8 * 2**20, compute_flops=1e12, bandwidth=1e11)
    assert r["compute_time"] == 2**20 / 1e12
    assert r["memory_time"] == 8 * 2**20 / 1e11
    assert r["time"] == r["memory_time"]
    assert r["bound"] == "memory"
    assert r["idle_memory_fraction"] == 0.0
    assert r["idle_compute_fraction"] == pytest.approx(1 - (2**20 / 1e12) / (8 * 2**20 / 1e11), rel=1e-15)
    assert r["intensity"] == 0.125 and r["ridge"] == 10.0


def test_compute_bound_matmul():
    n = 4096  # bf16 matmul: 2n^3 FLOPs over 3 n^2 * 2 bytes
    flops, bytes_ = 2 * n**3, 3 * n * n * 2
    r = factory_time(flops, bytes_, compute_flops=989.4e12, bandwidth=3.35e12)
    assert r["bound"] == "compute"
    assert r["time"] == flops / 989.4e12
    assert r["idle_compute_fraction"] == 0.0
    # the road is busy for ridge/intensity of the time: (989.4/3.35) / (4096/3)
    assert r["idle_memory_fraction"] == pytest.approx(1 - (989.4e12 / 3.35e12) / (n / 3), rel=1e-12)
    assert r["intensity"] == pytest.approx(n / 3)


def test_bound_switches_at_the_ridge():
    compute, bandwidth = 1e12, 1e11  # ridge: 10 FLOP/byte
    bytes_ = 1e6
    assert factory_time(9.99e6, bytes_, compute, bandwidth)["bound"] == "memory"
    balanced = factory_time(1e7, bytes_, compute, bandwidth)
    assert balanced["bound"] == "balanced"
    assert balanced["idle_compute_fraction"] == balanced["idle_memory_fraction"] == 0.0
    assert factory_time(1.001e7, bytes_, compute, bandwidth)["bound"] == "compute"
    # doubling the bandwidth halves the ridge: the same op becomes compute-bound
    assert factory_time(9.99e6, bytes_, compute, 2 * bandwidth)["bound"] == "compute"


def test_overhead_is_added_per_launch_and_can_be_the_bound():
    r = factory_time(1e3, 8e3, compute_flops=1e12, bandwidth=1e12, launches=2, overhead_s=5e-6)
    assert r["overhead_time"] == 1e-5
    assert r["time"] == 8e3 / 1e12 + 1e-5
    assert r["bound"] == "overhead"
    assert r["idle_memory_fraction"] == pytest.approx(1 - 8e-9 / r["time"])
    big = factory_time(1e9, 8e9, compute_flops=1e12, bandwidth=1e12, launches=2, overhead_s=5e-6)
    assert big["bound"] == "memory"  # the same launches are noise next to 8 ms of traffic


def test_agrees_with_the_roofline_module():
    for flops, bytes_ in [(1e6, 1e9), (1e12, 1e6), (3e9, 2e7)]:
        r = factory_time(flops, bytes_, 67e12, 4.8e12, launches=3, overhead_s=2e-6)
        assert r["time"] == pytest.approx(roofline.predict_time(flops, bytes_, 67e12, 4.8e12, 6e-6), rel=1e-15)
        achieved = flops / (r["time"] - r["overhead_time"])
        assert achieved == pytest.approx(roofline.attainable(67e12, 4.8e12, flops / bytes_), rel=1e-12)


@pytest.mark.parametrize("args", [(1, 1, 0, 1), (1, 1, 1, 0), (-1, 1, 1, 1), (0, 0, 1, 1)])
def test_nonsense_is_refused(args):
    with pytest.raises(ValueError):
        factory_time(*args)


def test_no_bytes_means_infinite_intensity():
    r = factory_time(1e6, 0, 1e12, 1e12)
    assert math.isinf(r["intensity"]) and r["bound"] == "compute"


# --- presets -----------------------------------------------------------------------------------


def test_presets_from_spec_sheets_and_measured_ceilings():
    h100 = as_preset(specs.SPECS["H100"])
    assert h100.compute("bf16") == (989.4e12, "bf16")
    assert h100.compute("fp32") == (67e12, "fp32")
    assert h100.bandwidth == 3.35e12
    cpu = as_preset(calibrate.Ceilings("cpu", "CPU test", copy_bandwidth=2e10, fp32_flops=1e11))
    assert cpu.name == "this machine (CPU test)" and cpu.bandwidth == 2e10
    assert cpu.compute("bf16") == (1e11, "fp32")  # not measured here: fp32, said so
    with pytest.raises(ValueError):
        as_preset({"bandwidth": 1e9})


# --- the widgets ------------------------------------------------------------------------------


def test_factory_widget_redraws_on_a_slider_change():
    box = factory_widget(flops=2**24, bytes_=8 * 2**24)
    assert box.preset.value == specs.SPECS["A100"].name
    assert box.result["bound"] == "memory"
    assert "memory-bound" in box.summary.value
    assert bytes(box.picture.value).startswith(b"\x89PNG")
    before_text, before_png = box.summary.value, box.picture.value

    box.sliders["flops"].value = 1e13  # far past the ridge
    assert box.result["bound"] == "compute"
    assert "compute-bound" in box.summary.value and box.summary.value != before_text
    assert bytes(box.picture.value) != bytes(before_png)
    assert box.result["time"] == pytest.approx(1e13 / 19.5e12)

    box.sliders["overhead_us"].value = 10
    box.sliders["launches"].value = 1000
    assert box.result["overhead_time"] == pytest.approx(1000 * 10e-6)


def test_factory_widget_presets_and_custom_machine():
    box = factory_widget(precision="fp32")
    box.preset.value = specs.SPECS["H200"].name
    assert box.sliders["compute"].value == 67e12 and box.sliders["bandwidth"].value == 4.8e12
    box.precision.value = "bf16"
    assert box.sliders["compute"].value == 989.4e12
    assert box.preset.value == specs.SPECS["H200"].name, "a preset moving the sliders stays that preset"
    box.sliders["bandwidth"].value = 1e10
    assert box.preset.value == "custom"
    assert box.result["memory_time"] == pytest.approx(8 * 2**24 / 1e10)


def test_factory_widget_offers_this_machine_first():
    here = calibrate.Ceilings("cpu", "CPU test", copy_bandwidth=2e10, fp32_flops=1e11)
    box = factory_widget(ceilings=here, precision="bf16")
    assert box.preset.value == "this machine (CPU test)"
    assert box.sliders["compute"].value == 1e11
    assert "bf16 was not measured" in box.summary.value


def test_roofline_widget_moves_the_point():
    box = roofline_widget(intensity=0.25, precision="bf16")
    spec = specs.SPECS["A100"]
    assert box.result == roofline_point(0.25, spec.flops("bf16"), spec.bandwidth)
    assert box.result["bound"] == "memory"
    assert box.result["attainable_flops"] == pytest.approx(0.25 * spec.bandwidth)
    png = box.picture.value
    box.intensity.value = 1000
    assert box.result["bound"] == "compute" and box.result["fraction_of_peak"] == 1.0
    assert "compute-bound" in box.summary.value and bytes(box.picture.value) != bytes(png)
    box.preset.value = specs.SPECS["H200"].name
    assert box.result["ridge"] == pytest.approx(989.4e12 / 4.8e12)


def test_every_precision_is_offered():
    assert set(PRECISIONS) == {"bf16", "tf32", "fp32"}
