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
    assert set(summaries) == set(sub.choices) == {"doctor", "grade", "hint", "release", "ceilings", "bench",
                                                  "gradebook", "exercises", "figures"}
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
    ["grade", "factory.intensity", "x.py:f"],                     # a value exercise: no such file
    ["grade", "factory.intensity", "some words"],                 # neither a value nor FILE.py:NAME
    ["hint", "fusion.cos_coss"],
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
    from gpuprinciples.instructor import bench
    from gpuprinciples.machine import runtime
    monkeypatch.setattr(runtime, "HAS_CUDA", False)
    assert cli.main(["bench", "--only", f"fusion.cos_cos,{bench.MODEL_BENCH}"]) == 1
    assert "needs a GPU" in capsys.readouterr().err
    assert cli.main(["bench", "--grader", "--only", bench.MODEL_BENCH]) == 2


def _grade_cli(*args, env=None, **kw):
    import os
    return subprocess.run([sys.executable, "-m", "gpuprinciples.cli", "grade", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})}, **kw)


def test_a_closed_pipe_keeps_the_verdict_of_a_failed_grade():
    """`gpuprinciples grade ... --json | head -1` must still exit 1 for a fail: the exit code is the contract."""
    proc = subprocess.Popen([sys.executable, "-m", "gpuprinciples.cli", "grade", "fusion.cos_cos",
                             "tests/submissions/core/two_launches.py:cos_cos", "--json"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()  # the reader takes one line and goes away, as `head -1` does
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert first.strip() == b"{"
    assert proc.wait(timeout=300) == 1, err
    assert "Traceback" not in err


def test_a_value_exercise_is_graded_from_the_shell(tmp_path):
    """A value on the line, or FILE.py:NAME naming a literal (arithmetic allowed, nothing run)."""
    import json
    right = _grade_cli("factory.intensity", "1/12", "--json")
    assert right.returncode == 0, right.stdout + right.stderr
    assert json.loads(right.stdout)["passed"] is True
    answer = tmp_path / "answer.py"
    answer.write_text("intensity = 0.5\nintensity = 1 / 12  # the last binding counts, as when the file runs\n")
    assert _grade_cli("factory.intensity", f"{answer}:intensity").returncode == 0
    answer.write_text("intensity = 0.5\n")
    wrong = _grade_cli("factory.intensity", f"{answer}:intensity", env={"NO_COLOR": "1"})
    assert wrong.returncode == 1 and wrong.stdout.startswith("FAILED  factory.intensity")
    assert "gpuprinciples hint factory.intensity" in wrong.stdout


def test_a_value_exercise_refuses_code_with_a_sentence_on_how_it_is_answered(tmp_path, capsys):
    answer = tmp_path / "answer.py"
    answer.write_text("import os\nintensity = os.system('echo ran')\n")
    assert cli.main(["grade", "factory.intensity", f"{answer}:intensity"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 'intensity' in ") and "not a literal value" in err
    assert "a value exercise is answered with a value, not a function" in err and "check(EXERCISE, value)" in err
    assert "give the name of the function" not in err


def test_a_timeout_names_the_command_lines_flag():
    ran = _grade_cli("fusion.cos_cos", "tests/submissions/fusion/cos_cos_hangs.py:cos_cos", "--timeout", "3")
    assert ran.returncode == 1
    assert "`--timeout SECONDS` allows longer" in ran.stdout and "check(..., timeout" not in ran.stdout


def test_ceilings_prints_a_table_with_units(capsys, monkeypatch):
    from gpuprinciples.machine import runtime
    from gpuprinciples.measure import calibrate
    monkeypatch.setattr(runtime, "HAS_CUDA", False)
    monkeypatch.setattr(calibrate, "measure_cpu_ceilings",
                        lambda: calibrate.Ceilings("cpu", "a test CPU", 38.4e9, 0.15e12, measured_at=0, quick=True))
    assert cli.main(["ceilings"]) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "copy_bandwidth" not in out  # no raw dict, no raw keys
    assert "copy bandwidth (read + write)  38.4 GB/s" in out and "fp32 matmul" in out and "TFLOP/s" in out
    assert "a test CPU" in out


def test_hint_from_the_shell(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GPUPRINCIPLES_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("GPUPRINCIPLES_HINTS", raising=False)
    assert cli.main(["hint", "fusion.cos_cos"]) == 0
    assert capsys.readouterr().out.startswith("Hint 1 of ")
