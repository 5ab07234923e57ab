# exercise: fusion.softmax
# function: softmax
# verdict: failed
# timeout: 25
# says: did not finish within 25 s
"""A loop that never ends."""
import time


def softmax(x):
    while True:
        time.sleep(0.5)
