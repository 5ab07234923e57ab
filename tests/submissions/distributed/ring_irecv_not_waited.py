# exercise: distributed.ring_allreduce
# function: ring_allreduce
# verdict: failed
# says: collectiverace
# says: read a tensor that the irecv
# Wrong: adds the chunk an irecv is receiving without waiting for the irecv. On a GPU the addition may read it
# before NCCL has written it; gloo dropped the unwaited receive and timed out after 60 s.
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
        request = dist.isend(chunks[send_i], right)
        dist.irecv(incoming, left)
        request.wait()
        chunks[recv_i] += incoming
    for step in range(n - 1):
        send_i, recv_i = (rank + 1 - step) % n, (rank - step) % n
        incoming = torch.empty_like(chunks[recv_i])
        request = dist.isend(chunks[send_i], right)
        dist.recv(incoming, left)
        request.wait()
        chunks[recv_i].copy_(incoming)
    return out
