# graded-by: test_grader_core.py
def cos_cos(x):
    """Your turn."""
    raise NotImplementedError("Exercise: write your solution here")
