"""Every figure a lesson's text states has its source beside it (DESIGN: "Numbers in the text are measured
in the notebook or cited with a source").

A *figure* is a number with a unit of time or of rate, the things a GPU measures: ns, µs, ms, TB/s, GB/s,
TFLOP/s, tokens/s ("14–25 µs", "4.8 TB/s", "779 TFLOP/s"). Sizes, counts and ratios are left out: they are
arithmetic on shapes, which the text shows. A figure whose paragraph works it out ("124 × 4.22 TB/s ≈ 520
TFLOP/s": the figure follows "≈" or "=") is arithmetic too; the figures it starts from are checked.

A *citation* sits in the same paragraph (text between blank lines) of the same Markdown cell, and is one of:
* a link to a page of docs/, which holds the GPU, versions, date and command of every run it reports, and
  then every figure of the paragraph must be on one of the linked pages (to the precision the text gives
  it: 779 TFLOP/s is cited by docs/measured.md's 779.4);
* a published source: a URL, an arXiv paper, NVIDIA's datasheet, whitepaper or Programming Guide, a README
  (in a paragraph that also cites docs/, within 100 characters of the figure: a "datasheet" at one end of a
  paragraph does not excuse another host's figure at the other);
* a run recorded in the package with its script (`tools/<script>.py`, or the lesson's `RECORDED` data).
A figure that is measured in the notebook is printed by a cell, not written in the text, so the text
needs no number for it. A paragraph a person has checked for a reason these rules do not know can carry
`<!-- figure-ok: why -->`.

Links to docs/ must also lead somewhere: the page exists, and so does its `#anchor`.
"""

import re
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT

UNIT = r"(?:ns|µs|us|ms|TB/s|GB/s|TFLOP/s|PFLOP/s|TFLOPS|tokens/s)"
NUM = r"\d[\d,]*(?:\.\d+)?"
FIGURE = re.compile(r"(?<![\w.])" + NUM + r"(?:\s*(?:–|-|to|/)\s*" + NUM + r")*\s*" + UNIT + r"(?![\w/])")
NEAR = 100  # characters: how close a published source must be to a figure in a paragraph that also cites docs/
DERIVED = re.compile(r"(?:≈|=|~)\s*$")
DOC_LINK = re.compile(r"docs/([\w-]+\.md)(#[\w-]+)?")
PUBLISHED = re.compile(r"https?://|arXiv|datasheet|whitepaper|Programming Guide|README|spec sheet|"
                       r"\btools/\w+\.py|\bRECORDED\b", re.I)


def _unit(figure: str) -> str:
    unit = re.search(UNIT + r"$", figure).group(0)
    return {"us": "µs", "TFLOPS": "TFLOP/s"}.get(unit, unit)


def _figures(text: str) -> list[tuple[float, str]]:
    """Every (number, unit) of a text's figures: "14–25 µs" is (14, µs) and (25, µs)."""
    return [(float(n.replace(",", "")), _unit(m.group(0))) for m in FIGURE.finditer(text)
            for n in re.findall(NUM, m.group(0))]


def _decimals(number: str) -> int:
    return len(number.split(".")[1]) if "." in number else 0


def _on_page(number: str, unit: str, page: list[tuple[float, str]]) -> bool:
    """The page states this figure in this unit, to the precision the text gives it."""
    value, half = float(number.replace(",", "")), 0.5 * 10 ** -_decimals(number)
    return any(u == unit and abs(value - x) <= half + 1e-9 for x, u in page)


def _page_figures(name: str) -> list[tuple[float, str]] | None:
    path = ROOT / "docs" / name
    return _figures(path.read_text(encoding="utf-8")) if path.exists() else None


def uncited(paragraph: str, pages=_page_figures) -> list[str]:
    """The figures of one paragraph that have no source beside them."""
    if "figure-ok" in paragraph:
        return []
    cited = [pages(name) for name, _ in DOC_LINK.findall(paragraph)]
    cited = [numbers for numbers in cited if numbers is not None]
    if not cited and PUBLISHED.search(paragraph):
        return []
    missing = []
    for match in FIGURE.finditer(paragraph):
        if DERIVED.search(paragraph[:match.start()]):
            continue
        if PUBLISHED.search(paragraph[max(0, match.start() - NEAR):match.end() + NEAR]):
            continue  # a paragraph citing docs/ may quote a published figure: its source right beside it
        numbers = re.findall(NUM, match.group(0))
        unit = _unit(match.group(0))
        if cited and all(any(_on_page(n, unit, page) for page in cited) for n in numbers):
            continue
        where = "not on the docs/ page it cites" if cited else "no source in its paragraph"
        context = " ".join(paragraph[max(0, match.start() - 90):match.end() + 20].split())
        missing.append(f"{match.group(0)!r} ({where}): …{context}…")
    return missing


def _paragraphs(path: Path):
    nb = nbformat.read(str(path), as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for paragraph in re.split(r"\n\s*\n", cell.source):
                yield i, paragraph


LESSONS = sorted(ROOT.glob("solutions/*.ipynb"))


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_every_figure_in_the_text_has_its_source_beside_it(path):
    found = [f"cell {i}: {hit}" for i, paragraph in _paragraphs(path) for hit in uncited(paragraph)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_links_to_docs_lead_somewhere(path):
    broken = []
    for i, paragraph in _paragraphs(path):
        for name, anchor in DOC_LINK.findall(paragraph):
            page = ROOT / "docs" / name
            if not page.exists():
                broken.append(f"cell {i}: docs/{name} does not exist")
            elif anchor and f'id="{anchor[1:]}"' not in page.read_text(encoding="utf-8") \
                    and not re.search(rf"^#+ .*{re.escape(anchor[1:])}", page.read_text(encoding="utf-8"), re.M | re.I):
                broken.append(f"cell {i}: docs/{name}{anchor}: no such anchor")
    assert not broken, "\n".join(broken)


# ---- the rule itself: it can fail, and it passes what it should ----------------------------------------

PAGE = {"measured.md": _figures("| bf16 matmul 8192³ | 779.4 TFLOP/s | ... | launch floor | 14–25 µs | 4.223 TB/s |")}


def _pages(name):
    return PAGE.get(name)


@pytest.mark.parametrize("text, ok", [
    ("A tiny launch took 4.1–4.8 µs on another host.", False),  # no source at all
    ("A tiny launch took 4.1–4.8 µs ([docs/measured.md](../docs/measured.md#launch)).", False),  # not on that page
    ("A tiny launch took 14–25 µs ([docs/measured.md](../docs/measured.md#launch)).", True),
    ("bf16 ran at 779 TFLOP/s (docs/measured.md).", True),  # 779.4 to the precision written
    ("bf16 ran at 688 TFLOP/s on another host (docs/measured.md).", False),
    ("bf16 ran at 779.9 TFLOP/s (docs/measured.md).", False),  # more precise than the page, and not it
    ("A copy ran at 4.2 µs (docs/measured.md).", False),  # the page's 4.223 is TB/s, not µs
    ("An H200 reads HBM at 4.8 TB/s by its datasheet.", True),
    ("gpt-fast's README reports 104.9 tokens/s.", True),
    ("At most 124 × 4.22 TB/s ≈ 520 TFLOP/s (docs/measured.md).", True),  # 520 is worked out, 4.22 is cited
    ("The ridge is 206 by the datasheet, 185 as measured (779 TFLOP/s, docs/measured.md), and on another host, "
     "the one before, a good while back, with other drivers, the rate was lower, 688 TFLOP/s.", False),
    ("It read 8 MB in 2 µs. <!-- figure-ok: an example, not a measurement -->", True),
    ("The cache holds 33.5 MB per sequence.", True),  # a size: arithmetic on shapes
])
def test_the_rule_fires_on_an_uncited_figure_and_not_on_a_cited_one(text, ok):
    assert (not uncited(text, pages=_pages)) == ok, uncited(text, pages=_pages)
