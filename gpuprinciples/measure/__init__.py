"""Measuring: work without a clock (counters), time with one (timing), the ceilings this machine
reaches (calibrate), collectives, profiler tables, and what a call left behind (observe)."""
