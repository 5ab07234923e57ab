# exercise: distributed.ring_allreduce
# function: ring_allreduce
# verdict: failed
# says: collectiverace
# says: was still sending
# Wrong: copies each chunk into one send buffer and isends it without ever waiting: the next step overwrites the
# buffer while the isend may still be reading it (on a GPU the copy runs on the rank's stream, the send on NCCL's,
# one per pair of ranks as NCCL starts lazily; with device_id= the group's ops are serialised and the blocking
# recv's wait happens to order them: undefined by PyTorch's contract either way).
# gloo cancelled the dropped sends and every rank timed out after 60 s; it now fails at once, as a race.
import torch
import torch.distributed as dist


def ring_allreduce(x):
    rank, n = dist.get_rank(), dist.get_world_size()
    out = x.clone()
    chunks = list(out.tensor_split(n))
    right, left = (rank + 1) % n, (rank - 1) % n
    send_buffer = torch.empty(chunks[0].numel())
    recv_buffer = torch.empty(chunks[0].numel())
    for step in range(2 * (n - 1)):
        reduce = step < n - 1
        send_i = (rank - step) % n if reduce else (rank - step + n) % n
        recv_i = (send_i - 1) % n
        sending, receiving = send_buffer[:chunks[send_i].numel()], recv_buffer[:chunks[recv_i].numel()]
        sending.copy_(chunks[send_i])
        dist.isend(sending, right)
        dist.recv(receiving, left)
        if reduce:
            chunks[recv_i] += receiving
        else:
            chunks[recv_i].copy_(receiving)
    return out
