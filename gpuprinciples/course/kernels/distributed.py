"""Reference solutions of lesson 09's exercises: data parallel by hand, a ring all-reduce, ZeRO's memory."""

from __future__ import annotations

import torch


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------------------------
# Reference solutions of the lesson's exercises (the grader's tests and `bench` use them)
# ---------------------------------------------------------------------------------------------


def allreduce_gradients(model) -> None:
    """Data parallel by hand: average every gradient over all ranks, in place."""
    import torch.distributed as dist
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:  # frozen parameters have no gradient to share
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= world


def ring_allreduce(x):
    """Sum `x` over all ranks with only send/recv: a reduce-scatter ring, then an all-gather ring.

    Each rank sends 2(n-1) chunks of about S/n bytes: 2(n-1)/n · S in all, whatever n is.
    """
    import torch.distributed as dist
    rank, n = dist.get_rank(), dist.get_world_size()
    out = x.clone()
    chunks = list(out.tensor_split(n))  # views into out; sizes differ by at most one element
    right, left = (rank + 1) % n, (rank - 1) % n
    for step in range(n - 1):  # reduce-scatter: afterwards chunk (rank + 1) % n is complete here
        send_i, recv_i = (rank - step) % n, (rank - step - 1) % n
        incoming = torch.empty_like(chunks[recv_i])
        request = dist.isend(chunks[send_i], right)
        dist.recv(incoming, left)
        request.wait()
        chunks[recv_i] += incoming
    for step in range(n - 1):  # all-gather: pass the complete chunks around the ring
        send_i, recv_i = (rank + 1 - step) % n, (rank - step) % n
        incoming = torch.empty_like(chunks[recv_i])
        request = dist.isend(chunks[send_i], right)
        dist.recv(incoming, left)
        request.wait()
        chunks[recv_i].copy_(incoming)
    return out


def zero_memory(num_params: int, world_size: int, stage: int) -> dict:
    """Bytes per rank of mixed-precision Adam under ZeRO stage 0-3 (Rajbhandari et al., arXiv 1910.02054).

    fp16 parameters 2Ψ, fp16 gradients 2Ψ, fp32 master weights, momentum and variance 12Ψ.
    Stage 1 shards the optimizer state, stage 2 the gradients too, stage 3 the parameters too.
    A sharded tensor of Ψ elements leaves ceil(Ψ/N) on each rank (the last shard is padded).
    """
    shard = ceil_div(num_params, world_size)
    return {"params": 2 * (shard if stage >= 3 else num_params),
            "grads": 2 * (shard if stage >= 2 else num_params),
            "optimizer": 12 * (shard if stage >= 1 else num_params)}
