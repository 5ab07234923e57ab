# exercise: distributed.ring_allreduce
# function: ring_allreduce
# verdict: passed
# timeout: 90
# Right (NCCL): ring_batch_waits_first's ring with an isend and an irecv at each step, then a loop on is_completed()
# until both are done. NCCL's requests report completion once transferred; gloo's isend/irecv reported it only
# after wait(), so the loop never ended.
# mutant-of: distributed/ring_batch_waits_first.py
# @@
# -        ops = [dist.P2POp(dist.irecv, incoming, left), dist.P2POp(dist.isend, chunks[send_i], right)]
# -        dist.batch_isend_irecv(ops)[0].wait()
# +        requests = [dist.isend(chunks[send_i], right), dist.irecv(incoming, left)]
# +        while not all(r.is_completed() for r in requests):
# +            pass
