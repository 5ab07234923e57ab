"""The counters: bytes per masked lane, launches, PyTorch operators, FLOPs by dtype, saved bytes."""

import pytest
import torch
import triton
import triton.language as tl

from gpuprinciples.machine import runtime
from gpuprinciples.measure import bounds, counters


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


def copy(x, block=64):
    y = torch.empty_like(x)
    _copy_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return y


interpreter_only = pytest.mark.skipif(not runtime.INTERPRETER, reason="bytes are counted under the interpreter")


@interpreter_only
def test_memory_written_counts_each_byte_once_however_often_it_is_written():
    """An atomic sum adds into one float once per program: 10 programs store 40 bytes (and load them), but
    what they keep in memory is 4 bytes (backward.attention_backward's dQ, added tile by tile, is dQ once)."""
    x, out = torch.ones(640), torch.zeros(1)
    with counters.record(stores=True) as rec:
        _sum_kernel[(10,)](x, out, x.numel(), BLOCK=64)
        copy(torch.randn(100))
    assert out.item() == 640
    assert rec.store_bytes == 40 + 400 and rec.store_footprint_bytes == 4 + 400
    with counters.record() as untracked:
        copy(torch.randn(10))
    assert untracked.store_footprint_bytes is None


@interpreter_only
@pytest.mark.parametrize("n", [1, 63, 64, 65, 1000])
def test_masked_lanes_are_not_counted(n):
    x = torch.randn(n)
    with counters.record() as rec:
        y = copy(x)
    assert torch.equal(x, y)
    assert rec.load_bytes == rec.store_bytes == 4 * n  # not 4 * 64 * ceil(n / 64)
    assert rec.triton_launches == 1 and rec.kernel_names == ["_copy_kernel"]
    assert rec.launches[0].load_bytes == 4 * n


@interpreter_only
def test_dtype_sizes_and_atomics():
    x = torch.randn(100, dtype=torch.float16)
    with counters.record() as rec:
        copy(x)
    assert rec.load_bytes == 200
    total = torch.zeros(1)
    with counters.record() as rec:
        _sum_kernel[(2,)](torch.ones(100), total, 100, BLOCK=64)
    assert total.item() == 100
    assert rec.load_bytes == 400 + 2 * 4 and rec.store_bytes == 2 * 4  # each atomic reads and writes


@triton.jit
def _store_iota(dst, n, BLOCK: tl.constexpr):
    at = tl.arange(0, BLOCK)
    tl.store(dst + at, at.to(tl.float32), mask=at < n)


@triton.jit
def _store_through_address(table, n, BLOCK: tl.constexpr):
    dst = tl.load(table).to(tl.pointer_type(tl.float32))  # an address made from an integer
    at = tl.arange(0, BLOCK)
    tl.store(dst + at, at.to(tl.float32), mask=at < n)


@interpreter_only
def test_a_store_outside_every_argument_is_refused_before_it_lands():
    wide = torch.zeros(64)
    _store_iota[(1,)](wide[:32], 64, BLOCK=64)  # past the view, inside its storage: as on a GPU, allowed
    assert torch.equal(wide, torch.arange(64.0))
    with pytest.raises(bounds.OutOfBounds, match=r"stored 16 element\(s\) outside every tensor passed to it; "
                                                 r"the first at element 48 of the memory under `dst`"):
        _store_iota[(1,)](torch.zeros(48), 64, BLOCK=64)
    assert counters._state.bounds is None  # cleared after the launch
    table = torch.tensor([wide.data_ptr()], dtype=torch.int64)
    _store_through_address[(1,)](table, 8, BLOCK=8)  # a launch that makes pointers is not checked
    assert torch.equal(wide[:8], torch.arange(8.0))


@triton.jit
def _sum_unmasked(src, dst, BLOCK: tl.constexpr):
    tl.store(dst, tl.sum(tl.load(src + tl.arange(0, BLOCK)), 0))  # no mask: every lane loads


@interpreter_only
def test_a_load_outside_every_argument_is_refused_before_it_reads():
    """Under the interpreter a stray load reads the grader's own memory (whatever lies there, or a SIGSEGV); on a GPU
    another tensor's values, or an illegal memory access."""
    out = torch.zeros(1)
    _sum_unmasked[(1,)](torch.ones(64)[:40], out, BLOCK=64)  # past the view, inside its storage: allowed
    assert out.item() == 64
    with pytest.raises(bounds.OutOfBounds, match=r"kernel `_sum_unmasked` \(program \(0, 0, 0\)\) loaded 24 "
                                                 r"element\(s\) outside every tensor passed to it; the first at "
                                                 r"element 40 of the memory under `src`, which holds 40.*refused the "
                                                 r"load"):
        _sum_unmasked[(1,)](torch.ones(40), out, BLOCK=64)


def test_two_launches_counted():
    x = torch.randn(300, device=runtime.DEVICE)
    with counters.record() as rec:
        copy(copy(x))
    assert rec.triton_launches == 2


def test_nothing_counted_outside_a_recording():
    with counters.record() as rec:
        pass
    copy(torch.randn(10, device=runtime.DEVICE))
    assert rec.triton_launches == 0 and rec.load_bytes == 0


def test_nested_recordings_both_count():
    with counters.record() as outer:
        copy(torch.randn(10, device=runtime.DEVICE))
        with counters.record() as inner:
            copy(torch.randn(10, device=runtime.DEVICE))
    assert outer.triton_launches == 2 and inner.triton_launches == 1


def test_torch_ops_are_classified():
    x = torch.randn(64, 32)
    with counters.record() as rec:
        torch.empty(10)
        x.t().reshape(-1)  # a transpose (a view), then a reshape that must copy
        x.cos()
        x[:, :5].contiguous()
    assert "cos" in rec.torch_compute_ops
    assert "empty" not in rec.torch_compute_ops and "clone" not in rec.torch_compute_ops
    assert rec.torch_bytes >= 2 * x.numel() * 4  # cos read x and wrote its result
    assert rec.largest_new_numel == x.numel()


def test_the_interpreters_own_copies_are_not_the_learners():
    x = torch.randn(100, device=runtime.DEVICE)
    with counters.record() as rec:
        copy(x)
    assert rec.torch_compute_ops == {} and rec.torch_bytes == 0


def test_matmul_flops_by_dtype():
    a, b = torch.randn(16, 32), torch.randn(32, 8)
    with counters.record() as rec:
        a @ b
        a.bfloat16() @ b.bfloat16()
    assert rec.flops_by_dtype["float32"] == 2 * 16 * 32 * 8
    assert rec.flops_by_dtype["bfloat16"] == 2 * 16 * 32 * 8


def test_saved_bytes_for_backward():
    w = torch.randn(64, 64, requires_grad=True)
    x = torch.randn(8, 64)
    with counters.record(saved=True) as rec:
        (x @ w).relu().sum()
    # the matmul keeps x (for w's gradient; x needs none, so w is not kept), relu keeps its output
    assert rec.saved_bytes == (8 * 64 + 8 * 64) * 4
    with counters.record(saved=True) as rec_nograd:
        with torch.no_grad():
            (x @ w).relu().sum()
    assert rec_nograd.saved_bytes == 0


@interpreter_only
def test_trace_shows_which_program_touched_what():
    x = torch.randn(100)
    with counters.record(trace=True) as rec:
        copy(x, block=64)
    seen = counters.touched(rec, x)
    assert sorted(seen) == [(0, 0, 0), (1, 0, 0)]
    assert list(seen[(0, 0, 0)]["load"]) == list(range(64))
    assert list(seen[(1, 0, 0)]["load"]) == list(range(64, 100))  # masked lanes absent
    assert len(seen[(1, 0, 0)]["store"]) == 0  # stores went to y, not x


def test_nested_recordings_count_torch_ops_once_each():
    x = torch.randn(10)
    with counters.record() as outer:
        with counters.record() as inner:
            x.cos()
    assert outer.torch_compute_ops["cos"] == 1 and inner.torch_compute_ops["cos"] == 1


@interpreter_only
def test_loads_of_an_input_changed_and_put_back_are_seen():
    x = torch.randn(1000)
    with counters.record(inputs=[x]) as honest:
        copy(x)
    assert honest.as_dict()["input_loads_changed"] == 0
    assert honest.input_load_bytes == 4 * x.numel()

    saved = x.clone()
    with counters.record(inputs=[x]) as smuggled:
        x.numpy()[:7] = 42.0  # NumPy: unseen by PyTorch's dispatcher
        y = copy(x)
        x.numpy()[...] = saved.numpy()  # put back: the input looks untouched afterwards
    assert torch.equal(x, saved) and torch.equal(y[:7], torch.full((7,), 42.0))
    assert smuggled.as_dict()["input_loads_changed"] == 7


def test_no_input_check_without_inputs():
    with counters.record() as rec:
        torch.ones(3) + 1
    assert rec.as_dict()["input_loads_changed"] is None


# A kernel made an operator (PyTorch's way to let torch.compile trace it), PyTorch arithmetic hidden in one, and
# an operator registered without a Python body: the first is a launch, the other two are PyTorch's work.
@torch.library.triton_op("gpuprinciples_tests::copy", mutates_args={})
def _copy_op(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    torch.library.wrap_triton(_copy_kernel)[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y


@torch.library.custom_op("gpuprinciples_tests::cos_cos", mutates_args=())
def _hidden_cos_cos(x: torch.Tensor) -> torch.Tensor:
    return x.cos().cos()


_LIBRARY = torch.library.Library("gpuprinciples_tests_opaque", "DEF")
_LIBRARY.define("cos_cos(Tensor x) -> Tensor")
_LIBRARY.impl("cos_cos", lambda x: x.cos().cos(), "CompositeExplicitAutograd")


def test_a_custom_operators_python_body_is_counted_as_if_written_inline():
    x = torch.randn(100, device=runtime.DEVICE)
    with counters.record() as rec:
        y = _copy_op(x)
    assert torch.equal(x, y)
    assert rec.kernel_names == ["_copy_kernel"] and not rec.torch_compute_ops, rec.as_dict()
    assert rec.torch_ops["gpuprinciples_tests::copy"] == 1  # seen (the profiler sees it too), not as compute
    with counters.record() as rec:
        _hidden_cos_cos(x)
    assert rec.torch_compute_ops == {"cos": 2}, rec.as_dict()
    with counters.record() as rec:  # no Python body to run: opaque, so counted as compute under its name
        torch.ops.gpuprinciples_tests_opaque.cos_cos(x)
    assert rec.torch_compute_ops == {"gpuprinciples_tests_opaque::cos_cos": 1}, rec.as_dict()
