"""Lesson 06, Tensor Core shapes: pad a model so every matmul is aligned.

The learner writes `pad_model(model) -> model`: a TinyLM whose vocabulary, width and hidden size are
awkward numbers (like GPT-2's 50257) becomes one whose every matmul has every dimension a multiple of
`ALIGN[dtype]` elements (16 bytes: 8 for bf16/fp16, 4 for fp32), with the same logits on the real
vocabulary. The grader's batches have a multiple of 8 tokens, so the dimensions to fix are the model's.

Judged in the child, on any machine:

* `MatmulShapes`, a dispatch mode, records the operand shapes of every mm/addmm/bmm the padded model's
  forward runs; every dimension must be a multiple of the alignment for the dtype;
* the logits `[..., :vocab]` must equal the original model's (the tolerance of the dtype, scaled
  by the size of the logits), in the original dtype;
* on a GPU, a training step (forward and backward) of a GPT-2-shaped model (vocab 50257) is timed
  against its padded twin: the lower end of the speedup's interval must reach `MIN_SPEEDUP`.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gpuprinciples.course.kit import Case, FunctionExercise, ValueExercise
from gpuprinciples.course.lab.models import TinyLM, from_recipe, lm_loss
from gpuprinciples.course.lab.steproof import TimedRoof, recipe_step_work
from gpuprinciples.measure import timing

_compare_timed = timing.compare  # bound when the grader imports this, before the learner's module loads

ALIGN = {"bfloat16": 8, "float16": 8, "float32": 4}  # 16 bytes
OUTPUT_RTOL = {"bfloat16": 2e-2, "float16": 4e-3, "float32": 1e-5}  # of the largest |logit|
MIN_SPEEDUP = 1.2  # GPU only: the lower end of the interval, padded vocab vs 50257
MATMUL_OPS = ("mm", "addmm", "bmm", "baddbmm")


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def pad_model(model: TinyLM, multiple: int = 8) -> TinyLM:
    """The reference solution: a bigger TinyLM, zeros everywhere but the original weights' corner."""
    vocab, d = model.embed.weight.shape
    hidden = model.blocks[0].fc1.out_features
    weight = model.head.weight
    padded = TinyLM(round_up(vocab, multiple), round_up(d, multiple), round_up(hidden, multiple),
                    len(model.blocks)).to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        for p in padded.parameters():
            p.zero_()  # padded channels stay exactly zero through every layer: gelu(0) = 0
        padded.embed.weight[:vocab, :d] = model.embed.weight
        for new, old in zip(padded.blocks, model.blocks):
            new.fc1.weight[:hidden, :d] = old.fc1.weight
            new.fc1.bias[:hidden] = old.fc1.bias
            new.fc2.weight[:d, :hidden] = old.fc2.weight
            new.fc2.bias[:d] = old.fc2.bias
        padded.head.weight[:vocab, :d] = model.head.weight
    padded.vocab = vocab  # its loss still runs over the real vocabulary
    return padded


# -------------------------------------------------------------------------------------------------
# Recording matmul shapes
# -------------------------------------------------------------------------------------------------


class MatmulShapes(TorchDispatchMode):
    """Records (op, M, K, N, dtype) of every matmul dispatched in the block (batch dims dropped)."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, int, int, int, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in MATMUL_OPS:
            a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
            self.calls.append((name, a.shape[-2], a.shape[-1], b.shape[-1], str(a.dtype).replace("torch.", "")))
        return func(*args, **kwargs)


def misaligned(calls, align: dict = ALIGN) -> list[tuple]:
    """The recorded matmuls with a dimension that is not a multiple of the alignment for their dtype."""
    return [c for c in calls if any(n % align.get(c[4], 8) for n in c[1:4])]


# -------------------------------------------------------------------------------------------------
# Running a case
# -------------------------------------------------------------------------------------------------

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
_ROOF_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def build(recipe: dict, device: str):
    model, tokens, targets = from_recipe(recipe, device, _DTYPES[recipe["dtype"]])
    return model, tokens, targets


def _run(fn, args, kwargs):
    from gpuprinciples.machine import runtime
    (recipe,) = args
    if kwargs.get("timed"):
        return _time_on_gpu(fn, recipe)
    model, tokens, targets = build(recipe, runtime.DEVICE)
    with torch.no_grad():
        loss = model.loss(tokens, targets).item()  # before the learner's function, which may change the model
        padded = fn(model)
    shapes = MatmulShapes()
    with torch.no_grad(), shapes:
        logits = padded(tokens)
    with torch.no_grad():  # what training would minimise: a padded logit must not enter its softmax
        padded_loss = padded.loss(tokens, targets).item() if hasattr(padded, "loss") else None
    return {"logits": logits, "matmuls": [list(c) for c in shapes.calls], "loss": loss, "padded_loss": padded_loss}


def _time_on_gpu(fn, recipe: dict) -> dict:
    from torch.utils._python_dispatch import _disable_current_modes

    def train_step(m, tokens, targets):  # forward and backward: backward multiplies by the vocab dimension
        lm_loss(m(tokens), targets, recipe["vocab"]).backward()
        m.zero_grad(set_to_none=True)

    with _disable_current_modes():  # the grader's op counters would slow every op
        model, tokens, targets = build(recipe, "cuda")
        with torch.no_grad():
            padded = fn(model)
        comparison = _compare_timed({"padded": lambda: train_step(padded, tokens, targets),
                                     "original": lambda: train_step(model, tokens, targets)},
                                    device="cuda", budget_s=2.0)
    return {"rounds": [dict(r) for r in comparison.rounds]}  # raw: the grader computes every statistic


def _reference(recipe: dict, timed: bool = False):
    if timed:
        return None
    model, tokens, _ = build(recipe, "cpu")
    with torch.no_grad():
        return model(tokens)


def _compare(got, want, case: Case) -> list[str]:
    where = f" (case {case.label})"
    recipe = case.args[0]
    if case.kwargs.get("timed"):
        try:
            ratio, low, high = timing.summarize_rounds(got.get("rounds"), "padded", "original")["speedup"]
        except (ValueError, AttributeError):
            return [f"the timed run returned nothing the grader can read{where}"]
        if low < MIN_SPEEDUP:
            return [f"on this GPU the padded model is {ratio:.2f}× as fast as the original (95% interval "
                    f"{low:.2f}–{high:.2f}×){where}; the interval must reach {MIN_SPEEDUP:g}×"]
        return []
    if not isinstance(got, dict) or not isinstance(got.get("logits"), torch.Tensor):
        return [f"the padded model's forward did not return a tensor of logits{where}"]
    reasons = []
    logits, vocab = got["logits"], recipe["vocab"]
    if logits.shape[:-1] != want.shape[:-1] or logits.shape[-1] < vocab:
        return [f"the padded model returned logits of shape {tuple(logits.shape)}{where}: expected "
                f"{tuple(want.shape[:-1])} by at least {vocab} (the real vocabulary first)"]
    if logits.dtype != want.dtype:
        reasons.append(f"the padded model computes in {logits.dtype}, the original in {want.dtype}{where}: "
                       "keep the dtype (the alignment rule depends on it)")
    else:
        real = logits[..., :vocab].double()
        scale = want.double().abs().max().item()
        err = (real - want.double()).abs().max().item()
        tol = OUTPUT_RTOL[recipe["dtype"]] * scale
        if not err <= tol:
            reasons.append(f"the logits on the real vocabulary changed{where}: max error {err:.3g}, allowed "
                           f"{tol:.3g} ({OUTPUT_RTOL[recipe['dtype']]:g} of the largest logit). Padded weights "
                           "must be zero where they meet real channels")
        loss, padded_loss = got.get("loss"), got.get("padded_loss")
        if padded_loss is not None and not abs(padded_loss - loss) <= 2 * tol:  # log-sum-exp minus a logit
            reasons.append(f"the padded model's loss is {padded_loss:.6g} where the original's is {loss:.6g}{where}: "
                           "its padded logits enter the softmax. Keep `vocab` the real vocabulary (the loss reads "
                           "only the first `vocab` logits)")
    calls = [tuple(c) for c in got["matmuls"]]
    if not calls:
        reasons.append(f"no matmul ran in the padded model's forward{where}")
    bad = misaligned(calls)
    if bad:
        op, m, k, n, dtype = bad[0]
        reasons.append(f"{len(bad)} of {len(calls)} matmuls are not aligned{where}: e.g. {op} with M={m}, K={k}, "
                       f"N={n} in {dtype}, where every dimension must be a multiple of {ALIGN.get(dtype, 8)} "
                       f"elements (16 bytes)")
    return reasons


def _cases(gen: torch.Generator, mode: str) -> list[Case]:
    def seed():
        return int(torch.randint(0, 2**31 - 1, (1,), generator=gen))

    def odd(low, high):  # not a multiple of 2, so of no alignment either
        return int(torch.randint(low, high, (1,), generator=gen)) | 1

    recipes = [
        dict(seed=seed(), vocab=odd(500, 1100), d_model=odd(40, 90), hidden=odd(150, 300), n_layers=2,
             batch=2, seq=32, dtype="bfloat16"),
        dict(seed=seed(), vocab=odd(300, 700), d_model=odd(30, 60), hidden=odd(100, 200), n_layers=3,
             batch=3, seq=16, dtype="float32"),
        # aligned to 4 but not to 8: fine for fp32, not for bf16
        dict(seed=seed(), vocab=4 * odd(100, 200), d_model=4 * odd(9, 20), hidden=4 * odd(30, 60), n_layers=2,
             batch=1, seq=64, dtype="bfloat16"),
    ]
    cases = [Case(f"{r['dtype']} vocab={r['vocab']} d={r['d_model']} hidden={r['hidden']}", (r,)) for r in recipes]
    if mode == "gpu":  # GPT-2 small's shapes, two blocks: the 50257-wide head is most of the work
        big = dict(seed=seed(), vocab=50257, d_model=768, hidden=3072, n_layers=2, batch=8, seq=1024,
                   dtype="bfloat16")
        cases.append(Case("bfloat16 vocab=50257 d=768 hidden=3072, 8192 tokens (timed)", (big,), {"timed": True}))
    return cases


PAD_MODEL = FunctionExercise(
    id="tensorcores.pad_model",
    title="Pad a model so every matmul is Tensor Core aligned",
    signature="pad_model(model: TinyLM) -> TinyLM  # same logits on the real vocabulary, aligned shapes",
    cases=_cases,
    reference=_reference,
    compare=_compare,
    run=_run,
    timeout_s=300.0,
    solution="gpuprinciples.course.exercises.tensorcores:pad_model",
    # the roof of the padded step is the original problem's work: padding adds FLOPs, not useful ones
    timed_roof=TimedRoof(lambda r: recipe_step_work(r, _ROOF_DTYPE[r["dtype"]],
                                                    param_bytes=_DTYPES[r["dtype"]].itemsize),
                         timed="padded"),
    judges=((("cpu", "gpu"), "every matmul dimension a multiple of 16 bytes (counted)"),
            (("gpu",), f"a GPT-2-shaped step timed: speedup over vocab 50257 ≥ {MIN_SPEEDUP:g}×")),
    hints=(
        "Three sizes set every matmul's K and N: the vocabulary, d_model and the hidden size. Round each up.",
        "Build a bigger TinyLM, zero all its parameters, and copy the original weights into the top-left corner.",
        "A padded channel must stay zero through every layer: zero weights in and out, zero bias, and gelu(0) = 0.",
        "16 bytes is 8 bf16 elements but 4 fp32 elements: pad for the narrowest dtype the model runs in.",
    ),
)

# tensorcores.padded_vocab: a decision from a measured sweep. The timed case's model (vocab as listed, d_model 768,
# hidden 3072, two blocks, bf16, 8 x 1024 tokens, loss over the real 50257), one training step: docs/vocab-h200.md
# (one NVIDIA H200, torch 2.11.0+cu130, Triton 3.6.0, 2026-12-04, `python tools/sweep_vocab.py`), median seconds of
# 141 interleaved rounds.
RECORDED_VOCAB_SWEEP = {50257: 2.2168e-02, 50260: 1.5526e-02, 50264: 1.0574e-02, 50272: 1.0480e-02,
                        50288: 1.0476e-02, 50304: 1.0445e-02, 50432: 1.0440e-02, 50688: 1.0463e-02}
WORTH = 0.02  # a step within 2 % of the fastest measured is as good: padding further only costs memory


def _smallest_fast_vocab() -> int:
    best = min(RECORDED_VOCAB_SWEEP.values())
    return min(w for w, s in RECORDED_VOCAB_SWEEP.items() if s <= best * (1 + WORTH))


def _compare_vocab(got, want: int) -> list[str]:
    """A wrong width fails with what it gets wrong: the time it leaves, or the rows it pads for nothing."""
    if isinstance(got, bool) or not isinstance(got, (int, float)) or got != int(got):
        return [f"answered {got!r}: the answer is a vocabulary size, one of the measured ones "
                f"{list(RECORDED_VOCAB_SWEEP)}"]
    got = int(got)
    if got not in RECORDED_VOCAB_SWEEP:
        return [f"vocabulary {got} was not measured: choose one of {list(RECORDED_VOCAB_SWEEP)}"]
    best = min(RECORDED_VOCAB_SWEEP.values())
    step, alignment = RECORDED_VOCAB_SWEEP[got], got & -got  # the largest power of two dividing it
    if step > best * (1 + WORTH):
        return [f"vocabulary {got} (a multiple of {alignment}) takes {step * 1e3:.2f} ms a step, "
                f"{step / best:.2f}x the fastest measured ({best * 1e3:.2f} ms): its rows are not 16-byte "
                "aligned for bf16, so the head's matmuls miss cuBLAS's fast kernels"]
    if got > want:
        return [f"vocabulary {got} is fast ({step * 1e3:.2f} ms), but so is {want} "
                f"({RECORDED_VOCAB_SWEEP[want] * 1e3:.2f} ms, within {WORTH:.0%} of the fastest) with "
                f"{got - want} fewer rows: once every row is a multiple of 16 bytes, padding further bought "
                "nothing you could measure here"]
    return []


PADDED_VOCAB = ValueExercise(
    id="tensorcores.padded_vocab",
    title="Decide: how far to pad GPT-2's vocabulary",
    question=("nanoGPT pads GPT-2's 50257-token vocabulary to 50304, a multiple of 64. Every padded row costs "
              "memory (in the embedding and the head, their gradients and optimizer state). From the training "
              "steps measured on the course's H200 (tensorcores.RECORDED_VOCAB_SWEEP, seconds by vocabulary), "
              "which is the smallest vocabulary whose step is within 2 % of the fastest measured?"),
    expected=_smallest_fast_vocab,
    compare=_compare_vocab,
    hints=("Find the fastest measured step first; then every vocabulary whose step is at most 1.02 times it.",
           "n & -n is the largest power of two that divides n: print it beside each step time."),
)

EXERCISES = (PAD_MODEL, PADDED_VOCAB)
