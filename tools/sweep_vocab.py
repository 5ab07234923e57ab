"""Lesson 06's measurement: a GPT-2-shaped training step at vocabularies padded to ever larger powers of two.

    python tools/sweep_vocab.py            # on a CUDA GPU; prints one line per vocabulary and a dict to paste

The model is the one `tensorcores.pad_model` times (TinyLM: d_model 768, hidden 3072, two blocks, bf16,
8 × 1024 tokens), its loss over the real 50257 tokens; only the head's width (the padded vocabulary)
changes. All widths are timed interleaved, round by round (`timing.compare`), so drift hits each alike.
"""

from __future__ import annotations

import statistics

import torch

from gpuprinciples.course.lab.models import TinyLM, lm_loss
from gpuprinciples.measure import timing

VOCAB = 50257
WIDTHS = (50257, 50260, 50264, 50272, 50288, 50304, 50432, 50688)  # 50257 rounded up to 4, 8, 16, ... 512


def largest_power_of_two_dividing(n: int) -> int:
    return n & -n


def main() -> None:
    torch.manual_seed(0)
    tokens = torch.randint(0, VOCAB, (8, 1024), device="cuda")
    targets = torch.randint(0, VOCAB, (8, 1024), device="cuda")
    models = {w: TinyLM(w, 768, 3072, 2).to("cuda", torch.bfloat16) for w in WIDTHS}

    def step(model):
        def run():
            lm_loss(model(tokens), targets, VOCAB).backward()
            model.zero_grad(set_to_none=True)
        return run

    comparison = timing.compare({str(w): step(m) for w, m in models.items()}, device="cuda", budget_s=20.0,
                                min_rounds=30)
    medians = {w: statistics.median(r[str(w)] for r in comparison.rounds) for w in WIDTHS}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {len(comparison.rounds)} rounds")
    for w in WIDTHS:
        print(f"vocab {w:6d} (multiple of {largest_power_of_two_dividing(w):3d}): {medians[w] * 1e3:.3f} ms "
              f"({medians[VOCAB] / medians[w]:.2f}x of 50257)")
    print("RECORDED_VOCAB_SWEEP = {" + ", ".join(f"{w}: {medians[w]:.4e}" for w in WIDTHS) + "}")


if __name__ == "__main__":
    main()
