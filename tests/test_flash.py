"""Lesson 08 (FlashAttention): the exercises' data, the reference solutions, and the kernel itself."""

import math
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from on_device import on_device

from gpuprinciples.course.exercises import flash
from gpuprinciples.course.kernels.attention import attention, attention_float64, naive_attention
from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, NOT_ATTEMPTED, PASSED
from gpuprinciples.machine import runtime
from gpuprinciples.sandbox.submission import Submission


def reasons(report) -> str:
    return " ".join(report.reasons).lower()


def solution(spec: str) -> Submission:
    module, name = spec.split(":")
    return Submission(source=f"from {module} import {name}\n", name=name, origin=spec)


# --- the kernel ----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,causal", [((1, 2, 77, 32), False), ((2, 1, 45, 64), True), ((1, 1, 1, 32), True),
                                          ((1, 1, 64, 128), True), ((1, 1, 100, 16), False)])
def test_kernel_matches_float64(shape, causal):
    gen = torch.Generator().manual_seed(0)
    q, k, v = on_device(*(torch.randn(shape, generator=gen) for _ in range(3)))
    want = naive_attention(q.double(), k.double(), v.double(), causal)
    assert (attention(q, k, v, causal).double() - want).abs().max() < 1e-5


def test_kernel_survives_large_scores_and_strided_views():
    gen = torch.Generator().manual_seed(1)
    q, k = on_device(*(torch.randn(1, 90, 2, 32, generator=gen).transpose(1, 2) * 8 for _ in range(2)))
    v = on_device(torch.randn(1, 2, 90, 32, generator=gen))
    want = naive_attention(q.double(), k.double(), v.double(), True)
    got = attention(q, k, v, True)
    assert torch.isfinite(got).all() and (got.double() - want).abs().max() < 1e-4


def test_program_order_changes_nothing_but_the_order():
    # l2_sweep's second order (head by head): the same answer, bit for bit
    gen = torch.Generator().manual_seed(3)
    q, k, v = on_device(*(torch.randn(2, 3, 70, 32, generator=gen) for _ in range(3)))
    for causal in (False, True):
        blocks = {"BLOCK_M": 32, "BLOCK_N": 32}
        assert torch.equal(attention(q, k, v, causal, blocks=blocks),
                           attention(q, k, v, causal, blocks=blocks, heads_inner=True))


def test_descriptors_made_by_the_wrapper_and_the_persistent_kernel_give_the_same_answer():
    # K/V descriptors over [B·H·N, D] (row0 = the head's first row) and one program walking several work items
    from gpuprinciples.course.kernels.attention import CPU_BLOCKS, attention_persistent
    gen = torch.Generator().manual_seed(4)
    q, k, v = on_device(*(torch.randn(2, 3, 128, 32, generator=gen) * 3 for _ in range(3)))
    for causal in (False, True):
        want = naive_attention(q.double(), k.double(), v.double(), causal)
        got = attention(q, k, v, causal, blocks=CPU_BLOCKS, host_desc=True)
        assert (got.double() - want).abs().max() < 1e-4
    got = attention_persistent(q, k, v, programs=5)  # 24 work items over 5 programs
    assert (got.double() - naive_attention(q.double(), k.double(), v.double())).abs().max() < 1e-4
    with pytest.raises(AssertionError, match="multiple of 128"):
        attention(q[:, :, :100], k[:, :, :100], v[:, :, :100], host_desc=True)


@pytest.mark.parametrize("host", [False, True])
def test_the_loop_is_warp_specialised_with_the_wrappers_kv_descriptors(host):
    """Compiled for sm_90: two computing warpgroups and a producer (12 warps, registers moved by setmaxnreg), whether
    K and V come through the wrapper's descriptors or the program's own (a wrapper-made Q descriptor, its tile fixed,
    makes Triton 3.6-3.9's warp specialisation refuse the kernel: Q and O stay the program's own)."""
    from gpuprinciples.course.kernels.attention import _host_descriptors, attention_kernel
    from gpuprinciples.toolchain import gpucompile

    t = torch.empty(1, 2, 256, 128, dtype=torch.bfloat16)
    kv = _host_descriptors(t, t, 128) if host else (t, t)
    info = gpucompile.compile_launch(attention_kernel, (t, *kv, t, 2, 256, 0.1, *t.stride()[:3] * 4, 256), dict(
        D=128, CAUSAL=False, PRECISION="tf32", BLOCK_M=128, BLOCK_N=128, EVEN_N=True, WARP_SPECIALIZE=True,
        HOST_DESC=host, num_warps=4, num_stages=2))
    assert info.ok, info.error
    assert info.num_warps == 12 and "setmaxnreg" in info.ptx


def test_bytes_without_a_cache_give_an_intensity_of_about_block_m():
    from gpuprinciples.course.kernels.attention import hbm_bytes_without_cache
    B, H, N, D = 1, 1, 4096, 128
    moved = hbm_bytes_without_cache(B, H, N, D, 128, 2)
    assert moved == 4 * N * D * (1 + N // 128)  # per head, bf16: Q and O once, K and V once per query tile
    assert round(4 * N * N * D / moved) == 124  # FLOP per byte: N·BLOCK_M / (N + BLOCK_M)


def test_the_reference_is_softmax_attention():
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 3, 20, 32, generator=gen) for _ in range(3))
    for causal in (False, True):
        want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
        assert torch.allclose(attention_float64(q, k, v, causal), want, atol=1e-12)


# --- the exercises' data -------------------------------------------------------------------------


def test_cases_are_fresh_odd_and_cover_the_contract():
    a = flash._attention_cases(torch.Generator().manual_seed(1), "cpu")
    b = flash._attention_cases(torch.Generator().manual_seed(2), "cpu")
    assert [c.label for c in a] != [c.label for c in b]
    sizes = {c.args[0].shape[2] for c in a}
    assert any(n % 32 for n in sizes) and 128 in sizes
    assert {c.args[0].shape[3] for c in a} == {32, 64, 128}
    assert {c.kwargs["causal"] for c in a} == {False, True}
    assert any(not c.args[0].is_contiguous() for c in a)
    # float32 under the interpreter, and the GPU's dtypes once each, for the GPU's compiler to see (GPU_HALF_DTYPES)
    assert [c.args[0].dtype for c in a if c.args[0].dtype != torch.float32] == [torch.bfloat16, torch.float16]
    gpu = flash._attention_cases(torch.Generator().manual_seed(1), "gpu")
    assert {c.args[0].dtype for c in gpu} == {torch.bfloat16, torch.float16}
    for cases in (a, gpu):  # q, k, v with strides of their own: one stride set for all three is wrong
        assert any(c.args[1].untyped_storage().data_ptr() == c.args[2].untyped_storage().data_ptr() for c in cases)
        assert any(c.args[0].stride() != c.args[1].stride() for c in cases)
        assert any(len({c.args[i].stride() for i in range(3)}) == 3 for c in cases)
        for c in cases:  # what a tensor descriptor needs: 16-byte aligned bases and row strides
            for t in c.args:
                assert t.stride(-1) == 1 and (t.stride(2) * t.element_size()) % 16 == 0
                assert (t.storage_offset() * t.element_size()) % 16 == 0


def test_each_stage_has_the_cases_it_promises():
    gen = torch.Generator().manual_seed(5)
    for mode in ("cpu", "gpu"):  # (a loop, not a parameter: a test named "gpu" is skipped without one)
        tiles, tails, causal = (flash._cases_for(f"flash.attention_{s}")(gen, mode)
                                for s in ("tiles", "tails", "causal"))
        assert all(c.args[0].shape[2] % 128 == 0 and not c.kwargs["causal"] for c in tiles)
        assert not any(c.kwargs["causal"] for c in tails) and any(c.args[0].shape[2] % 16 for c in tails)
        assert all(c.kwargs["causal"] for c in causal) and any(c.args[0].shape[2] % 16 for c in causal)
        assert {1} < {c.args[0].shape[2] for c in tails}  # one row, and longer ones
        for cases in (tiles, tails, causal):
            assert any(flash._kind(c) == "large" for c in cases)


def test_per_row_vectors_are_allowed_and_a_score_matrix_is_not():
    """A FlashAttention-2 kernel may keep a log-sum-exp per (padded) row and a scratch value per row and
    K/V tile; the scores, even in bf16, do not fit in that allowance."""
    case = next(c for c in flash._attention_cases(torch.Generator().manual_seed(6), "cpu")
                if flash.NoScoreMatrix().evaluate({"largest_new_numel": 0}, c) is None
                and c.args[0].shape[2] > 100)
    B, H, N, D = case.args[0].shape
    out = B * H * N * D * 4
    rows = B * H * math.ceil(N / 128) * 128
    fa2 = {"store_bytes": out + rows * 4 + rows * 4 * math.ceil(N / 64), "load_bytes": out * (2 + math.ceil(N / 64)),
           "torch_bytes": 0}
    assert flash.StoresOnlyOutput().evaluate(fa2, case) is None
    assert flash.LoadsWithinFlashBound().evaluate({**fa2, "load_bytes": fa2["load_bytes"] + rows * 4 * N // 64},
                                                  case) is None
    scores_bf16 = {**fa2, "store_bytes": out + B * H * N * N * 2}
    assert "something else went to memory" in flash.StoresOnlyOutput().evaluate(scores_bf16, case)


def test_every_case_can_fail_zeros_and_the_input():
    """Without the grader's default comparison, prove ours can fail: zeros, q itself, the wrong scale."""
    for case in flash._attention_cases(torch.Generator().manual_seed(3), "cpu"):
        want = attention_float64(*case.args, **case.kwargs)
        wrap = lambda out: {"out": out, "device": runtime.DEVICE, "kv_reads": 1}  # noqa: E731 - as a GPU reports too
        assert flash._compare_attention(wrap(torch.zeros_like(case.args[0])), want, case)
        assert flash._compare_attention(wrap(case.args[0].clone()), want, case)
        right = want.to(case.args[0].dtype)
        assert not flash._compare_attention(wrap(right), want, case)
        assert "2 times" in " ".join(flash._compare_attention({**wrap(right), "kv_reads": 2}, want, case))


def test_the_naive_way_trips_the_byte_requirements():
    case = flash._attention_cases(torch.Generator().manual_seed(4), "cpu")[2]
    B, H, N, D = case.args[0].shape
    out_bytes = B * H * N * D * 4
    naive = {"store_bytes": out_bytes + flash.naive_bytes(case)["stores"], "load_bytes": 0, "torch_bytes": 0,
             "largest_new_numel": B * H * N * N}
    assert "score matrix" in flash.NoScoreMatrix().evaluate(naive, case)
    assert "something else went to memory" in flash.StoresOnlyOutput().evaluate(naive, case)
    flash_like = {"store_bytes": out_bytes, "load_bytes": out_bytes * (2 + 2 * math.ceil(N / 16)),
                  "torch_bytes": 0, "largest_new_numel": B * H * N * D}
    assert flash.StoresOnlyOutput().evaluate(flash_like, case) is None
    assert flash.LoadsWithinFlashBound().evaluate(flash_like, case) is None
    assert flash.NoScoreMatrix().evaluate(flash_like, case) is None
    row_slack = flash.row_vector_bytes(case)  # per-row vectors may be read back too
    over = {**flash_like, "load_bytes": flash_like["load_bytes"] + row_slack + 1}
    assert "at most" in flash.LoadsWithinFlashBound().evaluate(over, case)


# --- grading the package's solutions --------------------------------------------------------------


def test_reference_attention_passes_with_flash_traffic():
    report = grade("flash.attention", solution(flash.ATTENTION.solution))
    assert report.status == PASSED, report.reasons
    if runtime.INTERPRETER:
        counts = report.measurements["counts"]
        assert counts["triton_launches"] == 1 and not counts["torch_compute_ops"]
        size = dict(part.split("=") for part in counts["case"].split()[:4])  # "B=1 H=2 N=189 D=64 ..."
        B, H, N, D = (int(size[k]) for k in "BHND")
        assert counts["store_bytes"] == B * H * N * D * 4  # the output, once: nothing else reached memory


def test_merge_solution_passes():
    report = grade("flash.merge", solution(flash.MERGE.solution))
    assert report.status == PASSED, report.reasons


MERGE_MISTAKES = {
    "nan_when_both_empty": ("def merge(m1, s1, m2, s2):\n    import torch\n    m = torch.maximum(m1, m2)\n"
                            "    return m, s1 * torch.exp(m1 - m) + s2 * torch.exp(m2 - m)\n",
                            "nan in the wrong places"),
    "overflows": ("def merge(m1, s1, m2, s2):\n    import torch\n    m = torch.maximum(m1, m2)\n"
                  "    return m, (s1 * torch.exp(m1) + s2 * torch.exp(m2)) / torch.exp(m)\n",
                  "large maxima (exp(m) overflows)"),
    "forgets_rescaling": ("def merge(m1, s1, m2, s2):\n    import torch\n    return torch.maximum(m1, m2), s1 + s2\n",
                          "s: "),
}


@pytest.fixture(scope="module")
def merge_reports():
    with ThreadPoolExecutor(max_workers=2) as pool:  # each grade waits on its own child process
        done = pool.map(lambda n: grade("flash.merge", Submission(source=MERGE_MISTAKES[n][0], name="merge",
                                                                  origin=n)), sorted(MERGE_MISTAKES))
        return dict(zip(sorted(MERGE_MISTAKES), done))


@pytest.mark.parametrize("name", sorted(MERGE_MISTAKES))
def test_merge_mistakes_fail_for_the_right_reason(merge_reports, name):
    report = merge_reports[name]
    assert report.status == FAILED
    assert MERGE_MISTAKES[name][1] in reasons(report), report.reasons


def test_merge_stub_is_not_attempted():
    stub = Submission(source="def merge(m1, s1, m2, s2):\n    raise NotImplementedError('Exercise')\n", name="merge",
                      origin="stub")
    assert grade("flash.merge", stub).status == NOT_ATTEMPTED


def test_score_gib_value():
    assert grade("flash.score_gib", 2.0).status == PASSED
    assert grade("flash.score_gib", 4.0).status == FAILED
    assert grade("flash.score_gib", None).status == NOT_ATTEMPTED
