# graded-by: test_trust.py
"""Runs out of memory (raised here rather than by allocating: the test machine must survive)."""


def cos_cos(x):
    raise MemoryError("could not allocate 200 GiB")
