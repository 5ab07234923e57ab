"""What a check found: one `Report`, the same for a notebook, a terminal and a tool."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

PASSED, FAILED, NOT_ATTEMPTED, ERROR = "passed", "failed", "not attempted", "error"


@dataclass
class CheckLine:
    """One row of a report: what was checked, whether it held, and the detail in words."""

    name: str
    passed: bool | None  # None: not run (e.g. timing without a GPU)
    detail: str = ""


@dataclass
class Report:
    exercise: str
    title: str
    mode: str  # "gpu": compiled and timed; "cpu": Triton interpreter, counters instead of clocks
    status: str = FAILED
    correct: bool | None = None
    reasons: list[str] = field(default_factory=list)
    checks: list[CheckLine] = field(default_factory=list)
    measurements: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    output: str = ""  # what the learner's code printed
    duration_s: float = 0.0
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

    # -- display -------------------------------------------------------------------------
    def _repr_html_(self) -> str:
        from .display import html
        return html(self)

    def _ipython_display_(self) -> None:
        # `check()` displays the report itself; when it is also the cell's value, show it once
        if self._shown:
            self._shown = False
            return
        from IPython.display import HTML, display
        display(HTML(self._repr_html_()))

    def __str__(self) -> str:
        from .display import text
        return text(self)
