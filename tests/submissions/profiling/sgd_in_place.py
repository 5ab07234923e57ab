# exercise: profiling.foreach_sgd
# function: sgd_momentum
# verdict: failed
# says: changed its input
# Mistake: updates the caller's tensors in place (as torch.optim does), instead of returning new ones.
import torch


def sgd_momentum(params, grads, bufs, lr, momentum):
    torch._foreach_mul_(bufs, momentum)
    torch._foreach_add_(bufs, grads)
    torch._foreach_add_(params, bufs, alpha=-lr)
    return [p.clone() for p in params], [b.clone() for b in bufs]
