"""Every pytest run in this repository (tests/, and solutions/ or lessons/ under nbval) keeps its own
hint state and caches, in a folder of its own that is removed at the end.

A check that passes records the pass in the hint state, which unlocks that exercise's full solution
(gpuprinciples/course/hints.py): the solution notebooks pass every check, so a run of them must not unlock
the solutions of the learner who ran it. Here, not in tests/conftest.py, so that `pytest --nbval-lax
solutions` alone is covered too; nbval's kernels inherit this process's environment.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

_ROOT = Path(__file__).resolve().parent

if "PYTEST_XDIST_WORKER" not in os.environ:  # the main process: xdist's workers inherit its folder
    _cache = tempfile.mkdtemp(prefix="gpuprinciples-test-cache-")
    os.environ["GPUPRINCIPLES_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)


# The "if you have not done X yet" branches of lessons/ (run unsolved under nbval in CI): on a CPU, each must
# say what tests/lesson_branches.py lists (nbval itself compares no outputs of these cells).
def _lesson_branches():
    import importlib.util
    spec = importlib.util.spec_from_file_location("lesson_branches", _ROOT / "tests" / "lesson_branches.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


import pytest  # noqa: E402


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    cell, path = getattr(item, "cell", None), getattr(item, "path", None)
    if cell is not None and path is not None and path.parent.name == "lessons" and path.parent.parent == _ROOT:
        from gpuprinciples.machine import runtime
        if not runtime.HAS_CUDA:
            why = _lesson_branches().problem(path.stem, cell.source, getattr(item, "test_outputs", None))
            if why:
                raise AssertionError(why)
    return result
