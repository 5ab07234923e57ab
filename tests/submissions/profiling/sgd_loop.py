# exercise: profiling.foreach_sgd
# function: sgd_momentum
# verdict: failed
# says: operator dispatches per call
# Mistake: right math, one tensor at a time: dispatches grow with the number of tensors.
def sgd_momentum(params, grads, bufs, lr, momentum):
    new_bufs = [momentum * b + g for b, g in zip(bufs, grads)]
    new_params = [p - lr * b for p, b in zip(params, new_bufs)]
    return new_params, new_bufs
