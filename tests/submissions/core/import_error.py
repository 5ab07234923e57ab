# graded-by: test_grader_core.py

raise RuntimeError("broken at import")


def cos_cos(x):
    return x
