# graded-by: test_distributed.py
# Adversarial: all-reduces one token (so a collective was called) and nothing else. It walks every
# frame it can reach for the case's seed or for a batch beside its own model, and sets the gradients
# of the whole batch from those. The grader must leave nothing of the kind in a rank: then all it
# finds is its own slice, and the gradients stay local.
import copy
import inspect
import sys

import torch
import torch.distributed as dist


def _frames():
    seen = [info.frame for info in inspect.stack()]
    for frame in sys._current_frames().values():
        while frame is not None:
            seen.append(frame)
            frame = frame.f_back
    return seen


def _whole_batch_grads(model, x, y):
    twin = copy.deepcopy(model)
    twin.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(twin(x), y).backward()
    return [p.grad for p in twin.parameters()]


def _found(model):
    for frame in _frames():
        local = frame.f_locals
        if all(k in local for k in ("seed", "dims", "per_rank", "frozen")):
            try:
                from gpuprinciples.course.exercises.distributed import _ddp_problem
            except ImportError:
                continue
            world = dist.get_world_size()
            _, x, y = _ddp_problem(local["seed"], local["dims"], local["per_rank"] * world, local["frozen"])
            print("found the answer: the case's seed")
            return x, y
    for frame in _frames():
        local = frame.f_locals
        x, y = local.get("x"), local.get("y")
        if local.get("model") is model and isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            return x, y
    return None


def allreduce_gradients(model):
    dist.all_reduce(torch.zeros(1))
    found = _found(model)
    if found is None:
        return
    for p, g in zip(model.parameters(), _whole_batch_grads(model, *found)):
        if p.grad is not None:
            p.grad.copy_(g)
