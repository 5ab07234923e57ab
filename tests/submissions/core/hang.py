# graded-by: test_grader_core.py
def cos_cos(x):
    while True:  # never returns
        pass
