"""Measuring: work without a clock (counters), time with one (timing), the ceilings this machine
reaches (calibrate), collectives, profiler tables, what a call left behind (observe), and, under the
interpreter, where a GPU would keep each tensor (placement)."""
