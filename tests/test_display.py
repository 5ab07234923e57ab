"""A report in three forms: the same facts in HTML, text and JSON."""

import io
import json

from gpuprinciples.grader import display
from gpuprinciples.grader.report import CheckLine, Report


def sample() -> Report:
    r = Report(exercise="fusion.cos_cos", title="cos(cos(x))", mode="cpu")
    r.checks.append(CheckLine("correct", True, "6 of 6 cases"))
    r.checks.append(CheckLine("at most 1 kernel launch", False, "2 launches <b>"))
    r.fail("2 Triton launches per call")
    r.checks.append(CheckLine("speedup over eager", None, "timed on a GPU only"))
    r.measurements.update({"bytes_moved": 123456, "counts": {"raw": 1}, "bytes_case": "(7,) normal float32",
                           "projected_us (roofline, not measured)": {"H200": 0.5}})
    r.output = "hello"
    r.hint = 'Stuck? Run hint("fusion.cos_cos") in a cell for hint 1 of 3.'
    return r


def test_json_has_the_contract_fields():
    data = json.loads(sample().to_json())
    assert {"exercise", "passed", "correct", "mode", "reasons", "measurements"} <= set(data)
    assert data["passed"] is False and data["status"] == "failed" and data["mode"] == "cpu"
    assert data["measurements"]["counts"] == {"raw": 1}  # raw counters stay in the JSON


def test_text_and_html_say_the_same_things():
    r = sample()
    text, html = str(r), r._repr_html_()
    for form in (text, html):
        assert "FAILED" in form and "2 Triton launches per call" in form and "123,456" in form
        assert "no GPU time claimed" in form
        assert "raw" not in form  # the raw counters are summarised, not dumped
    assert "&lt;b&gt;" in html and "<b>\"" not in html  # learner-controlled text is escaped
    assert "hello" in text and "hello" in html


def test_fail_keeps_not_attempted_and_error():
    r = Report(exercise="x", title="x", mode="cpu", status="not attempted")
    r.fail("something")
    assert r.status == "not attempted"
    r = Report(exercise="x", title="x", mode="cpu", status="passed")
    r.fail("late failure")
    assert r.status == "failed" and not r.passed


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_verdict_is_in_words_first_and_colour_only_adds_to_them(monkeypatch):
    r = sample()
    plain = display.text(r)
    assert plain.startswith("FAILED  fusion.cos_cos")
    lines = plain.splitlines()
    assert any(line.strip().startswith("PASSED") and "correct" in line for line in lines)
    assert any(line.strip().startswith("FAILED") and "at most 1 kernel launch" in line for line in lines)
    assert any(line.strip().startswith("NOT JUDGED") and "speedup" in line for line in lines)
    assert "\x1b[" not in plain and not any(mark in plain for mark in "✅❌")
    coloured = display.text(r, colour=True)
    assert "\x1b[31mFAILED\x1b[0m" in coloured and "\x1b[32mPASSED\x1b[0m" in coloured
    assert display._ANSI_RE.sub("", coloured) == plain  # the same words with or without colour
    html = r._repr_html_()
    for word in ("FAILED", "PASSED", "NOT JUDGED"):
        assert word in html


def test_no_color_is_honoured_and_a_pipe_gets_none(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert display.use_colour(_Terminal()) is True
    assert display.use_colour(io.StringIO()) is False  # a pipe or a file
    monkeypatch.setenv("NO_COLOR", "1")
    assert display.use_colour(_Terminal()) is False
    assert "color:#cf222e" not in sample()._repr_html_()  # the notebook's HTML drops colour too
    monkeypatch.setenv("NO_COLOR", "")  # set but empty: no-color.org says colour stays
    assert display.use_colour(_Terminal()) is True
    monkeypatch.setenv("TERM", "dumb")
    assert display.use_colour(_Terminal()) is False


def test_measurements_have_names_a_learner_knows_and_units():
    text = str(sample())
    for raw in ("bytes_case", "bytes_moved", "projected_us"):
        assert raw not in text and raw not in sample()._repr_html_()
    assert "bytes moved: 120.56 KiB (123,456 B)" in text
    assert "projected time from the datasheets (roofline, not measured): H200 0.5 µs" in text


def test_a_report_that_did_not_pass_ends_with_the_hint_offer():
    r = sample()
    assert str(r).splitlines()[-1] == r.hint
    assert "gp-hint" in r._repr_html_() and 'hint(&#34;fusion.cos_cos&#34;)' in r._repr_html_()


def test_a_tolerance_never_reads_off_by_more_than_0_percent():
    from gpuprinciples.course.kit import compare_values
    assert compare_values(0.5, 1.0, 0.02) == ["answered 0.5; off by more than 2% (the tolerance)"]
    assert compare_values(0.5, 1.0, 0.001) == ["answered 0.5; off by more than 0.1% (the tolerance)"]
    assert compare_values(0.5, 1.0, 0.025) == ["answered 0.5; off by more than 2.5% (the tolerance)"]
    (exact,) = compare_values(15, 16, 0.0)
    assert "0%" not in exact and "exact" in exact
    assert compare_values(16, 16, 0.0) == []


def test_the_roof_fraction_is_a_sentence_for_people_and_numbers_for_tools():
    r = sample()
    r.measurements["roof"] = {"fraction": 0.62, "bound": "memory", "roof_ms": 0.1}
    r.measurements["timing ragged"] = {"time_ms": 1.0, "roof": {"fraction": 0.5}}
    r.notes.append("62% of this GPU's roof for this work (memory-bound: …).")
    text = str(r)
    assert "fraction" not in text and "roof_ms" not in text and "62% of this GPU's roof" in text
    assert json.loads(r.to_json())["measurements"]["roof"]["fraction"] == 0.62
