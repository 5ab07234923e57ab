# exercise: distributed.ring_allreduce
# function: ring_allreduce
# verdict: failed
# says: collectiverace
# says: read a tensor that the irecv
# Wrong: ring_barrier's ring, whose reduce-scatter receives each chunk with an irecv it never waits for, then adds
# it. On a GPU the addition may read the chunk before NCCL has written it (waiting for the isend covers only the
# isend); gloo dropped the unwaited receive and timed out after 60 s.
# mutant-of: distributed/ring_barrier.py
# @@
#          send_i, recv_i = (rank - step) % n, (rank - step - 1) % n
#          incoming = torch.empty_like(chunks[recv_i])
#          request = dist.isend(chunks[send_i], right)
# -        dist.recv(incoming, left)
# +        dist.irecv(incoming, left)
