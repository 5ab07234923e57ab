# exercise: distributed.allreduce_gradients
# function: allreduce_gradients
# verdict: failed
# says: called reduce
# says: rank 1 kept its own local gradients
# Wrong: reduces onto rank 0 only. NCCL leaves the other ranks' tensors as they were, so rank 1 keeps its local
# gradients; gloo wrote partial sums into them (a different, misleading sentence), and the ranks now do as NCCL.
import torch.distributed as dist


def allreduce_gradients(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.reduce(p.grad, dst=0)
            if dist.get_rank() == 0:
                p.grad /= world
