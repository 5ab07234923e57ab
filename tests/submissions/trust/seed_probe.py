# graded-by: test_trust.py
"""Looks for the grader's secret seed everywhere it can reach from inside the worker. The test grades
this with seed=0x2B1D53C79A0E4F61, so the probe knows what to look for; a learner would not even know that."""
import gc
import os
import sys

# the seed the test grades with, stored masked so that the probe does not find its own copy
_KEY = 0x7F3A_1C55_E2D4_0B99
_HIDDEN = 0x2B1D_53C7_9A0E_4F61 ^ _KEY


def _mentions(value, depth=0) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return (value ^ _KEY) in (_HIDDEN, _HIDDEN ^ 0x5EED, _HIDDEN ^ 0xF1A9)
    if isinstance(value, (str, bytes)):
        text = value if isinstance(value, str) else value.decode("latin-1")
        return str(_HIDDEN ^ _KEY) in text or hex(_HIDDEN ^ _KEY)[2:] in text
    if depth < 3 and isinstance(value, dict):
        return any(_mentions(k, depth + 1) or _mentions(v, depth + 1) for k, v in value.items())
    if depth < 3 and isinstance(value, (list, tuple, set)):
        return any(_mentions(v, depth + 1) for v in value)
    return False


def _where() -> list[str]:
    places = []
    if _mentions(dict(os.environ)):
        places.append("environment")
    if _mentions(sys.argv):
        places.append("argv")
    for path in ("/proc/self/cmdline", "/proc/self/environ", f"/proc/{os.getppid()}/cmdline",
                 f"/proc/{os.getppid()}/environ"):
        try:
            with open(path, "rb") as f:
                if _mentions(f.read()):
                    places.append(path)
        except OSError:
            pass
    if any(_mentions(obj) for obj in gc.get_objects() if isinstance(obj, (dict, list, tuple))):
        places.append("objects")
    frame = sys._getframe()
    while frame is not None:
        if _mentions(dict(frame.f_locals)) or _mentions(dict(frame.f_globals)):
            places.append(f"frame {frame.f_code.co_name}")
        frame = frame.f_back
    return places


_probed = []


def cos_cos(x):
    if not _probed:
        _probed.append(_where())
        print(f"seed probe: found in {_probed[0] or 'nowhere'}", flush=True)
    raise ValueError("probe only")
