# exercise: distributed.allreduce_gradients
# function: allreduce_gradients
# verdict: failed
# says: collectiverace
# says: was never waited for
# Wrong: divides first, then starts every all-reduce with async_op=True and never waits for one. On a GPU the
# gradients are read while NCCL may still be reducing them (its own stream): right or wrong by timing. On gloo
# it was timing too; the ranks now fail it as a race whatever the timing.
import torch.distributed as dist


def allreduce_gradients(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            p.grad /= world
            dist.all_reduce(p.grad, async_op=True)
