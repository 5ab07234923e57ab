"""Hints in tiers: each `hint(id)` reveals the next hint; the solution comes last.

The solution is shown only once the exercise's check has passed, or after the last hint. State
(how many hints each exercise has shown, which checks passed) lives in a small JSON file,
`hints.json` under `$GPUPRINCIPLES_CACHE_DIR` (default `~/.cache/gpuprinciples`); `check()`
records a pass through `record_result()`. Only a learner's own checks belong there: every pytest run
in the repository (the solution notebooks under nbval pass every check) gets a cache folder of its own
from the repository's conftest.py, and the gradebook turns hints off.

For a graded session an instructor sets `GPUPRINCIPLES_HINTS=off`: `hint()` then says hints are
off, and no state is read or written.
"""

from __future__ import annotations

import inspect
import json
import os
import tempfile
import textwrap
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

OFF_VALUES = ("off", "0", "false", "no")
OFF_TEXT = "Hints are off for this session (GPUPRINCIPLES_HINTS=off): your instructor turned them off."


def hints_enabled() -> bool:
    return os.environ.get("GPUPRINCIPLES_HINTS", "on").strip().lower() not in OFF_VALUES


def state_path() -> Path:
    root = os.environ.get("GPUPRINCIPLES_CACHE_DIR") or Path.home() / ".cache" / "gpuprinciples"
    return Path(root) / "hints.json"


def load_state() -> dict:
    try:
        state = json.loads(state_path().read_text())
    except (OSError, ValueError):
        state = {}
    return {"shown": dict(state.get("shown", {})), "passed": sorted(set(state.get("passed", [])))}


def _save_state(state: dict) -> None:
    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # write then rename: two kernels saving at once never leave half a file
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(f.name, path)


def record_result(report) -> None:
    """Called by `check()`: remember that an exercise passed (this unlocks its solution)."""
    if not hints_enabled() or not report.passed:
        return
    state = load_state()
    if report.exercise not in state["passed"]:
        state["passed"] = sorted(state["passed"] + [report.exercise])
        _save_state(state)


@dataclass
class Hint:
    exercise: str
    kind: str  # "hint", "solution", "off" or "unknown"
    text: str

    def __str__(self) -> str:
        return self.text


def reveal(exercise_id: str) -> Hint:
    """The next tier for this exercise (and move to it): a hint, then the solution."""
    if not hints_enabled():
        return Hint(exercise_id, "off", OFF_TEXT)
    from . import catalog
    try:
        exercise = catalog.get(exercise_id)
    except KeyError as exc:
        return Hint(exercise_id, "unknown", exc.args[0])
    state = load_state()
    shown = state["shown"].get(exercise.id, 0)
    if exercise.id not in state["passed"] and shown < len(exercise.hints):
        state["shown"][exercise.id] = shown + 1
        _save_state(state)
        left = len(exercise.hints) - shown - 1
        after = (f"{left} more hint{'s' if left != 1 else ''} before the solution" if left
                 else "the next hint() shows the solution")
        return Hint(exercise.id, "hint",
                    f"Hint {shown + 1} of {len(exercise.hints)} for {exercise.id}: {exercise.hints[shown]}\n({after})")
    why = "your check passed" if exercise.id in state["passed"] else "you have seen every hint"
    return Hint(exercise.id, "solution", f"Solution to {exercise.id} ({why}):\n\n{solution_text(exercise)}")


def offer(exercise_id: str, *, shell: bool = False) -> str:
    """The sentence a report that did not pass ends with: how to ask for the next tier ("" with hints off)."""
    if not hints_enabled():
        return ""
    from . import catalog
    try:
        exercise = catalog.get(exercise_id)
    except KeyError:
        return ""
    ask = f"gpuprinciples hint {exercise.id}" if shell else f'hint("{exercise.id}")'
    shown = load_state()["shown"].get(exercise.id, 0)
    if shown < len(exercise.hints):
        tier = f"hint {shown + 1} of {len(exercise.hints)}, then the solution after the last"
    else:
        tier = "the solution (you have seen every hint)"
    where = "" if shell else " in a cell (from gpuprinciples import hint)"
    return f"Stuck? Run {ask}{where} for {tier}."


def hint(exercise_id: str) -> Hint:
    """Print the next hint for an exercise (the solution after the last one) and return it."""
    found = reveal(exercise_id)
    print(found.text)
    return found


def solution_text(exercise) -> str:
    """The reference solution in words a learner can read."""
    if exercise.kind == "value":
        answer = exercise.expected()
        shown = f"{answer:.6g}" if isinstance(answer, float) else repr(answer)
        return f"The answer is {shown}."
    if not getattr(exercise, "solution", None):
        return "This exercise has no published solution."
    module_name, name = exercise.solution.split(":")
    fn = getattr(import_module(module_name), name)
    return "\n\n".join(_source_with_helpers(fn))


def _source_with_helpers(fn) -> list[str]:
    """The function's source, then the kernels and helpers it uses (recursively) from its module and the
    modules beside it in its package (a paged kernel's shared pieces live in the contiguous kernel's file)."""
    package = fn.__module__.rpartition(".")[0]
    seen, order, todo = set(), [], [fn]
    while todo:
        obj = todo.pop(0)
        inner = obj
        while not inspect.isfunction(inner) and hasattr(inner, "fn"):  # @triton.jit / autotune wrappers
            inner = inner.fn
        home = getattr(inner, "__module__", None) or ""
        if id(inner) in seen or home.rpartition(".")[0] != package:
            continue
        seen.add(id(inner))
        order.append(textwrap.dedent(inspect.getsource(inner)).rstrip())
        code = getattr(inner, "__code__", None)
        for used in code.co_names if code else ():
            target = vars(import_module(home)).get(used)
            if target is not None and callable(target):
                todo.append(target)
    return order
