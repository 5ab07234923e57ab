# exercise: distributed.allreduce_gradients
# function: allreduce_gradients
# verdict: passed
# Right: the reference with a barrier before and after "to be safe". A barrier carries no gradient (NCCL's is a
# one-element all-reduce); the grader once failed it as a collective other than all_reduce.
import torch.distributed as dist


def allreduce_gradients(model):
    dist.barrier()
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world
    dist.barrier()
