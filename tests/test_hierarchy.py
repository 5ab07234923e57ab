"""Lesson 11 (memory hierarchy): the occupancy model, the matmul kernel, the judges, the reference solutions."""

from dataclasses import replace

import pytest
import torch
import triton
import triton.language as tl
from on_device import DEVICE, PRODUCT_DTYPE, on_device, product_tolerance

from gpuprinciples.course.exercises import hierarchy
from gpuprinciples.course.kernels import matmul as mm
from gpuprinciples.course.kit import Case
from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, NOT_ATTEMPTED, PASSED
from gpuprinciples.machine import occupancy, runtime
from gpuprinciples.measure import counters
from gpuprinciples.sandbox.submission import Submission
from gpuprinciples.toolchain import compiling


def reasons(report) -> str:
    return " ".join(report.reasons).lower()


def solution(spec: str) -> Submission:
    module, name = spec.split(":")
    return Submission(source=f"from {module} import {name}\n", name=name, origin=spec)


# --- occupancy: values worked by hand from NVIDIA's rules (cuda_occupancy.h, compute capability 9.0) -------


@pytest.mark.parametrize("regs,smem,warps,want,limited_by", [
    (32, 0, 4, 64, "warp slots"),  # 1024 registers per warp, 16 warps per quarter: the 64 slots bind first
    (16, 0, 1, 32, "blocks"),  # one-warp blocks: the 32-block cap, half the warp slots
    (65, 0, 8, 24, "registers"),  # 2080 -> 2304 per warp: 7 per quarter, 28 warps, 3 blocks of 8
    (64, 0, 8, 32, "registers"),  # 2048 per warp: 8 per quarter, 32 warps, 4 blocks of 8
    (200, 0, 1, 8, "registers"),  # 6400 per warp: 2 per quarter, 8 warps; 65536 / 6400 alone would say 10
    (128, 0, 16, 16, "registers"),  # 4096 x 16 warps = 65536: exactly one block
    (255, 0, 16, 0, "registers"),  # 8192 x 16 > 65536 registers in one block: it does not fit at all
    (64, 0, 32, 32, "registers"),  # 2048 x 32 = 65536: one block of 32 warps
    (32, 100_000, 4, 8, "shared memory"),  # 100000 + 1024 -> 101120 bytes: 2 blocks in 228 KiB
    (32, 227 * 1024, 4, 4, "shared memory"),  # the largest a block may ask for: one block
    (32, 227 * 1024 + 1, 4, 0, "shared memory"),  # one byte more: none
    (154, 213_016, 8, 8, "registers"),  # the reference matmul compiled for sm_90 (128x256x64, 8 warps, 3 stages)
])
def test_occupancy_worked_examples(regs, smem, warps, want, limited_by):
    result = occupancy.occupancy(regs, smem, warps)
    assert result.warps == want
    assert result.fraction == want / 64
    assert limited_by in result.limited_by


def test_register_and_shared_units():
    assert occupancy.occupancy(33, 0, 1).registers_per_warp == 1280  # 33 x 32 = 1056, rounded up to 256s
    assert occupancy.occupancy(1, 1, 1).shared_per_block == 1152  # 1 byte + the 1 KiB reserved, rounded to 128


def test_occupancy_solution_passes_and_a_naive_formula_fails():
    assert grade("hierarchy.occupancy", solution(hierarchy.OCCUPANCY.solution), seed=3).status == PASSED
    naive = Submission(source=(
        "def occupancy(regs_per_thread, smem_per_block, num_warps):\n"
        "    # registers without the allocation unit or the sub-partitions\n"
        "    by_regs = 65536 // max(regs_per_thread * 32 * num_warps, 1)\n"
        "    by_smem = 233472 // max(smem_per_block, 1)\n"
        "    return min(64 // num_warps, 32, by_regs, by_smem) * num_warps\n"), name="occupancy", origin="naive")
    report = grade("hierarchy.occupancy", naive, seed=3)
    assert report.status == FAILED
    assert "an h100/h200 sm holds" in reasons(report) and "limited by" in reasons(report)


def test_occupancy_stub_is_not_attempted():
    stub = Submission(source="def occupancy(r, s, w):\n    raise NotImplementedError\n", name="occupancy",
                      origin="stub")
    assert grade("hierarchy.occupancy", stub).status == NOT_ATTEMPTED


# --- the matmul kernel ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 4, 4), (37, 52, 44), (70, 36, 100), (64, 64, 64)])
@pytest.mark.parametrize("desc", ["abc", "", "bc", "ac"])
def test_kernel_matches_float64(shape, desc):
    M, N, K = shape
    gen = torch.Generator().manual_seed(M + N + K)
    a, b = on_device(torch.randn(M, K, generator=gen), torch.randn(K, N, generator=gen))
    c = mm.matmul(a, b, replace(mm.CPU_CONFIG, desc=desc))
    assert c.dtype == a.dtype and c.shape == (M, N)
    assert (c.double() - a.double() @ b.double()).abs().max() < product_tolerance(1e-4)


def test_rows_not_16_byte_aligned_take_the_pointer_path():
    a, b = on_device(torch.randn(20, 45), torch.randn(45, 33))  # 45 and 33 floats: rows not multiples of 16 bytes
    assert (mm.matmul(a, b).double() - a.double() @ b.double()).abs().max() < product_tolerance(1e-4)


def test_fewer_programs_than_tiles_walk_all_tiles():
    """The persistent form: 3 programs for 4 × 3 tiles of 32 × 32."""  # (small tiles: the interpreter runs it)
    gen = torch.Generator().manual_seed(0)
    a, b = on_device(torch.randn(100, 64, generator=gen), torch.randn(64, 92, generator=gen))
    c = torch.empty(100, 92, device=DEVICE)
    with counters.record() as rec:
        mm.matmul_kernel[(3,)](a, b, c, 100, 92, 64, 64, 92, 92, BM=32, BN=32, BK=32, GROUP_M=2,
                               DESC_A=True, DESC_B=True, DESC_C=True)
    assert rec.triton_launches == 1
    assert (c.double() - a.double() @ b.double()).abs().max() < product_tolerance(1e-4)


def test_c_stored_in_halves_and_a_flattened_loop_give_the_same_product():
    gen = torch.Generator().manual_seed(1)
    a, b = on_device(torch.randn(70, 100, generator=gen), torch.randn(100, 76, generator=gen))
    for cfg in (replace(mm.CPU_CONFIG, split_c=2), replace(mm.CPU_CONFIG, flatten=True)):
        assert (mm.matmul(a, b, cfg).double() - a.double() @ b.double()).abs().max() < product_tolerance(1e-4)


def test_padded_operands_and_warp_specialised_loops_give_the_same_product():
    gen = torch.Generator().manual_seed(2)
    a, b = on_device(torch.randn(70, 104, generator=gen), torch.randn(104, 76, generator=gen), dtype=PRODUCT_DTYPE)
    want = a.double() @ b.double()
    for cfg in (replace(mm.CPU_CONFIG, pad="ab"), replace(mm.CPU_CONFIG, pad="a", warp_specialize="tiles"),
                replace(mm.CPU_CONFIG, warp_specialize="k")):
        c = mm.matmul(a, b, cfg)
        assert (c.double() - want).abs().max() < product_tolerance(1e-4, c)


def test_padded_rows_are_128_bytes_apart_and_hold_the_same_numbers():
    t = torch.randn(5, 52)  # rows of 208 bytes
    wide = mm.padded_rows(t)
    assert wide.stride(0) == 64 and torch.equal(wide, t)  # 256-byte rows (CUDA's allocator starts them on 512)
    buf = torch.randn(5 * 64 + 32)
    start = (-buf.data_ptr() % 128) // 4
    aligned = buf[start:start + 5 * 64].view(5, 64)  # base and rows on 128 bytes: nothing to copy
    assert mm.padded_rows(aligned) is aligned


def test_alignment_hint_only_where_the_jit_cannot_see_16_byte_rows():
    assert mm.alignment_hint(2, 8192, 8192, 8192) == 1  # divisible by 16: Triton's JIT specialises on it
    assert mm.alignment_hint(2, 8184, 8200, 8184) == 8  # 16-byte rows, which only the hint tells the compiler
    assert mm.alignment_hint(2, 8184, 8201) == 1  # a row of 8201 bf16 is not 16-byte aligned: no hint
    assert mm.alignment_hint(4, 44, 52) == 4


RAGGED_SIGNATURE = (8191, 8200, 8184, 8184, 8200, 8200)  # M, N, K and the row strides of the timed ragged shape


@pytest.mark.parametrize("align", [8, 1])
def test_ragged_pointer_loads_need_the_hint_to_be_pipelined(align):
    """Compiled for sm_90 as launched on 8191×8200×8184 (ints not divisible by 16): with the hint, 16-byte
    cp.async copies pipelined through shared memory; without it, 2-byte loads and no pipeline."""
    from gpuprinciples.toolchain import gpucompile

    t = torch.empty(16, 16, dtype=torch.bfloat16)
    cfg = replace(mm.GPU_CONFIG, desc="")
    info = gpucompile.compile_launch(mm.matmul_kernel, (t, t, t, *RAGGED_SIGNATURE), {
        **mm.kernel_constexprs(cfg, align=align), "num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
    assert info.ok and info.wgmma, info.error
    if align == 8:
        assert "cp.async.cg" in info.ptx and "ld.global.b16" not in info.ptx
        assert info.shared_bytes >= 3 * (128 * 64 + 64 * 256) * 2  # three stages of A and B tiles
    else:
        assert "ld.global.b16" in info.ptx and "cp.async" not in info.ptx


def test_a_fourth_stage_fits_when_c_is_stored_in_halves():
    from gpuprinciples.toolchain import gpucompile

    sig = {"A": "*bf16", "B": "*bf16", "C": "*bf16", "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
           "stride_bk": "i32", "stride_cm": "i32"}
    whole = gpucompile.compile_kernel(mm.matmul_kernel, sig, mm.kernel_constexprs(mm.GPU_CONFIG), 8, 4)
    halves = gpucompile.compile_kernel(mm.matmul_kernel, sig, mm.kernel_constexprs(replace(mm.GPU_CONFIG, split_c=2)),
                                       8, 4)
    assert not whole.ok and whole.refusal == "resources"
    assert halves.ok and halves.shared_bytes <= compiling.max_shared_bytes(), halves.error


@triton.jit
def _tile_order(Out, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    t = tl.program_id(0)
    pm, pn = mm.grouped_tile(t, tiles_m, tiles_n, GROUP_M)
    tl.store(Out + t, pm * tiles_n + pn)


@pytest.mark.parametrize("tiles_m,tiles_n,group", [(5, 7, 2), (4, 3, 8), (1, 9, 4), (9, 1, 3)])
def test_grouped_order_visits_every_tile_once(tiles_m, tiles_n, group):
    """The grouped order is a permutation of the tiles, whatever GROUP_M and the grid's shape, and a group
    goes down its column of tiles first."""
    out = torch.full((tiles_m * tiles_n,), -1, dtype=torch.int32, device=DEVICE)
    _tile_order[(tiles_m * tiles_n,)](out, tiles_m, tiles_n, GROUP_M=group)
    assert sorted(out.tolist()) == list(range(tiles_m * tiles_n))
    first_column = out[:min(group, tiles_m)].tolist()
    assert first_column == [row * tiles_n for row in range(min(group, tiles_m))]


# --- judging a matmul ----------------------------------------------------------------------------


def _case(M, N, K, kind="normal", seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = hierarchy._values(gen, (M, K), kind, torch.float32)
    b = hierarchy._values(gen, (K, N), kind, torch.float32)
    return Case(f"M={M} N={N} K={K} {kind}", (a, b))


def _judge(out, case, loads=None):
    got = {"out": out, "device": runtime.DEVICE, "loads": loads}  # as the child reports it, on a GPU too
    return hierarchy._compare_matmul(got, hierarchy._matmul_reference(*case.args), case)


def test_values_judged_at_bf16_precision():
    case = _case(90, 60, 400, "offset")
    a, b = case.args
    exact = a.double() @ b.double()
    assert _judge(torch.mm(a, b), case) == []  # fp32 accumulation
    assert _judge(exact.to(torch.float16).float(), case) == []  # rounded through fp16, as the tutorial does
    assert _judge(exact.to(torch.bfloat16).float(), case) == []  # rounded to bf16: the contract
    assert "values wrong" in _judge(torch.zeros_like(exact).float(), case)[0]
    dropped = (a[:, :-1].double() @ b[:-1].double()).float()  # the last element of K never added
    assert "values wrong" in _judge(dropped, case)[0]
    bf16_acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.bfloat16)
    for k in range(a.shape[1]):  # a bf16 accumulator: rounded after every addition
        bf16_acc = (bf16_acc.float() + a[:, k:k + 1] * b[k:k + 1]).to(torch.bfloat16)
    assert "values wrong" in _judge(bf16_acc.float(), case)[0]


def test_shape_dtype_and_type_are_judged():
    case = _case(10, 8, 8)
    assert "dtype" in _judge(torch.zeros(10, 8, dtype=torch.float64), case)[0]
    assert "shape" in _judge(torch.zeros(8, 10), case)[0]
    assert "not a torch.tensor" in _judge([1.0], case)[0].lower()


def _traced(fn, case):
    a, b = case.args
    with counters.record(trace=True) as rec:
        out = fn(a, b)
    return out, hierarchy.strip_bytes(rec, out, a, b)


@pytest.mark.skipif(not runtime.INTERPRETER, reason="loads are traced under the interpreter")
def test_stored_tiles_imply_the_strips_the_reference_loads():
    case = _case(70, 76, 100)
    out, loads = _traced(mm.matmul, case)
    bm, bn = mm.CPU_CONFIG.BM, mm.CPU_CONFIG.BN
    tiles_m, tiles_n = triton.cdiv(70, bm), triton.cdiv(76, bn)
    assert loads["tiles"] == [[bm, bn, tiles_m * tiles_n]]
    assert loads["implied"] == tiles_m * tiles_n * (bm + bn) * 100 * 4
    assert loads["loaded"] <= loads["implied"]  # masked tails load less than whole strips
    assert loads["a_read"] == 70 * 100 and loads["b_read"] == 100 * 76
    assert _judge(out, case, loads) == []
    twice = dict(loads, loaded=2 * loads["implied"])
    assert "what its tiles imply" in _judge(out, case, twice)[0]
    assert "every element of a and b" in _judge(out, case, dict(loads, a_read=10))[0].lower()
    assert "no triton store" in _judge(out, case, dict(loads, tiles=[]))[0].lower()
    assert loads["stored"] == 70 * 76 * 4
    stored_twice = dict(loads, stored=2 * loads["stored"], implied=2 * loads["implied"])  # the strips of 2 stores
    assert "written once" in _judge(out, case, stored_twice)[0]


# --- grading the package's solution ----------------------------------------------------------------


def test_reference_matmul_passes():
    report = grade("hierarchy.matmul", solution(hierarchy.MATMUL.solution), seed=5)
    assert report.status == PASSED, report.reasons
    counts = report.measurements["counts"]
    assert counts["triton_launches"] == 1 and not counts["torch_compute_ops"]


# --- the L2 cliff ----------------------------------------------------------------------------------


def test_cliff_is_the_first_size_nearer_hbm():
    hbm = 4e12
    assert hierarchy.cliff_from_bandwidths({8: 12e12, 24: 11e12, 96: 4.2e12, 384: 4e12}, hbm) == 96
    assert hierarchy.cliff_from_bandwidths({8: 12e12, 24: 5e12, 96: 4.2e12, 384: 4e12}, hbm) == 24


def test_cliff_is_judged_from_the_best_size_not_the_smallest():
    """A small buffer does not reach L2's rate (the H200's 8 MiB: 7.4 TB/s, 24 MiB: 9.8): the L2 level is the
    best of the sizes. Judged from the smallest size, 48 MiB here would look like L2 and 384 the cliff."""
    assert hierarchy.cliff_from_bandwidths({8: 5e12, 24: 10e12, 48: 6e12, 384: 4e12}, 4e12) == 48
    recorded = hierarchy.RECORDED.CLIFF
    assert hierarchy.cliff_from_bandwidths(recorded["bandwidths"], recorded["hbm"]) == 96


def test_cliff_prediction_graded_against_the_answer():
    want = hierarchy._cliff_expected()  # measured on a GPU; what an H200 measured without one
    if not runtime.HAS_CUDA:
        assert want == 96
    assert grade("hierarchy.l2_cliff", want).status == PASSED
    assert grade("hierarchy.l2_cliff", 8 if want != 8 else 24).status == FAILED
    assert grade("hierarchy.l2_cliff", None).status == NOT_ATTEMPTED


# --- l1_working_set: a decision from the recorded L1 sweep; each wrong answer says what it gets wrong ----------


def test_l1_working_set_is_the_largest_size_within_10_percent_of_the_best():
    curve = hierarchy.l1_curve_kib()
    assert curve[128] == max(curve.values()) and curve[160] < 0.9 * curve[128] <= curve[96]  # RECORDED.L1_CURVE
    assert hierarchy._l1_working_set() == 128
    assert grade("hierarchy.l1_working_set", 128).status == PASSED
    assert grade("hierarchy.l1_working_set", 128.0).status == PASSED
    assert grade("hierarchy.l1_working_set", None).status == NOT_ATTEMPTED


@pytest.mark.parametrize("answer,says", [
    (256, "spec sheet"),  # the L1 + shared capacity, read off the table instead of the curve
    (160, "past the cliff"),  # the first size below the line
    (1024, "past the cliff"),
    (96, "at 128 kib it still read"),  # safe, but leaves L1 unused
    (64, "too little work per pass"),  # below the line for the other reason: a small chunk
    (131_072, "that is bytes"),
    (100, "was not measured"),
    ("128", "one of the measured sizes"),
])
def test_each_wrong_working_set_fails_with_its_own_sentence(answer, says):
    report = grade("hierarchy.l1_working_set", answer)
    assert report.status == FAILED and says in reasons(report), report.reasons


# --- tiles_fp32: a decision from what the sm_90 compile reports; each broken rule says what it breaks ----------


def test_the_largest_fp32_tile_that_fits_needs_a_smaller_bk():
    fits = hierarchy.compile_fp32_launch(dict(BM=128, BN=256, BK=16, num_warps=8, num_stages=3))
    assert fits.ok and fits.spills == 0 and fits.wgmma and fits.shared_bytes <= compiling.max_shared_bytes()
    assert hierarchy.BEST_FP32_INTENSITY == pytest.approx(85.33, abs=0.01)
    # no 256×256 launch fits: its float32 output tile staged for the TMA store is over the limit on its own
    assert 256 * 256 * 4 > compiling.max_shared_bytes()
    assert not hierarchy.compile_fp32_launch(dict(BM=256, BN=256, BK=8, num_warps=8, num_stages=3)).ok
    for answer in (dict(BM=128, BN=256, BK=16, num_warps=8, num_stages=3), (256, 128, 16, 8, 3),
                   replace(mm.Config(), BK=16)):
        assert grade("hierarchy.tiles_fp32", answer).status == PASSED, answer
    assert grade("hierarchy.tiles_fp32", None).status == NOT_ATTEMPTED


@pytest.mark.parametrize("answer,says", [
    ((128, 256, 64, 8, 3), "twice what the same launch takes in bf16"),  # the bf16 launch of section 4, copied
    ((128, 256, 16, 4, 3), "spilled"),  # the accumulator is 256 registers per thread with 4 warps
    ((32, 64, 32, 4, 3), "wgmma"),  # too few rows for a warpgroup's wgmma
    ((128, 256, 32, 8, 2), "only the next k step"),  # fits by giving up a stage
    ((128, 128, 32, 8, 3), "a launch within the same rules reaches 85.3"),  # fits, with a smaller tile than needed
    ((128, 256, 16, 16, 3), "choose it from"),
    ((128, 256, 16), "the answer is a launch"),
])
def test_each_wrong_launch_fails_with_its_own_sentence(answer, says):
    report = grade("hierarchy.tiles_fp32", answer)
    assert report.status == FAILED and says in reasons(report), report.reasons


# --- the memory-hierarchy kernels (their timing needs a GPU; what they compute does not) -----------------


def test_read_kernel_reads_every_pass():
    from gpuprinciples.course.kernels import bandwidth

    x = torch.rand(4 * 2 * 64, device=DEVICE)
    rotating = bandwidth.read_once(x, programs=4, passes=3, step=1, block=64)  # every chunk, three times over
    assert torch.allclose(rotating.view(4, 64).sum(0), 3 * x.view(-1, 64).sum(0), rtol=1e-5)
    own = bandwidth.read_once(x, programs=4, passes=2, step=0, block=64)  # each program its own chunk, twice
    assert torch.allclose(own.view(4, 64), 2 * x.view(4, 2, 64).sum(1), rtol=1e-5)


def test_pointer_chase_follows_one_cycle_through_every_entry():
    from gpuprinciples.course.kernels import bandwidth

    nxt = bandwidth.random_cycle(500, DEVICE)
    seen, i = set(), 0
    for _ in range(500):
        seen.add(i)
        i = int(nxt[i])
    assert len(seen) == 500 and i == 0
    out = torch.empty(1, dtype=torch.int32, device=DEVICE)
    bandwidth.chase_kernel[(1,)](nxt, out, 499, CACHE=".cg")
    assert int(out) == 0  # 1 + 499 steps from index 0: once round the cycle
