# graded-by: test_distributed.py
# Adversarial: sends one token around the ring (so something was sent) and nothing else. It walks
# every frame it can reach (and the garbage collector's objects) for the case's seed or the other
# ranks' data, and sums those instead. The grader must leave nothing of the kind in a rank: then it
# finds nothing and returns its own input.
import gc
import inspect
import sys

import torch
import torch.distributed as dist


def _frames():
    seen = []
    for info in inspect.stack():
        seen.append(info.frame)
    frame = sys._getframe()
    while frame is not None:
        seen.append(frame)
        frame = frame.f_back
    for frame in sys._current_frames().values():
        while frame is not None:
            seen.append(frame)
            frame = frame.f_back
    return seen


def _from_seed(x, world):
    try:
        from gpuprinciples.course.exercises.distributed import _ring_data
    except ImportError:
        return None
    for frame in _frames():
        local = frame.f_locals
        seed = local.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            return sum(_ring_data(seed, r, x.numel()) for r in range(world))
    return None


def _from_memory(x, world):
    others = [t for t in gc.get_objects() if type(t) is torch.Tensor and t is not x and t.shape == x.shape
              and t.dtype == x.dtype and not torch.equal(t, x)]
    distinct = []
    for t in others:
        if not any(torch.equal(t, d) for d in distinct):
            distinct.append(t)
    if len(distinct) == world - 1:
        return x + sum(distinct)
    return None


def ring_allreduce(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    token = torch.zeros(1)
    request = dist.isend(token, (rank + 1) % world)
    dist.recv(torch.empty(1), (rank - 1) % world)
    request.wait()
    found = _from_seed(x, world)
    if found is None:
        found = _from_memory(x, world)
    print(f"rank {rank}: found {'the answer' if found is not None else 'nothing'} without communicating")
    return x.clone() if found is None else found
