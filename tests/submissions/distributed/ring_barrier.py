# exercise: distributed.ring_allreduce
# function: ring_allreduce
# verdict: passed
# Right: the reference ring between two barriers. A barrier moves no data (NCCL's is a one-element all-reduce);
# the grader once failed it as a collective other than send and recv.
import torch
import torch.distributed as dist


def ring_allreduce(x):
    rank, n = dist.get_rank(), dist.get_world_size()
    out = x.clone()
    chunks = list(out.tensor_split(n))
    right, left = (rank + 1) % n, (rank - 1) % n
    dist.barrier()
    for step in range(n - 1):
        send_i, recv_i = (rank - step) % n, (rank - step - 1) % n
        incoming = torch.empty_like(chunks[recv_i])
        request = dist.isend(chunks[send_i], right)
        dist.recv(incoming, left)
        request.wait()
        chunks[recv_i] += incoming
    for step in range(n - 1):
        send_i, recv_i = (rank + 1 - step) % n, (rank - step) % n
        incoming = torch.empty_like(chunks[recv_i])
        request = dist.isend(chunks[send_i], right)
        dist.recv(incoming, left)
        request.wait()
        chunks[recv_i].copy_(incoming)
    dist.barrier()
    return out
