"""Time variants of the fusion reference kernels on a GPU and print a table per kernel, fastest first.

    PYTHONPATH=. python tools/tune_fusion.py [cos_cos softmax layernorm bias_gelu bias_gelu_forms]

Each table: median time (L2 flushed before each call, variants interleaved), bandwidth from the fewest
bytes the op must move, its share of the copy ceiling measured on this GPU, and the speedup over the
first entry (PyTorch) with its 95 % interval. `copy_` of the same bytes is the practical ceiling at
this size. The kernels' defaults come from what this printed on an H200; softmax and layer norm are
also timed against the persistent design they replaced (a few programs per SM looping over rows).
`bias_gelu_forms` (not in the default run) times the flat layout's choices against `copy_` itself, and a Triton
copy in the same layout against both: issue 31 asks for 1.05× torch.compile, which runs at the copy rate.
"""

import itertools
import sys

import torch
import triton
import triton.language as tl

from gpuprinciples.course.kernels.bias_gelu import bias_gelu, bias_gelu_flat, gelu
from gpuprinciples.course.kernels.cos_cos import cos_cos
from gpuprinciples.course.kernels.layernorm import layernorm
from gpuprinciples.course.kernels.softmax import softmax
from gpuprinciples.measure import calibrate, timing

F = torch.nn.functional
COPY = calibrate.ceilings().copy_bandwidth


@triton.jit
def persistent_softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride, n_programs,
                              BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for row in tl.range(tl.program_id(0), n_rows, n_programs, num_stages=NUM_STAGES):
        x = tl.load(x_ptr + row.to(tl.int64) * x_row_stride + cols, mask=cols < n_cols, other=-float("inf"))
        num = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row.to(tl.int64) * y_row_stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


def persistent_softmax(x, num_warps=8, num_stages=2, programs_per_sm=8):
    m, n = x.shape
    y = torch.empty_like(x)
    programs = min(m, programs_per_sm * torch.cuda.get_device_properties(x.device).multi_processor_count)
    persistent_softmax_kernel[(programs,)](x, y, m, n, x.stride(0), y.stride(0), programs,
                                           BLOCK=triton.next_power_of_2(n), NUM_STAGES=num_stages,
                                           num_warps=num_warps)
    return y


@triton.jit
def flat_form_kernel(x_ptr, b_ptr, y_ptr, numel, N, BLOCK: tl.constexpr, OFFSETS_64: tl.constexpr,
                     STORE_CACHE: tl.constexpr):
    """bias + GELU over x as one flat range, as `kernels.bias_gelu.bias_gelu_flat`, with two of its choices open:
    64-bit offsets (the package's: index % N is then a 64-bit remainder, a long instruction sequence) or 32-bit
    ones (Inductor's when numel < 2^31), and stores with the default policy ("") or streamed past L2 (".cs")."""
    if OFFSETS_64:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    x = tl.load(x_ptr + offs, mask=mask, eviction_policy="evict_first").to(tl.float32)
    x += tl.load(b_ptr + offs % N, mask=mask, eviction_policy="evict_last").to(tl.float32)
    y = gelu(x).to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + offs, y, mask=mask, cache_modifier=STORE_CACHE)


@triton.jit
def row_form_kernel(x_ptr, b_ptr, y_ptr, N, BLOCK: tl.constexpr, STORE_CACHE: tl.constexpr):
    """The same by row: program (j, row) takes columns [j·BLOCK, (j+1)·BLOCK) of one row, no remainder at all."""
    row = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, eviction_policy="evict_first").to(tl.float32)
    x += tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    y = gelu(x).to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + row * N + cols, y, mask=mask, cache_modifier=STORE_CACHE)


@triton.jit
def copy_form_kernel(x_ptr, y_ptr, numel, BLOCK: tl.constexpr):
    """copy_ of x in the flat layout as a Triton kernel: if it beats `copy_`, the copy rate is not the ceiling here."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask, eviction_policy="evict_first"), mask=mask)


def copy_form(x, b, block=1024, num_warps=4):
    y = torch.empty_like(x)
    copy_form_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block, num_warps=num_warps)
    return y


def _store_cache(stream_stores: bool) -> str:
    return ".cs" if stream_stores else ""


def flat_form(x, b, block=1024, num_warps=4, offsets_64=False, stream_stores=False):
    y = torch.empty_like(x)
    flat_form_kernel[(triton.cdiv(x.numel(), block),)](x, b, y, x.numel(), x.shape[1], BLOCK=block,
                                                       OFFSETS_64=offsets_64, STORE_CACHE=_store_cache(stream_stores),
                                                       num_warps=num_warps)
    return y


def row_form(x, b, block=1024, num_warps=4, stream_stores=False):
    y = torch.empty_like(x)
    row_form_kernel[(triton.cdiv(x.shape[1], block), x.shape[0])](x, b, y, x.shape[1], BLOCK=block,
                                                                  STORE_CACHE=_store_cache(stream_stores),
                                                                  num_warps=num_warps)
    return y


def table(title, fns, args, least_bytes):
    result = timing.compare(fns, args=args, device="cuda", budget_s=1.0)
    base = next(iter(fns))
    print(f"\n== {title}: TB/s, share of copy ({COPY / 1e12:.2f} TB/s), speedup vs {base}", flush=True)
    for name, t in sorted(result.timings.items(), key=lambda item: item[1].median):
        s = result.speedup(name, base)
        print(f"{name:60}{t.median * 1e6:9.1f} us{least_bytes / t.median / 1e12:6.2f} TB/s"
              f"{least_bytes / t.median / COPY:5.0%} {s.ratio:5.2f}x [{s.ci_low:.2f},{s.ci_high:.2f}]", flush=True)


def variants(fn, **grid):
    """{'fn a=1 b=2': fn with those keyword arguments} for every point of the grid."""
    names = list(grid)
    return {f"{fn.__name__} " + " ".join(f"{k}={v}" for k, v in zip(names, values)):
            (lambda *a, values=values: fn(*a, **dict(zip(names, values))))
            for values in itertools.product(*grid.values())}


def copy_of(x):
    out = torch.empty_like(x)
    return lambda t, *rest: out.copy_(t)


def main(which):
    if "cos_cos" in which:
        x = torch.randn(2**28, device="cuda")
        eager = lambda t: t.cos().cos()  # noqa: E731
        table("cos_cos 2^28 fp32", {"eager": eager, "copy_": copy_of(x), "torch.compile": torch.compile(eager),
                                    "default": cos_cos,
                                    **variants(cos_cos, block=[1024, 2048, 4096, 8192, 16384], num_warps=[4, 8, 16])},
              (x,), 8 * x.numel())
        del x
    for n in (4096, 8192):
        x = torch.randn(n, n, device="cuda")
        if "softmax" in which:
            eager = lambda t: torch.softmax(t, -1)  # noqa: E731
            table(f"softmax {n}^2 fp32", {"torch.softmax": eager, "copy_": copy_of(x),
                                          "torch.compile": torch.compile(eager),
                                          "default": softmax, **variants(softmax, num_warps=[4, 8, 16, 32]),
                                          **variants(persistent_softmax, num_warps=[8, 16], num_stages=[1, 2],
                                                     programs_per_sm=[4, 8, 16])},
                  (x,), 8 * x.numel())
        if "layernorm" in which:
            w, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
            eager = lambda t, w, b, eps: F.layer_norm(t, (t.shape[1],), w, b, eps)  # noqa: E731
            table(f"layernorm {n}^2 fp32", {"torch": eager, "copy_": copy_of(x), "torch.compile": torch.compile(eager),
                                            "default": layernorm, **variants(layernorm, num_warps=[4, 8, 16, 32])},
                  (x, w, b, 1e-5), 8 * x.numel() + 8 * n)
        del x
    if "bias_gelu" in which:
        x, b = torch.randn(8192, 8192, device="cuda"), torch.randn(8192, device="cuda")
        eager = lambda t, b: F.gelu(t + b)  # noqa: E731
        table("bias_gelu 8192^2 fp32", {"eager": eager, "copy_": copy_of(x), "torch.compile": torch.compile(eager),
                                        "default": bias_gelu,
                                        **variants(bias_gelu, block_m=[8, 16, 32], block_n=[64, 128, 256],
                                                   num_warps=[4, 8]),
                                        **variants(bias_gelu_flat, block=[1024, 2048, 4096, 8192],
                                                   num_warps=[4, 8, 16])},
              (x, b), 8 * x.numel())

    if "bias_gelu_forms" in which:  # issue 31: can a bias + GELU kernel beat copy_ of its bytes? Two rounds
        x, b = torch.randn(8192, 8192, device="cuda"), torch.randn(8192, device="cuda")
        eager = lambda t, b: F.gelu(t + b)  # noqa: E731
        fns = {"eager": eager, "copy_": copy_of(x), "torch.compile": torch.compile(eager), "flat": bias_gelu_flat,
               **variants(flat_form, block=[1024, 2048, 4096], num_warps=[4, 8], offsets_64=[False, True],
                          stream_stores=[False, True]),
               **variants(row_form, block=[1024, 2048, 8192], num_warps=[4, 8], stream_stores=[False, True]),
               **variants(copy_form, block=[1024, 2048, 4096], num_warps=[4, 8])}
        want = eager(x, b)
        for name, fn in fns.items():
            if "copy" in name:
                assert torch.equal(fn(x, b), x), name
            else:
                assert torch.allclose(fn(x, b), want, atol=1e-5, rtol=1e-5), name
        for round_ in (1, 2):
            table(f"bias_gelu 8192^2 fp32, its forms, round {round_}", fns, (x, b), 8 * x.numel())


if __name__ == "__main__":
    main(sys.argv[1:] or ["cos_cos", "softmax", "layernorm", "bias_gelu"])
