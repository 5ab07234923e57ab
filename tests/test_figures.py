"""`gpuprinciples figures`: the page it writes, from made-up measurements (no GPU needed), its refusal to
measure without a GPU, and the course's links to the page."""

import json
import re

import pytest

from conftest import ROOT
from gpuprinciples import cli
from gpuprinciples.instructor import figures
from gpuprinciples.machine import runtime

# made-up numbers, chosen so every derived figure is easy to check by hand
RUN = {
    "meta": {"gpu": "NVIDIA H200", "sms": 132, "driver": "999.1", "cuda": "13.0", "torch": "2.11.0+cu130",
             "triton": "3.6.0", "python": "3.12.1", "cpu": "CPU Test 9000, 8 threads", "date": "2030-01-02",
             "commit": "abc1234", "seconds": 123.4},
    "bandwidth": {"copy_tbs": 4.0},
    "matmul": {"n": 8192, "tflops": {"bf16": 700.0, "fp16": 650.0, "tf32": 350.0, "fp32": 50.0}},
    "k_alignment": {"m": 4096, "n": 4096, "k": {
        "4096": {"tflops": 600.0, "kernels": ["nvjet_tst_fake_kernel"]},
        "4088": {"tflops": 600.0, "kernels": ["nvjet_tst_fake_kernel"]},
        "4095": {"tflops": 150.0, "kernels": ["sm80_xmma_gemm_f16f16_fake_align1"]}}},
    "cos_cos": {"n": 2**28, "ms": {"eager": 1.0, "torch.compile": 0.5, "naive Triton": 0.625, "course kernel": 0.5}},
    "launch": {"tiny_us": {"1": 5.0}, "tiny_range_us": [4.0, 6.0], "floor_us": 5.0, "add_2_24_us": 40.0,
               "loop_us_per_add": 10.0},
    "attention": {"shape": [4, 16, 4096, 128],
                  "tflops": {"naive": 100.0, "SDPA flash": 350.0, "SDPA efficient": 175.0,
                             "course Triton kernel, autotuned": 450.0,
                             "course Triton kernel, 32×32 tiles, no pipelining": 150.0},
                  "extra_gib": {"naive": 4.0, "SDPA flash": 0.0625},
                  "unavailable": {"SDPA cuDNN": "No available kernel"}},
    "attention_l2": {"shape": [4, 16, 4096, 128],
                     "rows": [{"block_m": 128, "order": "tile by tile", "seconds": 1e-3, "tflops": 550.0,
                               "bytes_without_cache": 8e9, "needed": 8e12},
                              {"block_m": 128, "order": "head by head", "seconds": 2e-3, "tflops": 275.0,
                               "bytes_without_cache": 8e9, "needed": 4e12}]},
}


def _rows(page: str, anchor: str) -> list[list[str]]:
    """The table rows (cells) of one section of the page, header and rule left out."""
    section = page.split(f'<a id="{anchor}"></a>', 1)[1].split("<a id=", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|")]
    return rows[2:]


def test_every_section_has_its_anchor_once_and_its_rows():
    page = figures.render(RUN)
    for section in figures.SECTIONS:
        assert page.count(f'<a id="{section.anchor}"></a>') == 1
    counts = {"bandwidth": 1, "matmul": 4, "k-alignment": 3, "cos-cos": 4, "launch": 4, "attention": 8,
              "attention-l2": 2}
    assert {s.anchor for s in figures.SECTIONS} == set(counts)
    for anchor, n in counts.items():
        rows = _rows(page, anchor)
        assert len(rows) == n and all(len(r) == 3 for r in rows), (anchor, rows)


def test_the_header_says_where_and_how_it_was_measured():
    page = figures.render(RUN)
    for text in ("| GPU | NVIDIA H200 |", "| driver | 999.1 |", "| torch | 2.11.0+cu130 |", "| Triton | 3.6.0 |",
                 "| date (UTC) | 2030-01-02 |", "| gpuprinciples commit | abc1234 |", "in one run of 123 s"):
        assert text in page
    assert "Where these figures come from" not in page
    copied = figures.render(dict(RUN, meta=dict(RUN["meta"], source="Copied from the 2030-01-01 run.")))
    assert "> **Where these figures come from.** Copied from the 2030-01-01 run." in copied
    assert "Measured and written by" not in copied


def test_figures_and_what_follows_from_them():
    page = figures.render(RUN)
    assert _rows(page, "bandwidth")[0][1:] == ["4 TB/s", "the memory ceiling: 83% of the datasheet's 4.8 TB/s"]
    matmul = {r[0]: r[1:] for r in _rows(page, "matmul")}
    assert matmul["bf16 matmul 8192³"][0] == "700 TFLOP/s"
    assert matmul["fp32 matmul 8192³, TF32 on"] == ["350 TFLOP/s", "7.0× fp32's from one flag"]
    assert matmul["fp32 matmul 8192³, TF32 off"][1] == "CUDA cores: bf16 is 14.0× faster"
    k = _rows(page, "k-alignment")
    assert k[1][2].startswith("a multiple of 8: aligned rows; as fast")
    assert "4.0× the time of K = 4096" in k[2][2] and "`sm80_xmma_gemm_f16f16_fake_align1`" in k[2][2]
    cos = {r[0].split(", ")[-1]: r for r in _rows(page, "cos-cos")}
    assert cos["torch.compile"][1] == "0.5 ms" and "4.29 TB/s of x and y; 2.00× eager" in cos["torch.compile"][2]
    launch = _rows(page, "launch")
    assert launch[0][1] == "4–6 µs" and launch[1][1] == "5 µs"
    assert launch[3][1:] == ["10 µs per add", "overhead-bound: 2.0× the floor, the CPU cannot keep the GPU fed"]
    attention = {r[0].split("bf16, ", 1)[-1]: r[1:] for r in _rows(page, "attention")}
    assert attention["SDPA flash"] == ["350 TFLOP/s", "3.5× naive"]
    assert attention["SDPA cuDNN"] == ["not measured", "unavailable here: No available kernel"]
    assert attention["extra memory during that attention, SDPA flash"][0] == "0.0625 GiB"
    l2 = _rows(page, "attention-l2")
    assert l2[0][0].endswith("BLOCK_M = 128, programs tile by tile") and l2[0][1] == "1 ms"
    assert l2[0][2] == "550 TFLOP/s; from HBM alone its K/V re-reads would need 8.0 TB/s, 2.0× the copy ceiling"
    assert l2[1][1] == "2 ms" and "4.0 TB/s, 1.0× the copy ceiling" in l2[1][2]


def test_missing_figures_say_so_and_notes_follow_their_section():
    run = {"meta": {"gpu": "Some GPU without a datasheet", "source": "Partly recorded."},
           "matmul": {"tflops": {"bf16": 700.0}}, "notes": {"launch": ["Measured elsewhere: 3.3 µs."]}}
    page = figures.render(run)
    matmul = _rows(page, "matmul")
    assert matmul[0][1:] == ["700 TFLOP/s", "the compute ceiling"]  # no datasheet: no percentage invented
    assert matmul[1][1] == "not measured" and matmul[2][2] == ""
    assert all(r[1] == "not measured" for r in _rows(page, "launch"))
    launch = page.split('<a id="launch"></a>', 1)[1].split("<a id=", 1)[0]
    assert "* Measured elsewhere: 3.3 µs." in launch


def test_numbers_keep_four_significant_digits_at_most():
    assert [figures._num(v) for v in (1.014, 0.56, 688.123, 4262.0, 51.0, 0.0625, 12345.6)] == \
        ["1.014", "0.56", "688.1", "4,262", "51", "0.0625", "12,346"]
    assert figures._fig(None, "ms") == "not measured" and figures._fig(2.5, "ms") == "2.5 ms"


def test_it_refuses_to_measure_without_a_gpu(monkeypatch, capsys):
    monkeypatch.setattr(runtime, "HAS_CUDA", False)
    assert cli.main(["figures"]) == 1
    err = capsys.readouterr().err
    assert "no CUDA GPU is visible here" in err and "nothing to measure" in err
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        figures.measure()


def test_a_saved_run_renders_anywhere(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "HAS_CUDA", False)
    saved, page = tmp_path / "run.json", tmp_path / "measured.md"
    saved.write_text(json.dumps(RUN))
    assert cli.main(["figures", "--from", str(saved), "--write", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == figures.render(RUN)


def test_the_committed_page_has_every_section_and_says_where_its_figures_come_from():
    page = (ROOT / "docs" / "measured.md").read_text(encoding="utf-8")
    for section in figures.SECTIONS:
        assert f'<a id="{section.anchor}"></a>' in page, section.anchor
    assert "Where these figures come from" in page or "Measured and written by `gpuprinciples figures" in page


LINK = re.compile(r"measured\.md(?:#([A-Za-z0-9_-]+))?")


def test_every_link_to_the_page_names_a_section_it_has():
    anchors = {s.anchor for s in figures.SECTIONS}
    files = [*sorted((ROOT / "solutions").glob("*.ipynb")), *sorted((ROOT / "lessons").glob("*.ipynb")),
             *sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    bad = [f"{path.relative_to(ROOT)}: #{anchor}" for path in files
           for anchor in LINK.findall(path.read_text(encoding="utf-8")) if anchor and anchor not in anchors]
    assert not bad, bad
