"""Lesson 12 (FlashAttention backward): the reference kernels and the exercises. The submissions of
tests/submissions/backward/ state their verdicts in their headers and are graded by tests/test_submissions.py."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch
from torch.autograd.gradcheck import GradcheckError

from gpuprinciples import runtime
from gpuprinciples.course.exercises import backward as bw
from gpuprinciples.course.kernels import attention_backward as ab
from gpuprinciples.grader import judge
from gpuprinciples.grader.grading import grade
from gpuprinciples.grader.report import FAILED, PASSED
from gpuprinciples.measure import counters
from gpuprinciples.toolchain import compat


def _float64_grads(q, k, v, do, causal):
    return bw.gradients_float64(q, k, v, None, None, do, causal)


@pytest.mark.parametrize("n,d,causal,dtype", [(77, 32, False, torch.float32), (100, 64, True, torch.float32),
                                              (45, 64, True, torch.bfloat16), (33, 128, False, torch.float16)])
def test_reference_kernels_match_float64(n, d, causal, dtype):
    gen = torch.Generator().manual_seed(n)
    q, k, v, do = (torch.randn(1, 2, n, d, generator=gen).to(dtype).to(runtime.DEVICE) for _ in range(4))
    o, lse = ab.attention_lse(q, k, v, causal)
    want_o, want_lse = bw.attention_float64(q.cpu(), k.cpu(), v.cpu(), causal)
    assert (lse.cpu().double() - want_lse).abs().max() < 1e-4
    assert (o.cpu().double() - want_o).abs().max() < (1e-5 if dtype == torch.float32 else 3e-2)
    _assert_right(ab.attention_backward(q, k, v, o, lse, do, causal), q, k, v, do, causal)


def _assert_right(grads, q, k, v, do, causal):
    for got, want in zip(grads, _float64_grads(q.cpu(), k.cpu(), v.cpu(), do.cpu(), causal)):
        rtol, atol = bw.GRAD_TOLERANCES[(q.dtype, "normal")]
        scale = float(want.pow(2).mean().sqrt())
        assert ((got.cpu().double() - want).abs() <= atol * scale + rtol * want.abs()).all()


# On a GPU, tiles that Triton 3.6 warp-specialises correctly (others returned NaNs: docs/flash-backward-h200.md, run 2)
# and the one pass by TMA reduce too (the interpreter has none: pointer atomics there).
PLANS = {"warp-specialised": ab.Plan((64, 64, 4, 2), (64, 64, 4, 2), dkdv_ws=True, dq_ws=True) if runtime.HAS_CUDA
         else ab.Plan((32, 32, 4, 1), (32, 32, 4, 1), dkdv_ws=True, dq_ws=True),
         "one-loop": ab.Plan((64, 128, 8, 3) if runtime.HAS_CUDA else (32, 32, 4, 1),
                             (128, 64, 8, 4) if runtime.HAS_CUDA else (32, 32, 4, 1), one_loop=True),
         "one-pass": ab.Plan((32, 64, 4, 1), None),
         "one-pass-rotated": ab.Plan((64, 128, 8, 3) if runtime.HAS_CUDA else (32, 32, 4, 1), None,
                                     dq_tma=runtime.HAS_CUDA, rotate=True)}


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", list(PLANS))
def test_every_plan_of_the_backward_is_right(name, causal):
    """The plans tools/tune_backward.py times: one loop per pass (causal, the mask on every tile; what warp
    specialisation needs), and one pass with dQ added atomically."""
    plan = PLANS[name]
    gen = torch.Generator().manual_seed(7)
    q, k, v, do = (torch.randn(1, 2, 77, 32, generator=gen).to(runtime.DEVICE) for _ in range(4))
    o, lse = ab.attention_lse(q, k, v, causal)
    _assert_right(ab.attention_backward(q, k, v, o, lse, do, causal, plan=plan), q, k, v, do, causal)


def test_a_gradient_missing_its_scale_fails_the_tolerance():
    """The per-tensor tolerance can fail: dQ without its 1/√D (8× at D = 64) is told apart."""
    gen = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(1, 1, 40, 64, generator=gen) for _ in range(4))
    o, lse = bw.attention_float64(q, k, v)
    case = bw.Case("B=1 H=1 N=40 D=64 full normal float32", (q, k, v, o.float(), lse.float(), do), {"causal": False})
    want = _float64_grads(q, k, v, do, False)
    assert not bw._grad_reasons([w.float() for w in want], want, case)
    wrong = bw._grad_reasons([want[0].float() * math.sqrt(64), want[1].float(), want[2].float()], want, case)
    assert len(wrong) == 1 and wrong[0].startswith("dq: ")


def test_a_backward_may_take_delta_from_the_stored_o_and_no_further():
    """δ = rowsum(dO ∘ O) from the O the forward stored (rounded) moves dQ and dK by P ∘ (δ − δ') products: the
    grade accepts anything between that and the exact gradients, and nothing a missing δ gives. The stored O here
    is made 20× further from the exact one than bf16's rounding, so that the band decides."""
    gen = torch.Generator().manual_seed(3)
    q, k, v, do = (torch.randn(1, 2, 64, 32, generator=gen).to(torch.bfloat16) for _ in range(4))
    o, lse = bw.attention_float64(q, k, v, True)
    stored = (o + 0.04 * torch.randn(o.shape, generator=gen, dtype=torch.float64)).to(torch.bfloat16)
    exact = _float64_grads(q, k, v, do, True)
    p = torch.softmax(bw._scores_float64(q, k, True), -1)
    ds = p * (do.double() @ v.double().transpose(-2, -1) - (do.double() * stored.double()).sum(-1)[..., None])
    direct = (ds @ k.double() / math.sqrt(32), ds.transpose(-2, -1) @ q.double() / math.sqrt(32), exact[2])
    band = bw.stored_o_gradients(q, k, v, do, exact, True, stored)
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(band, direct))
    case = bw.Case("B=1 H=2 N=64 D=32 causal normal bfloat16", (q, k, v, stored, lse.float(), do), {"causal": True})
    assert not bw._grad_reasons(direct, exact, case, o_stored=stored)
    assert bw._grad_reasons(direct, exact, case, o_stored=o.to(torch.bfloat16))  # the band is the stored O's own
    no_delta = p * (do.double() @ v.double().transpose(-2, -1))
    missing = (no_delta @ k.double() / math.sqrt(32), no_delta.transpose(-2, -1) @ q.double() / math.sqrt(32), exact[2])
    assert bw._grad_reasons(missing, exact, case, o_stored=stored)


def test_the_value_exercises():
    assert grade("backward.saved_mib", (4 * 16 * 4096 * 128 * 2 + 4 * 16 * 4096 * 4) / 2**20).status == PASSED
    assert grade("backward.saved_mib", 4 * 16 * 4096 * 4096 * 2 / 2**20).status == FAILED  # the math path's P
    assert grade("backward.matmuls", 7).status == PASSED
    assert grade("backward.matmuls", 5).status == FAILED  # the gradients alone; the second pass recomputes S and dP


def test_the_tile_decision_is_read_from_the_compiled_kernel():
    best = bw._best_tiles()
    info = bw.compile_dkdv(*best)
    assert info.ok and not info.spills
    assert grade("backward.dkdv_tiles", best).status == PASSED
    wider = [c for c in bw.TILE_CHOICES if (c[1], c[0]) > (best[1], best[0])]
    assert wider and all(not bw._fits(c) for c in wider)  # every larger choice spills or does not fit
    assert grade("backward.dkdv_tiles", wider[0]).status == FAILED


def test_several_outputs_are_fingerprinted_as_one():
    """A timed backward returns (dq, dk, dv): each sampled, and a wrong one among them is told apart."""
    parts = [torch.randn(3, 50), torch.randn(7), torch.randn(2, 2, 2)]
    mine = judge.fingerprint(parts, 5)
    assert judge.timed_output(tuple(parts)) and not judge.timed_output((parts[0], "x"))
    assert mine["shape"] == [[3, 50], [7], [2, 2, 2]]
    assert judge.fingerprints_match(judge.fingerprint(tuple(p.clone() for p in parts), 5), mine)
    assert not judge.fingerprints_match(judge.fingerprint([parts[0], parts[1] * 3, parts[2]], 5), mine)


def test_tensor_descriptors_find_an_allocator_on_autograd_threads(monkeypatch):
    """Autograd runs a backward on a thread of its own; Triton keeps its allocator in a ContextVar (one thread's):
    the runtime's shim makes the default allocate too. Here (no GPU) the default reaches the runtime's allocator,
    which then finds no CUDA, instead of raising Triton's 'no allocator was set'."""
    import threading

    import triton
    from triton.runtime import _allocation

    monkeypatch.setattr(runtime, "HAS_CUDA", True)
    monkeypatch.setattr(triton, "set_allocator", lambda alloc: None, raising=False)
    monkeypatch.setattr(_allocation.NullAllocator, "__call__", _allocation.NullAllocator.__call__)  # put back after
    compat.set_tensor_descriptor_allocator()
    raised = []

    def on_another_thread():
        try:
            _allocation._allocator.get()(64, 16, None)
        except BaseException as exc:  # noqa: BLE001 - which error is the point
            raised.append(exc)

    thread = threading.Thread(target=on_another_thread)
    thread.start()
    thread.join()
    if raised:  # no CUDA here: torch refused the allocation, after Triton handed it over
        assert "no allocator was set" not in str(raised[0])


def _forward(ctx, q, k, v, causal=False):
    return bw.FlashAttention.forward(ctx, q, k, v, causal)


def _backward_without_scale(ctx, do):
    dq, dk, dv, _ = bw.FlashAttention.backward(ctx, do)
    return dq * math.sqrt(dq.shape[-1]), dk, dv, None


@pytest.mark.parametrize("causal", [False, True])
def test_the_autograd_function_passes_gradcheck_in_float64(causal):
    """The kernels accumulate in the LSE's dtype, float64 for float64 inputs: gradcheck compares the backward with
    finite differences of the forward, and tells apart a backward whose dQ misses its 1/√D."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 16, 16, generator=gen, dtype=torch.float64).to(runtime.DEVICE).requires_grad_()
               for _ in range(3))
    o, lse = ab.attention_lse(q.detach(), k.detach(), v.detach(), causal)
    assert lse.dtype == torch.float64
    assert torch.autograd.gradcheck(lambda q, k, v: bw.attention(q, k, v, causal), (q, k, v), fast_mode=True)
    wrong = bw.autograd_function(_forward, _backward_without_scale)
    with pytest.raises(GradcheckError):  # q alone: a failing fast check reruns slowly, per element, for its message
        torch.autograd.gradcheck(lambda q: wrong.apply(q, k.detach(), v.detach(), causal), (q,), fast_mode=True)


@pytest.mark.parametrize("causal", [False, True])
def test_the_float64_kernels_compile_for_the_gpu(causal):
    """The lesson's gradcheck runs these kernels in float64 on the GPU too: each must compile for an H100/H200
    with this Triton (3.6 refuses a float64 tl.dot, hence the "fma" products). Under the interpreter every
    launch is compiled for sm_90 as it is counted; on a GPU each launch compiled itself."""
    q, k, v = (torch.randn(1, 1, 16, 16, dtype=torch.float64, device=runtime.DEVICE).requires_grad_() for _ in range(3))
    with counters.record() as rec:
        bw.attention(q, k, v, causal).sum().backward()
    names = {c["kernel"] for c in rec.compiled.values()}
    assert {"forward_kernel", "delta_kernel", "dkdv_kernel", "dq_kernel"} <= names, names
    refused = [c["error"] for c in rec.compiled.values() if not c["ok"]]
    assert not refused, refused


@pytest.mark.parametrize("causal", [False, True])
def test_the_gluon_backward_compiles_for_hopper(causal):
    """Lesson 12's "how far it goes" kernel (Gluon: wgmma, TMA, a loader warp) cannot run under the interpreter:
    a CPU checks that this Triton still compiles both passes, as `gpuprinciples bench` would launch them on an
    H100/H200, into wgmma kernels that fit one SM's shared memory; the warp-specialised ones hand the loader's
    registers to the computing warps (setmaxnreg)."""
    from gpuprinciples.course.kernels import attention_backward_gluon as gluon
    from gpuprinciples.toolchain.compiling import HOPPER_PROPERTIES
    dkdv_ws, dq_ws = gluon._passes_ws(None, causal)
    rows = gluon.compile_for_hopper(128, causal)
    assert [r["kernel"] for r in rows] == [("dkdv_ws_kernel" if dkdv_ws else "dkdv_kernel"),
                                           ("dq_ws_kernel" if dq_ws else "dq_kernel")]
    for row, ws in zip(rows, (dkdv_ws, dq_ws)):
        assert row["ok"] and row["wgmma"], row.get("error")
        assert row["shared_bytes"] <= HOPPER_PROPERTIES["max_shared_mem"]
        assert (f"dec {gluon.LOADER_REGS}" in row["setmaxnreg"]) == ws, row["setmaxnreg"]


@pytest.mark.parametrize("ws", [(True, True), (False, False)])
def test_the_gluon_backward_s_causal_order_compiles_for_hopper(ws):
    """Causal, both orders of the CTAs: one program axis with the longest CTAs of 8 heads first (the default,
    `CAUSAL_GROUP_HEADS`) and the 2-D grid (`causal_group=0`): both forms of both passes compile to wgmma kernels for
    sm_90."""
    from gpuprinciples.course.kernels import attention_backward_gluon as gluon
    for group in (None, 0):
        rows = gluon.compile_for_hopper(128, True, ws=ws, causal_group=group)
        assert [r["kernel"] for r in rows] == [("dkdv_ws_kernel" if ws[0] else "dkdv_kernel"),
                                               ("dq_ws_kernel" if ws[1] else "dq_kernel")]
        assert all(r["ok"] and r["wgmma"] for r in rows), (group, [r.get("error") for r in rows])


@pytest.mark.skipif(not runtime.INTERPRETER, reason="the interpreter's stand-ins exist under the interpreter only")
def test_the_gluon_backward_compiles_after_interpreted_launches(tmp_path):
    """Triton imports Gluon's language while an interpreted launch has triton.language patched, and Gluon keeps
    the builtins it finds at import: unless the package imports it first, every Gluon kernel compiled after a
    Triton kernel ran in the same process is refused. A process of its own (nothing imported yet) and an empty
    Triton cache (the compile really runs; a cached one would hide the refusal)."""
    script = (
        "import torch, gpuprinciples\n"
        "from gpuprinciples.course.kernels.vector_add import vector_add\n"
        "assert torch.equal(vector_add(torch.ones(100), torch.ones(100)), torch.full((100,), 2.0))\n"
        "from gpuprinciples.course.kernels import attention_backward_gluon as g\n"
        "for row in g.compile_for_hopper(64, False):\n"
        "    print(row['kernel'], row['ok'], row.get('error'))\n")
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    rows = [line for line in done.stdout.splitlines() if line.split(" ")[0].endswith("_kernel")]
    assert len(rows) == 2 and all(line.split(" ")[1] == "True" for line in rows), done.stdout + done.stderr[-3000:]


def test_the_gluon_backward_says_where_it_cannot_run():
    from gpuprinciples.course.kernels import attention_backward_gluon as gluon
    q, k, v, o, do = (torch.zeros(1, 2, 128, 64, dtype=torch.bfloat16) for _ in range(5))
    lse = torch.zeros(1, 2, 128)
    with pytest.raises(ValueError, match="Hopper GPU"):
        gluon.attention_backward(q, k, v, o, lse, do, False)
