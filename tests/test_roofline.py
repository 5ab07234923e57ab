"""roofline.py: the model's arithmetic, the bound it names, projections and the plot."""

import pickle

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpuprinciples.course.lab import roofline as rl  # noqa: E402
from gpuprinciples.machine.specs import SPECS  # noqa: E402
from gpuprinciples.measure.calibrate import Ceilings

PEAK, BW = 100e12, 2e12  # a made-up GPU: ridge at 50 FLOP/byte


def test_math_on_hand_computed_cases():
    assert rl.intensity(1000, 250) == 4.0
    assert rl.ridge_point(PEAK, BW) == 50.0
    assert rl.attainable(PEAK, BW, 10) == 20e12  # memory roof: 2e12 * 10
    assert rl.attainable(PEAK, BW, 50) == PEAK
    assert rl.attainable(PEAK, BW, 500) == PEAK  # flat compute roof
    np.testing.assert_array_equal(rl.attainable(PEAK, BW, np.array([1.0, 1000.0])), [2e12, PEAK])
    # a 2^28-element fp32 x.cos(): 1 FLOP-ish per element, 8 bytes per element -> memory time
    n = 2**28
    assert rl.predict_time(n, 8 * n, PEAK, BW) == 8 * n / BW
    # 8192^3 matmul: compute time, plus a fixed overhead
    m = 8192
    flops, nbytes = 2 * m**3, 3 * m * m * 2
    assert rl.predict_time(flops, nbytes, PEAK, BW, overhead_s=1e-5) == pytest.approx(flops / PEAK + 1e-5)
    with pytest.raises(ValueError):
        rl.intensity(1, 0)


def test_bound_classification():
    n = 2**28
    assert rl.bound(n, 8 * n, PEAK, BW) == "memory"
    assert rl.bound(2 * 8192**3, 3 * 8192**2 * 2, PEAK, BW) == "compute"
    assert rl.bound(1024, 8 * 1024, PEAK, BW) == "overhead"  # nanoseconds of work: below the launch floor
    assert rl.bound(1024, 8 * 1024, PEAK, BW, overhead_s=0.0) == "memory"
    memory_s = 8 * n / BW
    assert rl.bound(n, 8 * n, PEAK, BW, measured_s=1.5 * memory_s) == "memory"  # slow, but explained
    assert rl.bound(n, 8 * n, PEAK, BW, measured_s=10 * memory_s) == "overhead"  # neither explains it


def test_project_is_a_labelled_number():
    n = 2**28
    p = rl.project(n, 8 * n, SPECS["H100"], dtype="fp32")
    assert float(p) == pytest.approx(8 * n / 3.35e12)
    assert p.gpu == SPECS["H100"].name and p.bound == "memory" and p.dtype == "fp32"
    assert "not measured" in repr(p) and "H100" in str(p)
    assert p * 1e3 == pytest.approx(float(p) * 1e3)
    assert pickle.loads(pickle.dumps(p)).gpu == p.gpu
    # same bytes on an H200 is faster by the bandwidth ratio
    assert rl.project(n, 8 * n, SPECS["H200"], "fp32") == pytest.approx(float(p) * 3.35 / 4.8)
    m = 8192
    mm = rl.project(2 * m**3, 3 * m * m * 2, SPECS["A100"], "bf16")
    assert mm.bound == "compute" and float(mm) == pytest.approx(2 * m**3 / 312e12)


def test_roof_of_accepts_specs_ceilings_and_pairs():
    assert rl.roof_of(SPECS["H200"]) == (989.4e12, 4.8e12)
    assert rl.roof_of(SPECS["H200"], "tf32") == (494.7e12, 4.8e12)
    gpu = Ceilings("cuda", "NVIDIA H200", 4.27e12, 51e12, 688e12, 362e12)
    assert rl.roof_of(gpu) == (688e12, 4.27e12)
    assert rl.roof_of(gpu, "fp32") == (51e12, 4.27e12)
    cpu = Ceilings("cpu", "CPU test", 1e10, 1e11)
    assert rl.roof_of(cpu) == (1e11, 1e10)
    assert rl.roof_of((PEAK, BW)) == (PEAK, BW)


def test_plot_draws_roof_ridge_and_points(tmp_path):
    points = [("cos", 0.125, 0.4e12), ("matmul", 2000.0, 80e12)]
    ax = rl.plot(PEAK, BW, points=points, title="made-up GPU")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_title() == "made-up GPU"
    offsets = [tuple(c.get_offsets()[0]) for c in ax.collections]
    assert offsets == [(0.125, 0.4e12), (2000.0, 80e12)]
    texts = [t.get_text() for t in ax.texts]
    assert "cos" in texts and "matmul" in texts
    assert any(t.startswith("ridge 50") for t in texts)
    roof = ax.lines[0]
    x, y = roof.get_data()
    np.testing.assert_allclose(y, np.minimum(PEAK, BW * x))
    assert x.min() < 0.125 and x.max() > 2000
    path = tmp_path / "roofline.png"
    ax.figure.savefig(path)
    assert path.stat().st_size > 1000 and path.read_bytes()[:4] == b"\x89PNG"
    plt.close(ax.figure)


def test_plot_takes_a_spec_or_ceilings_on_a_given_axes():
    fig, (left, right) = plt.subplots(1, 2)
    assert rl.plot(SPECS["H100"], points=[("x", 1.0, 1e12)], ax=left) is left
    assert "H100" in left.get_title() and "datasheet" in left.get_title()
    cpu = Ceilings("cpu", "CPU test", 1e10, 1e11)
    rl.plot(cpu, ax=right)
    assert "measured" in right.get_title()
    assert any(t.get_text().startswith("ridge 10") for t in right.texts)
    with pytest.raises(ValueError):
        rl.plot(PEAK, BW, points=[("zero", 1.0, 0.0)], ax=right)
    plt.close(fig)
