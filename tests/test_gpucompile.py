"""One verdict everywhere: kernels are compiled for an H100/H200 even on a machine without a GPU.

Under the interpreter every kernel launched while recording is compiled for sm_90 with that launch's
signature: what a GPU's compiler refuses fails there too, with its sentence and a hint; what it
accepts says what a GPU would run (registers, shared memory, wgmma). The interpreter's own limits are
shimmed where a GPU's behaviour can be reproduced (driver queries, float arguments, libdevice, bf16
tl.dot, warm-up handles, autotuning) and named in one sentence where not.

On a GPU these tests compile for the GPU itself (its target is sm_90 on an H200): the refusals and the
evidence are the same. GPU-only checks are marked `gpu`; on the H200:
    pytest -q -p no:cacheprovider tests/test_gpucompile.py tests/test_launch_paths.py
"""

from __future__ import annotations

from functools import lru_cache

import launch_kernels as lk
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents
from triton.language.extra.cuda.libdevice import tanh as cuda_tanh
from triton.language.extra.libdevice import rsqrt as generic_rsqrt
from triton.language.math import exp as math_exp

from gpuprinciples import counters, gpucompile, runtime
from gpuprinciples.course.catalog import all_exercises
from gpuprinciples.course.kit import Case, CompilesForGPU, LaunchesTriton, UsesTensorCores
from gpuprinciples.grader import display
from gpuprinciples.grader.report import PASSED
from gpuprinciples.toolchain import compat, compiling, interpreter

interpreter_only = pytest.mark.skipif(not runtime.INTERPRETER, reason="a shim of Triton's CPU interpreter")

SCALE = 2.0  # a plain global: a kernel may not read it on a GPU


def _plain_helper(x):
    return x * 2


@triton.jit
def cos_kernel(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, tl.cos(tl.load(src + at, mask=inside)), mask=inside)


@triton.jit
def scaled_by_global(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, tl.load(src + at, mask=inside) * SCALE, mask=inside)


@triton.jit
def calls_plain_python(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, _plain_helper(tl.load(src + at, mask=inside)), mask=inside)


@triton.jit
def pow_of_a_literal(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, tl.extra.cuda.libdevice.pow(tl.load(src + at, mask=inside), 2.0), mask=inside)


def _tensors(dtype=torch.float32, n=100):
    x = torch.randn(n).to(dtype).to(runtime.DEVICE)
    return x, torch.empty_like(x)


# -------------------------------------------------------------------------------------------------
# What the GPU compiler refuses, in its words and with a hint
# -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel,dtype,extra,words", [
    (cos_kernel, torch.bfloat16, {}, ["expected dtype", "but got bf16", "tl.cos(tl.load(", "`.to(tl.float32)`"]),
    (scaled_by_global, torch.float32, {}, ["cannot access global variable scale", "`scale = tl.constexpr(value)`",
                                           "as an argument"]),
    (calls_plain_python, torch.float32, {}, ["unsupported function referenced", "decorate `_plain_helper` with "
                                                                                "@triton.jit"]),
    (cos_kernel, torch.float32, {"BLOKC": 64}, ["blokc", "no parameter `blokc`"]),
    (pow_of_a_literal, torch.float64, {}, ["no version of this function for arguments of types fp64, fp32",
                                           "2.0 is fp32"]),
], ids=["bf16 transcendental", "plain global", "non-jit helper", "unknown keyword", "libdevice types"])
def test_a_refusal_says_the_compilers_sentence_and_a_hint(kernel, dtype, extra, words):
    x, y = _tensors(dtype)
    info = gpucompile.compile_launch(kernel, (x, y, x.numel()), {"BLOCK": 128, **extra})
    assert not info.ok and info.refusal in ("compiler", "arguments")
    text = info.error.lower()
    assert "does not compile for an h100/h200 (sm_90)" in text
    for word in words:
        assert word in text, (word, info.error)
    assert "0x" not in info.error  # no object addresses in a sentence for a learner


def test_an_accepted_kernel_says_what_a_gpu_would_run():
    x, y = _tensors()
    info = gpucompile.compile_launch(lk.double, (x, y, x.numel()), {"BLOCK": 256, "num_warps": 8})
    assert info.ok and info.error is None
    assert info.num_warps == 8 and info.num_stages == 3
    assert 0 < info.registers <= 255 and info.spills == 0  # read from the cubin by the bundled cuobjdump
    assert info.shared_bytes == 0 and not info.wgmma and info.dots == ()
    assert info.target == "cuda sm_90"
    assert info.signature == "src: *fp32, dst: *fp32, n: i32, BLOCK=256"
    assert ".target sm_90" in info.ptx and "ld.global" in info.ptx
    plain = info.as_dict()
    assert "ptx" not in plain and "ttir" not in plain  # the PTX stays in the process that compiled it
    assert plain["registers"] == info.registers and plain["dots"] == []


def test_the_signature_is_specialised_as_tritons_jit_does():
    x, y = _tensors(n=4096)
    one = gpucompile.compile_launch(cos_kernel, (x, y, 1), {"BLOCK": 128})
    assert "n=1" in one.signature  # an int equal to 1 becomes a constexpr
    jit = compiling.jit_function_of(cos_kernel)
    _, _, by_16, _ = compiling.specialize(jit, compiling.compile_target(), (x, y, 4096), {"BLOCK": 128})
    _, _, odd, _ = compiling.specialize(jit, compiling.compile_target(), (x[1:], y, 4095), {"BLOCK": 128})
    assert by_16[(2,)] and not odd[(2,)]  # n divisible by 16 is an attribute of the launch
    assert by_16[(0,)] and not odd[(0,)]  # and so is a 16-byte-aligned pointer


def test_compiles_are_cached_per_signature():
    x, y = _tensors()
    first = gpucompile.compile_launch(cos_kernel, (x, y, 100), {"BLOCK": 64})
    again = gpucompile.compile_launch(cos_kernel, (x, y, 77), {"BLOCK": 64})  # the same signature
    other = gpucompile.compile_launch(cos_kernel, (x, y, 96), {"BLOCK": 64})  # 96 is divisible by 16
    assert again is first and other is not first and other.key != first.key


def test_each_compile_not_in_the_cache_is_told_with_its_seconds(monkeypatch):
    """The grader's worker listens, so that its sandbox does not count the grader's compiling as the learner's time."""
    heard = []
    monkeypatch.setattr(gpucompile, "_listener", [heard.append])
    x, y = _tensors()
    gpucompile.compile_launch(cos_kernel, (x, y, 100), {"BLOCK": 32})
    gpucompile.compile_launch(cos_kernel, (x, y, 77), {"BLOCK": 32})  # the same signature: cached, not told
    assert len(heard) == 1 and heard[0] > 0


def test_a_kernel_beyond_hopper_shared_memory_is_refused():
    # a 256×256 by 256×256 bf16 tile product: both tiles in shared memory are 256 KiB, over 227 KiB
    info = gpucompile.compile_kernel(lk.tile_matmul, {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*fp32"},
                                     {"BM": 256, "BN": 256, "BK": 256, "PRECISION": "tf32"}, num_warps=8,
                                     num_stages=1)
    assert not info.ok and info.refusal == "resources"
    assert info.shared_bytes > compiling.max_shared_bytes()
    assert "bytes of shared memory per program" in info.error and "smaller tiles" in info.error


def test_a_gpus_own_refusal_reads_as_the_cpus(monkeypatch):
    """On a GPU the launch itself raises Triton's CompilationError; the learner reads the sentence and the hint
    the CPU's sm_90 compile gives (here the real exception of that compile, as a GPU's launch raises it)."""
    raised = []
    sentence = gpucompile._refusal_sentence
    monkeypatch.setattr(gpucompile, "_refusal_sentence", lambda name, exc, **kw: raised.append(exc) or sentence(
        name, exc, **kw))
    info = gpucompile.compile_kernel(cos_kernel, {"src": "*bf16", "dst": "*bf16", "n": "i32"}, {"BLOCK": 256})
    assert not info.ok and raised and type(raised[0]).__name__ == "CompilationError"
    on_gpu = gpucompile.compile_error_sentence(raised[0])
    assert on_gpu.startswith("kernel `cos_kernel` does not compile for this GPU: the GPU compiler refuses it with")
    assert "but got bf16" in on_gpu and "`.to(tl.float32)`" in on_gpu and "tl.load(src + at" in on_gpu
    assert gpucompile.compile_error_sentence(ValueError("no")) is None


def test_compile_kernel_takes_a_written_signature():
    info = gpucompile.compile_kernel(cos_kernel, {"src": "*fp32", "dst": "*fp32", "n": "i32"}, {"BLOCK": 1024},
                                     num_warps=8)
    assert info.ok and info.num_warps == 8 and info.registers > 0
    missing = gpucompile.compile_kernel(cos_kernel, {"src": "*fp32"}, {"BLOCK": 1024})
    assert not missing.ok and "give a type or a constexpr value for dst, n" in missing.error


# -------------------------------------------------------------------------------------------------
# Tensor cores: the evidence a requirement reads
# -------------------------------------------------------------------------------------------------


def _tile_counts(dtype, rows, precision="tf32"):
    with counters.record() as rec:
        c, a, b = lk.matmul_tile(dtype, rows, precision)
    tolerance = 1e-2 if dtype != torch.float32 else 1e-4
    assert torch.allclose(c.cpu(), a.float().cpu() @ b.float().cpu(), atol=tolerance, rtol=tolerance)  # bf16 too
    return rec.as_dict()


def test_uses_tensor_cores_reads_wgmma_from_the_compiled_kernel():
    case = Case("tile", ())
    need = UsesTensorCores()
    wide = _tile_counts(torch.bfloat16, 64)
    assert wide["compiled"][0]["dots"] == ["bf16"] and wide["compiled"][0]["wgmma"]
    assert need.evaluate(wide, case) is None and CompilesForGPU().evaluate(wide, case) is None
    narrow = _tile_counts(torch.bfloat16, 16)  # 16 rows: below a warpgroup's 64, so mma.sync, not wgmma
    assert not narrow["compiled"][0]["wgmma"]
    assert "did not become hopper's wgmma" in need.evaluate(narrow, case).lower()
    fp32 = _tile_counts(torch.float32, 64, "ieee")
    assert "no kernel multiplied bf16 or fp16 tiles" in need.evaluate(fp32, case) and "f32" in need.evaluate(fp32, case)


def test_every_triton_exercise_asks_that_a_gpu_accept_it():
    for exercise in all_exercises().values():
        kinds = [type(r) for r in getattr(exercise, "requirements", ())]
        assert kinds.count(CompilesForGPU) == (1 if LaunchesTriton in kinds else 0), exercise.id
        if LaunchesTriton in kinds:
            assert kinds.index(CompilesForGPU) == kinds.index(LaunchesTriton) + 1


def test_the_compile_pass_compiles_every_timed_input_of_every_kernel_exercise():
    """The GPU times (and checks) inputs larger than its cases: each is a compile-pass case, its large
    floating-point tensors sent as their layout only, made without drawing values (a 2^28 randn takes seconds)."""
    from gpuprinciples.grader import compilepass
    for exercise in all_exercises().values():
        if LaunchesTriton not in [type(r) for r in getattr(exercise, "requirements", ())] or not exercise.timing:
            continue
        timed = [case for case in compilepass.plan(exercise) if case.get("direct")]
        assert len(timed) == len(exercise.timing.each()), exercise.id
        assert any(isinstance(a, compilepass.Blank) for case in timed for a in case["args"]), exercise.id
    cos_cos = compilepass.plan(all_exercises()["fusion.cos_cos"])[-1]
    assert cos_cos["label"] == "the timed input" and cos_cos["args"][0].shape == (2**28,)


# -------------------------------------------------------------------------------------------------
# The interpreter's limits: shimmed as a GPU behaves, or named
# -------------------------------------------------------------------------------------------------


@triton.jit
def add_eps(src, dst, n, eps, BLOCK: tl.constexpr):
    at = tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, tl.load(src + at, mask=inside) + eps.to(tl.float32), mask=inside)


@triton.jit
def libdevice_both_ways(src, dst, n, BLOCK: tl.constexpr):
    at = tl.arange(0, BLOCK)
    inside = at < n
    v = tl.load(src + at, mask=inside)
    out = tl.extra.cuda.libdevice.tanh(v) + tl.extra.libdevice.erf(v) + tl.extra.cuda.libdevice.atan2(v, v * 0.5 + 1)
    tl.store(dst + at, out, mask=inside)


@triton.jit
def libdevice_by_name(src, dst, n, BLOCK: tl.constexpr):
    at = tl.arange(0, BLOCK)
    inside = at < n
    v = tl.load(src + at, mask=inside)
    tl.store(dst + at, generic_rsqrt(v * v + 1) + cuda_tanh(v) + math_exp(v), mask=inside)


@triton.jit
def waits_on_the_previous_grid(src, dst, n, BLOCK: tl.constexpr):
    tl.extra.cuda.gdc_wait()  # PDL's wait, through its module
    at = tl.arange(0, BLOCK)
    inside = at < n
    tl.store(dst + at, tl.load(src + at, mask=inside) * 2, mask=inside)
    gdc_launch_dependents()  # and imported by name


@triton.jit
def through_inline_asm(src, dst, n, BLOCK: tl.constexpr):
    at = tl.arange(0, BLOCK)
    inside = at < n
    v = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [tl.load(src + at, mask=inside)], dtype=tl.float32,
                                  is_pure=True, pack=1)
    tl.store(dst + at, v, mask=inside)


def test_float_arguments_are_fp32_scalars():
    x, y = _tensors()
    add_eps[(1,)](x, y, x.numel(), 0.25, BLOCK=128)
    assert torch.equal(y, x + 0.25)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_libdevice_functions_compute(dtype):
    x, y = _tensors(dtype)
    libdevice_both_ways[(1,)](x, y, x.numel(), BLOCK=128)
    want = x.tanh() + torch.erf(x) + torch.atan2(x, x * 0.5 + 1)
    assert torch.allclose(y, want, atol=1e-6 if dtype == torch.float32 else 1e-12)


def test_functions_imported_by_name_compute():
    """Libraries import libdevice and tl.math functions by name (Liger-Kernel's `rsqrt`): the interpreter
    patched only module attributes, so the libdevice stub returned None and a builtin wanted `_semantic`."""
    x, y = _tensors()
    libdevice_by_name[(1,)](x, y, x.numel(), BLOCK=128)
    assert torch.allclose(y, torch.rsqrt(x * x + 1) + x.tanh() + x.exp(), atol=1e-5)
    assert generic_rsqrt.__module__ == "triton.language.extra.libdevice"  # the names are put back after the run


@pytest.mark.skipif(runtime.HAS_CUDA and torch.cuda.get_device_capability()[0] < 9,
                    reason="PDL's instructions need a Hopper GPU (sm_90) or newer")
def test_pdl_grid_dependency_calls_run_everywhere():
    """`gdc_wait()` and `gdc_launch_dependents()` (lesson 10's PDL switch) raise under a bare interpreter; here
    they do nothing, what they mean where each kernel runs to its end before the next starts, whether a kernel
    reaches them through `tl.extra.cuda` or imports them by name; on a GPU they are Hopper's instructions."""
    x, y = _tensors()
    waits_on_the_previous_grid[(1,)](x, y, x.numel(), BLOCK=128)
    assert torch.equal(y, x * 2)
    assert gdc_launch_dependents.__module__.startswith("triton.language")  # put back after the run


@interpreter_only
def test_the_driver_answers_as_hopper():
    active = triton.runtime.driver.active
    target = active.get_current_target()
    assert (target.backend, target.arch, target.warp_size) == ("cuda", 90, 32)
    props = active.utils.get_device_properties(active.get_active_torch_device().index)
    assert props["multiprocessor_count"] == 132 and props["max_num_regs"] == 65536
    assert props["max_shared_mem"] == 232448 and props["warpSize"] == 32
    with pytest.raises(interpreter.InterpreterLimit, match="needs a GPU"):
        triton.testing.do_bench(lambda: None)
    if not torch.cuda.is_available():  # PyTorch's device queries answer alike; nothing claims a GPU
        x = torch.zeros(1)
        assert torch.cuda.get_device_properties(x.device).multi_processor_count == 132
        assert torch.cuda.get_device_capability() == (9, 0)
        with torch.cuda.device(x.device):
            pass


def test_a_warmup_handle_answers_from_the_compiled_kernel():
    x, y = _tensors()
    handle = lk.double.warmup(x, y, x.numel(), BLOCK=128, num_warps=4, grid=(1,))
    handle._init_handles()
    info = gpucompile.compile_launch(lk.double, (x, y, x.numel()), {"BLOCK": 128, "num_warps": 4})
    assert handle.n_regs == info.registers > 0 and handle.n_spills == info.spills == 0
    assert handle.metadata.shared == info.shared_bytes and handle.metadata.num_warps == 4
    handle[(1, 1, 1)](x, y, x.numel(), 128)
    assert torch.equal(y, 2 * x)


@interpreter_only
def test_what_the_interpreter_cannot_run_is_named_as_its_limit():
    x, y = _tensors()
    with pytest.raises(interpreter.InterpreterLimit) as caught:
        through_inline_asm[(1,)](x, y, x.numel(), BLOCK=128)
    text = str(caught.value)
    assert "interpreter cannot run kernel `through_inline_asm`" in text and "inline_asm" in text
    assert "may well be right on a gpu" in text.lower()
    assert gpucompile.compile_launch(through_inline_asm, (x, y, x.numel()), {"BLOCK": 128}).ok  # a GPU takes it


@interpreter_only
def test_compiling_leaves_the_interpreter_as_it_was(monkeypatch):
    from gpuprinciples.course.kernels.softmax import softmax, softmax_kernel
    monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")  # Triton's disk cache would skip the code generator
    x = torch.randn(7, 300)
    before = softmax(x)  # device calls (tl.max, tl.sum) leave triton.language patched for the interpreter
    # ... which the GPU compiler must not see: it failed with "'value' object has no attribute 'dtype'"
    info = gpucompile.compile_launch(softmax_kernel, (x, before, 7, 300, 300, 300), {"ROWS": 2, "BLOCK": 512})
    assert info.ok, info.error
    assert isinstance(tl.max, compat.interpreter_module().InterpretedFunction)  # put back after the compile
    assert torch.allclose(softmax(x), torch.softmax(x, dim=-1), atol=1e-6) and torch.equal(softmax(x), before)


@triton.autotune(configs=[triton.Config({"BM": 256, "BN": 256, "BK": 256}, num_warps=8, num_stages=1),
                          triton.Config({"BM": 64, "BN": 32, "BK": 32}, num_warps=4)], key=[])
@triton.jit
def tuned_tile(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b))


def test_autotuning_skips_what_a_gpu_could_not_launch():
    """The first configuration needs 256 KiB of shared memory: a GPU's autotuner skips it (out of
    resources), and so does the interpreter's, which compiles each for Hopper instead of timing it."""
    a, b = (torch.randn(256 * 256).bfloat16().to(runtime.DEVICE) for _ in range(2))
    c = torch.zeros(256 * 256, device=runtime.DEVICE)
    with counters.record() as rec:
        tuned_tile[(1,)](a, b, c)
    assert tuned_tile.best_config.kwargs == {"BM": 64, "BN": 32, "BK": 32}
    assert rec.triton_launches == 1  # the benchmarks (GPU) and the compiles (CPU) are not launches
    want = a[:64 * 32].view(64, 32).float() @ b[:32 * 32].view(32, 32).float()
    assert torch.allclose(c[:64 * 32].view(64, 32), want, atol=1e-2, rtol=1e-2)


# -------------------------------------------------------------------------------------------------
# Graded submissions: right ones pass, wrong ones fail with the compiler's sentence
# -------------------------------------------------------------------------------------------------

# (the kernels a GPU refuses, bf16_cos.py and global_block.py, state their sentence in their headers:
# tests/test_submissions.py grades them)
GRADED = {  # stem -> (exercise, function)
    "constexpr_global_block": ("fusion.cos_cos", "cos_cos"), "float_eps_layernorm": ("fusion.layernorm", "layernorm"),
    "libdevice_gelu": ("fusion.bias_gelu", "bias_gelu"), "inline_asm_cos_cos": ("fusion.cos_cos", "cos_cos"),
}


@lru_cache(maxsize=None)
def _reports():
    return lk.grade_submissions(GRADED)


def _reasons(stem) -> str:
    return " ".join(_reports()[stem].reasons).lower()


@pytest.mark.parametrize("stem", ["constexpr_global_block", "float_eps_layernorm", "libdevice_gelu"])
def test_kernels_a_gpu_accepts_pass(stem):
    report = _reports()[stem]
    if runtime.HAS_CUDA:
        assert lk.counted_checks_hold(report), report.reasons
    else:
        assert report.status == PASSED, report.reasons
        compiled = report.measurements["counts"]["compiled"]
        assert compiled and all(c["ok"] and c["target"] == "cuda sm_90" for c in compiled)


def test_an_interpreter_limit_is_reported_as_one():
    if runtime.HAS_CUDA:  # where the claim "may well be right on a GPU" is checked
        assert lk.counted_checks_hold(_reports()["inline_asm_cos_cos"]), _reports()["inline_asm_cos_cos"].reasons
        return
    text = _reasons("inline_asm_cos_cos")
    assert "interpreter cannot run kernel `cos_cos_asm`" in text and "may well be right on a gpu" in text
    # nothing wrong was seen: not FAILED (a verdict on the learner's code) but ERROR, its values not judged
    report = _reports()["inline_asm_cos_cos"]
    assert report.status == "error" and not report.passed
    correct, = (row for row in report.checks if row.name == "correct")
    assert correct.passed is None and "cannot run under triton's cpu interpreter" in correct.detail.lower()
    assert "\n  ERROR       raised on" in display.text(report)  # its reason is not worded as a failure either
