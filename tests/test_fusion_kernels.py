"""Lesson 07's reference kernels, their variants, the exercises' cases, and the drawing of what a kernel touches."""

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from gpuprinciples.course import catalog
from gpuprinciples.course.kernels.bias_gelu import bias_gelu, bias_gelu_flat
from gpuprinciples.course.kernels.cos_cos import cos_cos
from gpuprinciples.course.kernels.layernorm import layernorm
from gpuprinciples.course.kernels.softmax import launch_shape, softmax
from gpuprinciples.course.kernels.vector_add import vector_add
from gpuprinciples.course.lab import drawing
from gpuprinciples.grader.grading import grade
from gpuprinciples.machine import runtime
from gpuprinciples.measure import counters

matplotlib.use("Agg")
needs_interpreter = pytest.mark.skipif(not runtime.INTERPRETER, reason="bytes are counted under the interpreter")


def _moved(rec) -> int:
    return rec.load_bytes + rec.store_bytes + rec.torch_bytes


# -------------------------------------------------------------------------------------------------
# The kernels: right, and exactly the minimum bytes where the shapes allow
# -------------------------------------------------------------------------------------------------


@needs_interpreter
def test_elementwise_kernels_move_the_minimum():
    x, y = torch.randn(3001), torch.randn(3001)
    with counters.record() as rec:
        z = vector_add(x, y, block=256)
    assert torch.equal(z, x + y) and _moved(rec) == 3 * 4 * 3001 and rec.triton_launches == 1
    with counters.record() as rec:
        z = cos_cos(x, block=128, num_warps=2)
    torch.testing.assert_close(z, x.cos().cos())
    assert _moved(rec) == 2 * 4 * 3001 and not rec.torch_compute_ops


@needs_interpreter
@pytest.mark.parametrize("rows", [1, 2, 4])
def test_softmax_variants_are_right_on_strided_rows(rows):
    x = (torch.randn(37, 530) * 300)[:, :517]  # large values, a row stride of 530
    with counters.record() as rec:
        y = softmax(x, rows=rows)
    torch.testing.assert_close(y, torch.softmax(x.double(), -1).float(), rtol=1e-5, atol=1e-6)
    assert _moved(rec) == 2 * 4 * x.numel() and rec.triton_launches == 1


@needs_interpreter
def test_layernorm_reads_x_once_weight_and_bias_from_cache_and_uses_eps():
    m, n = 70, 300
    x = (16 + torch.randn(m, n + 7))[:, :n]
    w, b = torch.randn(n), torch.randn(n)
    for eps in (1e-5, 1e-2):
        with counters.record(cached=(w, b)) as rec:
            y = layernorm(x, w, b, eps)
        want = F.layer_norm(x.double(), (n,), w.double(), b.double(), eps)
        torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-5)
        least = (2 * m * n + 2 * n) * 4
        # every program loads weight and bias (the fast design on a GPU); all but the first loads are re-reads
        programs = rec.launches[0].grid[0]
        assert programs == -(-m // launch_shape(n)[1]) and rec.cached_reread_bytes == (programs - 1) * 2 * n * 4
        assert _moved(rec) - rec.cached_reread_bytes == least


@needs_interpreter
def test_cached_rereads_count_only_the_named_inputs():
    x, w = torch.randn(4, 64), torch.randn(64)

    @triton.jit
    def twice(x_ptr, w_ptr, y_ptr, N: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, N)
        a = tl.load(x_ptr + row * N + cols) + tl.load(x_ptr + row * N + cols)  # x twice: not excused
        tl.store(y_ptr + row * N + cols, a * tl.load(w_ptr + cols) * tl.load(w_ptr + cols))

    y = torch.empty_like(x)
    with counters.record(cached=(w,)) as rec:
        twice[(4,)](x, w, y, N=64)
    assert rec.load_bytes == 2 * x.numel() * 4 + 8 * 64 * 4
    assert rec.cached_reread_bytes == 7 * 64 * 4  # w loaded 8 times, counted once


@needs_interpreter
def test_bias_gelu_uses_descriptors_and_refuses_unaligned_rows():
    x, b = torch.randn(37, 132) * 4, torch.randn(132)
    with counters.record() as rec:
        y = bias_gelu(x, b, block_m=8, block_n=64)
    torch.testing.assert_close(y.double(), F.gelu(x.double() + b.double()), rtol=1e-5, atol=1e-5)
    assert rec.triton_launches == 1 and _moved(rec) <= 1.1 * (2 * x.numel() + 132) * 4
    with pytest.raises(ValueError, match="16-byte"):
        bias_gelu(torch.randn(5, 7), torch.randn(7))


@needs_interpreter
def test_the_flat_bias_gelu_is_right_on_ragged_shapes_in_one_pass():
    """"How far it goes" (kernels/bias_gelu.py): one flat range, the bias by index % N, a partial last block."""
    x, b = torch.randn(37, 133) * 4, torch.randn(133)
    with counters.record() as rec:
        y = bias_gelu_flat(x, b, block=256)
    torch.testing.assert_close(y.double(), F.gelu(x.double() + b.double()), rtol=1e-5, atol=1e-5)
    assert rec.triton_launches == 1 and rec.store_bytes == x.numel() * 4


# -------------------------------------------------------------------------------------------------
# The exercises' cases
# -------------------------------------------------------------------------------------------------


def _cases(name, seed=0):
    return catalog.get(f"fusion.{name}").cases(torch.Generator().manual_seed(seed), "cpu")


def test_cases_have_tails_and_hard_values():
    for seed in range(3):
        ln = _cases("layernorm", seed)
        assert any("offset" in c.label for c in ln) and any(not c.args[0].is_contiguous() for c in ln)
        assert len({c.args[3] for c in ln}) >= 2  # eps varies, so a hard-coded eps fails
        bg = _cases("bias_gelu", seed)
        assert all(c.args[0].shape[1] % 4 == 0 for c in bg)  # 16-byte rows: descriptors are legal
        assert any(c.args[0].shape[1] % 8 for c in bg)  # and still a tail for any block of 8+
        sm = _cases("softmax", seed)
        assert any(torch.isnan(c.args[0]).any() for c in sm)
        va = _cases("vector_add", seed)
        assert any(c.args[0].numel() % 16 for c in va)


def test_every_special_case_holds_each_special_value_alone_in_a_row():
    """Sprinkled NaN and +inf often share a row, and a softmax row with a +inf is NaN whatever the kernel does
    with the NaN: fusion/softmax_nan_wrong passed under some seeds. Every draw must show each value alone."""
    for seed in range(40):
        for name in ("softmax", "layernorm", "bias_gelu", "cos_cos", "vector_add"):
            special = [c.args[0] for c in _cases(name, seed) if "special" in c.label]
            assert special, name
            rows = special[0].reshape(-1, special[0].shape[-1])
            alone = [(row.isnan().sum(), (row == float("inf")).sum(), (row == -float("inf")).sum()) for row in rows]
            for which in range(3):
                assert any(counts[which] == 1 and sum(counts) == 1 for counts in alone), (name, seed, which)


def test_prediction_is_graded():
    assert grade("fusion.naive_softmax_accesses", 8).passed
    assert not grade("fusion.naive_softmax_accesses", 5).passed
    assert grade("fusion.naive_softmax_accesses", None).status == "not attempted"


@needs_interpreter
def test_naive_softmax_really_makes_about_8_accesses():
    x = torch.randn(64, 1000)
    with counters.record() as rec:
        m = x.max(dim=1, keepdim=True).values
        num = torch.exp(x - m)
        num / num.sum(dim=1, keepdim=True)
    assert 8.0 <= rec.torch_bytes / (4 * x.numel()) < 8.1


# -------------------------------------------------------------------------------------------------
# Drawing what a kernel touches
# -------------------------------------------------------------------------------------------------


@triton.jit
def _unmasked_load(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # the bug: no mask
    tl.store(y_ptr + offs, x, mask=offs < n)


@needs_interpreter
def test_touches_show_a_missing_mask_past_the_end():
    buffer = torch.randn(64)
    x, y = buffer[:37], torch.empty(37)
    with counters.record(trace=True) as rec:
        _unmasked_load[(3,)](x, y, 37, BLOCK=16)
    touches = drawing.program_touches(rec, x)
    assert sorted(touches) == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]
    assert list(touches[(2, 0, 0)]["load"]) == list(range(32, 48))  # 11 past the end
    img = drawing.image(touches[(2, 0, 0)], (3, 16), inside=37)
    red, blue = drawing._CODES["outside touched"], drawing._CODES["load"]
    assert (img == red).sum() == 11 and (img == blue).sum() == 5
    assert (drawing.image(touches[(0, 0, 0)], (3, 16), inside=37) == red).sum() == 0
    stores = drawing.program_touches(rec, y)
    assert sum(len(t["store"]) for t in stores.values()) == 37 and max(stores[(2, 0, 0)]["store"]) == 36
    fig = drawing.draw_kernel(rec, x, width=16)
    assert len([ax for ax in fig.axes if ax.images]) == 3


@needs_interpreter
def test_a_masked_kernel_stays_inside_and_strided_gaps_are_outside():
    x = torch.randn(6, 13)[:, :10]
    with counters.record(trace=True) as rec:
        softmax(x, rows=2)
    touches = drawing.program_touches(rec, x)
    assert len(touches) == 3
    inside = (np.arange(6)[:, None] < 6) & (np.arange(13)[None, :] < 10)
    for touch in touches.values():
        img = drawing.image(touch, (6, 13), inside=inside)
        assert (img == drawing._CODES["outside touched"]).sum() == 0
        assert (img == drawing._CODES["load"]).sum() == 20
    fig = drawing.draw(touches, (6, 13), inside=inside, max_programs=2)
    assert "first 2 of 3 programs" in fig._suptitle.get_text()


def test_draw_is_generic():
    # lesson 08 hands it tiles it computed itself
    touches = {(0, 0): {"load": np.arange(0, 8)}, (0, 1): {"load": np.arange(8, 16), "store": np.arange(8, 12)}}
    img = drawing.image(touches[(0, 1)], (4, 4))
    assert (img == drawing._CODES["both"]).sum() == 4 and (img == drawing._CODES["load"]).sum() == 4
    fig = drawing.draw(touches, (4, 4), title="tiles")
    assert len([ax for ax in fig.axes if ax.images]) == 2
