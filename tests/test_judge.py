"""The judge on made-up evidence: every rule of a verdict, without a child process (milliseconds)."""

import json

import pytest
import torch

from gpuprinciples.course import catalog
from gpuprinciples.course.kit import Case, LaunchesTriton, MaxLaunches, Timing
from gpuprinciples.grader import judge
from gpuprinciples.grader.report import CheckLine, Report
from gpuprinciples.sandbox import channel
from gpuprinciples.sandbox.channel import CaseResult, TimingResult

COS = catalog.get("fusion.cos_cos")


def counts(launches=1, **extra):
    return {"triton_launches": launches, "kernel_names": ["k"] * launches, "load_bytes": 8, "store_bytes": 8,
            "torch_ops": {}, "torch_compute_ops": {}, "torch_bytes": 0, "largest_new_numel": 0,
            "cached_reread_bytes": 0, **extra}


def case(label, n=4):
    return Case(label, (torch.arange(n, dtype=torch.float32),))


def ran(c, k=1):
    return judge.CaseVerdict(c, counts=counts(k))


def raised(c, error="ZeroDivisionError: division by zero"):
    return judge.CaseVerdict(c, error=error)


# -- requirements: judged only on cases that ran ---------------------------------------------------


def test_a_requirement_with_no_case_that_ran_is_not_judged():
    verdicts = [raised(case("a")), raised(case("b"))]
    lines = judge.judge_requirements((LaunchesTriton(), MaxLaunches(1)), verdicts, "cpu")
    assert [line.passed for line in lines] == [None, None]
    assert all(line.detail == judge.NOT_JUDGED for line in lines)


def test_a_requirement_is_judged_on_the_cases_that_ran_and_names_the_failing_one():
    a, b, c = case("a"), case("b"), case("c")
    lines = judge.judge_requirements((MaxLaunches(1),), [raised(a), ran(b, 1), ran(c, 3)], "cpu")
    assert lines[0].passed is False and lines[0].case is c and "3 triton launches" in lines[0].detail.lower()
    lines = judge.judge_requirements((MaxLaunches(1),), [raised(a), ran(b, 1)], "cpu")
    assert lines[0].passed is True and lines[0].detail == "on 1 of 2 cases"


def test_a_requirement_of_another_mode_is_not_judged():
    byte_rule = next(r for r in COS.requirements if "bytes" in r.describe())
    (line,) = judge.judge_requirements((byte_rule,), [ran(case("a"))], "gpu")
    assert line.passed is None and "interpreter" in line.detail


# -- one sentence for one problem ------------------------------------------------------------------


def test_the_same_error_on_every_case_is_one_sentence_with_a_count():
    verdicts = [raised(case(f"c{i}")) for i in range(6)]
    (sentence,) = judge.case_reasons(verdicts)
    assert sentence.startswith("raised on 6 of 6 cases (first: c0): ZeroDivisionError")


def test_different_problems_stay_apart():
    verdicts = [raised(case("a")), raised(case("b"), "ValueError: no"), ran(case("c"))]
    assert len(judge.case_reasons(verdicts)) == 2


def test_the_counts_shown_are_those_of_the_case_a_requirement_failed_on():
    small, large = case("small", 4), case("large", 400)
    verdicts = [ran(small, 3), ran(large, 1)]
    lines = judge.judge_requirements((MaxLaunches(1),), verdicts, "cpu")
    assert judge.evidence_case(verdicts, lines).case is small
    lines = judge.judge_requirements((MaxLaunches(5),), verdicts, "cpu")
    assert judge.evidence_case(verdicts, lines).case is large


# -- one case ----------------------------------------------------------------------------------


def result(output, **fields):
    return CaseResult(index=0, output=output, counts=counts(), **fields)


def test_a_right_output_passes_and_each_kind_of_wrong_fails_with_its_sentence():
    c = case("a")
    want = COS.reference(*c.args)
    assert judge.judge_case(COS, c, want, result(want.float()), "cpu").correct
    wrong = judge.judge_case(COS, c, want, result(torch.zeros(4)), "cpu")
    assert not wrong.correct and "values wrong" in wrong.problems[0]
    aliased = judge.judge_case(COS, c, want, result(want.float(), aliases_input=True), "cpu")
    assert "returned its input" in aliased.problems[0]
    other_type = judge.judge_case(COS, c, want, result("<a numpy.ndarray>", output_type="numpy.ndarray"), "cpu")
    assert "not a torch.Tensor" in other_type.problems[0]
    elsewhere = judge.judge_case(COS, c, want, result(want.float(), output_device="cuda"), "cpu")
    assert "expected it on cpu" in elsewhere.problems[0]


def test_a_wrong_warm_up_call_fails_even_when_the_graded_call_is_right():
    c = Case("a", (torch.arange(4.0),), decoy=(torch.ones(4),))
    want = COS.reference(*c.args)
    verdict = judge.judge_case(COS, c, want, result(want.float(), has_decoy_output=True,
                                                     decoy_output=torch.zeros(4)), "cpu")
    assert "on the warm-up call" in verdict.problems[0]


# -- the messages: a reply that does not fit its schema is refused ----------------------------------


def test_replies_are_parsed_against_their_schema():
    wire = CaseResult(index=2, error=None, counts={"a": 1}).to_wire()
    parsed = channel.parse({**wire, "nonce": "x", "surprise": 1}, (CaseResult,))
    assert isinstance(parsed, CaseResult) and parsed.index == 2 and not hasattr(parsed, "surprise")
    with pytest.raises(channel.ChannelGarbled):
        channel.parse({**wire, "index": "2"}, (CaseResult,))
    with pytest.raises(channel.ChannelGarbled):
        channel.parse({**wire, "inputs_changed": 0}, (CaseResult,))
    with pytest.raises(channel.ChannelGarbled):
        channel.parse(TimingResult().to_wire(), (CaseResult,))
    with pytest.raises(channel.ChannelGarbled):
        channel.parse(["case"], (CaseResult,))


# -- timing: statistics and every timed output judged here ------------------------------------------


def timing_spec(**options):
    return Timing(inputs=lambda gen, device: (torch.ones(1000),), baselines={"eager": None},
                  min_bytes=lambda args: 8000, **options)


def references(k=3):
    return [judge.fingerprint(torch.full((1000,), float(v)), 7) for v in range(k)]


def timed(rounds, *, fingerprints=None, **fields):
    refs = references()
    fps = fingerprints if fingerprints is not None else [refs[i % 3] for i in range(len(rounds) + 1)]
    return TimingResult(rounds=rounds, fingerprints=fps, **fields)


ARGS = (torch.ones(1000),)


def test_the_speedup_is_computed_here_from_the_raw_rounds():
    rounds = [{"yours": 1e-5, "eager": 2e-5 * (1 + 0.01 * i)} for i in range(20)]
    verdict = judge.judge_timing(timing_spec(min_speedup={"eager": 1.5}), (), ARGS, references(), timed(rounds), 4e12)
    assert not verdict.reasons
    low = verdict.measurements["speedup"]["eager"][1]
    assert 1.9 < low < 2.2
    slow = [{"yours": 1e-5, "eager": 1.2e-5} for _ in range(20)]
    verdict = judge.judge_timing(timing_spec(min_speedup={"eager": 1.5}), (), ARGS, references(), timed(slow), 4e12)
    assert "its interval must reach 1.5" in verdict.reasons[0] and not verdict.undecided


def test_a_median_at_the_bar_with_a_wide_interval_is_undecided_not_failed_twice():
    """Rounds whose median reaches the bar but whose interval dips below it (noise: the H200 once timed lesson 10's
    reference at 0.98x, interval 0.86-0.99x, against a 0.9x bar) are timed again by grading; a median below
    the bar, or another reason beside it, is a verdict at once."""
    noisy = [{"yours": 1e-5, "eager": 1e-5 * (0.8 if i % 5 < 2 else 1.0)} for i in range(21)]
    verdict = judge.judge_timing(timing_spec(min_speedup={"eager": 0.9}), (), ARGS, references(), timed(noisy), 4e12)
    median, low, _ = verdict.measurements["speedup"]["eager"]
    assert low < 0.9 <= median and verdict.reasons and verdict.undecided
    below = [{"yours": 1e-5, "eager": 1e-5 * (0.85 if i % 2 else 0.8)} for i in range(21)]
    verdict = judge.judge_timing(timing_spec(min_speedup={"eager": 0.9}), (), ARGS, references(), timed(below), 4e12)
    assert verdict.reasons and not verdict.undecided
    both = timing_spec(min_speedup={"eager": 0.9}, min_bandwidth_fraction=0.99)
    verdict = judge.judge_timing(both, (), ARGS, references(), timed(noisy), 4e12)
    assert len(verdict.reasons) == 2 and not verdict.undecided


def test_an_output_replayed_after_the_inputs_changed_fails():
    rounds = [{"yours": 1e-5, "eager": 2e-5} for _ in range(6)]
    replayed = [references()[0]] * 7  # the answer of variant 0, whatever the inputs held
    verdict = judge.judge_timing(timing_spec(), (), ARGS, references(), timed(rounds, fingerprints=replayed), 4e12)
    assert "inputs' values changed" in verdict.reasons[0] and "4 of 7 calls" in verdict.reasons[0]


def test_a_time_beyond_the_memory_system_is_a_measurement_error():
    rounds = [{"yours": 1e-12, "eager": 2e-5} for _ in range(6)]
    verdict = judge.judge_timing(timing_spec(), (), ARGS, references(), timed(rounds), 4e12)
    assert verdict.implausible and "implausible" in verdict.implausible


def test_work_left_on_a_side_stream_fails():
    rounds = [{"yours": 1e-5, "eager": 2e-5} for _ in range(6)]
    late = timed(rounds, after_window={"yours": [5e-5] * 6})
    assert "kept working" in judge.judge_timing(timing_spec(), (), ARGS, references(), late, 4e12).reasons[0]
    other = timed(rounds, timed_counts=[counts(other_stream_work={"k": 2})])
    assert "another cuda stream" in judge.judge_timing(timing_spec(), (), ARGS, references(), other,
                                                       4e12).reasons[0].lower()


def test_the_timed_calls_are_held_to_the_gpu_requirements():
    rounds = [{"yours": 1e-5, "eager": 2e-5} for _ in range(6)]
    verdict = judge.judge_timing(timing_spec(), (MaxLaunches(1),), ARGS, references(),
                                 timed(rounds, timed_counts=[counts(3)]), 4e12)
    assert verdict.reasons[0].startswith("in the timed calls: 3 Triton launches")


def test_a_timing_run_that_sent_nothing_is_not_a_pass():
    verdict = judge.judge_timing(timing_spec(), (), ARGS, references(), TimingResult(), 4e12)
    assert verdict.reasons == ["the timing run sent back no timed calls"]


# -- the report: each reason once; null for what was not judged ----------------------------------------


def test_a_failed_row_is_shown_once_and_not_judged_is_null_in_json():
    r = Report(exercise="x", title="t", mode="cpu")
    r.checks.append(CheckLine("at most 1 kernel launch", False, "3 Triton launches per call"))
    r.checks.append(CheckLine("moves at most 1.1 × the minimum bytes", None, judge.NOT_JUDGED))
    r.fail("3 Triton launches per call")
    r.fail("raised on case a: boom")
    text = str(r)
    assert text.count("3 Triton launches per call") == 1 and "  FAILED      raised on case a: boom" in text
    assert r._repr_html_().count("3 Triton launches per call") == 1
    assert json.loads(r.to_json())["checks"][1]["passed"] is None


def test_a_value_check_carries_no_interpreter_banner():
    r = Report(exercise="x", title="t", mode="cpu", kind="value", status="passed")
    assert "interpreter" not in str(r).lower() and "interpreter" not in r._repr_html_().lower()
    assert "interpreter" in str(Report(exercise="x", title="t", mode="cpu")).lower()


def test_an_unanswered_value_exercise_is_not_attempted_and_points_to_this_cell():
    from gpuprinciples.grader.grading import grade
    from gpuprinciples.grader.report import NOT_ATTEMPTED
    for empty in (None, ...):
        r = grade("bounds.ridge_h100", empty)
        assert r.status == NOT_ATTEMPTED
        assert r.reasons == ["not attempted yet: set your answer in this cell"]
        assert "cell above" not in str(r)


def test_the_same_cause_on_several_cases_is_one_sentence_with_a_count_whatever_the_numbers():
    """The values, indices and dtypes of a wrong output differ between cases; the cause does not."""
    a, b, c = case("(3, 161) special float32"), case("(1,) normal float32"), case("(2, 5, 22) normal bfloat16")
    wrong = "{n} of {m} values wrong (case {label}); first at index {i}: got {g}, expected 0.61 (tolerance {t})"
    problems = [(wrong.format(n=429, m=483, label=a.label, i="(0, 0)", g=0.6, t="1e-05 for torch.float32"), a),
                (wrong.format(n=1, m=1, label=b.label, i="(0,)", g=0.9, t="1e-05 for torch.float32"), b),
                (wrong.format(n="1,095", m="1,249", label=c.label, i="(0, 1, 2)", g=-3.2e-06,
                              t="0.016 for torch.bfloat16"), c),
                (f"NaN in the wrong places (case {b.label})", b)]
    sentences = judge.merge_by_case(problems, 7)
    assert len(sentences) == 2
    assert sentences[0].startswith("429 of 483 values wrong (3 of 7 cases (first: (3, 161) special float32))")
    assert sentences[1] == f"NaN in the wrong places (case {b.label})"
