# exercise: distributed.allreduce_gradients
# function: allreduce_gradients
# verdict: failed
# says: collectiverace
# says: before wait() on its request
# Wrong: divides each gradient while its all-reduce (async_op=True) may still be running, then waits. On a GPU
# the division (the rank's stream) races NCCL's reduction (its own stream): the average, the sum, or a mix.
import torch.distributed as dist


def allreduce_gradients(model):
    world = dist.get_world_size()
    works = []
    for p in model.parameters():
        if p.grad is not None:
            works.append(dist.all_reduce(p.grad, async_op=True))
            p.grad /= world
    for work in works:
        work.wait()
