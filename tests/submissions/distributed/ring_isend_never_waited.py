# exercise: distributed.ring_allreduce
# function: ring_allreduce
# verdict: failed
# says: collectiverace
# says: before wait() on its request
# Wrong: ring_barrier's ring with its isend requests kept but never waited for. The all-gather writes into the
# chunk the reduce-scatter's isend sent, and PyTorch leaves a tensor changed before its isend's wait() undefined.
# On NCCL as init_process_group("nccl") starts it (lazily), each pair of ranks sends on a stream of its own: on 3
# or more ranks nothing orders the write (the rank's stream) after the send (NCCL's). With device_id= (eager, as
# lab.init does) PyTorch serialises unbatched sends with all of the group's ops, and the values come out right
# by luck of that order. gloo tore the connections down under the unfinished sends ("Connection reset").
# mutant-of: distributed/ring_barrier.py
# @@
#      dist.barrier()
# +    requests = []
#      for step in range(n - 1):
#          send_i, recv_i = (rank - step) % n, (rank - step - 1) % n
#          incoming = torch.empty_like(chunks[recv_i])
# -        request = dist.isend(chunks[send_i], right)
# +        requests.append(dist.isend(chunks[send_i], right))
#          dist.recv(incoming, left)
# -        request.wait()
#          chunks[recv_i] += incoming
# @@
#          incoming = torch.empty_like(chunks[recv_i])
# -        request = dist.isend(chunks[send_i], right)
# +        requests.append(dist.isend(chunks[send_i], right))
#          dist.recv(incoming, left)
# -        request.wait()
#          chunks[recv_i].copy_(incoming)
