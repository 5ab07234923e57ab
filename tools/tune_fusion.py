"""Time variants of the fusion reference kernels on a GPU and print a table per kernel, fastest first.

    PYTHONPATH=. python tools/tune_fusion.py

Each table: median time, bandwidth from the fewest bytes the op must move, its share of the copy
ceiling measured on this GPU, and the speedup over the first entry (PyTorch) with its 95 % interval.
The kernels' defaults come from what this printed on an H200.
"""

import itertools

import torch

from gpuprinciples import hardware, timing
from gpuprinciples.kernels.bias_gelu import bias_gelu
from gpuprinciples.kernels.cos_cos import cos_cos
from gpuprinciples.kernels.layernorm import layernorm
from gpuprinciples.kernels.softmax import softmax

F = torch.nn.functional
COPY = hardware.ceilings().copy_bandwidth


def table(title, fns, args, least_bytes):
    result = timing.compare(fns, args=args, device="cuda", budget_s=1.0)
    base = next(iter(fns))
    print(f"\n== {title}: TB/s, share of copy ({COPY / 1e12:.2f} TB/s), speedup vs {base}")
    for name, t in sorted(result.timings.items(), key=lambda item: item[1].median):
        s = result.speedup(name, base)
        print(f"{name:60}{t.median * 1e6:9.1f} us{least_bytes / t.median / 1e12:6.2f} TB/s"
              f"{least_bytes / t.median / COPY:5.0%} {s.ratio:5.2f}x [{s.ci_low:.2f},{s.ci_high:.2f}]")


def variants(fn, **grid):
    """{'fn a=1 b=2': fn with those keyword arguments} for every point of the grid."""
    names = list(grid)
    return {f"{fn.__name__} " + " ".join(f"{k}={v}" for k, v in zip(names, values)):
            (lambda *a, values=values: fn(*a, **dict(zip(names, values))))
            for values in itertools.product(*grid.values())}


def main():
    x = torch.randn(2**28, device="cuda")
    eager = lambda t: t.cos().cos()  # noqa: E731
    table("cos_cos 2^28 fp32", {"eager": eager, "torch.compile": torch.compile(eager), "default": cos_cos,
                                **variants(cos_cos, block=[1024, 2048, 4096, 8192, 16384], num_warps=[4, 8, 16])},
          (x,), 8 * x.numel())

    x = torch.randn(4096, 4096, device="cuda")
    eager = lambda t: torch.softmax(t, -1)  # noqa: E731
    table("softmax 4096^2 fp32", {"torch.softmax": eager, "torch.compile": torch.compile(eager), "default": softmax,
                                  **variants(softmax, rows=[1, 2], num_warps=[4, 8, 16], num_stages=[2, 4],
                                             programs_per_sm=[2, 4, 8])},
          (x,), 8 * x.numel())

    w, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    eager = lambda t, w, b, eps: F.layer_norm(t, (4096,), w, b, eps)  # noqa: E731
    table("layernorm 4096^2 fp32", {"torch": eager, "torch.compile": torch.compile(eager), "default": layernorm,
                                    **variants(layernorm, num_warps=[4, 8, 16], num_stages=[1, 2, 3],
                                               programs_per_sm=[2, 4, 8])},
          (x, w, b, 1e-5), 8 * x.numel() + 8 * 4096)

    x, b = torch.randn(8192, 8192, device="cuda"), torch.randn(8192, device="cuda")
    eager = lambda t, b: F.gelu(t + b)  # noqa: E731
    table("bias_gelu 8192^2 fp32", {"eager": eager, "torch.compile": torch.compile(eager), "default": bias_gelu,
                                    **variants(bias_gelu, block_m=[8, 16, 32], block_n=[64, 128, 256],
                                               num_warps=[4, 8])},
          (x, b), 8 * x.numel())


if __name__ == "__main__":
    main()
