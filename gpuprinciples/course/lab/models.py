"""Small seeded models shared by lessons 04 (mixed precision), 05 (checkpointing), 06 (Tensor Cores).

`tiny_lm(seed, ...)` builds the same weights for the same seed on any machine, so the grader can
build a model in its own process and the learner's child process can build its twin. The model is
nanoGPT's shape without attention and without norms: embedding, residual MLP blocks, a head.

    model = tiny_lm(seed=0, vocab=512, d_model=64, hidden=256, n_layers=4)
    x, y = token_batch(seed=1, vocab=512, batch=8, seq=64)
    loss = model.loss(x, y)

A grading case names its model by a recipe (a dict of seed and sizes); `from_recipe` builds it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """x + fc2(gelu(fc1(x))): the MLP half of a transformer block."""

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(d_model, hidden)
        self.fc2 = nn.Linear(hidden, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(x)))


class TinyLM(nn.Module):
    """tokens [B, T] -> logits [B, T, vocab]."""

    def __init__(self, vocab: int, d_model: int, hidden: int, n_layers: int):
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(Block(d_model, hidden) for _ in range(n_layers))
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return lm_loss(self(tokens), targets, self.vocab)


def lm_loss(logits: torch.Tensor, targets: torch.Tensor, vocab: int) -> torch.Tensor:
    """Cross-entropy over the first `vocab` logits (a padded head may have more: they are ignored)."""
    return F.cross_entropy(logits[..., :vocab].flatten(0, -2).float(), targets.flatten())


def tiny_lm(seed: int, vocab: int, d_model: int, hidden: int, n_layers: int) -> TinyLM:
    """A TinyLM with GPT-2's initialisation (std 0.02, residual projections scaled by 1/sqrt(2L))."""
    gen = torch.Generator().manual_seed(seed)
    model = TinyLM(vocab, d_model, hidden, n_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.02, generator=gen)  # non-zero, so a padding that drops a bias shows
            else:
                std = 0.02 / (2 * n_layers) ** 0.5 if name.endswith("fc2.weight") else 0.02
                p.normal_(0.0, std, generator=gen)
    return model


def token_batch(seed: int, vocab: int, batch: int, seq: int, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens and next-token targets (the targets are a fixed function of the tokens, so
    there is something to learn)."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (batch, seq), generator=gen)
    mapping = torch.randperm(vocab, generator=gen)
    return tokens.to(device), mapping[tokens].to(device)


def from_recipe(recipe: dict, device="cpu", dtype: torch.dtype | None = None):
    """The model and batch a grading case's recipe names: weights from recipe["seed"], tokens from seed + 1.

    recipe: seed, vocab, d_model, hidden, n_layers, batch, seq. Returns (model, tokens, targets).
    """
    model = tiny_lm(recipe["seed"], recipe["vocab"], recipe["d_model"], recipe["hidden"], recipe["n_layers"])
    model = model.to(device=device, dtype=dtype)
    tokens, targets = token_batch(recipe["seed"] + 1, recipe["vocab"], recipe["batch"], recipe["seq"], device)
    return model, tokens, targets
