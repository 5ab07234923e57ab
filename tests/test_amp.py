"""Lesson 04: amp.train_step graded for real (fp32 loss curve, first-step gradients, FLOPs by dtype,
master weights), and wrong conversions failed for the right reason."""

import warnings

import pytest
import torch

from gpuprinciples.course.exercises import amp
from gpuprinciples.course.lab.models import tiny_lm, token_batch
from gpuprinciples.grader.grading import grade

SEED = 20261202


def test_fp16_underflow_and_scaling():
    grad = torch.tensor(1e-8)
    assert grad.half().item() == 0.0  # below fp16's smallest subnormal (6e-8): gone
    scaled = (grad * 65536).half()  # the GradScaler's initial scale
    assert scaled.item() != 0.0
    assert abs(scaled.float().item() / 65536 - 1e-8) < 1e-10  # unscaled in fp32, it survives
    assert grad.bfloat16().item() != 0.0  # bf16 has fp32's exponent range


def test_matmul_flops_by_dtype_under_cpu_autocast():
    model = tiny_lm(0, vocab=64, d_model=16, hidden=32, n_layers=2)
    x, y = token_batch(1, 64, 2, 8)
    counter = amp.MatmulFlops()
    with counter:
        model.loss(x, y).backward()
    assert set(counter.by_dtype) == {"float32"}
    tokens = 16
    forward = 2 * tokens * (2 * 2 * 16 * 32 + 16 * 64)  # two blocks of two Linears, the head
    assert counter.by_dtype["float32"] == 3 * forward  # backward is twice the forward
    counter = amp.MatmulFlops()
    with counter, torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model.loss(x, y)
    with counter:
        loss.backward()
    assert counter.by_dtype == {"bfloat16": 3 * forward}
    assert amp.low_precision_share(counter.by_dtype) == 1.0


def test_reference_solution_passes():
    report = grade("amp.train_step", amp.amp_step, seed=SEED)
    assert report.passed, report.reasons


def test_autocast_for_cuda_casts_on_the_cpu_that_stands_in_for_a_gpu():
    """Where PyTorch has no GPU, `torch.autocast("cuda")` and `torch.cuda.amp.autocast()` cast on the CPU (the
    interpreter's stand-in), as they would on a GPU; PyTorch alone would disable them with a warning."""
    from gpuprinciples.machine import runtime
    if not runtime.INTERPRETER:
        pytest.skip("a GPU autocasts for itself")
    a, b = torch.randn(4, 8), torch.randn(8, 2)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert (a @ b).dtype == torch.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.cuda.amp.autocast is deprecated, still works
        with torch.cuda.amp.autocast(dtype=torch.float16):
            assert (a @ b).dtype == torch.float16
    with torch.autocast("cuda"):  # no dtype: the GPU's default, float16 (the CPU's own would be bfloat16)
        assert (a @ b).dtype == torch.float16
    # the functional switches, as a hand-written step may use them
    torch.set_autocast_dtype("cuda", torch.bfloat16)
    torch.set_autocast_enabled("cuda", True)
    try:
        assert torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda") == torch.bfloat16
        assert (a @ b).dtype == torch.bfloat16
    finally:
        torch.set_autocast_enabled("cuda", False)
        torch.set_autocast_dtype("cuda", torch.bfloat16)  # the CPU's default, which stands for both here
    assert (a @ b).dtype == torch.float32
