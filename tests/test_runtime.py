"""The mode is decided at import, and a Triton that computes nothing is caught."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprinciples.machine import runtime
from gpuprinciples.toolchain import compat, selftest

ROOT = Path(__file__).resolve().parent.parent


def python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_mode_matches_the_machine():
    assert runtime.MODE == ("gpu" if runtime.HAS_CUDA else "cpu")
    assert runtime.INTERPRETER == (not runtime.HAS_CUDA) or os.environ.get("TRITON_INTERPRET") == "1"
    assert runtime.sizes(cpu=1, gpu=2) == (2 if runtime.HAS_CUDA else 1)
    assert selftest.self_test() is None


def test_importing_the_package_turns_on_the_interpreter_before_kernels_exist():
    done = python("import os\nos.environ.pop('TRITON_INTERPRET', None)\nimport gpuprinciples, triton\n"
                  "@triton.jit\ndef k(x):\n    pass\nprint(type(k).__name__)", GPUPRINCIPLES_FORCE_CPU="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "InterpretedFunction"


@pytest.mark.skipif(not runtime.INTERPRETER, reason="breaks the interpreter on purpose")
def test_a_triton_that_stores_nothing_is_caught():
    code = ("import gpuprinciples\nfrom gpuprinciples.toolchain import compat, selftest\n"
            "B = compat.interpreter_module().InterpreterBuilder\n"
            "B.create_masked_store = lambda self, *a, **k: None\n"
            "print(selftest.self_test())")
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert "known-answer kernel returned wrong values" in done.stdout


def test_a_self_test_that_fails_in_the_grading_child_blames_the_machine(tmp_path):
    """The grader's own process passed its known-answer check, its child did not (on a GPU machine where other
    processes held the memory: "CUDA error: out of memory"): an error of the machine, not "your code failed"."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "if any('gpuprinciples.grader.worker' in a or a.endswith('worker.py') for a in sys.orig_argv):\n"
        "    from gpuprinciples.toolchain import selftest\n"
        "    selftest._run_known_answer = lambda: 'the known-answer kernel is broken on purpose.'\n")
    done = python("from gpuprinciples.grader.grading import grade\n"
                  "from gpuprinciples.sandbox.submission import from_path\n"
                  "from gpuprinciples.course.kernels.cos_cos import __file__ as f\n"
                  "r = grade('fusion.cos_cos', from_path(f + ':cos_cos'))\n"
                  "print(r.status, r.reasons)", PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("error") and "could not start on this machine" in done.stdout, done.stdout
    assert "broken on purpose" in done.stdout and "your code" not in done.stdout.replace("before loading your code", "")


def test_describe_and_versions():
    info = runtime.describe()
    assert info["mode"] == runtime.MODE and info["triton"] != "missing"
    assert compat.triton_version() >= (3, 6)


def test_a_mask_built_from_a_scalar_comparison_loads_and_stores():
    """`(offs < G) & (tl.program_id(0) < n)`: Triton 3.9's interpreter made that mask int32 and refused it."""
    import torch
    import triton
    import triton.language as tl

    from gpuprinciples.measure import counters

    @triton.jit
    def masked_copy(X, Y, n, G: tl.constexpr):
        offs = tl.arange(0, 16)
        rows = (offs < G) & (tl.program_id(0) < n)
        tl.store(Y + offs, tl.load(X + offs, mask=rows, other=0.0), mask=rows)

    x = torch.arange(1, 17, dtype=torch.float32, device=runtime.DEVICE)
    y = torch.zeros_like(x)
    with counters.record() as rec:
        masked_copy[(1,)](x, y, 3, G=4)
    runtime.synchronize()
    assert y.tolist() == [1, 2, 3, 4] + [0] * 12
    if runtime.INTERPRETER:
        assert rec.load_bytes == rec.store_bytes == 16


def test_an_autotuned_kernel_runs_under_the_interpreter_with_its_first_config():
    if not runtime.INTERPRETER:
        pytest.skip("the shim is for the interpreter; on a GPU the autotuner times each configuration")
    import torch
    import triton
    import triton.language as tl

    @triton.autotune(configs=[triton.Config({"BLOCK": 8}), triton.Config({"BLOCK": 64})], key=["n"])
    @triton.jit
    def fill_block_size(Out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(Out + offs, tl.full([BLOCK], BLOCK, tl.int32), mask=offs < n)

    out = torch.zeros(20, dtype=torch.int32)
    fill_block_size[lambda meta: (triton.cdiv(20, meta["BLOCK"]),)](out, 20)
    assert out.tolist() == [8] * 20  # the first configuration, without a GPU driver to time any


def test_the_fork_server_hashes_tritons_sources_once_for_every_child():
    """Triton digests its own source files before its first compile in a process (0.4 s on a 2-core CPU, every
    check, through the sm_90 compile pass); the server does it before forking, so its children inherit it."""
    code = ("import time, gpuprinciples\n"
            "from gpuprinciples.toolchain import compat\n"
            "compat.warm_compile_key()\n"
            "started = time.perf_counter(); compat.compile_key()(); print(time.perf_counter() - started)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) < 0.01  # the digest is kept: a second call reads nothing
