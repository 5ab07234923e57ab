"""Lesson 09, distributed training: real torch.distributed, graded on N gloo ranks.

A learner's function runs unchanged on every rank. The grader's child process starts N gloo ranks
(`distributed.run_ranks`), each rank calls the function under `count_collectives()`, and the
grader compares every rank's result with a single-process reference and reads the counted
collectives: how many, which kind, how many bytes.

A case holds the data itself (drawn in the grader's process), never a seed to rebuild it from, and
each rank is sent only its own share (`run_ranks(per_rank=...)`, ranks forked from a fresh server):
a rank's code that walks its frames or its memory finds its own slice, nothing from which the
answer could be had without communicating. References are computed in the grader's process.
"""

from __future__ import annotations

import torch

from ..kit import Case, FunctionExercise, ValueExercise
from ..lab import distributed as D

# -------------------------------------------------------------------------------------------------
# distributed.allreduce_gradients: data parallel by hand
# -------------------------------------------------------------------------------------------------


def _ddp_model(weights: list, frozen: bool) -> torch.nn.Module:
    """Linear → Tanh → Linear with the given weights (w1, b1, w2, b2)."""
    w1, _, w2, _ = weights
    model = torch.nn.Sequential(torch.nn.Linear(w1.shape[1], w1.shape[0]), torch.nn.Tanh(),
                                torch.nn.Linear(w2.shape[1], w2.shape[0]))
    with torch.no_grad():
        for p, w in zip(model.parameters(), weights):
            p.copy_(w)
    if frozen:  # a frozen parameter has no .grad: a solution must leave it alone
        model[0].bias.requires_grad_(False)
    return model


def _local_grads(model, x, y):
    model.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(model(x), y).backward()
    return [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]


def _ddp_rank(rank, world, fn, weights, frozen, x, y):
    """One rank: the shared model, and this rank's slice of the batch only (`per_rank`)."""
    model = _ddp_model(weights, frozen)
    _local_grads(model, x, y)
    with D.count_collectives() as counted:
        fn(model)
    return {"grads": [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()],
            "collectives": counted.as_dict()}


def _ddp_run(fn, args, kwargs):
    world, weights, xs, ys, frozen = args
    return D.run_ranks(_ddp_rank, world, (fn, weights, frozen), per_rank=list(zip(xs, ys)), timeout=180)


def _ddp_reference(world, weights, xs, ys, frozen):
    """In the grader's process: the gradient of the whole batch, and each rank's own."""
    model = _ddp_model(weights, frozen)
    local = [_local_grads(model, x, y) for x, y in zip(xs, ys)]
    return {"grads": _local_grads(model, torch.cat(xs), torch.cat(ys)), "local": local}


def _ddp_cases(gen: torch.Generator, mode: str) -> list[Case]:
    def draw(low, high):
        return int(torch.randint(low, high, (1,), generator=gen))
    specs = [(2, False), (3, True), (2, True)]  # world size 3 catches a hard-coded "/ 2"
    cases = []
    for world, frozen in specs:
        d_in, hidden, d_out = draw(3, 12), draw(5, 40), draw(1, 6)
        per_rank = draw(2, 9)
        weights = [torch.randn(shape, generator=gen) * 0.5
                   for shape in ((hidden, d_in), (hidden,), (d_out, hidden), (d_out,))]
        # each rank's slice is drawn apart: the case holds data, never a seed to rebuild it from
        xs = [torch.randn(per_rank, d_in, generator=gen) for _ in range(world)]
        ys = [torch.randn(per_rank, d_out, generator=gen) for _ in range(world)]
        label = f"{world} ranks, Linear{(d_in, hidden)}→Linear{(hidden, d_out)}, {per_rank} samples per rank" + (
            ", one frozen parameter" if frozen else "")
        cases.append(Case(label, (world, weights, xs, ys, frozen)))
    return cases


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-6)


def _ddp_compare(got, expected, case: Case) -> list[str]:
    world = case.args[0]
    where = f" (case {case.label})"
    want, local = expected["grads"], expected["local"]
    if not isinstance(got, list) or len(got) != world:
        return [f"expected one result per rank{where}"]
    reasons = []
    for rank, result in enumerate(got):
        grads = result["grads"]
        for i, (g, w) in enumerate(zip(grads, want)):
            if w is None:
                if g is not None:
                    reasons.append(f"rank {rank}: parameter {i} is frozen (requires_grad=False) and had no "
                                   f"gradient, but ends with one: skip parameters whose .grad is None{where}")
                continue
            if not isinstance(g, torch.Tensor):
                reasons.append(f"rank {rank}: parameter {i} lost its gradient{where}")
                continue
            if _close(g, w):
                continue
            reasons.append(_why_grad_wrong(rank, i, g, w, local, world) + where)
            break  # one sentence per rank is enough
        grad_bytes = sum(g.numel() * g.element_size() for g in want if g is not None)
        reasons += _ddp_traffic(rank, world, result["collectives"], grad_bytes, where)
    return _dedupe(reasons)


# an all-reduce, or the same in two halves (a reduce-scatter, then an all-gather: what a ring all-reduce does);
# a barrier carries no gradient (NCCL's is a one-element all-reduce)
_DDP_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "barrier")


def _ddp_traffic(rank: int, world: int, counted: dict, grad_bytes: int, where: str) -> list[str]:
    """What the counted collectives say: the gradients combined, each once (by the ring model's bytes)."""
    bytes_of = counted["bytes"]
    reduced = bytes_of.get("all_reduce", 0)
    halves = bytes_of.get("reduce_scatter", 0) + bytes_of.get("all_gather", 0)
    others = sorted(k for k in counted["counts"] if k not in _DDP_COLLECTIVES)
    reasons = []
    if others:
        reasons.append(f"rank {rank} called {', '.join(others)}: averaging gradients needs only all_reduce "
                       "(a broadcast copies one rank's gradients instead of combining them)" + where)
    if reduced == 0 and not halves:
        reasons.append(f"rank {rank} called no all_reduce: the gradients were never combined{where}")
    elif not halves and reduced > grad_bytes:
        reasons.append(f"rank {rank} all-reduced {reduced:,} bytes but the gradients are {grad_bytes:,} bytes "
                       f"({reduced / grad_bytes:.2g}×): all-reduce each gradient once, every extra "
                       f"pass costs another 2(n−1)/n of its size on the network{where}")
    elif halves:
        # an all-reduce sends 2(n−1)/n of its size, each half (n−1)/n; a half's tensor may be padded by up to n−1
        # elements (to a multiple of n). Compared in whole bytes, as multiples of (n−1)/n: a padding of exactly
        # n−1 elements is the budget to the byte, where floats came out 1e-13 over it
        n = world
        padding = sum((n - 1) * call["element_size"] for call in counted["calls"]
                      if call["kind"] in ("reduce_scatter", "all_gather"))
        if 2 * reduced + halves > 2 * grad_bytes + padding:
            sent, budget = (n - 1) / n * (2 * reduced + halves), 2 * (n - 1) / n * grad_bytes
            reasons.append(f"rank {rank} sent {sent:,.0f} bytes (all_reduce {reduced:,}, reduce_scatter "
                           f"{bytes_of.get('reduce_scatter', 0):,}, all_gather {bytes_of.get('all_gather', 0):,} "
                           f"bytes): combining the gradients once sends 2(n−1)/n of their {grad_bytes:,} bytes = "
                           f"{budget:,.0f}, as one all-reduce or a reduce-scatter then an all-gather of each{where}")
    return reasons


def _why_grad_wrong(rank, i, g, w, local, world) -> str:
    if _close(g, w * world):
        return (f"rank {rank}: the gradients are {world}× the single-process ones: all_reduce sums, "
                f"so divide by the world size ({world}) to average")
    if rank != 0 and local[0][i] is not None and _close(g, local[0][i]):
        return (f"rank {rank} ends with rank 0's own gradients: broadcast copies one rank's gradients "
                f"to all, it does not combine them; use all_reduce")
    if local[rank][i] is not None and _close(g, local[rank][i]):
        return f"rank {rank} kept its own local gradients: they were not combined across ranks"
    nonzero = w.abs() > 1e-6
    if bool(nonzero.any()):
        ratio = (g[nonzero] / w[nonzero]).double()
        if float(ratio.std(unbiased=False)) < 1e-4 * abs(float(ratio.mean())) + 1e-9:
            return (f"rank {rank}: the gradients are {float(ratio.mean()):.3g}× the single-process ones; "
                    f"the average over {world} ranks is the sum divided by {world}")
    err = (g.double() - w.double()).abs().max().item()
    return (f"rank {rank}: parameter {i}'s gradient differs from the single-process gradient of the whole "
            f"batch (max error {err:.3g})")


def _dedupe(reasons):
    return list(dict.fromkeys(reasons))


ALLREDUCE_GRADIENTS = FunctionExercise(
    id="distributed.allreduce_gradients",
    title="Data parallel by hand: average the gradients over all ranks",
    signature="allreduce_gradients(model: nn.Module) -> None  # on every rank, after backward; in place",
    cases=_ddp_cases,
    reference=_ddp_reference,
    run=_ddp_run,
    forks_ranks=True,
    compare=_ddp_compare,
    timeout_s=240.0,
    solution="gpuprinciples.course.kernels.distributed:allreduce_gradients",
    hints=(
        "Every rank computed gradients on its own slice of the batch; after your function every rank must "
        "hold the gradient of the whole batch: the average of the ranks' gradients.",
        "dist.all_reduce(t) replaces t, on every rank, with the sum over ranks; divide by dist.get_world_size().",
        "Skip parameters whose .grad is None (frozen ones).",
    ),
)

# -------------------------------------------------------------------------------------------------
# distributed.ring_allreduce: all-reduce from send and recv, graded on the counted bytes
# -------------------------------------------------------------------------------------------------


def _ring_rank(rank, world, fn, x):
    """One rank: its own tensor only (`per_rank`)."""
    with D.count_collectives() as counted:
        out = fn(x)
    return {"out": out.detach().clone() if isinstance(out, torch.Tensor) else None,
            "type": type(out).__name__, "collectives": counted.as_dict()}


def _ring_run(fn, args, kwargs):
    world, xs = args
    return D.run_ranks(_ring_rank, world, (fn,), per_rank=[(x,) for x in xs], timeout=180)


def _ring_reference(world, xs):
    return torch.stack(xs).double().sum(0)


def _ring_cases(gen: torch.Generator, mode: str) -> list[Case]:
    cases = []
    for world in (2, 3, 4):
        numel = int(torch.randint(40, 400, (1,), generator=gen))
        numel += 1 if numel % world == 0 else 0  # chunks of unequal size
        xs = [torch.randn(numel, generator=gen) for _ in range(world)]
        cases.append(Case(f"{world} ranks, {numel} float32 elements", (world, xs)))
    return cases


def ring_budget(world: int, numel: int, element_size: int = 4) -> int:
    """Most bytes one rank may send: 2(n−1) chunks of at most ceil(numel/n) elements."""
    return 2 * (world - 1) * D.ceil_div(numel, world) * element_size


def _ring_compare(got, expected, case: Case) -> list[str]:
    world, xs = case.args
    numel = xs[0].numel()
    where = f" (case {case.label})"
    reasons = []
    size = numel * 4
    for rank, result in enumerate(got):
        out = result["out"]
        if out is None:
            reasons.append(f"rank {rank} returned a {result['type']}, not a torch.Tensor{where}")
        elif tuple(out.shape) != (numel,) or out.dtype != torch.float32:
            reasons.append(f"rank {rank} returned shape {tuple(out.shape)} {out.dtype}, expected ({numel},) "
                           f"torch.float32{where}")
        elif not torch.allclose(out.double(), expected, rtol=1e-5, atol=1e-5):
            wrong = ~torch.isclose(out.double(), expected, rtol=1e-5, atol=1e-5)
            first = int(torch.nonzero(wrong)[0])
            if torch.allclose(out.double(), xs[rank].double()):
                reasons.append(f"rank {rank} returned its own input: nothing was summed{where}")
            else:
                chunk = next(c for c, idx in enumerate(torch.arange(numel).tensor_split(world)) if first in idx)
                reasons.append(f"rank {rank}: {int(wrong.sum())} of {numel} elements are not the sum over ranks; "
                               f"the first is element {first}, in chunk {chunk} of {world}: a chunk was sent, "
                               f"received or added in the wrong place{where}")
        counted = result["collectives"]
        not_p2p = sorted(k for k in counted["counts"] if k not in ("send", "recv", "barrier"))  # a barrier: no data
        if not_p2p:
            reasons.append(f"rank {rank} called {', '.join(not_p2p)}: this exercise builds the all-reduce "
                           f"itself, from send and recv only{where}")
            continue
        sent = counted["bytes"].get("send", 0)
        budget = ring_budget(world, numel)
        if sent > budget:
            reasons.append(f"rank {rank} sent {sent:,} bytes = {sent / size:.2f}·S; a ring all-reduce sends "
                           f"2(n−1)/n·S = {2 * (world - 1) / world:.2f}·S (at most {budget:,} bytes with "
                           f"unequal chunks){where}")
        elif sent == 0 and world > 1:
            reasons.append(f"rank {rank} sent nothing{where}")
    return _dedupe(reasons)


RING_ALLREDUCE = FunctionExercise(
    id="distributed.ring_allreduce",
    title="Ring all-reduce from send and recv: 2(n−1)/n · S per rank",
    signature="ring_allreduce(x: Tensor[S]) -> Tensor[S]  # on every rank: the sum of x over all ranks",
    cases=_ring_cases,
    reference=_ring_reference,
    run=_ring_run,
    forks_ranks=True,
    compare=_ring_compare,
    timeout_s=240.0,
    solution="gpuprinciples.course.kernels.distributed:ring_allreduce",
    hints=(
        "Split the tensor into n chunks with x.tensor_split(n) (sizes may differ by one).",
        "Reduce-scatter: for n − 1 steps, send one chunk to rank + 1 and add the chunk from rank − 1. "
        "At step s, rank r sends chunk (r − s) mod n.",
        "All-gather: n − 1 more steps pass the finished chunks around the ring, copying instead of adding.",
        "If every rank calls a blocking dist.send first, they can all wait forever: use dist.isend, "
        "then dist.recv, then wait() on the send.",
    ),
)

# -------------------------------------------------------------------------------------------------
# distributed.zero_memory: the ZeRO paper's memory model, graded exactly
# -------------------------------------------------------------------------------------------------


def _zero_cases(gen: torch.Generator, mode: str) -> list[Case]:
    def draw(low, high):
        return int(torch.randint(low, high, (1,), generator=gen))
    divisible = 8 * draw(10_000, 1_000_000)
    odd = 8 * draw(10_000, 1_000_000) + draw(1, 8)  # not a multiple of 8 ranks: the last shard is padded
    big = 7_500_000_000  # the paper's 7.5B-parameter example
    return [
        Case("stages 0–3, Ψ divisible by N", ([(divisible, 8, s) for s in range(4)],)),
        Case("stages 0–3, Ψ not divisible by N", ([(odd, 8, s) for s in range(4)] + [(odd, 3, 3)],)),
        Case("7.5B parameters on 64 ranks; one rank", ([(big, 64, s) for s in range(4)]
                                                       + [(draw(5, 100), 1, 3)],)),
    ]


def _zero_run(fn, args, kwargs):
    return [fn(psi, n, stage) for psi, n, stage in args[0]]


def _zero_reference(combos):
    return [D.zero_memory(psi, n, stage) for psi, n, stage in combos]


_ZERO_PARTS = {  # part -> (bytes per parameter, first stage that shards it, what it is)
    "params": (2, 3, "fp16 parameters"),
    "grads": (2, 2, "fp16 gradients"),
    "optimizer": (12, 1, "fp32 master weights, momentum and variance"),
}


def _zero_compare(got, expected, case: Case) -> list[str]:
    reasons = []
    for (psi, n, stage), answer, want in zip(case.args[0], got, expected):
        if not isinstance(answer, dict) or sorted(answer) != sorted(want):
            reasons.append(f"stage {stage}: return a dict with keys params, grads, optimizer "
                           f"(got {answer!r:.80})")
            continue
        for key, value in want.items():
            mine = answer[key]
            if not isinstance(mine, bool) and isinstance(mine, (int, float)) and mine == value:
                continue
            per, first, what = _ZERO_PARTS[key]
            sharded = stage >= first
            if sharded and psi % n and mine == per * (psi // n):
                why = (f"Ψ = {psi:,} is not a multiple of N = {n}: each rank holds ceil(Ψ/N) = "
                       f"{D.ceil_div(psi, n):,} elements of a sharded tensor, not Ψ // N")
            elif sharded:
                why = f"{what} ({per} bytes each) are sharded from stage {first} on: 1/N of them per rank"
            else:
                why = f"{what} ({per} bytes each) are not sharded before stage {first}: every rank holds all of them"
            reasons.append(f"stage {stage}, Ψ = {psi:,}, N = {n}: {key} = {mine!r} bytes per rank, expected "
                           f"{value:,} ({why})")
    return _dedupe(reasons)


ZERO_MEMORY = FunctionExercise(
    id="distributed.zero_memory",
    title="Bytes per rank under ZeRO stages 0–3 (mixed-precision Adam)",
    signature="zero_memory(num_params: int, world_size: int, stage: int) -> dict  # params, grads, optimizer",
    cases=_zero_cases,
    reference=_zero_reference,
    run=_zero_run,
    compare=_zero_compare,
    timeout_s=120.0,
    solution="gpuprinciples.course.kernels.distributed:zero_memory",
    hints=(
        "Unsharded (stage 0): params 2Ψ, grads 2Ψ, optimizer 12Ψ bytes (arXiv 1910.02054, section 3.1).",
        "Stage 1 shards the optimizer state over N ranks, stage 2 also the gradients, stage 3 also the parameters.",
        "A sharded tensor of Ψ elements leaves ceil(Ψ / N) on each rank: -(-psi // n) in integers.",
    ),
)

# -------------------------------------------------------------------------------------------------
# distributed.bubble: predict the pipeline bubble before measuring it
# -------------------------------------------------------------------------------------------------

BUBBLE_STAGES, BUBBLE_MICROBATCHES = 4, 12

BUBBLE = ValueExercise(
    id="distributed.bubble",
    title="Predict: GPipe's idle fraction with 4 stages and 12 micro-batches",
    question=(f"A pipeline of p = {BUBBLE_STAGES} equal stages runs m = {BUBBLE_MICROBATCHES} micro-batches "
              "(all forwards, then all backwards). What fraction of each stage's time is idle?"),
    expected=lambda: D.bubble_fraction(BUBBLE_STAGES, BUBBLE_MICROBATCHES),
    rel_tol=0.01,
    hints=("Count time slots: the last micro-batch leaves the last stage after m + p − 1 slots; each stage "
           "works in m of them.",),
)

EXERCISES = (ALLREDUCE_GRADIENTS, RING_ALLREDUCE, ZERO_MEMORY, BUBBLE)

__all__ = ["EXERCISES", "ring_budget"]
