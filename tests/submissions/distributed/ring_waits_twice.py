# exercise: distributed.ring_allreduce
# function: ring_allreduce
# verdict: passed
# Right (NCCL): waits for every request at each step, then once more for all of them at the end "to be safe".
# NCCL's second wait returns at once; gloo's second wait on an isend or irecv waited for another message, until
# its timeout. The graded ranks' wait returns at once for a request already waited for.
import torch
import torch.distributed as dist


def ring_allreduce(x):
    rank, n = dist.get_rank(), dist.get_world_size()
    out = x.clone()
    chunks = list(out.tensor_split(n))
    right, left = (rank + 1) % n, (rank - 1) % n
    requests = []
    for step in range(2 * (n - 1)):
        reduce = step < n - 1
        send_i = (rank - step) % n if reduce else (rank - step + n) % n
        recv_i = (send_i - 1) % n
        incoming = torch.empty_like(chunks[recv_i])
        pair = [dist.isend(chunks[send_i], right), dist.irecv(incoming, left)]
        for request in pair:
            request.wait()
        requests += pair
        if reduce:
            chunks[recv_i] += incoming
        else:
            chunks[recv_i].copy_(incoming)
    for request in requests:
        request.wait()
    return out
