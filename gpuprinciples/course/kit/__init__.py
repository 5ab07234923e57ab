"""The words an exercise is declared in: cases, requirements, comparisons, live loads, the two kinds of exercise.

A lesson's exercise file (course/exercises/) imports them from here; nothing here runs learner code.
"""

from .cases import GPU_HALF_DTYPES, H200_SMS, Case, Regime, dtype_plan, regime_specs
from .compare import TOLERANCES, compare_tensors, compare_values, output_problems
from .exercise import Exercise, FunctionExercise, Timing, ValueExercise, cached_inputs, compiled
from .loads import LiveLoads, LoadReason, judge_live_loads, traced_run
from .requirements import (
                           BytesWithin,
                           CompilesForGPU,
                           LaunchesTriton,
                           MaxLaunches,
                           NoTensorOf,
                           NoTorchCompute,
                           Requirement,
                           UsesTensorCores,
                           WritesEveryOutput,
                           memory_bytes,
)

__all__ = [
    "GPU_HALF_DTYPES", "H200_SMS", "Case", "Regime", "dtype_plan", "regime_specs",
    "TOLERANCES", "compare_tensors", "compare_values", "output_problems",
    "Exercise", "FunctionExercise", "Timing", "ValueExercise", "cached_inputs", "compiled",
    "LiveLoads", "LoadReason", "judge_live_loads", "traced_run",
    "BytesWithin", "CompilesForGPU", "LaunchesTriton", "MaxLaunches", "NoTensorOf", "NoTorchCompute",
    "Requirement", "UsesTensorCores", "WritesEveryOutput", "memory_bytes",
]
