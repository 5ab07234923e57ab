import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"
sys.path.insert(0, str(ROOT))

import gpuprinciples  # noqa: E402,F401  (first: sets interpreter mode before any kernel)
from gpuprinciples.machine import runtime  # noqa: E402

# Longest first, so that under pytest-xdist (`-n 2 --dist loadfile`: one file, one notebook per worker at a
# time) the last minutes are not one worker alone: the Binder install and the browser, then the notebooks,
# then the test files. A stable sort: the cells of a notebook keep their order.
LONG_FILES = ("tests/test_binder.py", "tests/test_browser.py")


def _rank(item) -> int:
    path = item.nodeid.split("::")[0]
    if path in LONG_FILES:
        return 0
    return 1 if path.endswith(".ipynb") and not path.startswith("tests/") else 2


def pytest_report_header(config):
    info = runtime.describe()
    return f"gpuprinciples: mode {info['mode']}, torch {info['torch']}, triton {info['triton']}"


def pytest_configure(config):
    # CI's second run sets these to prove that the torch and Triton it asked for are the ones imported
    # (PYTHONPATH shadowing the environment's)
    import torch
    import triton

    for name, module in (("TORCH", torch), ("TRITON", triton)):
        want = os.environ.get(f"GPUPRINCIPLES_EXPECT_{name}")
        if want and not (module.__version__ + ".").startswith(want + "."):
            raise pytest.UsageError(f"expected {module.__name__} {want}, imported {module.__version__} "
                                    f"from {module.__file__}")


def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)
    if runtime.HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; run on the GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def submission():
    """submission("fusion/x.py", "cos_cos") -> a Submission read from tests/submissions/."""
    from gpuprinciples.sandbox.submission import from_path

    def load(relative: str, name: str):
        return from_path(f"{SUBMISSIONS / relative}:{name}")

    return load


os.environ.setdefault("PYTHONUNBUFFERED", "1")
