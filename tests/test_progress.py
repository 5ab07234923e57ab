"""gpuprinciples.course.lab.progress: the bars the slow notebook cells show."""

import time

from gpuprinciples.course.lab.progress import bar, ticking


def test_bar_passes_every_item_through():
    assert list(bar(range(5), "steps")) == list(range(5))
    assert list(bar(iter("abc"), "steps", total=3, enabled=False)) == ["a", "b", "c"]


def test_ticking_redraws_while_the_block_runs(capsys):
    seen = ""
    with ticking("waiting for ranks", every_s=0.05):
        deadline = time.monotonic() + 20
        while seen.count("waiting for ranks:") < 3 and time.monotonic() < deadline:  # first draw + 2 ticks
            time.sleep(0.05)
            seen += capsys.readouterr().err
    assert seen.count("waiting for ranks:") >= 3


def test_ticking_disabled_draws_nothing(capsys):
    with ticking("quiet", enabled=False) as shown:
        assert shown is None
    assert "quiet" not in capsys.readouterr().err


def test_a_check_clears_its_progress_line_before_the_verdict(capsys, monkeypatch, tmp_path):
    """`check()` shows "grading …" while it works; the verdict must not sit under a leftover progress line."""
    from gpuprinciples.grader.grading import check
    monkeypatch.setenv("GPUPRINCIPLES_CACHE_DIR", str(tmp_path))
    with ticking("kept", every_s=0.05):
        time.sleep(0.1)
    kept = capsys.readouterr().err
    assert kept.split("\r")[-1].startswith("kept: 00:00")  # the default leaves the bar on screen
    check("factory.intensity", 0.5)
    captured = capsys.readouterr()
    assert "grading factory.intensity" in captured.err
    assert captured.err.split("\r")[-1].strip() == ""  # the last thing drawn on that line: blanks
    assert captured.out.startswith("FAILED  factory.intensity")
