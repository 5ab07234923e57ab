"""A known-answer kernel, y = a·x + b: catches an interpreter or a driver that silently returns zeros."""

from __future__ import annotations

import threading

import torch
import triton
import triton.language as tl

from ..machine import runtime


@triton.jit
def _axpb_kernel(x_ptr, y_ptr, a, b, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, a * x + b, mask=mask)


def axpb(x: torch.Tensor, a: float, b: float) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    _axpb_kernel[(triton.cdiv(n, 16),)](x, y, a, b, n, BLOCK=16)
    return y


# ---------------------------------------------------------------------------------------------
# A known-answer kernel: catches an interpreter or a driver that silently returns zeros
# ---------------------------------------------------------------------------------------------

_self_test_passed = False
_self_test_lock = threading.Lock()


def self_test() -> str | None:
    """Run one tiny known-answer kernel; return None when right, else a sentence saying what is wrong.

    Only success is remembered: the interpreter is not thread-safe, so a failure seen while another
    thread runs a kernel is tried again next time rather than condemning the session."""
    global _self_test_passed
    with _self_test_lock:
        if _self_test_passed:
            return None
        problem = _run_known_answer()
        _self_test_passed = problem is None
        return problem


def _run_known_answer() -> str | None:
    try:
        x = torch.arange(37, dtype=torch.float32, device=runtime.DEVICE)
        y = axpb(x, 3.0, 1.0)
        runtime.synchronize()
        if torch.equal(y.cpu(), (x * 3 + 1).cpu()):
            return None
        return ("Triton's known-answer kernel returned wrong values "
                f"(mode {runtime.MODE}, Triton {triton.__version__}): grading cannot be trusted on this install.")
    except Exception as exc:  # noqa: BLE001 - reported in words
        return f"Triton's known-answer kernel failed to run ({type(exc).__name__}: {exc})."
