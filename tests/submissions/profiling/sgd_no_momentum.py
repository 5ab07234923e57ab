# exercise: profiling.foreach_sgd
# function: sgd_momentum
# verdict: failed
# says: new_params[0]
# Mistake: forgets the momentum buffer in the parameter update.
import torch


def sgd_momentum(params, grads, bufs, lr, momentum):
    new_bufs = torch._foreach_add(torch._foreach_mul(bufs, momentum), grads)
    new_params = torch._foreach_add(params, grads, alpha=-lr)
    return new_params, new_bufs
