import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"
sys.path.insert(0, str(ROOT))

import gpuprinciples  # noqa: E402,F401  (first: sets interpreter mode before any kernel)
from gpuprinciples import runtime  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if runtime.HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; run on the GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def submission():
    """submission("fusion/x.py", "cos_cos") -> a Submission read from tests/submissions/."""
    from gpuprinciples.submission import from_path

    def load(relative: str, name: str):
        return from_path(f"{SUBMISSIONS / relative}:{name}")

    return load


os.environ.setdefault("PYTHONUNBUFFERED", "1")
