"""Verdicts from evidence: pure functions from (exercise, case, what the child measured) to reasons.

Nothing here starts a process or runs learner code, so every rule is tested on made-up results in
milliseconds (tests/test_judge.py). `grading.py` gathers the evidence and builds the report.

Three rules hold throughout:
* a requirement is judged only on cases that ran to completion; with none it is "not judged"
  (`None`), never a pass;
* the same problem on several cases is one sentence that says on how many;
* every statistic that decides a verdict (medians, intervals, bandwidth) is computed here, in the
  grader's process, from the raw samples the child sent.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

import torch

from ..course.kit import BytesWithin, Case, LoadReason, compare_tensors, memory_bytes
from ..course.lab import roofline
from ..sandbox.channel import CaseResult, TimingResult
from . import honesty

# Device work after a timed call's window (median) may reach this fraction of the call, plus this floor,
# before the call is refused: the measure is a difference of two host round trips, so it has jitter.
AFTER_WINDOW_SLACK, AFTER_WINDOW_FLOOR_S = 0.1, 20e-6
# A time the memory system cannot deliver is a measurement error, not a speedup.
IMPLAUSIBLE_BANDWIDTH = 1.15
NOT_JUDGED = "not judged: no case ran to completion"


# ---------------------------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------------------------


@dataclass
class CaseVerdict:
    case: Case
    error: str | None = None  # the learner's function raised (then nothing else was judged)
    beyond_interpreter: bool = False  # ... because Triton's interpreter cannot run its kernel: not judged here
    problems: list[str] = field(default_factory=list)
    counts: dict | None = None  # the counters' evidence, when the function returned
    # what its kernels read that they must not (LoadReason): a failure, though its values may be right
    reads: list[str] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return self.error is None and not self.problems


def output_dtype(case: Case, want) -> torch.dtype:
    """The learner returns the dtype of the inputs; the reference may be float64 for accuracy."""
    first = next((a for a in case.args if isinstance(a, torch.Tensor)), None)
    return first.dtype if first is not None and first.is_floating_point() else want.dtype


def judge_case(exercise, case: Case, want, result: CaseResult, device: str) -> CaseVerdict:
    """Compare one case's outcome with the reference `want` computed in the grader."""
    verdict = CaseVerdict(case)
    if result.error is not None:
        verdict.error, verdict.beyond_interpreter = result.error, result.beyond_interpreter
        return verdict
    verdict.counts = result.counts
    where = f"case {case.label}"
    problems = verdict.problems
    if result.inputs_changed:
        problems.append(f"changed its input on {where}: inputs must be left as they were")
    elif result.inputs_changed_while_read:
        problems.append(f"changed its input on {where} while a kernel was reading it (and put it back afterwards): "
                        "the kernel read values that were not the input's; inputs must be left as they were")
    problems += honesty.sentences(result.watched, where)  # work hidden from the counters (observe.py)
    if result.aliases_input:
        problems.append(f"returned its input (or a view of it) on {where}: return a new tensor")
    if result.reuses_output:
        problems.append(f"returned memory it had already returned on an earlier call ({where}): "
                        "return a new tensor every call")
    custom = exercise.compare is not None
    if not custom and result.output_type != "torch.Tensor":
        problems.append(f"returned a {result.output_type}, not a torch.Tensor ({where})")
    if not custom and result.output_device not in (None, device):
        problems.append(f"returned a tensor on {result.output_device}, expected it on {device} ({where})")
    if problems:
        return verdict
    if not custom and case.decoy is not None and result.has_decoy_output:
        decoy_want = exercise.reference(*case.decoy, **case.kwargs)
        problems += [f"on the warm-up call (same shapes, other values): {p}" for p in compare_tensors(
            result.decoy_output, decoy_want, case, dtype=output_dtype(case, decoy_want))]
        if problems:
            return verdict
    if custom:
        reasons = exercise.compare(result.output, want, case)
        # an over-read is an over-read: it leads the report and does not make right values "wrong"
        verdict.reads = [r for r in reasons if isinstance(r, LoadReason)]
        problems += [r for r in reasons if not isinstance(r, LoadReason)]
    else:
        problems += compare_tensors(result.output, want, case, dtype=output_dtype(case, want))
    return verdict


# ---------------------------------------------------------------------------------------------
# Requirements and repeated reasons
# ---------------------------------------------------------------------------------------------


@dataclass
class RequirementVerdict:
    name: str
    passed: bool | None  # None: not judged (another mode's rule, or no case ran)
    detail: str = ""
    case: Case | None = None  # the case it failed on


def judge_requirements(requirements, verdicts: list[CaseVerdict], mode: str) -> list[RequirementVerdict]:
    """Each requirement on the cases that ran: its first failure, a pass, or not judged."""
    ran = [v for v in verdicts if v.counts is not None]
    out = []
    for requirement in requirements:
        name = requirement.describe()
        if mode not in requirement.modes:
            # what this machine does count of it may still fail it (PyTorch's copies on a GPU)
            partly = getattr(requirement, "evaluate_part", None)
            part = partly and next(((why, v.case) for v in ran if (why := partly(v.counts, v.case))), None)
            if part:
                out.append(RequirementVerdict(name, False, part[0], part[1]))
                continue
            where = "under the interpreter" if requirement.modes == ("cpu",) else "on a GPU"
            out.append(RequirementVerdict(name, None, f"counted {where} only: not measured on this machine"))
            continue
        if not ran:
            out.append(RequirementVerdict(name, None, NOT_JUDGED))
            continue
        failure = next(((why, v.case) for v in ran if (why := requirement.evaluate(v.counts, v.case))), None)
        raised = getattr(requirement, "evaluate_error", None)  # a case that raised may still fail a requirement
        failure = failure or (raised and next(((why, v.case) for v in verdicts if v.error is not None
                                               and (why := raised(v.error, v.case))), None))
        # a tick only with evidence: "compiles for sm_90" needs a compiled kernel, not a plain-PyTorch answer
        seen = getattr(requirement, "has_evidence", None)
        witnessed = [v for v in ran if seen is None or seen(v.counts)]
        if failure:
            out.append(RequirementVerdict(name, False, failure[0], failure[1]))
        elif not witnessed:
            out.append(RequirementVerdict(name, None, f"not judged: {requirement.no_evidence}"))
        else:
            out.append(RequirementVerdict(name, True, f"on {len(witnessed)} of {len(verdicts)} cases"))
    return out


# an index tuple "(0, 3)", a number "2,830" "1e-05" "-0.41", a dtype "torch.bfloat16"
_NUMBER = re.compile(r"\((?:\s*\d+\s*,?)+\)|[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:e[-+]?\d+)?|torch\.\w+")


def cause(text: str, case: Case) -> str:
    """What a problem is, without the case it was seen on: its case, numbers and dtypes blanked out, so
    "4 of 4 values wrong (case A) ... got 0.79" and "2,830 of 2,830 values wrong (case B) ..." are one cause."""
    return _NUMBER.sub("#", text.replace(case.label, "\0"))


def merge_by_case(problems: list[tuple[str, Case]], total: int) -> list[str]:
    """One sentence per cause however many cases had it: "... on 6 of 6 cases (first: (1,) normal) ...",
    the first case's details standing for the rest."""
    groups: dict[str, list[tuple[str, Case]]] = {}
    for text, case in problems:
        groups.setdefault(cause(text, case), []).append((text, case))
    sentences = []
    for group in groups.values():
        text, case = group[0]
        if len(group) > 1:
            text = text.replace(f"case {case.label}", f"{len(group)} of {total} cases (first: {case.label})", 1)
        sentences.append(text)
    return sentences


def case_reasons(verdicts: list[CaseVerdict]) -> list[str]:
    """The reasons of every case that was wrong, each problem once; what a kernel read first (where it read
    what it must not, a wrong value is most likely its consequence)."""
    problems = [(f"raised on case {v.case.label}: {v.error}", v.case) for v in verdicts if v.error is not None]
    problems += [(p, v.case) for v in verdicts for p in v.reads]
    problems += [(p, v.case) for v in verdicts for p in v.problems]
    return merge_by_case(problems, len(verdicts))


def evidence_case(verdicts: list[CaseVerdict], requirements: list[RequirementVerdict]) -> CaseVerdict | None:
    """The case whose counts a report shows: the one a requirement failed on, else the largest that ran,
    so the totals shown are those of the case the reasons name."""
    failed = next((r.case for r in requirements if r.passed is False and r.case is not None), None)
    ran = [v for v in verdicts if v.counts is not None]
    for v in ran:
        if v.case is failed:
            return v
    return max(ran, key=lambda v: case_size(v.case), default=None)


def case_size(case: Case) -> int:
    return sum(a.numel() for a in case.args if isinstance(a, torch.Tensor))


def byte_summary(exercise, case: Case, counts: dict, bandwidths: dict[str, float]) -> dict:
    """Bytes moved against the minimum, and what they would cost on named GPUs: a roofline projection
    from the datasheets (`bandwidths`, bytes/s), never a measurement."""
    moved = memory_bytes(counts)
    out = {"bytes_case": case.label, "bytes_moved": moved, "launches": counts["triton_launches"]}
    for requirement in exercise.requirements:
        if isinstance(requirement, BytesWithin):
            least = requirement.minimum(case)
            out["bytes_minimum"] = least
            out["bytes_ratio"] = round(moved / least, 3) if least else None
    if moved > 0 and counts["triton_launches"]:  # nothing moved by a kernel: nothing to project (never "0 µs")
        out["projected_us (roofline, not measured)"] = {name: float(f"{moved / bw * 1e6:.3g}")
                                                        for name, bw in bandwidths.items()}
    return out


# ---------------------------------------------------------------------------------------------
# Timing on a GPU
# ---------------------------------------------------------------------------------------------


def timed_output(out) -> bool:
    """What a timed call may return: a plain tensor, or a tuple/list of them (a backward's dq, dk, dv)."""
    return type(out) is torch.Tensor or (isinstance(out, (tuple, list)) and bool(out)
                                         and all(type(t) is torch.Tensor for t in out))


def fingerprint(out, sample_seed: int) -> dict:
    """A few thousand sampled values and two sums: enough to tell a right output from a wrong one
    without sending it whole across the pipe. Several outputs: each sampled, in order, as one."""
    if isinstance(out, (tuple, list)):
        parts = [fingerprint(t, sample_seed) for t in out]
        return {"sample": torch.cat([p["sample"] for p in parts]), "sum": sum(p["sum"] for p in parts),
                "abs_sum": sum(p["abs_sum"] for p in parts), "shape": [p["shape"] for p in parts]}
    flat = out.detach().reshape(-1)
    gen = torch.Generator(device="cpu").manual_seed(sample_seed)
    idx = torch.randint(0, max(flat.numel(), 1), (4096,), generator=gen).to(flat.device)
    return {"sample": flat[idx].float().cpu(), "sum": float(flat.double().sum()),
            "abs_sum": float(flat.double().abs().sum()), "shape": list(out.shape)}


def round_seed(seed: int, call: int) -> int:
    """The seed of timed call `call`'s inputs (call 0: the untimed first call): new values for every call, so a
    cache keyed on values (not only buffers) never hits, and the grader can make any call's inputs again."""
    return (seed + call * 0x9E3779B97F4A7C15) % 2**62


def fingerprints_match(theirs, mine: dict, rtol: float = 2e-2, atol: float = 2e-2) -> bool:
    if not isinstance(theirs, dict) or theirs.get("shape") != mine["shape"]:
        return False
    sample = theirs.get("sample")
    if not isinstance(sample, torch.Tensor) or sample.shape != mine["sample"].shape:
        return False
    if not torch.allclose(sample.float(), mine["sample"], rtol=rtol, atol=atol, equal_nan=True):
        return False
    scale = max(abs(mine["abs_sum"]), 1.0)
    try:
        return (abs(float(theirs["sum"]) - mine["sum"]) <= 1e-3 * scale + 1e-2
                and abs(float(theirs["abs_sum"]) - mine["abs_sum"]) <= 1e-3 * scale + 1e-2)
    except (KeyError, TypeError, ValueError):
        return False


@dataclass
class TimingVerdict:
    reasons: list[str] = field(default_factory=list)
    implausible: str | None = None  # a measurement error: the report is an ERROR, not a fail
    checks: list[tuple[str, bool | None, str]] = field(default_factory=list)
    measurements: dict = field(default_factory=dict)
    roof: str = ""  # the kernel's fraction of this GPU's roof, in a sentence
    # every reason is a speedup whose median reached its bar while its interval's lower end did not: the rounds
    # were too noisy to decide, and another timing may (grading times once more, never a third time)
    undecided: bool = False


def judge_timing(spec, requirements, args: tuple, references: list[dict], result: TimingResult,
                 copy_bandwidth: float, earlier: dict[str, list[float]] | None = None, *,
                 peak_flops: float | None = None) -> TimingVerdict:
    """The timed calls' outputs, requirements and speed, from the raw samples.

    `references`: {call i: the grader's fingerprint of the right output on call i's inputs} for the calls it
    checked (call 0 is the untimed first call), or a list, call i then on variant i % len(references).
    `earlier`: samples of baselines timed in an earlier check (not in `result.rounds`), compared
    unpaired. `peak_flops`: the matmul rate measured here for the inputs' dtype (roofline.matmul_peak),
    which with `copy_bandwidth` makes this GPU's roof for the work: every verdict states its fraction."""
    from ..measure.timing import bootstrap_speedup, bootstrap_speedup_unpaired

    verdict = TimingVerdict()
    if result.error:
        verdict.reasons.append(f"failed while being timed: {result.error}")
        return verdict
    if not result.fingerprints or not result.rounds:
        verdict.reasons.append("the timing run sent back no timed calls")
        return verdict
    if not isinstance(references, dict):
        references = {i: references[i % len(references)] for i in range(len(result.fingerprints))}
    checked = [i for i in range(len(result.fingerprints)) if i in references]
    wrong = [i for i in checked if not fingerprints_match(result.fingerprints[i], references[i])]
    if wrong:
        verdict.reasons.append(
            f"wrong on the large timing input: {len(wrong)} of {len(checked)} calls returned an output "
            "that does not match the reference computed by the grader (between calls the inputs' values changed, "
            "in place: the answer must be computed from them every call)")
        return verdict
    names = list(result.rounds[0])
    samples = {name: [r[name] for r in result.rounds] for name in names}
    medians = {name: statistics.median(s) for name, s in samples.items()}
    yours = medians["yours"]
    least_bytes, flops = spec.min_bytes(args), spec.flops(args)
    achieved = least_bytes / yours
    m = verdict.measurements
    m["time_ms"] = {name: round(t * 1e3, 4) for name, t in medians.items()}
    m["bandwidth_TBps"] = round(achieved / 1e12, 3)
    m["copy_ceiling_TBps"] = round(copy_bandwidth / 1e12, 3)
    if flops:
        m["TFLOPps"] = round(flops / yours / 1e12, 2)
    fraction, bound, roof_s = roofline.fraction_of_roof(yours, flops, least_bytes, peak_flops, copy_bandwidth)
    # significant digits, not decimals: an overhead-bound call can sit far below 0.1% of the roof, and 0.0 would
    # read as "no fraction stated"
    m["roof"] = {"fraction": float(f"{fraction:.3g}"), "bound": bound, "roof_ms": float(f"{roof_s * 1e3:.4g}")}
    verdict.roof = roofline.describe_roof(fraction, bound, roof_s, flops, least_bytes, peak_flops, copy_bandwidth)
    speedups = {}
    for base in spec.baselines:
        if base in samples:
            s = bootstrap_speedup(samples["yours"], samples[base], a="yours", b=base)
        elif earlier and base in earlier:
            s = bootstrap_speedup_unpaired(samples["yours"], earlier[base], a="yours", b=base)
            m["time_ms"][base] = round(statistics.median(earlier[base]) * 1e3, 4)
        else:
            verdict.reasons.append(f"the baseline {base!r} was not timed")
            return verdict
        speedups[base] = (s.ratio, s.ci_low, s.ci_high)
    m["speedup"] = {name: [round(v, 3) for v in s] for name, s in speedups.items()}
    after = statistics.median(result.after_window.get("yours") or [0.0])
    m["after_window_us"] = round(after * 1e6, 1)
    # The timed calls ran under the counters too: they are held to the same requirements.
    timed_case = Case("of the timing input", args)
    broken: dict[str, str] = {}
    elsewhere = {k: v for counts in result.timed_counts for k, v in (counts.get("other_stream_work") or {}).items()}
    if elsewhere:  # the window is a pair of events on the current stream: another stream's work is not in it
        broken["stream"] = ("work ran on another CUDA stream than the current one (" + ", ".join(
            f"{k} ×{v}" for k, v in elsewhere.items()) + "), outside the timed window (a pair of events on "
            "the current stream); launch on the current stream")
    for counts in result.timed_counts:
        for requirement in requirements:
            if "gpu" in requirement.modes and requirement.describe() not in broken:
                why = requirement.evaluate(counts, timed_case)
                if why:
                    broken[requirement.describe()] = why
    if broken:
        verdict.reasons += [f"in the timed calls: {why}" for why in broken.values()]
        return verdict
    if after > AFTER_WINDOW_SLACK * yours + AFTER_WINDOW_FLOOR_S:
        verdict.reasons.append(
            f"the GPU kept working {after * 1e6:.0f} µs after each timed call returned (the call itself took "
            f"{yours * 1e6:.0f} µs): work on a side stream, outside the timed window, is not free; make the "
            "current stream wait for it before returning")
        return verdict
    # Only now, the evidence of work outside the window judged (a side stream fails with its own sentence): a time
    # beyond the memory system is a measurement error, not a speedup
    if achieved > IMPLAUSIBLE_BANDWIDTH * copy_bandwidth:
        verdict.implausible = (f"implausible timing: {achieved / 1e12:.2f} TB/s is beyond this GPU's measured "
                               f"{copy_bandwidth / 1e12:.2f} TB/s; the timed calls did not do the work")
        return verdict
    fraction = achieved / copy_bandwidth
    if spec.min_bandwidth_fraction is not None:
        good = fraction >= spec.min_bandwidth_fraction
        verdict.checks.append((f"≥ {spec.min_bandwidth_fraction:.0%} of copy bandwidth", good,
                               f"{fraction:.0%} ({achieved / 1e12:.2f} TB/s)"))
        if not good:
            verdict.reasons.append(f"reached {fraction:.0%} of this GPU's copy bandwidth; the target is "
                                   f"{spec.min_bandwidth_fraction:.0%}")
    undecided = []
    for base, (median, low, high) in speedups.items():
        need = spec.min_speedup.get(base)
        detail = f"{median:.2f}× (95% interval {low:.2f}–{high:.2f}×)"
        good = None if need is None else low >= need
        verdict.checks.append((f"speedup over {base}" + (f" ≥ {need:g}×" if need else ""), good, detail))
        if good is False:
            verdict.reasons.append(f"speedup over {base} is {detail}; its interval must reach {need:g}×")
            undecided.append(median >= need)
    verdict.undecided = bool(undecided) and all(undecided) and len(undecided) == len(verdict.reasons)
    return verdict
