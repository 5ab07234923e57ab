# graded-by: test_distributed.py
# Sums the gradients and forgets to divide by the world size.
import torch.distributed as dist


def allreduce_gradients(model):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
