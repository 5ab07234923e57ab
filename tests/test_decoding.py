"""Lesson 10 (decoding): the kernels, the model, the exercises' data and judges, and the package's solutions."""

import types
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
import torch

from gpuprinciples.course.exercises import decoding
from gpuprinciples.course.kernels import decode_attention as decode_attention_module
from gpuprinciples.course.kernels import decode_step, rope_attention
from gpuprinciples.course.kernels.decode_attention import decode_attention, gpu_stages, plan, split_count
from gpuprinciples.course.kernels.decode_step import embed_and_lengths, fused_linear, greedy_next, rope_and_cache
from gpuprinciples.course.kernels.paged_attention import gather_pages, paged_decode_attention
from gpuprinciples.course.kernels.weight_only_matmul import dequantized_linear, quantize, weight_only_matmul
from gpuprinciples.course.kit import Case, LiveLoads, judge_live_loads
from gpuprinciples.course.lab.decoder import (
    LLAMA_1B,
    LLAMA_8B,
    OTHER_KERNELS,
    TINY,
    Decoder,
    _rms_norm,
    _rope,
    decode_step_bytes,
    kernel_group,
    kv_cache_bytes,
)
from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, NOT_ATTEMPTED, PASSED
from gpuprinciples.machine import runtime
from gpuprinciples.measure import counters
from gpuprinciples.sandbox.submission import Submission

DEVICE = runtime.DEVICE
DTYPE = torch.float32 if runtime.INTERPRETER else torch.bfloat16
TOL = 1e-5 if DTYPE == torch.float32 else 2e-2


def solution(spec: str) -> Submission:
    module, name = spec.split(":")
    return Submission(source=f"from {module} import {name}\n", name=name, origin=spec)


def random_cache(gen, B, Hq, Hkv, S, D):
    q = torch.randn(B, Hq, D, generator=gen)
    k, v = torch.randn(B, Hkv, S, D, generator=gen), torch.randn(B, Hkv, S, D, generator=gen)
    lens = torch.randint(1, S + 1, (B,), generator=gen).to(torch.int32)
    lens[0] = S
    return [t.to(DEVICE, DTYPE) for t in (q, k, v)] + [lens.to(DEVICE)]


# --- the kernels ---------------------------------------------------------------------------------


@pytest.mark.parametrize("B,Hq,Hkv,S,D,splits", [(1, 1, 1, 1, 32, None), (3, 8, 2, 150, 32, None), (2, 6, 2, 77, 64, 1),
                                                 (2, 8, 1, 200, 32, 7), (1, 4, 4, 33, 128, None)])
@pytest.mark.parametrize("descriptors", [True, False])
def test_decode_attention_matches_float64(B, Hq, Hkv, S, D, splits, descriptors):
    q, k, v, lens = random_cache(torch.Generator().manual_seed(S), B, Hq, Hkv, S, D)
    got = decode_attention(q, k, v, lens, splits=splits, descriptors=descriptors)
    want = decoding.attention_reference(q, k, v, lens)
    assert got.dtype == q.dtype and (got.double() - want).abs().max() < TOL


@pytest.mark.parametrize("descriptors", [True, False])
def test_decode_attention_reads_each_live_element_once_and_nothing_else(descriptors):
    if not runtime.INTERPRETER:
        pytest.skip("loads are counted under the interpreter only")
    q, k, v, lens = random_cache(torch.Generator().manual_seed(5), 3, 8, 2, 150, 32)
    with counters.record(trace=True) as rec:
        decode_attention(q, k, v, lens, splits=4, descriptors=descriptors)
    live = decoding._live_positions((q, k, v, lens)).flatten()
    for cache in (k, v):
        loads = torch.from_numpy(counters.load_counts(rec, cache))
        assert torch.equal(loads, live), "each live position once, nothing past the lengths"
    assert rec.triton_launches == 2


def test_the_split_plan_comes_from_shapes_and_no_tile_straddles_splits():
    q = torch.zeros(4, 32, 128)
    cfg = plan(q, 8, 1000)
    assert cfg["chunk"] % cfg["block_n"] == 0 and cfg["splits"] == -(-1000 // cfg["chunk"])
    assert plan(q, 8, 1000, splits=1)["splits"] == 1
    assert plan(q, 8, 1000, splits=5, block_n=32)["chunk"] == 224  # 32 tiles of 32 over 5 splits: 7 each


def test_the_gpu_split_rule_rounds_down_and_fills_the_gpu_once_the_batch_does():
    """The H200's figures (132 SMs): 8 splits at the long context, 1 at batch 64 with 1024 positions, 32 at
    LLAMA_1B's batch 1 with 4096 (each split ≥ 2 tiles); 2 stages at D = 128, 3 at D = 64."""
    assert split_count(8, 8, 32768 // 64, 132) == 8
    assert split_count(64, 8, 1024 // 64, 132) == 1
    assert split_count(128, 8, 1024 // 64, 132) == 1
    assert split_count(1, 8, 4096 // 64, 132) == 32
    assert split_count(1, 1, 10_000, 132) == 64  # at most GPU_MAX_SPLITS
    assert split_count(2, 8, 3, 132) == 1  # a short cache: one split
    assert (gpu_stages(128), gpu_stages(64)) == (2, 3)


def test_short_splits_load_plainly_and_long_ones_through_descriptors(monkeypatch):
    """On a GPU (DESCRIPTOR_MIN_TILES 16, splits of 2 tiles or more) a split of fewer than 16 tiles loads K and V
    with plain loads (a descriptor built on the device costs more than it saves there); the long context's splits,
    every CPU plan, and every plan with DESCRIPTOR_MIN_TILES 0 use descriptors."""
    module = decode_attention_module
    monkeypatch.setattr(module, "_sm_count", lambda device: 132)
    long_q, short_q = (types.SimpleNamespace(shape=shape, is_cuda=True, device=None)  # shapes on a GPU
                       for shape in ((8, 32, 128), (1, 32, 64)))

    def plans():
        return plan(long_q, 8, 32768), plan(short_q, 8, 5120)

    assert (module.DESCRIPTOR_MIN_TILES, module.GPU_MIN_BLOCKS) == (16, 2)
    long, short = plans()
    assert long["chunk"] // long["block_n"] == 64 and long["descriptors"]
    assert short["chunk"] // short["block_n"] == 2 and not short["descriptors"]
    assert plan(torch.zeros(1, 32, 64), 8, 5120)["descriptors"]
    assert not plan(long_q, 8, 32768, descriptors=False)["descriptors"]
    monkeypatch.setattr(module, "DESCRIPTOR_MIN_TILES", 0)
    assert all(cfg["descriptors"] for cfg in plans())


@pytest.mark.parametrize("page", [8, 16, 64])
def test_paged_matches_the_contiguous_cache(page):
    gen = torch.Generator().manual_seed(page)
    B, Hq, Hkv, S, D = 3, 8, 2, 130, 32
    q, k, v, lens = random_cache(gen, B, Hq, Hkv, S, D)
    per_seq = -(-S // page)
    n_pages = B * per_seq + 5
    order = torch.randperm(n_pages, generator=gen)
    table = order[:B * per_seq].view(B, per_seq).to(torch.int32).to(DEVICE)
    pad = per_seq * page - S
    k_pages = torch.zeros(n_pages, Hkv, page, D, device=DEVICE, dtype=DTYPE)
    v_pages = torch.zeros_like(k_pages)
    for pool, cache in ((k_pages, k), (v_pages, v)):
        padded = torch.nn.functional.pad(cache, (0, 0, 0, pad))
        pool[order[:B * per_seq].to(DEVICE)] = padded.view(B, Hkv, per_seq, page, D).transpose(1, 2).reshape(-1, Hkv,
                                                                                                             page, D)
    assert torch.equal(gather_pages(k_pages, table, S), k)
    got = paged_decode_attention(q, k_pages, v_pages, table, lens)
    assert (got.double() - decoding.attention_reference(q, k, v, lens)).abs().max() < TOL


def test_weight_only_matmul_matches_its_dequantised_product():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 200, generator=gen).to(DEVICE, DTYPE)
    w = (torch.randn(77, 200, generator=gen) * 0.02).to(DEVICE, DTYPE)
    w8, scale = quantize(w)
    assert w8.dtype == torch.int8 and w8.abs().max() <= 127
    got = weight_only_matmul(x, w8, scale)
    want = dequantized_linear(x.double(), w8, scale.double())
    assert (got.double() - want).abs().max() < (1e-5 if DTYPE == torch.float32 else 2e-2)
    assert (got.float() - x.float() @ w.float().T).abs().max() < 0.05  # int8 rounding, not a wrong product


@pytest.mark.parametrize("M", [1, 3, 6])
def test_fused_linear_matches_its_unfused_operators(M):
    """Each prologue (none, RMSNorm, SwiGLU) and epilogue (8-bit scales, residual), against the PyTorch operators
    they replace; N and K multiples of no tile, M past one row tile (BLOCK_M ≤ 4)."""
    gen = torch.Generator().manual_seed(M)
    N, K = 77, 200
    x = torch.randn(M, K, generator=gen).to(DEVICE, DTYPE)
    wide = torch.randn(M, 2 * K, generator=gen).to(DEVICE, DTYPE)
    w = (torch.randn(N, K, generator=gen) * 0.1).to(DEVICE, DTYPE)
    res = torch.randn(M, N, generator=gen).to(DEVICE, DTYPE)
    g = (torch.rand(K, generator=gen) + 0.5).to(DEVICE, DTYPE)
    w8, scale = quantize(w)
    f = torch.nn.functional
    pairs = [(fused_linear(x, w), x.float() @ w.float().T),
             (fused_linear(x, w, norm=g, eps=1e-5, residual=res), res.float() + _rms_norm(x.float(), g.float(), 1e-5)
              @ w.float().T),
             (fused_linear(wide, w, swiglu=True), (f.silu(wide[:, :K].float()) * wide[:, K:].float()) @ w.float().T),
             (fused_linear(x, w8, scale, residual=res), res.float() + x.float() @ (w8.float() * scale[:, None]).T)]
    for got, want in pairs:
        assert got.shape == (M, N) and got.dtype == DTYPE
        assert (got.float() - want).abs().max() < TOL * 10 * want.abs().max()
    with pytest.raises(AssertionError, match="scales"):
        fused_linear(x, w8)


def test_fused_linear_tiles_fill_the_gpu_and_fit_the_registers():
    for n, k, size in [(3072, 2048, 2), (2048, 2048, 2), (16384, 2048, 2), (2048, 8192, 2), (128256, 2048, 2),
                       (2048, 8192, 1), (77, 200, 2)]:
        cfg = decode_step.gpu_config(n, k, size, 132)
        programs = -(-n // cfg["BLOCK_N"])
        assert cfg["BLOCK_N"] == 1 or n // cfg["BLOCK_N"] >= decode_step.PROGRAMS_PER_SM * 132  # fills the GPU
        assert cfg["BLOCK_N"] == 32 or programs < 2 * decode_step.PROGRAMS_PER_SM * 132  # and no smaller tiles
        assert cfg["BLOCK_N"] * cfg["BLOCK_K"] <= decode_step.MAX_TILE_ELEMENTS
    decode_step.TUNED[(77, 200, DTYPE.itemsize)] = {"BLOCK_N": 16, "BLOCK_K": 64, "num_warps": 4, "STAGES": 1}
    try:
        if DEVICE == "cuda":
            x, w = torch.zeros(1, 200, device=DEVICE, dtype=DTYPE), torch.zeros(77, 200, device=DEVICE, dtype=DTYPE)
            assert decode_step.config_for(x, w)["BLOCK_N"] == 16
    finally:
        del decode_step.TUNED[(77, 200, DTYPE.itemsize)]


def test_rope_and_cache_write_the_pytorch_steps_values():
    gen = torch.Generator().manual_seed(4)
    B, Hq, Hkv, D, S = 3, 4, 2, 32, 20
    qkv = torch.randn(B, (Hq + 2 * Hkv) * D, generator=gen).to(DEVICE, DTYPE)
    angles = torch.arange(S)[:, None] * (1.0 / 500_000 ** (torch.arange(0, D, 2) / D))[None, :]
    cos, sin = angles.cos().to(DEVICE), angles.sin().to(DEVICE)
    pos = torch.tensor([3, 0, 19], dtype=torch.int32, device=DEVICE)
    k_cache = torch.zeros(B, Hkv, S, D, device=DEVICE, dtype=DTYPE)
    v_cache = torch.zeros_like(k_cache)
    q = rope_and_cache(qkv, cos, sin, pos, k_cache, v_cache, Hq)
    q0, k0, v0 = qkv.split([Hq * D, Hkv * D, Hkv * D], -1)
    c, s_ = cos[pos.long()], sin[pos.long()]
    rows = torch.arange(B, device=DEVICE)
    assert torch.allclose(q.float(), _rope(q0.reshape(B, Hq, D), c, s_).float(), atol=TOL)
    assert torch.allclose(k_cache[rows, :, pos.long()].float(), _rope(k0.reshape(B, Hkv, D), c, s_).float(), atol=TOL)
    assert torch.equal(v_cache[rows, :, pos.long()], v0.reshape(B, Hkv, D))
    assert int((k_cache != 0).any(-1).sum()) == B * Hkv  # nothing else written


@pytest.mark.parametrize("splits,merge_in_kernel", [(None, True), (1, True), (3, True), (3, False)])
def test_rope_attention_is_rope_and_cache_then_decode_attention(splits, merge_in_kernel, monkeypatch):
    """The fused step's one-launch attention gives the three launches' output and cache writes, with the new
    position anywhere in a split (its first row, its last, the cache's first), and leaves its counts at zero;
    also with the splits merged by decode_attention's merge kernel."""
    monkeypatch.setattr(rope_attention, "MERGE_IN_KERNEL", merge_in_kernel)
    gen = torch.Generator().manual_seed(7)
    B, Hq, Hkv, D, S = 4, 8, 2, 32, 300
    qkv = torch.randn(B, (Hq + 2 * Hkv) * D, generator=gen).to(DEVICE, DTYPE)
    angles = torch.arange(S)[:, None] * (1.0 / 500_000 ** (torch.arange(0, D, 2) / D))[None, :]
    cos, sin = angles.cos().to(DEVICE), angles.sin().to(DEVICE)
    pos = torch.tensor([0, 128, 255, 299], dtype=torch.int32, device=DEVICE)
    k_cache, v_cache = (torch.randn(B, Hkv, S, D, generator=gen).to(DEVICE, DTYPE) for _ in range(2))
    k_fused, v_fused = k_cache.clone(), v_cache.clone()
    want = decode_attention(rope_and_cache(qkv, cos, sin, pos, k_cache, v_cache, Hq), k_cache, v_cache, pos + 1,
                            splits=splits)
    counts = torch.zeros(B * Hkv, dtype=torch.int32, device=DEVICE)
    for _ in range(2):  # a second call on the same counts (a graph's replay)
        got = rope_attention.rope_attention(qkv, cos, sin, pos, k_fused, v_fused, Hq, counts, splits=splits)
        assert (got.float() - want.float()).abs().max() < TOL
        assert torch.equal(k_fused, k_cache) and torch.equal(v_fused, v_cache)
        assert not counts.any()


def test_kernel_groups():
    assert kernel_group("fused_linear_kernel") == "matmuls: fused_linear"
    assert kernel_group("nvjet_tst_64x8_64x16_4x1_v_bz_TNN") == "matmuls: cuBLAS"
    assert kernel_group("void gemv2T_kernel_val<int, int, __nv_bfloat16>") == "matmuls: cuBLAS"
    assert kernel_group("split_kv_kernel") == kernel_group("rope_attention_kernel") == "attention: split-KV + merge"
    assert kernel_group("void pytorch_flash::flash_fwd_splitkv_kernel<>") == "attention: SDPA"
    assert kernel_group("void at::native::vectorized_elementwise_kernel<4>") == OTHER_KERNELS


class _Recorded:
    """Stands in for a @triton.jit kernel: keeps each launch's (grid, args, kwargs), then launches it."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append((args, kwargs))
            return self.kernel[grid](*args, **kwargs)
        return launch


PDL_KERNELS = ((decode_step, "fused_linear_kernel"), (decode_step, "rope_cache_kernel"),
               (decode_attention_module, "split_kv_kernel"), (decode_attention_module, "merge_splits_kernel"),
               (rope_attention, "rope_attention_kernel"), (decode_step, "embed_kernel"),
               (decode_step, "argmax_part_kernel"), (decode_step, "argmax_finish_kernel"))


def _pdl_step(on: bool, monkeypatch):
    """One fused decode step of the tiny model with its attention in one launch, the same step with it in three
    (and fused_linear over two weight tiles, each prologue; attention in three splits, merged) with the PDL switch
    `on`: (the outputs, the launches of the step's five kernels as (kernel, args, kwargs))."""
    recorded = [(module, name, _Recorded(getattr(module, name))) for module, name in PDL_KERNELS]
    with monkeypatch.context() as patch:
        for module, name, stand_in in recorded:
            patch.setattr(module, name, stand_in)
        gen = torch.Generator().manual_seed(5)
        prompt = torch.randint(0, TINY.vocab, (2, 9), generator=gen).to(DEVICE)
        nxt = torch.randint(0, TINY.vocab, (2,), generator=gen).to(DEVICE)
        x, wide = (torch.randn(3, k, generator=gen).to(DEVICE, DTYPE) for k in (200, 400))
        w = (torch.randn(77, 200, generator=gen) * 0.1).to(DEVICE, DTYPE)
        g = (torch.rand(200, generator=gen) + 0.5).to(DEVICE, DTYPE)
        model = Decoder(TINY, batch=2, max_seq=16, fused=True)
        model.prefill(prompt)  # PyTorch's kernels: the switch is only the fused step's
        with decode_step.pdl(on):
            config = {"BLOCK_N": 16, "BLOCK_K": 128, "num_warps": 4, "STAGES": 2}  # K = 200: two weight tiles
            outputs = [fused_linear(x[:1], w, norm=g, config=config), fused_linear(wide, w, swiglu=True, config=config),
                       fused_linear(x, w, residual=x[:, :77], config=config),
                       model.decode(nxt, torch.full((2,), 9, dtype=torch.int32, device=DEVICE)),
                       model.k_cache.clone(), model.v_cache.clone()]
            with decode_step.one_launch_attention():
                outputs.append(model.decode(nxt, torch.full((2,), 9, dtype=torch.int32, device=DEVICE)))
            q, k, v, lens = random_cache(gen, 2, 8, 2, 300, 32)
            outputs.append(decode_attention(q, k, v, lens, splits=3, pdl=decode_step.PDL))
            tokens, seq_lens = nxt.clone(), torch.full((2,), 9, dtype=torch.int32, device=DEVICE)
            model.step(tokens, seq_lens)  # the step's ends: embed_and_lengths, and greedy_next's two launches
            outputs += [tokens, seq_lens]
    return outputs, [(r.kernel, *launch) for _, _, r in recorded for launch in r.launches]


def test_the_pdl_switch_changes_no_value_of_the_fused_step(monkeypatch):
    """With PDL on, fused_linear loads its first weight tile before gdc_wait and starts its loop at the second;
    rope_and_cache waits first. Off and on (the default) give the same values (bit for bit under the
    interpreter, where the waits do nothing), and on really launches the PDL form of both kernels."""
    assert decode_step.PDL  # the default: measured faster on an H200, the same values
    off, off_launches = _pdl_step(False, monkeypatch)
    assert decode_step.PDL  # the block put it back
    on, on_launches = _pdl_step(True, monkeypatch)
    assert all("PDL" not in kwargs and "launch_pdl" not in kwargs for _, _, kwargs in off_launches)  # as before
    if DEVICE == "cuda" and torch.cuda.get_device_capability()[0] < 9:
        assert all("PDL" not in kwargs for _, _, kwargs in on_launches)  # no PDL before Hopper: the switch waits
    else:
        two_decodes, the_step = (5 + 6) * TINY.n_layers + 2 + 2, 1 + 6 * TINY.n_layers + 1 + 2  # embed ... argmax
        assert len(on_launches) == len(off_launches) == 3 + two_decodes + 2 + the_step
        assert all(kwargs["PDL"] and kwargs["launch_pdl"] for _, _, kwargs in on_launches)
        linear = [kwargs for kernel, _, kwargs in on_launches if kernel is decode_step.fused_linear_kernel]
        assert linear and all(kwargs["EARLY_TRIGGER"] for kwargs in linear)  # every grid "one wave" here
    for a, b in zip(off, on):
        assert torch.equal(a, b) if runtime.INTERPRETER else (a.float() - b.float()).abs().max() < TOL


def test_greedy_next_is_torch_argmax_with_its_ties_and_counts_the_position():
    """Two launches (the largest of each 1024-logit block, then of the blocks) pick what torch.argmax picks: the
    first index among equal largest values, within a block and across blocks; seq_lens += 1."""
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(4, 3000, generator=gen).to(DEVICE, DTYPE)
    logits[1, [700, 2900]] = 9.0  # a tie across blocks: the first wins
    logits[2, [1030, 1031]] = 9.0  # a tie inside one block
    logits[3, 2999] = 9.0  # the last logit, in the ragged last block
    tokens = torch.zeros(4, dtype=torch.long, device=DEVICE)
    seq_lens = torch.tensor([0, 5, 7, 4094], dtype=torch.int32, device=DEVICE)
    greedy_next(logits, tokens, seq_lens)
    assert torch.equal(tokens, logits.argmax(dim=-1)) and tokens[1:].tolist() == [700, 1030, 2999]
    assert seq_lens.tolist() == [1, 6, 8, 4095]


def test_the_steps_ends_in_triton_change_no_token():
    """embed_and_lengths is embed[tokens] and seq_lens + 1; a fused step with the Triton ends (the default) leaves the
    same logits, token and length as with PyTorch's indexing, argmax and adds."""
    gen = torch.Generator().manual_seed(8)
    embed = torch.randn(50, 300, generator=gen).to(DEVICE, DTYPE)
    tokens = torch.tensor([3, 49, 0], device=DEVICE)
    x, lengths = embed_and_lengths(embed, tokens, torch.tensor([0, 9, 15], dtype=torch.int32, device=DEVICE))
    assert torch.equal(x, embed[tokens]) and lengths.tolist() == [1, 10, 16]
    model = Decoder(TINY, batch=2, max_seq=16, fused=True)
    model.prefill(torch.randint(0, TINY.vocab, (2, 5), generator=gen).to(DEVICE))
    ends = []
    for fused_ends in (False, True):
        with decode_step.switched("FUSED_ENDS", fused_ends):
            tokens = torch.tensor([1, 2], device=DEVICE)
            seq_lens = torch.full((2,), 5, dtype=torch.int32, device=DEVICE)
            logits = model.decode(tokens, seq_lens)
            model.step(tokens, seq_lens)
            ends.append((logits, tokens, seq_lens))
    assert all(torch.equal(a, b) for a, b in zip(*ends)) and ends[1][2].tolist() == [6, 6]


def test_only_a_grid_of_one_wave_lets_the_next_kernel_start_after_its_wait(monkeypatch):
    """fused_linear triggers the next launch right after its wait when its grid has at most EARLY_TRIGGER (8)
    programs per SM (an H100's or H200's 132 SMs here), else after its weight loop; never without PDL."""
    monkeypatch.setattr(decode_step, "_sm_count", lambda device: 132)
    gpu = types.SimpleNamespace(is_cuda=True, device=None)
    assert decode_step.EARLY_TRIGGER == 8
    assert decode_step.early_trigger(gpu, (1, 8 * 132), True) and decode_step.early_trigger(gpu, (2, 4 * 132), True)
    assert not decode_step.early_trigger(gpu, (1, 8 * 132 + 1), True)  # LLAMA_1B's gate | up: 8192 programs
    with decode_step.switched("EARLY_TRIGGER", None):
        assert not decode_step.early_trigger(gpu, (1, 1), True)
    assert not decode_step.early_trigger(gpu, (1, 1), False)  # no PDL


def test_each_pdl_kernel_compiles_for_hopper_with_its_grid_dependency_instructions(monkeypatch):
    """Every launch of the step with PDL on compiles for sm_90 (an H100/H200's, with the Triton in use) and its
    PTX holds griddepcontrol.wait and griddepcontrol.launch_dependents; off, neither."""
    from gpuprinciples.toolchain import gpucompile
    if DEVICE == "cuda" and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("PDL needs sm_90: this GPU compiles the step without it")
    for on in (False, True):
        _, launches = _pdl_step(on, monkeypatch)
        seen = set()
        for kernel, args, kwargs in launches:
            info = gpucompile.compile_launch(kernel, args, kwargs)
            assert info.ok, info.error
            assert info.target.endswith("sm_90") or DEVICE == "cuda", info.target
            assert ("griddepcontrol.wait" in info.ptx) == on and ("griddepcontrol.launch_dependents" in info.ptx) == on
            seen.add(info.kernel)
        assert seen == {name for _, name in PDL_KERNELS}


# --- the model ----------------------------------------------------------------------------------


@pytest.mark.parametrize("attention", ["triton", "sdpa"])
def test_a_decode_step_continues_the_prefill(attention):
    """Decoding token T at position T after a prefill of T tokens gives the logits a prefill of T + 1 gives."""
    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, TINY.vocab, (2, 9), generator=gen).to(DEVICE)
    nxt = torch.randint(0, TINY.vocab, (2,), generator=gen).to(DEVICE)
    model = Decoder(TINY, batch=2, max_seq=16, attention=attention)
    model.prefill(prompt)
    got = model.decode(nxt, torch.full((2,), 9, dtype=torch.int32, device=DEVICE))
    want = Decoder(TINY, batch=2, max_seq=16).prefill(torch.cat([prompt, nxt[:, None]], 1))
    assert (got.float() - want.float()).abs().max() < (1e-4 if DTYPE == torch.float32 else 5e-2)


@pytest.mark.parametrize("fmt", [None, torch.int8])
def test_the_fused_step_is_the_pytorch_step_in_seven_launches_a_layer_or_five(fmt):
    gen = torch.Generator().manual_seed(3)
    prompt = torch.randint(0, TINY.vocab, (2, 9), generator=gen).to(DEVICE)
    nxt = torch.randint(0, TINY.vocab, (2,), generator=gen).to(DEVICE)
    plain, fused = Decoder(TINY, batch=2, max_seq=16), Decoder(TINY, batch=2, max_seq=16, fused=True)
    for m in (plain, fused):
        if fmt is not None:
            m.quantize(fmt)
        m.prefill(prompt)
    lens = torch.full((2,), 9, dtype=torch.int32, device=DEVICE)
    want = plain.decode(nxt, lens).float()
    with decode_step.one_launch_attention(False), counters.record() as rec:
        got = fused.decode(nxt, lens).float()
    assert (got - want).abs().max() < (1e-4 if DTYPE == torch.float32 else 5e-2)
    assert (fused.k_cache - plain.k_cache).abs().max() < TOL and (fused.v_cache - plain.v_cache).abs().max() < TOL
    # 4 matmuls, rope_and_cache, attention's 1 or 2 a layer; the embedding with seq_lens + 1, and the head
    assert rec.triton_launches <= 7 * TINY.n_layers + 2
    assert sum(rec.torch_compute_ops.values()) == 0
    with decode_step.switched("FUSED_ENDS", False), counters.record() as rec:
        fused.decode(nxt, lens)
    assert sum(rec.torch_compute_ops.values()) == 2  # PyTorch's embedding lookup and seq_lens + 1
    with decode_step.one_launch_attention(), counters.record() as rec:
        one = fused.decode(nxt, lens).float()
    assert (one - got).abs().max() < (1e-4 if DTYPE == torch.float32 else 5e-2)
    assert rec.triton_launches == 5 * TINY.n_layers + 2  # the attention block in one launch
    assert sum(rec.torch_compute_ops.values()) == 0


def test_quantised_weights_halve_the_bytes_and_keep_the_logits_close():
    model = Decoder(TINY, batch=1, max_seq=8)
    prompt = torch.randint(0, TINY.vocab, (1, 5), generator=torch.Generator().manual_seed(2)).to(DEVICE)
    want = model.prefill(prompt).float()
    bytes_16 = model.weight_bytes()
    assert bytes_16 == TINY.matmul_params() * model.embed.element_size()
    model.quantize(torch.int8)
    assert model.weight_bytes() < 0.55 * bytes_16 * 2 / model.embed.element_size()  # 1 byte a weight + scales
    assert (model.prefill(prompt).float() - want).abs().max() < 0.05 * want.abs().max()


def test_the_configs_count_what_llama_3_2_1b_and_3_1_8b_have():
    assert LLAMA_1B.n_params() == 1_235_814_400  # Llama 3.2 1B's parameter count, embedding tied
    # Llama 3.1 8B's count has an output head of its own: here it is tied, one vocab x d_model matrix fewer
    assert LLAMA_8B.n_params() + LLAMA_8B.vocab * LLAMA_8B.d_model == 8_030_261_248
    assert TINY.n_params() < 1_000_000
    assert decode_step_bytes(LLAMA_1B, 1, 0) == 2 * LLAMA_1B.matmul_params()


# --- the exercises' data and judges ---------------------------------------------------------------


def test_kv_cases_cover_mha_gqa_mqa_and_dtypes():
    cases = decoding._kv_cases(torch.Generator().manual_seed(1), "cpu")
    assert {c.args[0].n_kv_heads == c.args[0].n_heads for c in cases} == {True, False}
    assert any(c.args[0].n_kv_heads == 1 for c in cases)
    assert {c.args[3] for c in cases} >= {torch.bfloat16, torch.float32, torch.float8_e4m3fn}
    assert [c.label for c in cases] != [c.label for c in decoding._kv_cases(torch.Generator().manual_seed(2), "cpu")]
    for c in cases:
        assert decoding._kv_reference(*c.args) == kv_cache_bytes(*c.args)


@pytest.mark.parametrize("wrong, words", [
    (lambda c, b, s, d: c.n_layers * b * s * c.n_kv_heads * c.head_dim * d.itemsize, "k or v alone"),
    (lambda c, b, s, d: 2 * c.n_layers * b * s * c.n_heads * c.head_dim * d.itemsize, "every query head"),
    (lambda c, b, s, d: 2 * b * s * c.n_kv_heads * c.head_dim * d.itemsize, "one layer"),
    (lambda c, b, s, d: 2 * c.n_layers * b * s * c.n_kv_heads * c.head_dim * 4, "4 bytes per element"),
])
def test_wrong_kv_formulas_fail_with_a_hint(wrong, words):
    cases = decoding._kv_cases(torch.Generator().manual_seed(3), "cpu")
    said = [" ".join(decoding._compare_kv(wrong(*c.args), decoding._kv_reference(*c.args), c)) for c in cases]
    assert any(said) and any(words in s.lower() for s in said), said
    assert not decoding._compare_kv(kv_cache_bytes(*cases[0].args), decoding._kv_reference(*cases[0].args), cases[0])
    assert decoding._compare_kv("a lot", 5, cases[0])


def test_decode_cases_are_fresh_and_cover_the_contract():
    cases = decoding._decode_cases(torch.Generator().manual_seed(1), "cpu")
    others = decoding._decode_cases(torch.Generator().manual_seed(2), "cpu")
    assert [c.label for c in cases] != [c.label for c in others]
    groups = {c.args[0].shape[1] // c.args[1].shape[1] for c in cases}
    assert {1, 3, 4, 8} <= groups  # MHA, an odd group, GQA, MQA
    assert any(not c.args[0].is_contiguous() for c in cases) and any(not c.args[1].is_contiguous() for c in cases)
    assert any(c.args[1].untyped_storage().data_ptr() == c.args[2].untyped_storage().data_ptr() for c in cases)
    for c in cases:
        q, k, v, lens = c.args
        assert lens.dtype == torch.int32 and int(lens.min()) >= 1 and int(lens.max()) == k.shape[2]
        dead = ~decoding._live_positions(c.args).bool()
        if " nan " in c.label:
            assert torch.isnan(v[dead]).all()
        assert torch.isfinite(decoding.attention_reference(*c.args)).all()


def test_every_decode_case_can_fail():
    """Zeros, q itself, and the wrong head mapping (h % Hkv instead of h // G) must not pass."""
    for case in decoding._decode_cases(torch.Generator().manual_seed(3), "cpu"):
        q, k, v, lens = case.args
        want = decoding.attention_reference(*case.args)
        compare = decoding.DECODE_ATTENTION.compare

        def wrap(out):  # the child's report: the output, and the device the grader expects it on (a GPU's too)
            return {"out": out, "device": runtime.DEVICE, "loads": None}
        assert compare(wrap(torch.zeros_like(q)), want, case)
        assert compare(wrap(q.clone()), want, case)
        assert not compare(wrap(want.to(q.dtype)), want, case)
        Hq, Hkv = q.shape[1], k.shape[1]
        if Hq != Hkv and Hkv > 1:
            heads = torch.arange(Hq) % Hkv
            mixed = decoding.attention_reference(q, k[:, heads], v[:, heads], lens)  # as if MHA with another order
            assert compare(wrap(mixed.to(q.dtype)), want, case)


def test_the_live_load_judge():
    k = torch.zeros(2, 1, 5, 2)
    lens = torch.tensor([2, 5], dtype=torch.int32)
    case = Case("tiny", (torch.zeros(2, 1, 2), k, k, lens))
    region = LiveLoads(1, "k_cache", decoding._live_positions, 1.1, what="positions at or past seq_lens[b]",
                       once="once")
    live = decoding._live_positions(case.args).flatten()
    ptr = [k.untyped_storage().data_ptr()]
    assert judge_live_loads([region], {"1": live, "storage": ptr}, case) == []
    past = live.clone()
    past[2 * 2] = 1  # sequence 0, position 2: past its length
    (why,) = judge_live_loads([region], {"1": past, "storage": ptr}, case)
    assert "must not be read" in why and "k_cache[0, 0, 2, 0]" in why
    (why,) = judge_live_loads([region], {"1": live * 4, "storage": ptr}, case)
    assert "4.00× over" in why and "up to 4 times" in why
    (why,) = judge_live_loads([region], {"1": torch.zeros_like(live), "storage": ptr}, case)
    assert "never loaded" in why and "14 of k_cache" in why


def test_traffic_bound_allows_the_splits_and_refuses_copies():
    case = decoding._decode_cases(torch.Generator().manual_seed(4), "cpu")[1]
    rule = decoding.DECODE_ATTENTION.requirements[-1]
    least = decoding.decode_min_bytes(case.args)
    assert rule.evaluate({"load_bytes": least, "store_bytes": 0, "torch_bytes": 0}, case) is None
    k = case.args[1]
    whole_copy = 2 * k.numel() * k.element_size()
    assert "pytorch copies" in rule.evaluate({"load_bytes": least, "store_bytes": 0, "torch_bytes": whole_copy},
                                             case).lower()


def test_paged_cases_point_dead_entries_elsewhere():
    for case in decoding._paged_cases(torch.Generator().manual_seed(1), "cpu"):
        q, kp, vp, table, lens = case.args
        page = kp.shape[2]
        live = decoding._live_page_rows(case.args)
        assert int(live.sum()) == int(lens.sum()) * kp.shape[1] * kp.shape[3]  # every live position in one page
        used = table[torch.arange(table.shape[1])[None, :] < (lens[:, None].long() + page - 1) // page]
        assert len(set(used.tolist())) == len(used)  # no page shared by two live positions
        assert torch.isfinite(decoding._paged_reference(*case.args)).all()


def test_value_exercises():
    assert grade("decoding.ridge_batch", 206).status == PASSED
    assert grade("decoding.ridge_batch", 1).status == FAILED


def test_batch_for_budget_is_a_decision_and_each_wrong_one_says_why():
    from gpuprinciples.course.exercises.decoding import RECORDED_SWEEP, STEP_BUDGET_S
    assert RECORDED_SWEEP[64] <= STEP_BUDGET_S < RECORDED_SWEEP[128]  # the recorded curve decides it
    assert grade("decoding.batch_for_budget", 64).status == PASSED
    assert grade("decoding.batch_for_budget", 64.0).status == PASSED
    assert grade("decoding.batch_for_budget", None).status == NOT_ATTEMPTED
    most = grade("decoding.batch_for_budget", 256)  # the most tokens/s, ignoring the promise
    assert most.status == FAILED and "under the promised 250" in most.reasons[0] and "5.643 ms" in most.reasons[0]
    over = grade("decoding.batch_for_budget", 128)  # just past the budget
    assert over.status == FAILED and "4.391 ms" in over.reasons[0]
    safe = grade("decoding.batch_for_budget", 1)  # the fastest per user, leaving throughput unused
    assert safe.status == FAILED and "batch 64" in safe.reasons[0] and "weights are read once" in safe.reasons[0]
    unmeasured = grade("decoding.batch_for_budget", 100)
    assert unmeasured.status == FAILED and "was not measured" in unmeasured.reasons[0]
    assert "batch size" in grade("decoding.batch_for_budget", "64").reasons[0]


def test_context_for_memory_is_a_decision_and_each_slip_says_what_it_forgot():
    # LLAMA_8B: 128 KiB of K and V per position; 15.0 GB of bf16 weights; 90 % of 141 GB; 64 sequences; pages of 16
    assert kv_cache_bytes(LLAMA_8B, 1, 1, torch.bfloat16) == 2 * 32 * 8 * 128 * 2
    want = decoding._context_for_memory()
    assert want == (int((0.9 * 141e9 - 2 * LLAMA_8B.n_params()) // (64 * 131_072)) // 16 * 16) == 13_328
    assert grade("decoding.context_for_memory", want).status == PASSED
    assert grade("decoding.context_for_memory", float(want)).status == PASSED
    assert grade("decoding.context_for_memory", None).status == NOT_ATTEMPTED
    slips = decoding._context_mistakes()
    assert len({v for pair in slips.values() for v in pair} | {want}) == 2 * len(slips) + 1  # no two alike
    for why, (paged, raw) in slips.items():
        for answer in (paged, raw):
            report = grade("decoding.context_for_memory", answer)
            assert report.status == FAILED and why in report.reasons[0], (answer, report.reasons)
    over = grade("decoding.context_for_memory", want + 16)
    assert over.status == FAILED and "over the" in over.reasons[0]
    under = grade("decoding.context_for_memory", want - 16)
    assert under.status == FAILED and "left idle" in under.reasons[0]
    ragged = grade("decoding.context_for_memory", want + 10)
    assert ragged.status == FAILED and "whole pages" in ragged.reasons[0]
    assert "number of positions" in grade("decoding.context_for_memory", "13328").reasons[0]


def test_mha_cache_is_four_times_gqa():
    assert kv_cache_bytes(replace(LLAMA_1B, n_kv_heads=32), 1, 8192, torch.bfloat16) == 4 * kv_cache_bytes(
        LLAMA_1B, 1, 8192, torch.bfloat16)


# --- grading the package's solutions --------------------------------------------------------------


@pytest.fixture(scope="module")
def solution_reports():
    ids = ["decoding.kv_cache_bytes", "decoding.decode_attention", "decoding.paged_decode_attention"]
    # on a GPU both kernels' passes are timed: graded one at a time, so that neither grade's timing runs beside the
    # other's (two at a time, the paged one reached 39 % of copy on an H200 and failed; alone it passes)
    with ThreadPoolExecutor(max_workers=1 if runtime.HAS_CUDA else 2) as pool:
        from gpuprinciples.course.catalog import get
        return dict(zip(ids, pool.map(lambda i: grade(i, solution(get(i).solution)), ids)))


@pytest.mark.parametrize("exercise_id", ["decoding.kv_cache_bytes", "decoding.decode_attention",
                                         "decoding.paged_decode_attention"])
def test_the_package_solutions_pass(solution_reports, exercise_id):
    report = solution_reports[exercise_id]
    assert report.status == PASSED, report.reasons
    if runtime.INTERPRETER and exercise_id != "decoding.kv_cache_bytes":
        assert report.measurements["counts"]["triton_launches"] in (1, 2)


def test_a_prediction_is_locked_to_the_first_answer_of_a_session(monkeypatch):
    from gpuprinciples.grader import grading
    monkeypatch.setattr(grading, "_PREDICTIONS", {})
    first = grading.check("decoding.ridge_batch", 1, show=False)  # wrong, and then the measurement shows why
    assert first.status == FAILED
    second = grading.check("decoding.ridge_batch", 206, show=False)  # hindsight is not a prediction
    assert second.status == FAILED
    assert any(note.startswith("Prediction locked: your first answer this session, 1,") for note in second.notes)
    assert grading.grade("decoding.ridge_batch", 206).status == PASSED  # grade() (CLI, tests) keeps nothing
    # an exercise that is not a prediction takes every new answer
    assert grading.check("decoding.batch_for_budget", 1, show=False).status == FAILED
    assert grading.check("decoding.batch_for_budget", 64, show=False).status == PASSED
    # a first answer of None (not attempted) locks nothing
    monkeypatch.setattr(grading, "_PREDICTIONS", {})
    assert grading.check("decoding.ridge_batch", None, show=False).status == NOT_ATTEMPTED
    assert grading.check("decoding.ridge_batch", 206, show=False).status == PASSED
