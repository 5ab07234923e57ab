# graded-by: test_grader_core.py
def cos_cos(x):
    return x.does_not_exist()
