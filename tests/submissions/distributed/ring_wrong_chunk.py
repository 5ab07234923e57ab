# graded-by: test_distributed.py
# A ring with the right volume, but the all-gather passes the wrong chunk along.
import torch
import torch.distributed as dist


def ring_allreduce(x):
    rank, n = dist.get_rank(), dist.get_world_size()
    out = x.clone()
    chunks = list(out.tensor_split(n))
    right, left = (rank + 1) % n, (rank - 1) % n
    for step in range(n - 1):
        send_i, recv_i = (rank - step) % n, (rank - step - 1) % n
        incoming = torch.empty_like(chunks[recv_i])
        req = dist.isend(chunks[send_i], right)
        dist.recv(incoming, left)
        req.wait()
        chunks[recv_i] += incoming
    for step in range(n - 1):
        send_i, recv_i = (rank - step) % n, (rank - step - 1) % n  # off by one: should start at rank + 1
        incoming = torch.empty_like(chunks[recv_i])
        req = dist.isend(chunks[send_i], right)
        dist.recv(incoming, left)
        req.wait()
        chunks[recv_i].copy_(incoming)
    return out
