"""A report in three forms: the same facts in HTML, text and JSON."""

import json

from gpuprinciples.report import CheckLine, Report


def sample() -> Report:
    r = Report(exercise="fusion.cos_cos", title="cos(cos(x))", mode="cpu")
    r.checks.append(CheckLine("correct", True, "6 of 6 cases"))
    r.checks.append(CheckLine("at most 1 kernel launch", False, "2 launches <b>"))
    r.fail("2 Triton launches per call")
    r.measurements.update({"bytes_moved": 123456, "counts": {"raw": 1}})
    r.output = "hello"
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
