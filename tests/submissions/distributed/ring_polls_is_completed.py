# exercise: distributed.ring_allreduce
# function: ring_allreduce
# verdict: passed
# timeout: 90
# Right (NCCL): isend and irecv, then a loop on is_completed() until both are done. NCCL's requests report
# completion once transferred; gloo's isend/irecv reported it only after wait(), so the loop never ended.
import torch
import torch.distributed as dist


def ring_allreduce(x):
    rank, n = dist.get_rank(), dist.get_world_size()
    out = x.clone()
    chunks = list(out.tensor_split(n))
    right, left = (rank + 1) % n, (rank - 1) % n
    for step in range(2 * (n - 1)):
        reduce = step < n - 1
        send_i = (rank - step) % n if reduce else (rank - step + n) % n
        recv_i = (send_i - 1) % n
        incoming = torch.empty_like(chunks[recv_i])
        requests = [dist.isend(chunks[send_i], right), dist.irecv(incoming, left)]
        while not all(r.is_completed() for r in requests):
            pass
        if reduce:
            chunks[recv_i] += incoming
        else:
            chunks[recv_i].copy_(incoming)
    return out
