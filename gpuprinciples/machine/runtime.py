"""What this machine runs on, decided once: a GPU, or Triton's interpreter.

Importing `gpuprinciples` imports this module first, and it decides the mode:

* a CUDA GPU is visible: kernels compile and run on it; the grader times them ("gpu" mode);
* no GPU: `TRITON_INTERPRET=1` is set *before any kernel is defined*, so `@triton.jit` kernels run
  under Triton's interpreter on NumPy, and the grader reads counters instead of clocks ("cpu" mode).

Triton reads `TRITON_INTERPRET` when a kernel is decorated, so a kernel defined before this import
would be compiled for a GPU that is not there. Set `GPUPRINCIPLES_FORCE_CPU=1` to use the
interpreter even where a GPU exists (how the CPU path is tested on a GPU machine).
"""

from __future__ import annotations

import os
import sys

import torch

FORCE_CPU = os.environ.get("GPUPRINCIPLES_FORCE_CPU", "") not in ("", "0")
HAS_CUDA = torch.cuda.is_available() and not FORCE_CPU
DEVICE = "cuda" if HAS_CUDA else "cpu"
MODE = "gpu" if HAS_CUDA else "cpu"

if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"
INTERPRETER = os.environ.get("TRITON_INTERPRET", "") not in ("", "0")

try:
    import triton  # noqa: E402
    import triton.language as tl  # noqa: E402,F401
except ImportError:  # pragma: no cover - triton is a dependency on Linux
    triton = None

_announced = False


def announce() -> None:
    """Say once, in plain words, which mode this session runs in."""
    global _announced
    if _announced:
        return
    _announced = True
    if HAS_CUDA:
        print(f"gpuprinciples: GPU mode on {torch.cuda.get_device_name()}: kernels are compiled and timed.",
              file=sys.stderr)
    else:
        print("gpuprinciples: no GPU here, so Triton kernels run under Triton's interpreter "
              "(TRITON_INTERPRET=1) and checks grade counted bytes and launches instead of time.",
              file=sys.stderr)


def sizes(cpu, gpu):
    """Pick a problem size for this machine: small enough for the interpreter, large enough on a GPU."""
    return gpu if HAS_CUDA else cpu


def synchronize() -> None:
    if HAS_CUDA:
        torch.cuda.synchronize()


def describe() -> dict:
    """What `gpuprinciples doctor` prints."""
    info = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "triton": getattr(triton, "__version__", "missing"),
        "mode": MODE,
        "device": torch.cuda.get_device_name() if HAS_CUDA else "CPU (no CUDA GPU visible)",
        "interpreter": INTERPRETER,
        "cpu_count": os.cpu_count(),
    }
    if HAS_CUDA:
        info["cuda"] = torch.version.cuda
        props = torch.cuda.get_device_properties(0)
        info["sms"] = props.multi_processor_count
        info["memory_gib"] = round(props.total_memory / 2**30, 1)
        info["capability"] = f"{props.major}.{props.minor}"
    return info
