# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# timeout: 25
# says: did not finish within 25 s
"""A loop that never ends (it sleeps, so it does not burn a core while the grader waits)."""
import time


def cos_cos(x):
    while True:
        time.sleep(0.5)
