"""Where a class's notebooks are: the layouts instructors have, and every file left out with the reason.

    SUBMISSIONS/<learner>/*.ipynb                      a folder per learner (notebooks at any depth in it)
    SUBMISSIONS/submitted/<learner>/<assignment>/*.ipynb   nbgrader's exchange (or SUBMISSIONS is `submitted/`)
    SUBMISSIONS/<learner>_<lesson>.ipynb               one folder of files named by learner (Canvas-style)
    SUBMISSIONS.zip                                    any of these in a zip from an LMS (Moodle's
                                                       `Name_123_assignsubmission_file_/` folders too)

Nothing is modified: a zip is unpacked into a temporary folder that lives as long as the `Intake`.
"""

from __future__ import annotations

import json
import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

# Moodle names a learner's folder "Full Name_12345_assignsubmission_file_"
_MOODLE_SUFFIX = re.compile(r"_\d+_assignsubmission_\w*$")


@dataclass
class Notebook:
    learner: str
    path: Path
    label: str  # what the gradebook calls it: its path below the learner ("ps1/lesson.ipynb")
    folder: Path | None  # copied whole beside it when run (its data files); None: the notebook alone


@dataclass
class Intake:
    layout: str
    notebooks: list[Notebook] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why it was left out)
    _unpacked: tempfile.TemporaryDirectory | None = field(default=None, repr=False)

    def close(self) -> None:
        if self._unpacked is not None:
            self._unpacked.cleanup()


def find(submissions) -> Intake:
    """Every learner's notebooks under `submissions` (a folder or a .zip), and every other file with why."""
    root = Path(submissions)
    if root.is_file() and root.suffix.lower() == ".zip":
        return _from_zip(root)
    if not root.is_dir():
        return Intake("none", skipped=[(str(root), "no such folder or .zip")])
    return _from_folder(root)


def _from_zip(path: Path) -> Intake:
    unpacked = tempfile.TemporaryDirectory(prefix="gpuprinciples-intake-")
    target = Path(unpacked.name)
    skipped = []
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.infolist():
                name = member.filename
                if member.is_dir():
                    continue
                if name.startswith("/") or ".." in Path(name).parts:
                    skipped.append((f"{path.name}:{name}", "a path outside the zip's folder: not unpacked"))
                    continue
                archive.extract(member, target)
    except zipfile.BadZipFile as exc:
        unpacked.cleanup()
        return Intake("none", skipped=[(str(path), f"not a zip file that can be read ({exc})")])
    root = target
    while True:  # an LMS wraps everything in one folder (the assignment's name): look inside it
        entries = [p for p in root.iterdir() if not p.name.startswith(".") and p.name != "__MACOSX"]
        # (a lone folder with notebooks directly in it is one learner's, not a wrapper)
        if len(entries) == 1 and entries[0].is_dir() and not _has_notebooks_directly(entries[0]):
            root = entries[0]
            continue
        break
    found = _from_folder(root)
    for beside in sorted(p for p in target.rglob("*") if p.is_file() and root not in p.parents):
        parts = beside.relative_to(target).parts  # left beside the folder that holds the class
        skipped.append((str(beside.relative_to(target)), _why_not(beside, parts) or "outside the folder that holds "
                        "the learners' work"))
    found.layout = f"zip ({found.layout})"
    found.skipped = [(f if f.startswith(f"{path.name}:") else f"{path.name}:{f}", why) for f, why in skipped] + [
        (f"{path.name}:{f}", why) for f, why in found.skipped]
    found._unpacked = unpacked
    return found


def _has_notebooks_directly(folder: Path) -> bool:
    return any(p.suffix == ".ipynb" for p in folder.iterdir() if p.is_file())


def _from_folder(root: Path) -> Intake:
    layout = "a folder per learner"
    if (root / "submitted").is_dir():
        root, layout = root / "submitted", "nbgrader (submitted/<learner>/<assignment>/)"
    elif root.name == "submitted":
        layout = "nbgrader (submitted/<learner>/<assignment>/)"
    found = Intake(layout)
    flat = False
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        parts = path.relative_to(root).parts
        why = _why_not(path, parts)
        if why:
            found.skipped.append((str(path.relative_to(root)), why))
            continue
        if len(parts) == 1:  # <learner>_<lesson>.ipynb, all in one folder
            learner, sep, _ = path.stem.partition("_")
            if not sep or not learner:
                found.skipped.append((parts[0], "a notebook beside the learners' folders, with no learner in its "
                                                "name: expected <learner>_<lesson>.ipynb"))
                continue
            flat = True
            found.notebooks.append(Notebook(learner, path, path.name, None))
        else:
            learner = _MOODLE_SUFFIX.sub("", parts[0])
            found.notebooks.append(Notebook(learner, path, "/".join(parts[1:]), path.parent))
    if flat:
        found.layout = "one folder of <learner>_<lesson>.ipynb" + (" and folders per learner" if any(
            n.folder is not None for n in found.notebooks) else "")
    return found


def _why_not(path: Path, parts: tuple[str, ...]) -> str | None:
    if ".ipynb_checkpoints" in parts:
        return "a Jupyter checkpoint (an autosave), not the submitted notebook"
    if any(p.startswith(".") or p == "__MACOSX" for p in parts):
        return "a hidden file"
    if path.suffix.lower() != ".ipynb":
        return "not a notebook (.ipynb); a file beside a learner's notebook is still copied with it when it runs" \
            if len(parts) > 1 else "not a notebook (.ipynb)"
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells")
    except (OSError, ValueError, UnicodeDecodeError, AttributeError) as exc:
        return f"not a notebook Jupyter can open ({type(exc).__name__}: {str(exc)[:80]})"
    if not isinstance(cells, list):
        return "not a notebook Jupyter can open (no cells)"
    return None
