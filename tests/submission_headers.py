"""What a submission fixture under tests/submissions/ says about itself, and mutants made from their twin.

Each graded fixture states in comment lines what it is graded on and what the learner must be told:

    # exercise: fusion.cos_cos
    # function: cos_cos
    # verdict: failed            (or passed)
    # gpu-verdict: failed        (optional, or cpu-verdict: where one machine's verdict differs: a speed bar only a
    #                            GPU times, a count only the interpreter makes; the file says why)
    # says: a fragment the reasons must hold (lower case compared; repeatable)
    # not-says: a fragment they must not hold
    # cpu-says: / gpu-says: / cpu-not-says: / gpu-not-says:   the same, for one machine only
    # modes: cpu                 (optional, default `cpu gpu`: the machines it is graded on)
    # seed: 10                   (optional: a fixed seed, so a failure can be reproduced)
    # timeout: 25                (optional: the grading limit in seconds)
    # known-gap: why             (a cheat the grader does not catch yet: its passing is an expected failure)

tests/test_submissions.py grades every such file once. A file graded otherwise says so instead:
`# graded-by: test_trust.py` (a test that asserts more than a verdict) or `# not-graded: why` (a script, a
helper); files named `_*.py` are helpers the others import.

A mutant is its good twin with a small change: it names the twin, then the change as hunks

    # mutant-of: flash/good_pointers.py
    # @@
    #      a line that stays     (a bare `#`: an empty line that stays)
    # -    the twin's line
    # +    the mutant's line

Each hunk's old lines (those that stay and those removed) must stand exactly once in the twin: otherwise
materialising fails, so a mutant can never silently grade as its twin. `submission()` grades the result.

Nothing here imports the package at load time: gpuprinciples/instructor/verdicts.py loads this file too.
"""

from __future__ import annotations

import re
import tempfile
from functools import lru_cache
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "submissions"
KEYS = re.compile(r"^# (exercise|function|modes|seed|timeout|known-gap|mutant-of|graded-by|not-graded|"
                  r"(?:(?:cpu|gpu)-)?verdict|(?:(?:cpu|gpu)-)?(?:not-)?says): (.*)$")
SAYS = ("says", "not-says", "cpu-says", "gpu-says", "cpu-not-says", "gpu-not-says")


class MutantError(Exception):
    """A mutant's hunk does not fit its twin."""


def header(path: Path) -> dict:
    """The header lines of `path` (those before its first hunk), fragments lower-cased into lists."""
    found: dict = {key: [] for key in SAYS}
    found["modes"] = "cpu gpu"
    for line in Path(path).read_text().splitlines():
        if line.startswith("# @@"):
            break
        m = KEYS.match(line)
        if m:
            key, value = m.group(1), m.group(2).strip()
            if key in SAYS:
                found[key].append(value.lower())
            else:
                found[key] = value
    return found


def graded_files() -> list[Path]:
    """Every fixture that states a verdict, sorted by its path under tests/submissions/."""
    return sorted(p for p in FOLDER.glob("*/*.py") if not p.name.startswith("_") and "verdict" in header(p))


def verdict_on(path: Path, mode: str) -> str:
    """The verdict the fixture states for that machine."""
    stated = header(path)
    return stated.get(f"{mode}-verdict", stated["verdict"])


def timed_on_a_gpu(path: Path) -> bool:
    """Its verdict on a GPU is reached by timing it: it passes there (a pass is timed), or it fails on speed.
    A slow fixture timed while other grades ran beside it on one H100 passed (2026-12-07): graded alone."""
    stated = header(path)
    return verdict_on(path, "gpu") == "passed" or any("speedup" in s for s in stated["says"] + stated["gpu-says"])


def runs_on(path: Path, mode: str) -> bool:
    return mode in header(path)["modes"].split()


def hunks(path: Path) -> list[tuple[list[str], list[str]]]:
    """(old lines, new lines) of each hunk of a mutant."""
    out: list[tuple[list[str], list[str]]] = []
    for line in Path(path).read_text().splitlines():
        if line.startswith("# @@"):
            out.append(([], []))
        elif out and (line == "#" or line[:3] in ("#  ", "# -", "# +")):
            mark, code = (line + "  ")[2], line[3:]  # a bare "#" stands for an empty line that stays
            if mark != "+":
                out[-1][0].append(code)
            if mark != "-":
                out[-1][1].append(code)
        elif out and line.strip():
            raise MutantError(f"{path.name}: after the first hunk every line is a hunk line, not {line!r}")
    return out


def materialise(path: Path) -> str:
    """The text a mutant stands for: its twin with each hunk applied; a plain fixture's own text."""
    path = Path(path)
    twin = header(path).get("mutant-of")
    if not twin:
        return path.read_text()
    lines = materialise(FOLDER / twin).splitlines()
    for old, new in hunks(path):
        at = [i for i in range(len(lines) - len(old) + 1) if lines[i:i + len(old)] == old]
        if len(at) != 1 or not old:
            raise MutantError(f"{path.name}: a hunk's old lines stand {len(at)} times in {twin}, not once: "
                              + " / ".join(old)[:200])
        lines[at[0]:at[0] + len(old)] = new
    return "\n".join(lines) + "\n"


_TEMP = tempfile.TemporaryDirectory(prefix="gp-mutants-")


@lru_cache(maxsize=None)
def source(path: Path) -> Path:
    """A file holding what `path` stands for: itself, or (a mutant) its materialised text in a temp folder."""
    path = Path(path)
    if "mutant-of" not in header(path):
        return path
    out = Path(_TEMP.name) / path.parent.name / path.name
    out.parent.mkdir(exist_ok=True)
    out.write_text(materialise(path))
    return out


def submission(path: Path, function: str | None = None):
    """The Submission the grader gets for a fixture (a mutant: materialised, named and importing as itself)."""
    from dataclasses import replace

    from gpuprinciples.sandbox.submission import from_path
    path = Path(path)
    loaded = from_path(f"{source(path)}:{function or header(path)['function']}")
    return replace(loaded, origin=str(path), sys_path=(str(path.parent),)) if loaded.module is None else loaded


# ---- grading: each fixture once per test run, a folder at a time ------------------------------------

_REPORTS: dict[Path, object] = {}


def grade_fixture(path: Path):
    """Grade one fixture as its header says (exercise, function, seed, timeout)."""
    from gpuprinciples.grader.grading import grade
    h = header(path)
    seed = int(h["seed"]) if "seed" in h else None
    timeout = float(h["timeout"]) if "timeout" in h else None
    return grade(h["exercise"], submission(path), seed=seed, timeout=timeout)


def report(path: Path):
    """The report of a graded fixture. The first call for a folder grades every fixture of it that runs on
    this machine, two at a time (each grade mostly waits on its child; on a GPU, the ones that must pass one
    at a time); those with a time limit (hangs) start first so that their waits overlap the rest. A fixture
    outside that set (another machine's) is graded when asked for."""
    from concurrent.futures import ThreadPoolExecutor

    from gpuprinciples import runtime
    path = Path(path).resolve()
    if path not in _REPORTS:
        batch = [p for p in graded_files() if p.parent == path.parent and runs_on(p, runtime.MODE)
                 and p not in _REPORTS] or [path]
        if path not in batch:
            batch.append(path)
        batch.sort(key=lambda p: "timeout" not in header(p))
        # a verdict reached by timing is graded alone, so that no other grade disturbs it
        alone = [p for p in batch if runtime.HAS_CUDA and timed_on_a_gpu(p)]
        # a GPU machine's cores compile six at a time (these grades fail before they are timed).
        # Triton 3.6's interpreter was graded one at a time after its self-test failed when graders started
        # together (December 2, before the fork server); 144 fixtures two at a time on 3.6 showed no failure
        workers = 6 if runtime.HAS_CUDA else 2
        with ThreadPoolExecutor(max_workers=workers) as pool:
            together = [p for p in batch if p not in alone]
            _REPORTS.update(zip(together, pool.map(grade_fixture, together)))
        _REPORTS.update((p, grade_fixture(p)) for p in alone)
    return _REPORTS[path]
