# exercise: distributed.ring_allreduce
# function: ring_allreduce
# verdict: passed
# Right (NCCL): ring_batch_waits_first's ring with an isend and an irecv at each step, each waited for, then all of
# them once more at the end "to be safe". NCCL's second wait returns at once; gloo's second wait on an isend or
# irecv waited for another message, until its timeout. The graded ranks' wait returns at once for a request
# already waited for.
# mutant-of: distributed/ring_batch_waits_first.py
# @@
#      right, left = (rank + 1) % n, (rank - 1) % n
# +    requests = []
#      for step in range(2 * (n - 1)):
# @@
# -        ops = [dist.P2POp(dist.irecv, incoming, left), dist.P2POp(dist.isend, chunks[send_i], right)]
# -        dist.batch_isend_irecv(ops)[0].wait()
# +        pair = [dist.isend(chunks[send_i], right), dist.irecv(incoming, left)]
# +        for request in pair:
# +            request.wait()
# +        requests += pair
# @@
#              chunks[recv_i].copy_(incoming)
# +    for request in requests:
# +        request.wait()
#      return out
