# exercise: distributed.allreduce_gradients
# function: allreduce_gradients
# verdict: failed
# says: combining the gradients once sends 2(n−1)/n
# says: reduce_scatter
# Wrong by its traffic: ddp_reduce_scatter_all_gather's reduce-scatter, then an all-gather made by all-reducing a
# buffer of zeros holding its own shard: right values, 1.5 times an all-reduce's bytes.
# mutant-of: distributed/ddp_reduce_scatter_all_gather.py
# @@
# -    world = dist.get_world_size()
# +    world, rank = dist.get_world_size(), dist.get_rank()
# @@
#      dist.reduce_scatter_tensor(shard, padded)
# -    shard /= world
# -    dist.all_gather_into_tensor(padded, shard)
# +    padded.zero_()
# +    padded[rank * shard.numel():(rank + 1) * shard.numel()] = shard / world
# +    dist.all_reduce(padded)
