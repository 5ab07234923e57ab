# exercise: distributed.ring_allreduce
# function: ring_allreduce
# verdict: failed
# says: collectiverace
# says: before wait() on its request
# Wrong: the reference ring with its isend requests kept but never waited for. The all-gather writes into the
# chunk the reduce-scatter's isend sent: with no wait() nothing orders the two on a GPU (the write on the rank's
# stream, the send on NCCL's). gloo tore the connections down under the unfinished sends ("Connection reset").
import torch
import torch.distributed as dist


def ring_allreduce(x):
    rank, n = dist.get_rank(), dist.get_world_size()
    out = x.clone()
    chunks = list(out.tensor_split(n))
    right, left = (rank + 1) % n, (rank - 1) % n
    requests = []
    for step in range(n - 1):
        send_i, recv_i = (rank - step) % n, (rank - step - 1) % n
        incoming = torch.empty_like(chunks[recv_i])
        requests.append(dist.isend(chunks[send_i], right))
        dist.recv(incoming, left)
        chunks[recv_i] += incoming
    for step in range(n - 1):
        send_i, recv_i = (rank + 1 - step) % n, (rank - step) % n
        incoming = torch.empty_like(chunks[recv_i])
        requests.append(dist.isend(chunks[send_i], right))
        dist.recv(incoming, left)
        chunks[recv_i].copy_(incoming)
    return out
