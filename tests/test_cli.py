"""The command line as a newcomer meets it: every command and option says what it does, every usage
error is one "error: …" line and exit code 2, and a closed pipe (`| head`) ends quietly."""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprinciples import cli

ROOT = Path(__file__).resolve().parent.parent


def _subcommands():
    parser = cli._parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub


def test_every_command_has_a_summary_and_a_description():
    sub = _subcommands()
    summaries = {a.dest: a.help for a in sub._choices_actions}
    assert set(summaries) == set(sub.choices) == {"doctor", "grade", "release", "ceilings", "bench", "gradebook",
                                                  "exercises", "figures"}
    for name, p in sub.choices.items():
        assert summaries[name], name
        assert p.description and p.description.rstrip(".").lower().startswith(summaries[name].lower()), name


def test_every_option_and_argument_has_help():
    for name, p in _subcommands().choices.items():
        for action in p._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"gpuprinciples {name} {action.option_strings or action.dest} has no help text"


def test_help_states_the_defaults(capsys):
    assert cli.main(["grade", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--timeout SECONDS" in text and "the exercise's own limit" in text and "GPUPRINCIPLES_TIMEOUT" in text
    assert cli.main(["release", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: solutions)" in text and "(default: lessons)" in text


@pytest.mark.parametrize("argv", [
    [],
    ["frobnicate"],
    ["grade"],
    ["grade", "fusion.cos_cos"],
    ["grade", "fusion.cos_coss", "x.py:f"],                      # unknown exercise
    ["grade", "fusion.cos_cos", "/nonexistent/x.py:f"],           # no such file
    ["grade", "fusion.cos_cos", "x.py"],                          # no :FUNCTION
    ["grade", "fusion.cos_cos", "x.py:f", "--timeout", "soon"],
    ["bench", "--only", "fusion.cos_cos,fusion.nope"],
    ["bench", "--grader", "--submission", "fusion.cos_cos"],                     # no =FILE.py:FUNCTION
    ["bench", "--grader", "--submission", "fusion.cos_cos=/nonexistent/x.py:f"],
    ["bench", "--grader", "--submission", f"fusion.nope={ROOT}/tests/submissions/core/raises.py:cos_cos"],
    ["figures", "--from", "/nonexistent/run.json"],
    ["gradebook", "/nonexistent", "--out", "/tmp/never"],
    ["gradebook", "/nonexistent"],
    ["doctor", "--jsn"],
], ids=lambda argv: " ".join(argv) or "(nothing)")
def test_every_usage_error_is_one_error_line_and_exit_2(argv, capsys):
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: "), captured.err
    assert "Traceback" not in captured.err


def test_release_refuses_a_folder_without_solutions_and_keeps_the_lessons(tmp_path, capsys):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "01-kept.ipynb").write_text("{}")
    assert cli.main(["release", "--solutions", str(tmp_path / "solutons"), "--lessons", str(lessons)]) == 2
    assert capsys.readouterr().err.startswith("error: no notebooks in ")
    assert (lessons / "01-kept.ipynb").read_text() == "{}"  # release() would have removed it


def test_a_closed_pipe_ends_quietly():
    """`gpuprinciples exercises | head`: the reader goes away before the listing is written."""
    proc = subprocess.Popen([sys.executable, "-m", "gpuprinciples.cli", "exercises"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # long before the child has imported torch and written a line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert err == ""


def test_bench_only_takes_the_model_benchmark_by_its_name(monkeypatch, capsys):
    """`bench --only decoder.decode_step` names lesson 10's model benchmark, which is no exercise: it is no usage
    error (here, without a GPU, bench then refuses to time: exit 1); as a --grader id it is one."""
    from gpuprinciples import bench, runtime
    monkeypatch.setattr(runtime, "HAS_CUDA", False)
    assert cli.main(["bench", "--only", f"fusion.cos_cos,{bench.MODEL_BENCH}"]) == 1
    assert "needs a GPU" in capsys.readouterr().err
    assert cli.main(["bench", "--grader", "--only", bench.MODEL_BENCH]) == 2
