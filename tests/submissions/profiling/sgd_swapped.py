# exercise: profiling.foreach_sgd
# function: sgd_momentum
# verdict: failed
# says: values wrong
# Mistake: returns the two lists in the wrong order.
import torch


def sgd_momentum(params, grads, bufs, lr, momentum):
    new_bufs = torch._foreach_add(torch._foreach_mul(bufs, momentum), grads)
    new_params = torch._foreach_add(params, new_bufs, alpha=-lr)
    return new_bufs, new_params
