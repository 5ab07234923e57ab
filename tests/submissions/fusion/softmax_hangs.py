"""A loop that never ends."""
import time


def softmax(x):
    while True:
        time.sleep(0.5)
