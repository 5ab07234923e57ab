"""PyTorch does the work."""


def vector_add(x, y):
    return x + y
