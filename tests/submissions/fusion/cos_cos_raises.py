"""Raises on every call."""


def cos_cos(x):
    raise ValueError("block size must divide n")
