# exercise: distributed.allreduce_gradients
# function: allreduce_gradients
# verdict: failed
# says: combining the gradients once sends 2(n−1)/n
# Wrong by its traffic: all-gathers every rank's whole gradient and averages locally. Right values, and on 2 ranks
# as many bytes as an all-reduce, but (n−1)·S per rank on n ranks: twice an all-reduce's on 3.
import torch
import torch.distributed as dist


def allreduce_gradients(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            out = [torch.empty_like(p.grad) for _ in range(world)]
            dist.all_gather(out, p.grad)
            p.grad.copy_(torch.stack(out).mean(0))
