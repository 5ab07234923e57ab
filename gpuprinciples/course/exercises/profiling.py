"""Lesson 03, profiling: read a profile, name the bottleneck, fix it, profile again.

The profiles graded here are generated fresh for every check, shaped like `profiling.rows(prof)`
(see gpuprinciples/measure/profiling.py): rows of kind "op", "kernel", "annotation" and "runtime", with
self and total times on the CPU and on the device, in microseconds.
"""

from __future__ import annotations

import torch

from ..kit import Case, FunctionExercise, ValueExercise, compare_tensors
from .bounds import MaxDispatches

# -------------------------------------------------------------------------------------------------
# Generated profiles
# -------------------------------------------------------------------------------------------------

GEMM_KERNELS = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_"
    "kernel__5x_cublas",
    "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT",
    "ampere_sgemm_128x64_nn",
)
ELEMENTWISE_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
                      "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")
# leaf operator -> the kernel it launches (None: it launches nothing, e.g. an allocation or a view)
LEAVES = {
    "aten::addmm": "gemm", "aten::mm": "gemm", "aten::bmm": "gemm",
    "aten::add_": ELEMENTWISE_KERNEL, "aten::mul_": ELEMENTWISE_KERNEL, "aten::add": ELEMENTWISE_KERNEL,
    "aten::gelu": "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
    "aten::gelu_backward": "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl>",
    "aten::native_layer_norm": "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>",
    "aten::native_layer_norm_backward": "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel",
    "aten::_softmax": "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>",
    "aten::copy_": "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>",
    "aten::sum": "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper>>",
    "aten::empty": None, "aten::t": None, "aten::view": None, "aten::as_strided": None,
}
# composite operator -> the leaves it calls
COMPOSITES = {
    "aten::linear": ("aten::addmm", "aten::t"),
    "aten::matmul": ("aten::mm", "aten::bmm", "aten::view"),
    "aten::layer_norm": ("aten::native_layer_norm",),
    "aten::softmax": ("aten::_softmax",),
    "aten::to": ("aten::copy_", "aten::empty"),
}
PARENT = {leaf: parent for parent, leaves in COMPOSITES.items() for leaf in leaves}


def _u(gen, lo, hi) -> float:
    return lo + (hi - lo) * float(torch.rand((), generator=gen))


def synthetic_profile(gen: torch.Generator, target: str, device: bool) -> list[dict]:
    """A profile of one training step whose bottleneck operator is `target`.

    device=True: a GPU profile (self device times set; kernel and runtime rows present). Traps are
    built in: an operator leads by CPU time that is not the target; every kernel row is at least as
    long as the operators that launch it; annotations and composites lead by total time.
    """
    key = "self_device_us" if device else "self_cpu_us"
    leaves = {}
    for name, kernel in LEAVES.items():
        calls = int(torch.randint(1, 48, (), generator=gen))
        self_cpu = calls * _u(gen, 3, 30)
        self_dev = calls * _u(gen, 2, 300) if (device and kernel is not None) else 0.0
        leaves[name] = {"name": name, "kind": "op", "calls": calls, "self_cpu_us": self_cpu,
                        "self_device_us": self_dev}
    composites = {}
    for parent, children in COMPOSITES.items():
        calls = max(leaves[c]["calls"] for c in children)
        composites[parent] = {"name": parent, "kind": "op", "calls": calls, "self_cpu_us": calls * _u(gen, 2, 8),
                              "self_device_us": 0.0}
    ops = {**leaves, **composites}
    # the target leads its key by at least 25%
    others = max(r[key] for n, r in ops.items() if n != target)
    leaves[target][key] = max(leaves[target][key], 1.25 * others * _u(gen, 1.0, 1.6))
    if device:  # another operator leads by CPU time (launch-heavy, GPU-light): the CPU-time trap
        decoy = "aten::empty" if target != "aten::empty" else "aten::view"
        leaves[decoy]["calls"] = int(torch.randint(150, 400, (), generator=gen))
        leaves[decoy]["self_cpu_us"] = 1.3 * max(r["self_cpu_us"] for r in ops.values()) * _u(gen, 1.0, 1.5)
    table = []
    for r in leaves.values():
        table.append({**r, "cpu_total_us": r["self_cpu_us"], "device_total_us": r["self_device_us"]})
    for parent, children in COMPOSITES.items():
        kids = [leaves[c] for c in children]
        r = composites[parent]
        table.append({**r, "cpu_total_us": r["self_cpu_us"] + sum(k["self_cpu_us"] for k in kids),
                      "device_total_us": sum(k["self_device_us"] for k in kids)})
    all_cpu = sum(r["self_cpu_us"] for r in table)
    all_dev = sum(r["self_device_us"] for r in leaves.values())
    if device:
        gemm = GEMM_KERNELS[int(torch.randint(0, len(GEMM_KERNELS), (), generator=gen))]
        kernels: dict[str, dict] = {}
        for r in leaves.values():
            kernel = LEAVES[r["name"]]
            if kernel is None:
                continue
            kernel = gemm if kernel == "gemm" else kernel
            k = kernels.setdefault(kernel, {"name": kernel, "kind": "kernel", "calls": 0, "self_cpu_us": 0.0,
                                            "cpu_total_us": 0.0, "self_device_us": 0.0, "device_total_us": 0.0})
            k["calls"] += r["calls"]
            k["self_device_us"] += r["self_device_us"]
            k["device_total_us"] += r["self_device_us"]
        table.extend(kernels.values())
        launches = sum(k["calls"] for k in kernels.values())
        launch_cpu = launches * _u(gen, 4, 9)
        sync_cpu = all_dev * _u(gen, 0.5, 0.9)
        table.append({"name": "cudaLaunchKernel", "kind": "runtime", "calls": launches, "self_cpu_us": launch_cpu,
                      "cpu_total_us": launch_cpu, "self_device_us": 0.0, "device_total_us": 0.0})
        table.append({"name": "cudaDeviceSynchronize", "kind": "runtime", "calls": 1, "self_cpu_us": sync_cpu,
                      "cpu_total_us": sync_cpu, "self_device_us": 0.0, "device_total_us": 0.0})
        all_cpu += launch_cpu + sync_cpu
    step = int(torch.randint(2, 9, (), generator=gen))
    for name, share in ((f"ProfilerStep#{step}", 1.0), ("forward", _u(gen, 0.3, 0.45)),
                        ("backward", _u(gen, 0.35, 0.5)), ("Optimizer.step#SGD.step", _u(gen, 0.1, 0.2))):
        self_cpu = _u(gen, 5, 40)
        table.append({"name": name, "kind": "annotation", "calls": 1, "self_cpu_us": self_cpu,
                      "cpu_total_us": self_cpu + share * all_cpu, "self_device_us": 0.0,
                      "device_total_us": share * all_dev})
    for r in table:
        for k in ("self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us"):
            r[k] = round(r[k], 3)
    order = torch.randperm(len(table), generator=gen).tolist()
    return [table[i] for i in order]


# -------------------------------------------------------------------------------------------------
# profiling.bottleneck
# -------------------------------------------------------------------------------------------------


def _bottleneck_reference(table) -> str:
    ops = [r for r in table if r["kind"] == "op"]
    key = "self_device_us" if any(r["self_device_us"] > 0 for r in table) else "self_cpu_us"
    return max(ops, key=lambda r: r[key])["name"]


def _bottleneck_cases(gen: torch.Generator, mode: str) -> list[Case]:
    def pick(names):
        return names[int(torch.randint(0, len(names), (), generator=gen))]
    specs = [
        (pick(["aten::addmm", "aten::mm", "aten::_softmax", "aten::native_layer_norm"]), False),  # has a parent
        (pick(["aten::add_", "aten::mul_", "aten::gelu_backward"]), False),
        # two more CPU-only profiles: an answer that ranks by device time there returns whichever op comes first,
        # and with ~22 ops that is the bottleneck once in 22 profiles: four make a pass by luck about 1 in 230,000
        (pick(["aten::sum", "aten::copy_", "aten::gelu"]), False),
        (pick(["aten::bmm", "aten::native_layer_norm_backward"]), False),
        (pick(["aten::mm", "aten::bmm"]), True),  # matmul's total holds both
        (pick(["aten::add_", "aten::mul_"]), True),  # an optimizer written as a loop
        ("aten::addmm", True),
    ]
    cases = []
    for target, device in specs:
        table = synthetic_profile(gen, target, device)
        cases.append(Case(f"{'GPU' if device else 'CPU-only'} profile of {len(table)} rows", (table,)))
    return cases


def _compare_bottleneck(got, expected, case) -> list[str]:
    (table,) = case.args
    where = f" (case {case.label})"
    if not isinstance(got, str):
        return [f"returned a {type(got).__name__}; expected the operator's name, a str{where}"]
    if got == expected:
        return []
    row = next((r for r in table if r["name"] == got), None)
    if row is None:
        return [f"returned {got!r}, which is no row of the profile{where}"]
    device = any(r["self_device_us"] > 0 for r in table)
    ops = [r for r in table if r["kind"] == "op"]
    if row["kind"] == "kernel":
        why = "is a GPU kernel, not an operator: a kernel row sums every launch of it, whichever op launched it"
    elif row["kind"] == "annotation":
        why = "is an annotation (a label around many operators): its time is theirs"
    elif row["kind"] == "runtime":
        why = "is the CUDA runtime on the CPU side, not an operator"
    elif device and got == max(ops, key=lambda r: r["self_cpu_us"])["name"]:
        why = ("leads by CPU time; this profile has device times, and on a GPU the device time is the work: "
               "CPU time there is mostly launching")
    elif got == max(ops, key=lambda r: r["device_total_us" if device else "cpu_total_us"])["name"]:
        why = "leads by total time, which includes the time of the operators it calls: sort by self time"
    elif device:
        why = "is not the operator with the most self device time"
    else:
        why = "is not the operator with the most self CPU time"
    if not device:  # whichever rule it broke, a CPU-only profile's measure is the first thing to know
        why += "; this profile has no device times (it ran on the CPU alone), so self CPU time is the measure"
    return [f"returned {got!r}, which {why}{where}"]


BOTTLENECK = FunctionExercise(
    id="profiling.bottleneck",
    title="Name the bottleneck operator of a profile",
    signature=("bottleneck(table: list[dict]) -> str  # rows as profiling.rows(prof) makes them; the op with the "
               "most self device time (self CPU time when the profile has no device times)"),
    cases=_bottleneck_cases,
    reference=_bottleneck_reference,
    compare=_compare_bottleneck,
    timeout_s=60,
    solution="gpuprinciples.course.kernels.profiling:bottleneck",
    hints=(
        "Keep only the rows whose kind is 'op': kernels, annotations and the CUDA runtime are not operators.",
        "Self time, not total: aten::linear's total includes the aten::addmm it calls.",
        "If any row has self_device_us > 0 the profile ran on a GPU: rank by device time there.",
    ),
)

# -------------------------------------------------------------------------------------------------
# profiling.foreach_sgd: the optimizer loop in a handful of dispatches
# -------------------------------------------------------------------------------------------------


def sgd_momentum_loop(params, grads, bufs, lr, momentum):
    """The update as most first versions write it: a Python loop, two operators per tensor."""
    new_bufs = [momentum * b + g for b, g in zip(bufs, grads)]
    new_params = [p - lr * b for p, b in zip(params, new_bufs)]
    return new_params, new_bufs


def _sgd_reference(params, grads, bufs, lr, momentum):
    new_bufs = [momentum * b.double() + g.double() for b, g in zip(bufs, grads)]
    new_params = [p.double() - lr * b for p, b in zip(params, new_bufs)]
    return new_params, new_bufs


def _sgd_cases(gen: torch.Generator, mode: str) -> list[Case]:
    cases = []
    for count in (int(torch.randint(5, 12, (), generator=gen)), int(torch.randint(20, 41, (), generator=gen)), 1):
        def size(hi):
            return int(torch.randint(1, hi, (), generator=gen))
        shapes = [(size(300),) if float(torch.rand((), generator=gen)) < 0.5 else (size(40), size(70))
                  for _ in range(count)]

        def make():
            params = [torch.randn(s, generator=gen) for s in shapes]
            grads = [torch.randn(s, generator=gen) * 0.1 for s in shapes]
            bufs = [torch.randn(s, generator=gen) * 0.05 for s in shapes]
            return params, grads, bufs
        lr = round(_u(gen, 0.01, 0.5), 4)
        momentum = round(_u(gen, 0.5, 0.99), 4)
        cases.append(Case(f"{count} tensors, lr {lr}, momentum {momentum}", (*make(), lr, momentum),
                          decoy=(*make(), lr, momentum)))
    return cases


def _compare_sgd(got, expected, case) -> list[str]:
    want_params, want_bufs = expected
    where = f" (case {case.label})"
    if not isinstance(got, (list, tuple)) or len(got) != 2 or not all(isinstance(g, (list, tuple)) for g in got):
        return [f"returned {type(got).__name__}; expected (new_params, new_bufs), two lists of tensors{where}"]
    reasons = []
    for what, mine, want in (("new_params", got[0], want_params), ("new_bufs", got[1], want_bufs)):
        if len(mine) != len(want):
            reasons.append(f"{what} has {len(mine)} tensors, expected {len(want)}{where}")
            continue
        for i, (g, w) in enumerate(zip(mine, want)):
            problems = compare_tensors(g, w, case, dtype=torch.float32)
            if problems:
                reasons.append(f"{what}[{i}]: {problems[0]}")
                break
    return reasons


FOREACH_SGD = FunctionExercise(
    id="profiling.foreach_sgd",
    title="SGD with momentum in a handful of dispatches, however many tensors",
    signature=("sgd_momentum(params, grads, bufs: list[Tensor], lr: float, momentum: float) -> "
               "(new_params, new_bufs)  # buf' = momentum·buf + grad; param' = param − lr·buf'"),
    cases=_sgd_cases,
    reference=_sgd_reference,
    compare=_compare_sgd,
    requirements=(MaxDispatches(6),),
    timeout_s=90,
    solution="gpuprinciples.course.kernels.profiling:sgd_momentum",
    hints=(
        "torch._foreach_mul, torch._foreach_add take whole lists of tensors: one dispatch per list, not per tensor.",
        "torch._foreach_add(params, bufs, alpha=-lr) computes params − lr·bufs.",
        "Return new tensors: the inputs must stay as they were (the _foreach_*_ forms with a trailing "
        "underscore change them in place).",
    ),
)

# -------------------------------------------------------------------------------------------------
# profiling.tensor_cores: reading kernel names
# -------------------------------------------------------------------------------------------------

KERNEL_NAMES = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
    "__5x_cublas",
    "ampere_sgemm_128x64_nn",
    "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >",
    "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8",
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>",
    "sm80_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x128x32_stage3_warpsize2x2x1_tensor16x8x8_kernel",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>",
    "volta_sgemm_64x32_sliced1x4_tn",
    "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>",
    # an fp32 matmul with TF32 off on an H200 (torch 2.11, 2026-12-02): "xmma", yet ffma on the CUDA cores
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4_alignc4_execute_kernel"
    "__5x_cublas",
)
TENSOR_CORE = frozenset({0, 2, 4, 6})


def _compare_tensor_cores(answer, expected) -> list[str]:
    if not isinstance(answer, (set, frozenset, list, tuple)):
        return [f"answered a {type(answer).__name__}; expected a set of indices into KERNEL_NAMES"]
    picked = set()
    for a in answer:
        if isinstance(a, str) and a in KERNEL_NAMES:
            picked.add(KERNEL_NAMES.index(a))
        elif isinstance(a, int) and not isinstance(a, bool) and 0 <= a < len(KERNEL_NAMES):
            picked.add(a)
        else:
            return [f"{a!r} is neither an index into KERNEL_NAMES nor one of its names"]
    wrong = len(picked ^ set(expected))
    if wrong:
        return [f"{wrong} of {len(KERNEL_NAMES)} kernels classified wrongly"]
    return []


TENSOR_CORES = ValueExercise(
    id="profiling.tensor_cores",
    title="Which kernels run on Tensor Cores?",
    question="The set of indices i for which KERNEL_NAMES[i] is a Tensor Core kernel.",
    expected=lambda: TENSOR_CORE,
    compare=_compare_tensor_cores,
    hints=(
        "Tensor Core GEMMs name their MMA family or a reduced-precision type: hmma, wgmma, tensorop, "
        "s16816, tensor16x8x8, nvjet (cuBLAS's Hopper kernels); bf16, f16, tf32 inputs.",
        "xmma is cuBLAS's kernel template, used for both: an xmma kernel that says ffma (fused multiply-add, "
        "the CUDA cores' instruction) and has only f32 types runs on the CUDA cores.",
        "sgemm and gemv kernels are fp32 on the ordinary CUDA cores; elementwise, softmax and reduction kernels "
        "do no matrix multiply at all.",
    ),
)

EXERCISES = (BOTTLENECK, FOREACH_SGD, TENSOR_CORES)
