# exercise: profiling.foreach_sgd
# function: sgd_momentum
# verdict: failed
# says: expected (new_params, new_bufs)
# Mistake: flattens everything into one tensor and returns that, not the two lists.
import torch


def sgd_momentum(params, grads, bufs, lr, momentum):
    p = torch.cat([t.reshape(-1) for t in params])
    g = torch.cat([t.reshape(-1) for t in grads])
    b = torch.cat([t.reshape(-1) for t in bufs])
    nb = momentum * b + g
    return p - lr * nb
