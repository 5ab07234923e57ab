"""Every pytest run in this repository (tests/, and solutions/ or lessons/ under nbval) keeps its own
hint state and caches, in a folder of its own that is removed at the end.

A check that passes records the pass in the hint state, which unlocks that exercise's full solution
(gpuprinciples/hints.py): the solution notebooks pass every check, so a run of them must not unlock
the solutions of the learner who ran it. Here, not in tests/conftest.py, so that `pytest --nbval-lax
solutions` alone is covered too; nbval's kernels inherit this process's environment.
"""

import atexit
import os
import shutil
import tempfile

if "PYTEST_XDIST_WORKER" not in os.environ:  # the main process: xdist's workers inherit its folder
    _cache = tempfile.mkdtemp(prefix="gpuprinciples-test-cache-")
    os.environ["GPUPRINCIPLES_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
