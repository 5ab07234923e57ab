# graded-by: test_grader_core.py
import os
import signal


def cos_cos(x):
    os.kill(os.getpid(), signal.SIGSEGV)  # what an illegal memory access looks like from outside
