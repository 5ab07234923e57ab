"""Known stale claims stay out of everything a learner reads: solutions/, lessons/, docs/ and the README.

Each rule is a pattern for the stale thing and, where a sentence may rightly name it as stale, the
context that makes it right (the same sentence saying "deprecated", "sparse", "Volta", ...). A
sentence that is right for a reason no rule knows can carry the marker `stale-ok` (an HTML comment in
Markdown, a `#` comment in code), which says a person checked it.
"""

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: str  # the stale thing
    why: str
    needs: str | None = None  # it is a claim only in a sentence that also matches this
    unless: str | None = None  # ... and not in one that matches this (it names the thing as stale)

    def hits(self, text: str) -> list[str]:
        found = []
        for match in re.finditer(self.pattern, text):
            a, b = _sentence(text, match.start(), match.end())
            sentence = text[a:b]
            stop = text.find("\n", b)
            lines = text[text.rfind("\n", 0, a) + 1:stop if stop >= 0 else len(text)]
            if "stale-ok" in lines:  # the marker sits on a line of the sentence
                continue
            if self.needs and not re.search(self.needs, sentence, re.I):
                continue
            if self.unless and re.search(self.unless, sentence, re.I):
                continue
            found.append(f"{self.name}: {' '.join(sentence.split())[:200]!r} ({self.why})")
        return found


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the sentence around text[start:end] begins and ends: from the previous sentence end or
    blank line to the next."""
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)|\n\s*\n", text[:start])]
    after = re.search(r"[.!?](?=\s|$)|\n\s*\n", text[end:])
    return (ends[-1] if ends else 0), end + (after.end() if after else len(text) - end)


SPARSE_NUMBER = r"(?<![\d.,])(?:1,?979|1,?978\.9|3,?958|3,?957\.8|1\.97|1\.98|3\.9[4-6])(?![\d,])"
RULES = (
    Rule("torch.cuda.amp", r"torch\.cuda\.amp\b", "deprecated: torch.amp with the device type",
         unless=r"deprecat|instead of|not `?torch\.cuda\.amp|replaced"),
    Rule("make_block_ptr", r"make_block_ptr", "block pointers are deprecated: tensor descriptors "
         "(tl.make_tensor_descriptor)", unless=r"deprecat|instead of|not `?(tl\.)?make_block_ptr|replaced"),
    Rule("4×4 Tensor Cores", r"\b4\s*[×x]\s*4\b", "Volta's Tensor Core shape, not Hopper's (wgmma: m64nNk16)",
         needs=r"tensor core|wgmma|\bmma\b|hopper|h100|h200", unless=r"volta"),
    Rule("sparse peak as dense", SPARSE_NUMBER + r"\s*(?:TFLOP|PFLOP|TOP|POP)",
         "NVIDIA's 2:4-sparse headline: the dense peak is half", unless=r"spars"),
    # 1,979 is also the H100/H200's dense fp8 rate: a claim only when the sentence is about 16-bit types
    Rule("sparse bf16 peak as dense", r"(?<![\d.,])1,?97[89](?:\.9)?(?![\d,])",
         "the bf16/fp16 figure with 2:4 sparsity: dense is 989", needs=r"bf16|fp16|bfloat16|float16|half",
         unless=r"spars"),
    Rule("FlashAttention HBM traffic O(N·d)", r"O\(\s*N\s*(?:·|⋅|\\cdot|\*|\\,)?\s*[dD]\s*\)",
         "FlashAttention reads Θ(N²d²/M) bytes of HBM (Dao et al. 2022, Theorem 2), not O(Nd)",
         needs=r"hbm|traffic|access|i/o|\bio\b|moves|moved|reads|bytes", unless=r"N\^?2\s*d\^?2|N²d²|\bnot\b"),
    Rule("MEASURED.md", r"MEASURED\.md", "a file that is not in the repository: cite docs/measured.md"),
    Rule("FSDP1", r"FullyShardedDataParallel\b", "FSDP1's wrapper class: the course teaches FSDP2, "
         "torch.distributed.fsdp.fully_shard", unless=r"FSDP1|deprecat|legacy|instead of|replaced"),
    Rule("eager cos∘cos as fused", r"(?<![\w.])(?:x|t|v)?\.cos\(\)\.cos\(\)",
         "eager PyTorch runs x.cos().cos() as two kernels; only torch.compile or a Triton kernel fuses it",
         needs=r"\bfused\b|\bfuses\b|one kernel|single kernel|one pass",
         unless=r"two kernels|two operators|cannot fuse|not fused|unfused|torch\.compile|triton|compiled|inductor"),
)


def _texts(path: Path) -> list[tuple[str, str]]:
    """(where, text) for each piece a learner reads: every cell of a notebook, or the whole file."""
    if path.suffix == ".ipynb":
        nb = nbformat.read(str(path), as_version=4)
        return [(f"cell {i}", cell.source) for i, cell in enumerate(nb.cells)]
    return [("", path.read_text(encoding="utf-8"))]


FILES = sorted([*ROOT.glob("solutions/*.ipynb"), *ROOT.glob("lessons/*.ipynb"), *ROOT.glob("docs/**/*.md"),
                ROOT / "README.md"])


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_no_stale_claims(path):
    found = [f"{where}: {hit}" if where else hit for where, text in _texts(path) for rule in RULES
             for hit in rule.hits(text)]
    assert not found, "\n".join(found)


# ---- the rules themselves: each fires on the stale claim and not on a sentence that names it as stale ----

RULE_CASES = [
    ("torch.cuda.amp", "Wrap the step in `torch.cuda.amp.autocast()`.", True),
    ("torch.cuda.amp", "Use `torch.amp`; `torch.cuda.amp` is deprecated.", False),
    ("make_block_ptr", "Load the tile through `tl.make_block_ptr(base, shape, ...)`.", True),
    ("make_block_ptr", "Tensor descriptors replaced `tl.make_block_ptr`, which is deprecated.", False),
    ("4×4 Tensor Cores", "On Hopper each Tensor Core multiplies 4×4 matrices per clock.", True),
    ("4×4 Tensor Cores", "The 4×4 tiles drawn for Volta's first Tensor Cores describe none of Hopper.", False),
    ("4×4 Tensor Cores", "A 4x4 grid of programs covers the output.", False),
    ("sparse peak as dense", "An H200 does 3958 TFLOPS of fp8.", True),
    ("sparse peak as dense", "The 1,979 TFLOPS headline assumes 2:4 sparsity.", False),
    ("sparse bf16 peak as dense", "The H100 SXM reaches 1979 TFLOP/s in bf16.", True),
    ("sparse bf16 peak as dense", "Dense fp8 on an H100 is 1,979 TFLOP/s.", False),
    ("FlashAttention HBM traffic O(N·d)", "FlashAttention reads only O(N·d) bytes of HBM.", True),
    ("FlashAttention HBM traffic O(N·d)", "Its HBM traffic is $O(N d)$, linear in N.", True),
    ("FlashAttention HBM traffic O(N·d)", "Its HBM reads are Θ(N²d²/M), not O(N·d).", False),
    ("FlashAttention HBM traffic O(N·d)", "FlashAttention's extra memory is O(N·d) at most.", False),
    ("MEASURED.md", "Measured on an H200 (MEASURED.md, 2026-12-02).", True),
    ("MEASURED.md", "Measured on an H200 (MEASURED.md). <!-- stale-ok: quoting the old name -->", False),
    ("FSDP1", "Wrap the model in `FullyShardedDataParallel(model)` to shard it.", True),
    ("FSDP1", "FSDP2's `fully_shard` replaced FSDP1's `FullyShardedDataParallel` wrapper.", False),
    ("eager cos∘cos as fused", "Eager `x.cos().cos()` is one fused kernel.", True),
    ("eager cos∘cos as fused",
     "Eager PyTorch runs `x.cos().cos()` as two kernels; one fused kernel moves half.", False),
    ("eager cos∘cos as fused", "`torch.compile` fuses `x.cos().cos()` into one kernel.", False),
]


@pytest.mark.parametrize("name, text, stale", RULE_CASES)
def test_a_rule_fires_on_the_claim_and_not_on_its_correction(name, text, stale):
    rule = next(r for r in RULES if r.name == name)
    assert bool(rule.hits(text)) == stale, rule.hits(text)


def test_a_hit_names_the_sentence_and_the_reason():
    text = "Intro.\n\nOn an H200 (`shared/device/MEASURED.md`), a matmul ran\nat 688 TFLOP/s. Next sentence."
    (hit,) = next(r for r in RULES if r.name == "MEASURED.md").hits(text)
    assert "a matmul ran at 688 TFLOP/s." in hit and "Next" not in hit and "docs/measured.md" in hit
