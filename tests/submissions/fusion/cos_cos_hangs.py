"""A loop that never ends (it sleeps, so it does not burn a core while the grader waits)."""
import time


def cos_cos(x):
    while True:
        time.sleep(0.5)
