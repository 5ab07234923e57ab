"""measure/placement.py: under the interpreter, a launch handed a tensor that a GPU would keep in the CPU's memory
is refused as a GPU refuses it, and so is arithmetic that mixes such a tensor with one of the GPU's; every tensor a
GPU would keep in its own memory still launches, and what a GPU accepts across the two memories still runs."""

import pytest
import torch
import triton
from launch_kernels import double, double_tuned

from gpuprinciples.machine import runtime
from gpuprinciples.measure import placement

pytestmark = pytest.mark.skipif(not runtime.INTERPRETER, reason="a GPU refuses these launches itself")
REFUSED = "cannot be accessed from Triton (cpu tensor?)"


def _launch(src, dst, kernel=double):
    kernel[(triton.cdiv(src.numel(), 64),)](src, dst, src.numel(), **({} if kernel is double_tuned else {"BLOCK": 64}))
    return dst


# (what the learner's code makes the output with, given the input x)
ON_THE_GPU = {
    "empty_like": lambda x: torch.empty_like(x),
    "device=x.device": lambda x: torch.empty(x.shape, dtype=x.dtype, device=x.device),
    "device=x.device.type": lambda x: torch.empty(x.shape, device=x.device.type),  # "cuda" on a GPU machine
    "x.to(str(x.device))": lambda x: torch.empty(x.shape).to(str(x.device)),
    "x.new_empty": lambda x: x.new_empty(x.shape),
    "moved with .to(x.device)": lambda x: torch.empty(x.shape).to(x.device),
    "moved with .to(x)": lambda x: torch.empty(x.shape).to(x),
    "a view of x's buffer": lambda x: torch.empty(x.numel() + 10, device=x.device)[10:],
}
IN_THE_CPUS_MEMORY = {
    "no device=": lambda x: torch.empty(x.shape, dtype=x.dtype),
    "empty_like of a host tensor": lambda x: torch.empty_like(torch.empty(x.shape)),
    "arithmetic on a host tensor": lambda x: torch.zeros(x.shape) + 1,
    "a view of a host tensor": lambda x: torch.empty(x.numel() + 10)[10:],
    "x.cpu()": lambda x: x.cpu(),
    "torch.tensor of a list": lambda x: torch.tensor([0.0] * x.numel()),
}


@pytest.mark.parametrize("make", ON_THE_GPU.values(), ids=ON_THE_GPU.keys())
def test_a_tensor_on_the_inputs_device_launches(make):
    x = torch.randn(300)
    with placement.watch():
        y = _launch(x, make(x))
    torch.testing.assert_close(y, 2 * x)


@pytest.mark.parametrize("make", IN_THE_CPUS_MEMORY.values(), ids=IN_THE_CPUS_MEMORY.keys())
@pytest.mark.parametrize("kernel", [double, double_tuned], ids=["jit", "autotuned"])
def test_a_tensor_in_the_cpus_memory_is_refused_at_the_launch(make, kernel):
    x = torch.randn(300)
    with placement.watch():
        y = make(x)
        with pytest.raises(ValueError, match=r"\(at 1\) cannot be accessed from Triton \(cpu tensor\?\)"):
            _launch(x, y, kernel)
        assert _launch(x, torch.empty_like(x), kernel).equal(2 * x)  # the input itself is still the GPU's
    _launch(x, y, kernel)  # outside the watch nothing is refused


def test_a_move_answered_with_the_same_tensor_leaves_the_host_one_behind():
    """On a CPU, `.to(x.device)` of a CPU tensor returns the tensor itself; on a GPU it is a copy, and the
    original stays in the CPU's memory."""
    x = torch.randn(100)
    with placement.watch():
        host = torch.empty(100)
        moved = host.to(x.device)
        assert moved is not host
        _launch(x, moved)
        with pytest.raises(ValueError, match="cpu tensor"):
            _launch(x, host)


def test_a_gpu_tensor_mixed_with_a_host_scalar_stays_on_the_gpu():
    x = torch.randn(100)
    with placement.watch():
        _launch(x, torch.empty_like(x * torch.tensor(2.0)))


# ---- operations a GPU refuses when they mix the two memories -------------------------------------------------

MIXED = "Expected all tensors to be on the same device"
MODULE_TENSOR = torch.ones(300)  # made at import, before any watch: its place is not known
REFUSED_MIXES = {
    "x + arange": lambda x: x + torch.arange(300),
    "host * x": lambda x: torch.ones(300) * x,
    "in place": lambda x: x.clone().add_(torch.ones(300)),
    "torch.where": lambda x: torch.where(torch.ones(300, dtype=torch.bool), x, torch.zeros(300)),
    "cat": lambda x: torch.cat([x, torch.zeros(4)]),
    "matmul": lambda x: x @ torch.ones(300),
    "comparison": lambda x: x > torch.zeros(300),
    "a GPU tensor made from x": lambda x: (x * 2).exp() - torch.zeros(300),
    "made with device=": lambda x: torch.ones(300, device=x.device) + torch.zeros(300),
}
ALLOWED_MIXES = {
    "a CPU scalar (0-dim)": lambda x: x * torch.tensor(2.0),
    "indexing with a host index": lambda x: x[torch.arange(10)],
    "a copy into the GPU's memory": lambda x: torch.empty_like(x).copy_(torch.zeros(300)),
    "moved first": lambda x: x + torch.arange(300).to(x.device),
    "host with host": lambda x: torch.zeros(300) + torch.ones(300),
    "a module's tensor (place unknown)": lambda x: MODULE_TENSOR + torch.zeros(300),
}


@pytest.mark.parametrize("mix", REFUSED_MIXES.values(), ids=REFUSED_MIXES.keys())
def test_arithmetic_that_mixes_the_two_memories_is_refused_as_on_a_gpu(mix):
    x = torch.randn(300)
    with placement.watch(x), pytest.raises(RuntimeError, match=MIXED):
        mix(x)
    mix(x)  # outside the watch nothing is refused


@pytest.mark.parametrize("mix", ALLOWED_MIXES.values(), ids=ALLOWED_MIXES.keys())
def test_what_a_gpu_accepts_across_the_memories_runs(mix):
    x = torch.randn(300)
    with placement.watch(x):
        mix(x)


def test_only_tensors_known_to_be_the_gpus_count():
    """Without the call's inputs named, x's place is unknown (it could be a module's CPU tensor on a GPU
    machine too): never a refusal on a guess."""
    x = torch.randn(300)
    with placement.watch():
        x + torch.arange(300)


def test_torch_func_runs_under_the_watch_as_without_it():
    """torch.func's tensors are wrappers without a storage of their own: of no known place, never refused, and the
    watch must not raise on them (it raised "Cannot access storage of TensorWrapper" inside torch.func.vjp, in
    the learner's code, where a GPU, which has no watch, runs it)."""
    x, w, g = torch.randn(5, 3), torch.randn(3, 4), torch.randn(5, 4)

    def gradients():
        _, pull = torch.func.vjp(lambda a, b: torch.tanh(a @ b), x, w)
        return pull(g)

    want = gradients()
    with placement.watch(x):
        got = gradients()
    assert all(torch.equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("make", [
    lambda x: torch.empty(x.shape, dtype=x.dtype, device="cuda"),
    lambda x: torch.empty(x.shape, device=torch.device("cuda", 0)),
    lambda x: torch.zeros_like(x, device="cuda:0"),
    lambda x: torch.empty(x.shape).to("cuda"),
    lambda x: torch.empty(x.shape).cuda(),
    lambda x: x.new_empty(x.shape, device=0),
], ids=["device='cuda'", "torch.device('cuda', 0)", "zeros_like cuda:0", ".to('cuda')", ".cuda()", "device=0"])
def test_a_tensor_put_on_the_gpu_by_name_is_made_here_and_launches(make):
    """PyTorch here has no GPU: `device="cuda"` raised "Torch not compiled with CUDA enabled" in the learner's code
    where a GPU runs it. Under the watch the CPU stands in, and the tensor counts as the GPU's."""
    x = torch.randn(100)
    with placement.watch(x):
        y = make(x)
        assert y.is_cuda
        assert torch.equal(_launch(x, y), x * 2)
        assert x.cuda() is x  # `.cuda()` of a GPU tensor is the tensor itself, as on a GPU
    assert y.device.type == "cpu"  # in the CPU's memory, which stood in for the GPU's


def test_a_gpu_tensor_says_it_is_on_the_gpu():
    """Launch code asks where its tensors are (`assert q.is_cuda`; `if x.device.type != "cuda": fallback`): the
    GPU's tensors answer as on a GPU, a host tensor as the CPU's, and nothing changes outside the watch."""
    x = torch.randn(10)
    with placement.watch(x):
        host = torch.empty(3)
        made = torch.empty_like(x)
        for t in (x, made):
            assert t.is_cuda and not t.is_cpu and t.device == torch.device("cuda", 0) and t.get_device() == 0
            assert t.device.type == "cuda" and str(t.device) == "cuda:0"
        assert not host.is_cuda and host.is_cpu and host.device.type == "cpu" and host.get_device() == -1
        assert torch.empty(3, device=x.device).is_cuda  # and a device so named is the GPU's
        assert triton.runtime.driver.active.get_active_torch_device() == x.device  # Triton's driver agrees
    assert not x.is_cuda and x.device.type == "cpu"
    assert triton.runtime.driver.active.get_active_torch_device().type == "cpu"


def test_a_modules_top_level_may_name_the_gpu():
    """`DEVICE = torch.device("cuda")` and a table made with it at a module's top level, as Triton's tutorials
    write scripts: made in the CPU's memory while the learner's module is imported."""
    with pytest.raises((AssertionError, RuntimeError)):  # "Torch not compiled with CUDA", or "no NVIDIA driver"
        torch.zeros(4, device="cuda")
    with placement.gpu_named_as_cpu():
        table = torch.zeros(4, device=torch.device("cuda"))
        moved = torch.ones(4).to("cuda")
        copied = torch.ones(4).cuda()
    assert all(t.device.type == "cpu" for t in (table, moved, copied))


def test_the_learners_code_is_told_a_gpu_is_there():
    """`torch.cuda.is_available()`, `device_count()` and `torch.accelerator`'s answers asked by the learner's code
    (here, this test) while the CPU stands in for the GPU are a one-GPU machine's; PyTorch's own checks keep the
    truth (a GradScaler for "cuda" still disables itself: the build has no CUDA), and outside nothing changes."""
    def truth():  # (a CUDA build of PyTorch names cuda its accelerator even with no GPU, a CPU build None)
        return (torch.cuda.is_available(), torch.cuda.device_count(), torch.accelerator.is_available(),
                torch.accelerator.current_accelerator())

    before = truth()
    assert before[:3] == (False, 0, False)
    for stood_in in (placement.watch(torch.randn(3)), placement.gpu_named_as_cpu()):
        with stood_in:
            assert torch.cuda.is_available() and torch.cuda.device_count() == 1 and torch.cuda.is_bf16_supported()
            assert torch.accelerator.is_available() and torch.accelerator.device_count() == 1
            assert torch.accelerator.current_accelerator() == torch.device("cuda")
            assert not torch.cuda.is_current_stream_capturing()
            with pytest.warns(UserWarning, match="not available"):
                assert not torch.amp.GradScaler("cuda").is_enabled()
    assert truth() == before


def test_what_a_modules_top_level_makes_without_device_stays_in_the_cpus_memory():
    """A table or buffer made at the module's top level without `device=` is in the CPU's memory on a GPU machine:
    a launch in a later call is refused; one made with `device="cuda"` launches."""
    with placement.gpu_named_as_cpu():
        host_table = torch.ones(64)
        gpu_table = torch.ones(64, device="cuda")
    x = torch.randn(64)
    with placement.watch(x):
        with pytest.raises(ValueError, match=r"\(at 0\) cannot be accessed from Triton"):
            _launch(host_table, torch.empty_like(x))
        assert torch.equal(_launch(gpu_table, torch.empty_like(x)), gpu_table * 2)
