"""Lesson 01, the factory and the warehouse: count FLOPs and bytes, and predict with them.

Every answer here is a number or a word computed from first principles; the expected values are
derived from the same spec sheets the lesson shows (specs.SPECS), so the two cannot drift apart.
"""

from __future__ import annotations

from ...machine import specs
from ..kit import ValueExercise
from ..lab import roofline

ADD_N = 2**28  # elements of z = x + y in the H100 prediction
MATMUL_N = 4096  # C = A @ B with three MATMUL_N × MATMUL_N bf16 matrices


def _add_flops_bytes(n: int, itemsize: int = 4) -> tuple[int, int]:
    return n, 3 * n * itemsize  # one add per element; read x, read y, write z


def _matmul_flops_bytes(n: int, itemsize: int = 2) -> tuple[int, int]:
    return 2 * n**3, 3 * n * n * itemsize  # a multiply and an add per term; read A, B, write C once


def _predict_h100() -> float:
    flops, bytes_ = _add_flops_bytes(ADD_N)
    h100 = specs.SPECS["H100"]
    return roofline.predict_time(flops, bytes_, h100.flops("fp32"), h100.bandwidth)


def _matmul_bound() -> str:
    h100 = specs.SPECS["H100"]
    return roofline.bound(*_matmul_flops_bytes(MATMUL_N), h100.flops("bf16"), h100.bandwidth)


EXERCISES = (
    ValueExercise(
        id="factory.intensity",
        title="Arithmetic intensity of z = x + y",
        question="FLOPs per byte moved by z = x + y on float32 tensors (x and y read once, z written once).",
        expected=lambda: _add_flops_bytes(1)[0] / _add_flops_bytes(1)[1],
        hints=("Count per element: how many additions, and how many bytes cross the road?",
               "A float32 is 4 bytes; x and y are read, z is written."),
    ),
    ValueExercise(
        id="factory.predict_h100",
        title="Predict z = x + y on an H100",
        question=(f"Seconds z = x + y takes for {ADD_N:,} float32 elements on an H100 SXM, from its datasheet "
                  "(dense FP32 rate and memory bandwidth), ignoring launch overhead."),
        expected=_predict_h100,
        rel_tol=0.05,
        hints=("Work out both times, F / compute and B / bandwidth: the larger one is the answer.",
               "Bytes: 3 tensors × 4 bytes × n. Bandwidth: specs.SPECS['H100'].bandwidth bytes/s."),
    ),
    ValueExercise(
        id="factory.matmul_intensity",
        title="Arithmetic intensity of a matmul",
        question=(f"FLOPs per byte of C = A @ B for {MATMUL_N}×{MATMUL_N} bfloat16 matrices, "
                  "each matrix read or written exactly once."),
        expected=lambda: _matmul_flops_bytes(MATMUL_N)[0] / _matmul_flops_bytes(MATMUL_N)[1],
        hints=("Each of the n² outputs is a dot product of length n: n multiplies and n adds.",
               "Bytes: three n×n matrices of 2-byte numbers."),
    ),
    ValueExercise(
        id="factory.matmul_bound",
        title="What bounds a large matmul",
        question=f"On an H100 in bfloat16, is the {MATMUL_N}³ matmul 'compute' or 'memory' bound?",
        expected=_matmul_bound,
        hints=("Compare its intensity with the H100's ridge point, specs.SPECS['H100'].ridge_point('bf16').",),
    ),
    ValueExercise(
        id="factory.eager_bytes",
        title="Bytes moved by eager x.cos().cos()",
        question=("Bytes per element that eager PyTorch moves for y = x.cos().cos() on float32 x "
                  "(two kernels, each reading its input and writing its output once)."),
        expected=lambda: 4 * 4,
        hints=("The first cos writes a temporary that the second cos reads back.",),
    ),
)
