# exercise: distributed.allreduce_gradients
# function: allreduce_gradients
# verdict: failed
# says: combining the gradients once sends 2(n−1)/n
# says: reduce_scatter
# Wrong by its traffic: reduce-scatters, then all-gathers by all-reducing a buffer of zeros holding its own shard:
# right values, 1.5 times an all-reduce's bytes.
import torch
import torch.distributed as dist


def allreduce_gradients(model):
    world, rank = dist.get_world_size(), dist.get_rank()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.flatten() for g in grads])
    n = flat.numel()
    padded = torch.zeros(-(-n // world) * world)
    padded[:n] = flat
    shard = torch.empty(padded.numel() // world)
    dist.reduce_scatter_tensor(shard, padded)
    padded.zero_()
    padded[rank * shard.numel():(rank + 1) * shard.numel()] = shard / world
    dist.all_reduce(padded)
    offset = 0
    for g in grads:
        g.copy_(padded[offset:offset + g.numel()].view_as(g))
        offset += g.numel()
