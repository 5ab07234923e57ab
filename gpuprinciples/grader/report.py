"""What a check found: one `Report`, the same for a notebook, a terminal and a tool."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

from .display import Shown

PASSED, FAILED, NOT_ATTEMPTED, ERROR = "passed", "failed", "not attempted", "error"
# where `check()` appends each report as a JSON line, when set: the instructor's gradebook sets it for the
# notebooks it runs (instructor/gradebook.py) and reads the lines back
LOG_ENV = "GPUPRINCIPLES_REPORT_LOG"


@dataclass
class CheckLine:
    """One row of a report: what was checked, whether it held, and the detail in words."""

    name: str
    passed: bool | None  # None: not judged (another mode's rule, no case ran, timing without a GPU)
    detail: str = ""


@dataclass
class Report(Shown):
    exercise: str
    title: str
    mode: str  # "gpu": compiled and timed; "cpu": Triton interpreter, counters instead of clocks
    kind: str = "function"  # or "value": a number or a choice, judged in the notebook's process
    status: str = FAILED
    correct: bool | None = None
    reasons: list[str] = field(default_factory=list)
    checks: list[CheckLine] = field(default_factory=list)
    measurements: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    output: str = ""  # what the learner's code printed
    duration_s: float = 0.0
    phases_s: dict = field(default_factory=dict)  # where the check's time went: loading, cases, timing
    hint: str = ""  # on a report that did not pass: how to ask for the next hint (hints.offer)
    _shown: bool = field(default=False, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def fail(self, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)
        if self.status == PASSED or self.status == FAILED:
            self.status = FAILED

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("_shown")
        d["passed"] = self.passed
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)


def log_report(report) -> None:
    """Append the report as one JSON line to $GPUPRINCIPLES_REPORT_LOG (called by `check()`)."""
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(report.to_dict(), default=str) + "\n")
