"""The registry of exercises: one module per lesson, each exporting `EXERCISES`.

An exercise id is `module.name` (`fusion.cos_cos` lives in `course/exercises/fusion.py`), so finding
one imports only its lesson's module.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil

from . import exercises
from .kit import Exercise


def lesson_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(exercises.__path__) if not m.name.startswith("_"))


def _module_exercises(name: str) -> dict[str, Exercise]:
    module = importlib.import_module(f"{exercises.__name__}.{name}")
    found = {}
    for ex in getattr(module, "EXERCISES", ()):
        if not ex.id.startswith(name + "."):
            raise ValueError(f"exercise {ex.id!r} is declared in exercises/{name}.py: its id must start with {name}.")
        found[ex.id] = ex
    return found


def all_exercises() -> dict[str, Exercise]:
    found: dict[str, Exercise] = {}
    for name in lesson_modules():
        found.update(_module_exercises(name))
    return found


def get(exercise_id: str) -> Exercise:
    """The exercise with this id, or a KeyError whose message is a sentence with suggestions."""
    module = exercise_id.split(".", 1)[0]
    if "." in exercise_id and module in lesson_modules():
        found = _module_exercises(module)
        if exercise_id in found:
            return found[exercise_id]
    known = sorted(all_exercises())
    close = difflib.get_close_matches(exercise_id, known, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else f" Known exercises: {', '.join(known)}."
    raise KeyError(f"There is no exercise called {exercise_id!r}.{hint}")
