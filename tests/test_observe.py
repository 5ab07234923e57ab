"""Evidence a submission cannot switch off from Python (observe.py, child side; honesty.py, grader side).

Each hiding trick is run under the grader's own pair, `observe.Watch` outside `counters.record`, as
worker.run_case does, and honesty.py must name what was hidden; plain PyTorch and Triton work must
produce no sentence (a rule that fails a right answer is wrong).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import triton
import triton.language as tl

from gpuprinciples.grader import honesty
from gpuprinciples.grader.worker import _watched_entry
from gpuprinciples.machine import runtime
from gpuprinciples.measure import counters, observe

DEVICE = "cuda" if runtime.HAS_CUDA else "cpu"


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def _launch(x):
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y


def watched(fn, **record):
    observe.install()
    with observe.Watch(gpu=DEVICE != "cpu") as seen, counters.record(**record) as rec:
        out = fn()
        runtime.synchronize()
    return _watched_entry("graded call", seen, rec), rec, out


def said(entry) -> str:
    return " | ".join(honesty.sentences([entry], "case (8,)"))


A = torch.randn(16, 16, device=DEVICE)


def test_plain_pytorch_and_triton_work_is_no_hidden_work():
    entry, _, _ = watched(lambda: (torch.matmul(A, A).softmax(-1) @ A, _launch(A), A.cos().sum()))
    assert entry["watch"]["profiler_on"] and entry["watch"]["all_threads"]
    assert said(entry) == "", said(entry)
    assert entry["watch"]["ops"].get("mm", 0) >= 2  # the profiler saw what the mode saw


def test_disabled_torch_dispatch_is_seen():
    def hide():
        with torch._C._DisableTorchDispatch():
            return torch.mm(A, A)
    entry, rec, _ = watched(hide)
    assert "mm" not in rec.torch_compute_ops  # the mode was blind ...
    assert "mm×1" in said(entry) and "did not see" in said(entry)  # ... the profiler was not


def test_disable_current_modes_is_seen():
    from torch.utils._python_dispatch import _disable_current_modes

    def hide():
        with _disable_current_modes():
            return torch.nn.functional.scaled_dot_product_attention(A[None], A[None], A[None])
    entry, _, _ = watched(hide)
    # SDPA's CPU path, by PyTorch version: the math path (bmm, softmax; torch 2.13's CPU build) or its fused
    # CPU kernel (torch 2.14.1 from PyPI): either way, named
    assert "did not see" in said(entry) and ("bmm×2" in said(entry) or "_scaled_dot_product" in said(entry))


@pytest.mark.parametrize("how", ["thread", "futures"])
def test_work_in_a_thread_is_seen(how):
    def hide():
        if how == "thread":
            box = []
            t = threading.Thread(target=lambda: box.append(A.sin()))
            t.start()
            t.join()
            return box[0]
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(A.sin).result()
    entry, _, _ = watched(hide)
    text = said(entry)
    assert "sin×1 on another thread" in text and "started a thread" in text, text


def test_a_thread_still_running_is_named_and_ends_the_check():
    stop = threading.Event()
    entry, _, _ = watched(lambda: threading.Thread(target=stop.wait, name="lingers", daemon=True).start())
    stop.set()
    assert "still running after it returned: lingers" in said(entry)
    assert honesty.left_running([entry])


def test_switching_record_function_off_is_seen():
    def hide():
        torch.autograd._enable_record_function(False)
        with torch._C._DisableTorchDispatch():
            y = A.exp()
        torch.autograd._enable_record_function(True)
        return y
    entry, _, _ = watched(hide)
    assert "profiler or its recordfunction off" in said(entry).lower()
    assert "exp×1" in said(entry)  # the switch was refused: the profiler saw the operator anyway


def test_a_triton_launch_from_a_worker_thread_is_counted():
    x = torch.randn(100, device=DEVICE)

    def threaded():
        box = []
        t = threading.Thread(target=lambda: box.append(_launch(x)))
        t.start()
        t.join()
        return box[0]
    _, rec, out = watched(threaded)
    assert rec.triton_launches == 1 and torch.equal(out, x * 2)


@pytest.mark.skipif(not runtime.INTERPRETER, reason="store values are read under the interpreter")
def test_an_element_changed_after_its_kernel_stored_it_is_counted():
    x = torch.randn(100)
    with counters.record(stores=True) as rec:
        y = _launch(x)
        y[:7].numpy()[:] = 1.0  # NumPy: no operator, no store the counters see
    assert rec.written_check(y) == (0, 7)
    strided = torch.empty(10, 20)[:, :10]  # padded rows: judged by their elements
    with counters.record(stores=True) as rec:
        _double[(1,)](strided, strided, 0, BLOCK=64)  # stores nothing
        z = _launch(torch.randn(10, 10))
    assert rec.written_check(strided) == (100, 0) and rec.written_check(z) == (0, 0)


def test_gpu_kernels_no_launch_or_operator_accounts_for_are_named():
    entry = {"call": "graded call", "watch": {"kernels": {"my_kernel": 1, "sm90_xmma_gemm_bf16": 2},
                                              "kernels_under_ops": {}, "ops": {}}, "triton": {"my_kernel": 1}}
    assert honesty.unexplained_kernels(entry) == {"sm90_xmma_gemm_bf16": 2}
    assert "sm90_xmma_gemm_bf16×2" in said(entry)
    entry["watch"]["kernels_under_ops"] = {"sm90_xmma_gemm_bf16": 2}
    assert said(entry) == ""


def test_a_record_function_range_on_the_gpus_timeline_is_no_kernel():
    """On a GPU the profiler shows a `record_function` label on the GPU's timeline too (a user annotation): it
    launched nothing and is not counted as a kernel; a kernel an operator launched is."""
    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    events = [_Event("aten::addmm", cpu, 7), _Event("mlp_tail", cpu, 8, annotation=True),
              _Event("mlp_tail", cuda, 9, annotation=True), _Event("sm90_xmma_gemm_bf16", cuda, 10, linked=7)]
    assert observe._kernels(events) == {"kernels": {"sm90_xmma_gemm_bf16": 1},
                                        "kernels_under_ops": {"sm90_xmma_gemm_bf16": 1}}


def test_what_a_module_leaves_at_import_is_named():
    left = {"threads_alive": ["t"], "modes": ["Quiet"], "hooks": ["a global module hook"], "noted": []}
    text = " | ".join(honesty.import_sentences(left))
    assert "started a thread" in text and "Quiet" in text and "global module hook" in text
    assert honesty.import_sentences({"threads_alive": [], "processes_alive": [], "modes": [], "hooks": [],
                                     "noted": []}) == []


def test_statistics_come_from_raw_rounds_in_the_grader():
    from gpuprinciples.measure import timing
    rounds = [{"yours": 1.0, "fp32": 2.0}, {"yours": 1.0, "fp32": 2.2}, {"yours": 1.1, "fp32": 2.0}]
    summary = timing.summarize_rounds(rounds, "yours", "fp32")
    assert summary["median_ms"] == {"yours": 1000.0, "fp32": 2000.0}
    assert 1.8 < summary["speedup"][0] < 2.2 and summary["speedup"][1] <= summary["speedup"][0]
    with pytest.raises(ValueError):
        timing.summarize_rounds([{"yours": 1.0}], "yours", "fp32")


@pytest.mark.gpu
def test_on_a_gpu_the_profiler_names_library_kernels_hidden_from_the_mode():
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)

    def hide():
        with torch._C._DisableTorchDispatch():
            c = torch.mm(a, a)
        return _launch(c.float())
    entry, rec, _ = watched(hide)
    kernels = entry["watch"]["kernels"]
    assert any(name.startswith("_double") for name in kernels), kernels  # the learner's Triton kernel, by name
    assert len(kernels) >= 2, kernels  # and cuBLAS's
    assert "mm×1" in said(entry), said(entry)
    assert not honesty.unexplained_kernels(entry), entry  # the gemm is the (hidden) mm's


class _Event:
    """A stand-in for the profiler's _KinetoEvent, with the fields observe._kernels reads."""

    def __init__(self, name, device, correlation=0, linked=0, annotation=False):
        self._name, self._device, self._correlation, self._linked = name, device, correlation, linked
        self._annotation = annotation  # a record_function range

    def name(self):
        return self._name

    def device_type(self):
        return self._device

    def correlation_id(self):
        return self._correlation

    def linked_correlation_id(self):
        return self._linked

    def is_user_annotation(self):
        return self._annotation


def test_a_kernel_is_an_operators_when_the_profiler_links_it_to_one():
    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    events = [_Event("aten::mm", cpu, correlation=7), _Event("cudaLaunchKernel", cpu, correlation=99, linked=7),
              _Event("nvjet_gemm", cuda, linked=7), _Event("my_triton_kernel", cuda),
              _Event("cublas_gemm_from_ctypes", cuda, linked=99), _Event("Memcpy HtoD", cuda, linked=7)]
    seen = observe._kernels(events)
    assert seen["kernels"] == {"nvjet_gemm": 1, "my_triton_kernel": 1, "cublas_gemm_from_ctypes": 1}
    assert seen["kernels_under_ops"] == {"nvjet_gemm": 1}  # a runtime call is no operator


def test_a_frame_in_site_packages_is_no_standard_library_frame(monkeypatch):
    """On the H200 image Python lives in its venv: site-packages sits under the standard library's folder, and
    Triton's compiler (starting ptxas) must still be told apart from the learner's code."""
    import os
    package = os.path.dirname(os.path.realpath(observe.__file__))
    monkeypatch.setattr(observe, "_STDLIB", (os.path.dirname(package),))  # the package under "the stdlib" ...
    monkeypatch.setattr(observe, "_SITE", (package,))  # ... in "site-packages"
    assert observe._learners_frame(0) is None  # the innermost frame is this package's: not the learner's
    monkeypatch.setattr(observe, "_SITE", ())
    assert observe._learners_frame(0) is None  # ours first, wherever it is installed


def _in_file(path: str, source: str, **names):
    """Functions whose frames report `path` as their file: code of an installed package, or of PyTorch."""
    namespace = dict(names)
    exec(compile(source, path, "exec"), namespace)
    return namespace


def test_a_thread_an_installed_package_starts_for_pytorch_is_not_the_learners_but_for_the_learner_it_is():
    """On an H200 torch.compile, compiling a baseline during the timed calls, started tqdm's monitor thread,
    and the reference solutions of fusion.layernorm and bias_gelu failed for it. Whose thread it is: the first
    frame out from the call that is neither the standard library nor an installed package decides."""
    import os
    observe.install()
    package = _in_file(os.path.join(observe._SITE[0], "a_package", "monitor.py"), (
        "def start():\n"  # what tqdm does at its first bar: a monitor thread that outlives the call
        "    t = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True, name='a_package_monitor')\n"
        "    t.start()\n"
        "    return t\n"), threading=threading)
    pytorch = _in_file(os.path.join(os.path.dirname(torch.__file__), "_inductor", "compile_like.py"),
                       "def compile_baseline():\n    return start()\n", start=package["start"])
    for start, learners in ((pytorch["compile_baseline"], False), (package["start"], True)):
        before = observe.snapshot()
        with observe.armed():
            t = start()  # for the learner: this test's frame is the first that is no library's
        left, noted = observe.leftovers(*before), observe.take_noted()
        assert (left["threads_alive"] == ["a_package_monitor"]) is learners, (learners, left)
        assert bool(noted) is learners, (learners, noted)
        t.join()


def test_a_package_pip_put_in_a_folder_on_the_path_is_installed_code_and_its_neighbours_are_not(tmp_path, monkeypatch):
    """On an H100 with the wheels carried into a folder on PYTHONPATH (`pip install --target`), tqdm lay outside
    site-packages: its monitor thread, started for torch.compile's baseline, was blamed on the learner, and four
    reference solutions failed. What pip put there, named by its dist-info (RECORD or top_level.txt), is
    installed code; the learner's file beside it is not."""
    import ast
    import os
    import subprocess
    import sys
    # the files are listed, not written: RECORD is read, not the disk (Python 3.12's `Distribution.files` drops
    # what it does not find there, and this test failed on the GPU machine's Python)
    for name, meta, text in (("a_package", "RECORD", "a_package/__init__.py,,\na_package/monitor.py,,\n"
                                                      "a_helper.py,,\na_package-1.0.dist-info/RECORD,,\n"
                                                      "../../bin/tool,,\n"),
                             ("a_module", "top_level.txt", "a_module\n")):
        (tmp_path / f"{name}-1.0.dist-info").mkdir()
        (tmp_path / f"{name}-1.0.dist-info" / meta).write_text(text)
    folder = os.path.realpath(tmp_path)
    installed = {os.path.join(folder, "a_package", ""), os.path.join(folder, "a_helper.py"),
                 os.path.join(folder, "a_module", ""), os.path.join(folder, "a_module.py")}
    assert observe._packages_beside(folder) == installed
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([folder, os.environ.get("PYTHONPATH", "")]))
    seen = set(ast.literal_eval(subprocess.run(
        [sys.executable, "-c", "from gpuprinciples.measure import observe; print(observe._SITE)"],
        env=env, capture_output=True, text=True, check=True).stdout))
    assert installed <= seen and folder not in seen
    monkeypatch.setattr(observe, "_SITE", observe._SITE + tuple(installed))
    pytorch = _in_file(os.path.join(os.path.dirname(torch.__file__), "_inductor", "compile_like.py"),
                       "def compile_baseline(start):\n    return start()\n")
    for where, learners in ((os.path.join(folder, "a_package", "monitor.py"), False),
                            (os.path.join(folder, "a_packages_neighbour.py"), True)):
        start = _in_file(where, "def start():\n    return learners_frame(1)\n", learners_frame=observe._learners_frame)
        found = pytorch["compile_baseline"](start["start"])  # a thread start asks whose it is from where it runs
        assert (found.f_code.co_filename if found else None) == (where if learners else None)


def test_pytorchs_own_kernels_are_an_operators_and_a_librarys_are_not():
    """An ATen kernel without its profiler link (the autotuner's L2-clearing fill on an H200) is PyTorch's;
    a cuBLAS kernel with no operator behind it is a library reached without PyTorch."""
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >"
    entry = {"watch": {"kernels": {fill: 1, "nvjet_sm90_tst_128x256": 1}, "kernels_under_ops": {}}}
    assert honesty.unexplained_kernels(entry) == {"nvjet_sm90_tst_128x256": 1}
