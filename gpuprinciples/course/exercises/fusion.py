"""Lesson 07, operator fusion: keep the data in the factory.

Cases are drawn fresh for every check: several shapes, none of them a multiple of a block size
except by chance, normal and large-magnitude values, NaN and ±Inf, and (row-wise ops) row-strided
views. Exercises: vector_add (the first kernel), cos_cos, softmax, layernorm, bias_gelu (stretch).
"""

from __future__ import annotations

import torch

from ..kit import (
    H200_SMS,
    BytesWithin,
    Case,
    FunctionExercise,
    LaunchesTriton,
    MaxLaunches,
    NoTorchCompute,
    Regime,
    Timing,
    ValueExercise,
    compiled,
    regime_specs,
)

# -------------------------------------------------------------------------------------------------
# Value distributions
# -------------------------------------------------------------------------------------------------


def _values(gen: torch.Generator, shape, kind: str, dtype=torch.float32) -> torch.Tensor:
    if kind == "normal":
        x = torch.randn(shape, generator=gen)
    elif kind == "large":  # magnitudes where a naive exp overflows and cos needs real argument reduction
        x = (torch.rand(shape, generator=gen) * 2 - 1) * 3e3
    elif kind == "offset":  # a mean far from 0 next to a spread of 1: E[x²] - E[x]² loses the digits
        x = 16 + torch.randn(shape, generator=gen)
    elif kind == "small":  # a variance of 1e-4: eps = 1e-3 matters
        x = 1e-2 * torch.randn(shape, generator=gen)
    elif kind == "special":  # NaN and ±Inf sprinkled in
        x = torch.randn(shape, generator=gen) * 10
        flat = x.view(-1)
        picks = torch.randint(0, flat.numel(), (max(flat.numel() // 50, 3),), generator=gen)
        flat[picks[0::3]] = float("nan")
        flat[picks[1::3]] = float("inf")
        flat[picks[2::3]] = -float("inf")
        # Rows (the last dimension) 0, 1, 2 hold one NaN, one +inf, one -inf, alone, in every draw: sprinkled
        # only, a NaN often shares its row with a +inf, which makes a softmax row NaN anyway, and a kernel that
        # drops NaN went unseen under some seeds. Columns come from the picks: the other cases' draws stay.
        if x.dim() >= 2 and x.numel() // x.shape[-1] >= 3:
            rows = x.view(-1, x.shape[-1])
            for r, value in enumerate((float("nan"), float("inf"), -float("inf"))):
                rows[r] = torch.where(rows[r].isfinite(), rows[r], 0.0)
                rows[r, int(picks[r]) % rows.shape[1]] = value
    else:
        raise ValueError(kind)
    return x.to(dtype)


def _odd(gen: torch.Generator, low: int, high: int) -> int:
    """A size in [low, high) that is not a multiple of 16 (so no block size divides it)."""
    n = int(torch.randint(low, high, (1,), generator=gen))
    return n + 1 if n % 16 == 0 else n


# The regime a GPU's timed inputs reach (2**27 elements, 4096 rows): more programs than an H200 has SMs, where a
# persistent grid starts its second wave, and past 4 waves of them, where a grid capped at a few programs per SM
# (a persistent grid's size, or the fused-softmax tutorial's occupancy) leaves work undone unless it loops. On a
# CPU: one case just past 4 waves, at a block of 1024 elements / one row per program (8 waves cost CI 4 minutes).
WAVES = 4
ELEMENTS_PAST_SMS = Regime(f"more programs than an H200's {H200_SMS} SMs, {WAVES} times over, at BLOCK ≤ 1024",
                           lambda gen: (WAVES * H200_SMS * 1024 + _odd(gen, 1024, 3000),))
ROWS_PAST_SMS = Regime(f"more rows than an H200's {H200_SMS} SMs, {WAVES} times over",
                       lambda gen: (_odd(gen, WAVES * H200_SMS + 5, WAVES * H200_SMS + 40), _odd(gen, 20, 60)))

# A row wider than any block a kernel might cap itself at (8192): a row kernel holds the whole row in one block
# (next_power_of_2) or loops over its columns; one that caps the block and does neither leaves columns undone.
WIDE_ROW = 8193


# -------------------------------------------------------------------------------------------------
# fusion.vector_add: the first kernel
# -------------------------------------------------------------------------------------------------


def _vector_add_cases(gen: torch.Generator, mode: str) -> list[Case]:
    shapes = [(1,), (_odd(gen, 2, 200),), (_odd(gen, 1000, 5000),), (3, _odd(gen, 100, 400)),
              (_odd(gen, 20_000, 40_000),)]
    kinds = ["normal", "normal", "large", "special", "normal"]
    words = [""] * len(shapes)
    for shape, regime in regime_specs((ELEMENTS_PAST_SMS,), gen, mode):
        shapes.append(shape)
        kinds.append("normal")
        words.append(f" ({regime})")
    cases = []
    for shape, kind, extra in zip(shapes, kinds, words):
        x, y = _values(gen, shape, kind), _values(gen, shape, "normal")
        decoy = (_values(gen, shape, "normal"), _values(gen, shape, "normal"))
        cases.append(Case(f"{tuple(shape)} {kind}{extra}", (x, y), decoy=decoy))
    return cases


def _vector_add_reference(x, y):
    return x.double() + y.double()


def _add_bytes(case: Case) -> int:
    x, y = case.args
    return 3 * x.numel() * x.element_size()  # read x and y once, write z once


def _eager_add(x, y):
    return x + y


VECTOR_ADD = FunctionExercise(
    id="fusion.vector_add",
    title="Your first Triton kernel: z = x + y",
    signature="vector_add(x: Tensor, y: Tensor) -> Tensor  # same shape, contiguous, float32",
    cases=_vector_add_cases,
    reference=_vector_add_reference,
    requirements=(LaunchesTriton(), MaxLaunches(1), NoTorchCompute(), BytesWithin(_add_bytes, 1.1)),
    timing=Timing(
        inputs=lambda gen, device: (torch.randn(2**27, generator=gen, device=device),
                                    torch.randn(2**27, generator=gen, device=device)),
        baselines={"eager": _eager_add},
        min_bytes=lambda args: 3 * args[0].numel() * args[0].element_size(),
        min_bandwidth_fraction=0.7,
    ),
    solution="gpuprinciples.course.kernels.vector_add:vector_add",
    hints=(
        "pid = tl.program_id(0); offsets = pid * BLOCK + tl.arange(0, BLOCK).",
        "n is rarely a multiple of BLOCK: mask = offsets < n on both loads and on the store.",
        "Launch triton.cdiv(n, BLOCK) programs: kernel[(triton.cdiv(n, BLOCK),)](x, y, z, n, BLOCK=1024).",
    ),
)

# -------------------------------------------------------------------------------------------------
# fusion.cos_cos
# -------------------------------------------------------------------------------------------------


def _cos_cos_cases(gen: torch.Generator, mode: str) -> list[Case]:
    shapes = [(1,), (_odd(gen, 2, 200),), (_odd(gen, 1000, 5000),), (3, _odd(gen, 100, 400)),
              (2, 5, _odd(gen, 20, 90)), (_odd(gen, 60_000, 70_000),)]
    kinds = ["normal", "normal", "large", "special", "normal", "large"]
    dtypes = [torch.float32] * len(shapes)
    # bf16 too, as a GPU's kernels get it: large on a GPU, small under the interpreter (GPU_HALF_DTYPES)
    shapes.append((_odd(gen, 100_000, 200_000) if mode == "gpu" else _odd(gen, 1000, 3000),))
    kinds.append("normal")
    dtypes.append(torch.bfloat16)
    words = [""] * len(shapes)
    for shape, regime in regime_specs((ELEMENTS_PAST_SMS,), gen, mode):
        shapes.append(shape)
        kinds.append("normal")
        dtypes.append(torch.float32)
        words.append(f" ({regime})")
    cases = []
    for shape, kind, dtype, extra in zip(shapes, kinds, dtypes, words):
        x = _values(gen, shape, kind, dtype)
        decoy = _values(gen, shape, "normal", dtype)
        cases.append(Case(f"{tuple(shape)} {kind} {str(dtype).replace('torch.', '')}{extra}", (x,), decoy=(decoy,)))
    return cases


def _cos_cos_reference(x: torch.Tensor) -> torch.Tensor:
    return x.double().cos().cos()


def _elementwise_bytes(case: Case) -> int:
    (x,) = case.args
    return 2 * x.numel() * x.element_size()  # read x once, write y once


def _eager_cos_cos(x):
    return x.cos().cos()


_compiled_cos_cos = compiled(_eager_cos_cos)

COS_COS = FunctionExercise(
    id="fusion.cos_cos",
    title="cos(cos(x)) in one fused Triton kernel",
    signature="cos_cos(x: Tensor) -> Tensor  # any shape, contiguous; float32 or bfloat16",
    cases=_cos_cos_cases,
    reference=_cos_cos_reference,
    requirements=(LaunchesTriton(), MaxLaunches(1), NoTorchCompute(), BytesWithin(_elementwise_bytes, 1.1)),
    timing=Timing(
        inputs=lambda gen, device: (torch.randn(2**28, generator=gen, device=device),),
        baselines={"eager": _eager_cos_cos, "torch.compile": _compiled_cos_cos},
        min_bytes=lambda args: 2 * args[0].numel() * args[0].element_size(),
        # the reference solution aims higher (`gpuprinciples bench`): >= 90% of the copy ceiling, >= torch.compile
        # H200, five grades of the reference in a row: 3.10-3.90 TB/s between processes, so a pass line
        # near the reference's mean (0.85) would fail good kernels at random
        min_speedup={"eager": 1.3, "torch.compile": 0.9},
        min_bandwidth_fraction=0.65,
    ),
    solution="gpuprinciples.course.kernels.cos_cos:cos_cos",
    hints=(
        "One program per BLOCK of elements: offsets = pid * BLOCK + tl.arange(0, BLOCK).",
        "The last block runs past the end: mask = offsets < n, on the load and on the store.",
        "Apply tl.cos twice on the loaded values before storing: the intermediate never leaves registers.",
    ),
)

# -------------------------------------------------------------------------------------------------
# fusion.softmax
# -------------------------------------------------------------------------------------------------


def _softmax_cases(gen: torch.Generator, mode: str) -> list[Case]:
    specs = [((1, 1), "normal", 0), ((_odd(gen, 2, 20), _odd(gen, 50, 300)), "normal", 0),
             ((_odd(gen, 20, 70), _odd(gen, 1000, 3000)), "large", 0),
             ((_odd(gen, 5, 40), _odd(gen, 100, 700)), "normal", _odd(gen, 3, 50)),  # a column slice
             ((_odd(gen, 5, 40), _odd(gen, 4097, 5000)), "large", _odd(gen, 3, 50)),
             ((_odd(gen, 8, 30), _odd(gen, 30, 200)), "masked", 0),
             ((_odd(gen, 8, 30), _odd(gen, 100, 300)), "special", 0),  # a NaN or +inf makes its row NaN
             ((_odd(gen, 2, 6), _odd(gen, WIDE_ROW, WIDE_ROW + 800)), "normal", 0)]
    specs = [(*spec, "") for spec in specs] + [(shape, "normal", 0, f" ({regime})")
                                               for shape, regime in regime_specs((ROWS_PAST_SMS,), gen, mode)]
    cases = []
    for (m, n), kind, extra, regime in specs:
        def make(kind=kind, m=m, n=n, extra=extra):
            base = _values(gen, (m, n + extra), "normal" if kind == "masked" else kind)
            if kind == "masked":  # -inf entries, as an attention mask leaves them; never a whole row
                drop = torch.rand(m, n + extra, generator=gen) < 0.3
                drop[:, 0] = False
                base[drop] = -float("inf")
            return base[:, :n]  # extra > 0: a row-strided view of a wider tensor
        x, decoy = make(), make()
        label = f"{m}×{n} {kind}" + (f" (row stride {n + extra})" if extra else "") + regime
        cases.append(Case(label, (x,), decoy=(decoy,)))
    return cases


def _softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1)


def _eager_softmax(x):
    return torch.softmax(x, dim=-1)


_compiled_softmax = compiled(_eager_softmax)

SOFTMAX = FunctionExercise(
    id="fusion.softmax",
    title="Row softmax in one pass over memory",
    signature="softmax(x: Tensor[M, N]) -> Tensor[M, N]  # over the last dim; rows may be strided",
    cases=_softmax_cases,
    reference=_softmax_reference,
    requirements=(LaunchesTriton(), MaxLaunches(1), NoTorchCompute(), BytesWithin(_elementwise_bytes, 1.1)),
    timing=Timing(
        inputs=lambda gen, device: (torch.randn(4096, 4096, generator=gen, device=device),),
        baselines={"torch.softmax": _eager_softmax, "torch.compile": _compiled_softmax},
        min_bytes=lambda args: 2 * args[0].numel() * args[0].element_size(),
        min_speedup={"torch.softmax": 1.1},
        min_bandwidth_fraction=0.45,  # a plain row-per-program kernel; torch.softmax reaches ~55% on an H200
    ),
    solution="gpuprinciples.course.kernels.softmax:softmax",
    hints=(
        "One program per row: the row fits in SRAM, so read it once and write the result once.",
        "Subtract the row maximum before tl.exp, or large inputs overflow to inf and give NaN.",
        "Masked-off lanes must not win the max: load them with other=-float('inf').",
        "A row starts at row * x.stride(0), not row * N: the input may be a slice of a wider tensor.",
    ),
)

# -------------------------------------------------------------------------------------------------
# fusion.layernorm
# -------------------------------------------------------------------------------------------------


def _layernorm_cases(gen: torch.Generator, mode: str) -> list[Case]:
    specs = [((1, _odd(gen, 2, 100)), "normal", 0, 1e-5),
             ((_odd(gen, 20, 70), _odd(gen, 50, 300)), "offset", 0, 1e-5),
             ((_odd(gen, 20, 50), _odd(gen, 1000, 3000)), "large", 0, 1e-6),
             ((_odd(gen, 20, 60), _odd(gen, 100, 700)), "small", _odd(gen, 3, 50), 1e-3),  # a column slice
             ((_odd(gen, 30, 90), _odd(gen, 30, 200)), "offset", 0, 1e-5),
             ((_odd(gen, 8, 30), _odd(gen, 100, 300)), "special", 0, 1e-5),
             ((_odd(gen, 2, 6), _odd(gen, WIDE_ROW, WIDE_ROW + 800)), "normal", 0, 1e-5)]
    specs = [(*spec, "") for spec in specs] + [(shape, "normal", 0, 1e-5, f" ({regime})")
                                               for shape, regime in regime_specs((ROWS_PAST_SMS,), gen, mode)]
    cases = []
    for (m, n), kind, extra, eps, regime in specs:
        def make(kind=kind, m=m, n=n, extra=extra):
            x = _values(gen, (m, n + extra), kind)[:, :n]  # extra > 0: a row-strided view
            w = 1 + 0.5 * torch.randn(n, generator=gen)
            b = torch.randn(n, generator=gen)
            return x, w, b, eps
        label = f"{m}×{n} {kind} eps={eps:g}" + (f" (row stride {n + extra})" if extra else "") + regime
        cases.append(Case(label, make(), decoy=make()))
    return cases


def _layernorm_reference(x, weight, bias, eps):
    return torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), weight.double(), bias.double(), eps)


def _layernorm_bytes(case: Case) -> int:
    x, w, b, _ = case.args
    # read x, weight and bias once, write y once
    return (2 * x.numel() + w.numel() + b.numel()) * x.element_size()


def _weight_and_bias(args: tuple) -> tuple:
    # read by every row, small enough to stay in L2: memory sees each of their bytes once
    return args[1], args[2]


def _eager_layernorm(x, weight, bias, eps):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def _layernorm_timing_args(gen, device):
    n = 4096
    return (torch.randn(4096, n, generator=gen, device=device),
            1 + 0.5 * torch.randn(n, generator=gen, device=device), torch.randn(n, generator=gen, device=device),
            1e-5)


LAYERNORM = FunctionExercise(
    id="fusion.layernorm",
    title="Layer norm forward in one pass over memory",
    signature="layernorm(x: Tensor[M, N], weight: Tensor[N], bias: Tensor[N], eps: float) -> Tensor[M, N]"
              "  # over the last dim; rows may be strided",
    cases=_layernorm_cases,
    reference=_layernorm_reference,
    requirements=(LaunchesTriton(), MaxLaunches(1), NoTorchCompute(),
                  BytesWithin(_layernorm_bytes, 1.1, cached=_weight_and_bias)),
    timing=Timing(
        inputs=_layernorm_timing_args,
        baselines={"torch layer_norm": _eager_layernorm,
                   "torch.compile": compiled(_eager_layernorm)},
        min_bytes=lambda args: (2 * args[0].numel() + 2 * args[1].numel()) * args[0].element_size(),  # x, w, b, y
        min_speedup={"torch layer_norm": 1.0},
        min_bandwidth_fraction=0.45,  # torch's layer_norm reaches ~58% on an H200, the reference ~79%
    ),
    solution="gpuprinciples.course.kernels.layernorm:layernorm",
    hints=(
        "Like softmax: the row fits on chip; load it once (other=0.0), reduce, write once.",
        "mean = tl.sum(x) / N; then xc = x - mean, with the padding lanes set back to 0 (tl.where), "
        "and var = tl.sum(xc * xc) / N. E[x²] - E[x]² fails when the mean is large.",
        "weight and bias are the same for every row: each program may load them (they stay in the L2 cache, "
        "and the counters charge them once); one program per row is both simplest and fastest.",
        "eps is an argument: use the one you are given.",
    ),
)

# -------------------------------------------------------------------------------------------------
# fusion.bias_gelu (stretch)
# -------------------------------------------------------------------------------------------------


def _four_times_odd(gen: torch.Generator, low: int, high: int) -> int:
    """N = 4 × odd: 16-byte rows in float32 (tensor descriptors need them), yet no block of 8+ divides N."""
    k = int(torch.randint(low // 4, high // 4, (1,), generator=gen))
    return 4 * (k | 1)


def _bias_gelu_cases(gen: torch.Generator, mode: str) -> list[Case]:
    specs = [((1, 4), "normal"), ((_odd(gen, 2, 40), _four_times_odd(gen, 40, 300)), "normal"),
             ((_odd(gen, 17, 60), _four_times_odd(gen, 500, 1500)), "large"),
             ((_odd(gen, 5, 30), _four_times_odd(gen, 100, 400)), "special"),
             ((_odd(gen, 40, 100), _four_times_odd(gen, 100, 300)), "normal")]
    cases = []
    for (m, n), kind in specs:
        def make(kind=kind, m=m, n=n):
            return _values(gen, (m, n), kind), torch.randn(n, generator=gen)
        cases.append(Case(f"{m}×{n} {kind}", make(), decoy=make()))
    return cases


def _bias_gelu_reference(x, bias):
    return torch.nn.functional.gelu(x.double() + bias.double())


def _bias_gelu_bytes(case: Case) -> int:
    x, b = case.args
    return (2 * x.numel() + b.numel()) * x.element_size()  # read x and bias once, write y once


def _eager_bias_gelu(x, bias):
    return torch.nn.functional.gelu(x + bias)


BIAS_GELU = FunctionExercise(
    id="fusion.bias_gelu",
    title="Stretch: bias + GELU fused, tiles loaded through a tensor descriptor",
    signature="bias_gelu(x: Tensor[M, N], bias: Tensor[N]) -> Tensor[M, N]  # exact (erf) GELU of x + bias; "
              "contiguous, N a multiple of 4",
    cases=_bias_gelu_cases,
    reference=_bias_gelu_reference,
    requirements=(LaunchesTriton(), MaxLaunches(1), NoTorchCompute(), BytesWithin(_bias_gelu_bytes, 1.1)),
    timing=Timing(
        inputs=lambda gen, device: (torch.randn(8192, 8192, generator=gen, device=device),
                                    torch.randn(8192, generator=gen, device=device)),
        baselines={"eager": _eager_bias_gelu, "torch.compile": compiled(_eager_bias_gelu)},
        min_bytes=lambda args: (2 * args[0].numel() + args[1].numel()) * args[0].element_size(),
        min_speedup={"eager": 1.5},
        min_bandwidth_fraction=0.7,
    ),
    solution="gpuprinciples.course.kernels.bias_gelu:bias_gelu",
    hints=(
        "A 2-D grid of [BLOCK_M, BLOCK_N] tiles: pid_m = tl.program_id(0), pid_n = tl.program_id(1).",
        "tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[stride, 1], block_shape=[BLOCK_M, BLOCK_N]); "
        "desc.load([row0, col0]) pads past the edges, desc.store clips.",
        "Load the bias slice once per tile and broadcast it: b[None, :]. gelu(v) = 0.5·v·(1 + erf(v/√2)).",
    ),
)

# -------------------------------------------------------------------------------------------------
# Predictions
# -------------------------------------------------------------------------------------------------

NAIVE_SOFTMAX_ACCESSES = ValueExercise(
    id="fusion.naive_softmax_accesses",
    prediction=True,
    title="Predict: memory accesses per element of a softmax written as five PyTorch operations",
    question="x.max(dim=1) -> x - max -> exp -> sum(dim=1) -> num / den, for x of M×N with N large: how many "
             "times is each element of x (or of a temporary as large as x) read or written in memory?",
    expected=lambda: 8,  # max: 1 read; x - max: read + write; exp: read + write; sum: 1 read; divide: read + write
    rel_tol=0.0,
    hints=("Count per operation: each reads its inputs from memory and writes its output back.",
           "A reduction over a row (max, sum) reads N elements and writes 1: count 1 per element."),
)

EXERCISES = (VECTOR_ADD, COS_COS, SOFTMAX, LAYERNORM, BIAS_GELU, NAIVE_SOFTMAX_ACCESSES)
