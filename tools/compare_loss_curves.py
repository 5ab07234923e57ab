"""Lesson 12's training step, every way at once: how far apart do right answers drift? (issue 32)

    PYTHONPATH=. python tools/compare_loss_curves.py [--optimizer SGD AdamW] [--lr ...] [--steps 20]
           [--dtype bfloat16] [--sizes VOCAB WIDTH HEADS BATCH SEQ]

Runs the solution notebook's own cells (checks skipped) up to its training step, then trains its TinyLM with each
of SDPA's backends and with the notebook's `flash_attention`, and prints each curve's largest gap to SDPA's
default as a share of the first loss. If SDPA's backends spread as far as ours, the rule is too tight; if ours
alone is far, its backward is wrong.

Why it exists: on the H200 the notebook's loss-curve cell failed while it trained with AdamW (ours beyond
max(2e-2, 2 x the gap between SDPA's math path and its default)). AdamW's first steps move every weight by about
+-lr whatever its gradient's size, so a gradient entry near zero steps with the sign of its bf16 rounding and two
right answers part at once; SGD, the notebook's optimizer now, moves each weight in proportion to its gradient.
On a 2-core CPU in bf16 (`--dtype bfloat16 --sizes 256 512 4 2 512`, 20 steps): AdamW at 3e-3 put SDPA's math
path 3.3e-3 from its default and the lesson's kernel 6.6e-3; SGD at lr 1.0, 9.6e-5 and 1.1e-4.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parents[1] / "solutions" / "12-flash-attention-backward.ipynb"


def notebook_namespace() -> dict:
    """The notebook's code cells up to its training step's comparison: definitions only, no `check(...)` call,
    no memory measurement at the lesson's full size."""
    namespace = {"__name__": "__main__"}
    folder = Path(tempfile.mkdtemp(prefix="loss-curves-"))

    def run(index: int, source: str) -> None:
        # from a file: on a GPU, @triton.jit reads each kernel's source back (the interpreter does not need to)
        path = folder / f"cell{index}.py"
        path.write_text(source)
        exec(compile(source, str(path), "exec"), namespace)

    for index, cell in enumerate(json.loads(NOTEBOOK.read_text())["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        if "def step_peak_gib" in source or "rec_flash" in source:
            continue  # measurements at the lesson's size: not what this compares
        if "class TinyLM" in source:
            optimizer = r"torch\.optim\.\w+\(model\.parameters\(\), lr=[^)]*\)"
            source, found = re.subn(optimizer, "OPTIMIZER(model.parameters(), lr=LR)", source.split("STEP_DTYPE =")[0])
            if found != 1:  # else every row would train with the notebook's optimizer, whatever --optimizer says
                raise SystemExit("the TinyLM cell no longer builds its optimizer as `torch.optim.X(model.parameters(), "
                                 "lr=...)`: update this tool's pattern")
            run(index, source.replace("seq = runtime.sizes(", "seq = SIZES or runtime.sizes("))
            return namespace
        run(index, "\n".join("pass" if line.startswith("check(") else line for line in source.splitlines()))
    raise SystemExit("no TinyLM cell found in the notebook")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, nargs="+", help="default: 1.0 for SGD (the notebook's), 3e-3 for AdamW")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--optimizer", nargs="+", default=["SGD", "AdamW"], help="torch.optim classes")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], help="default: the notebook's")
    parser.add_argument("--sizes", type=int, nargs=5, metavar=("VOCAB", "WIDTH", "HEADS", "BATCH", "SEQ"),
                        help="the model and batch (default: the notebook's for this machine)")
    args = parser.parse_args()
    ns = notebook_namespace()
    ns["SIZES"] = tuple(args.sizes) if args.sizes else None
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def backend(which):
        def attend(q, k, v, causal):
            with sdpa_kernel(which):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return attend

    ways = {"sdpa default": ns["sdpa_attend"], "sdpa math": ns["math_attend"], "yours": ns["flash_attention"]}
    if ns["runtime"].HAS_CUDA:
        ways.update({f"sdpa {b.name.lower()}": backend(b) for b in
                     (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION)})
    dtype = getattr(torch, args.dtype) if args.dtype else ns["runtime"].sizes(cpu=torch.float32, gpu=torch.bfloat16)
    default_lr = {"SGD": [1.0], "AdamW": [3e-3]}
    for optimizer, lr in ((o, lr) for o in args.optimizer for lr in args.lr or default_lr.get(o, [1e-3])):
        ns["LR"], ns["OPTIMIZER"] = lr, getattr(torch.optim, optimizer)
        curves = {}
        for name, attend in ways.items():
            cast = (lambda fn: lambda q, k, v, causal: fn(q.to(dtype), k.to(dtype), v.to(dtype), causal))(attend)
            try:
                curves[name], _ = ns["train_losses"](cast, args.steps, dtype)
            except Exception as exc:  # noqa: BLE001 - a backend this GPU or shape does not offer
                print(f"  {name}: not run ({type(exc).__name__}: {str(exc)[:120]})")
        reference = curves["sdpa default"]
        scale = abs(reference[0])
        print(f"{optimizer}, lr {lr}, {args.steps} steps, {dtype}: "
              f"SDPA default from {reference[0]:.4f} to {reference[-1]:.4f}")
        for name, curve in curves.items():
            gaps = [abs(a - b) / scale for a, b in zip(curve, reference)]
            worst = max(gaps)
            print(f"  {name:>15}: largest gap {worst:.2e} (step {gaps.index(worst)}), last loss {curve[-1]:.4f}; "
                  f"every 4th step: {' '.join(f'{g:.1e}' for g in gaps[::4])}", flush=True)


if __name__ == "__main__":
    main()
