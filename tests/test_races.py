"""Two programs of one launch racing, found from their accesses under the interpreter (races.py), and the ways
kernels order their programs let through."""

import pytest
import torch
import triton
import triton.language as tl

from gpuprinciples.machine import runtime
from gpuprinciples.measure import counters, races

pytestmark = pytest.mark.skipif(not runtime.INTERPRETER, reason="the interpreter's programs run one at a time")
PROGRAMS = 4


@triton.jit
def _partial(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    return tl.sum(tl.load(x + offs, mask=offs < n, other=0.0))


@triton.jit
def plain_add(x, out, n, BLOCK: tl.constexpr):  # every program: out += its partial sum, by a load and a store
    tl.store(out, tl.load(out) + _partial(x, n, BLOCK))


@triton.jit
def atomic_add(x, out, n, BLOCK: tl.constexpr):
    tl.atomic_add(out, _partial(x, n, BLOCK))


@triton.jit
def locked_add(x, out, lock, n, BLOCK: tl.constexpr):  # Triton's layer-norm backward: a spin lock around the add
    s = _partial(x, n, BLOCK)
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    tl.store(out, tl.load(out) + s)
    tl.atomic_xchg(lock, 0)


@triton.jit
def last_merges(x, parts, count, out, n, BLOCK: tl.constexpr):  # the last program to count merges the others'
    tl.store(parts + tl.program_id(0), _partial(x, n, BLOCK))
    if tl.atomic_add(count, 1) == tl.num_programs(0) - 1:
        tl.store(out, tl.sum(tl.load(parts + tl.arange(0, BLOCK // 16))))


@triton.jit
def flag_then_read(x, parts, flag, out, n, BLOCK: tl.constexpr):  # program 1 waits on program 0's flag
    pid = tl.program_id(0)
    if pid == 0:
        tl.store(parts, _partial(x, n, BLOCK))
        tl.atomic_xchg(flag, 1)
    else:
        while tl.load(flag, volatile=True) == 0:
            pass
        tl.store(out + pid, tl.load(parts))


@triton.jit
def read_neighbour(x, out, n, BLOCK: tl.constexpr):  # in place: each program reads its neighbour's first element
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    nxt = tl.load(x + (offs + 1) % n)
    tl.store(x + offs, nxt, mask=offs < n)


@triton.jit
def same_value(out):  # every program writes the same four values: the memory ends the same in any order
    tl.store(out + tl.arange(0, 4), tl.full([4], 3.0, tl.float32))


@triton.jit
def own_value(out):
    tl.store(out + tl.arange(0, 4), tl.full([4], 1.0, tl.float32) * tl.program_id(0))


def _graded(launch):
    """The launch inside a recording that checks races: None, or the refusal's sentence."""
    try:
        with counters.record(races=True):
            launch()
    except races.RaceBetweenPrograms as refusal:
        return str(refusal)
    return None


x = torch.randn(PROGRAMS * 64)
n = x.numel()


def test_a_read_modify_write_by_every_program_is_refused_in_words():
    said = _graded(lambda: plain_add[(PROGRAMS,)](x, torch.zeros(1), n, BLOCK=64))
    assert said is not None
    assert "kernel `plain_add`: programs (0, 0, 0) and (1, 0, 0) of one launch touch the same 1 element(s) of " \
           "the memory under `out` and nothing orders them: program (0, 0, 0) stores there, program (1, 0, 0) " \
           "loads it" in said
    assert "tl.atomic_add" in said


def test_an_in_place_neighbour_read_is_refused():
    said = _graded(lambda: read_neighbour[(PROGRAMS,)](x.clone(), None, n, BLOCK=64))
    assert said is not None and "loads it, program" in said and "stores there" in said  # the load came first


def test_two_programs_storing_different_values_at_one_place_are_refused():
    assert "stores there, program (1, 0, 0) stores there" in _graded(lambda: own_value[(PROGRAMS,)](torch.zeros(4)))
    assert _graded(lambda: same_value[(PROGRAMS,)](torch.zeros(4))) is None


@pytest.mark.parametrize("name, launch", [
    ("atomics", lambda: atomic_add[(PROGRAMS,)](x, torch.zeros(1), n, BLOCK=64)),
    ("a lock", lambda: locked_add[(PROGRAMS,)](x, torch.zeros(1), torch.zeros(1, dtype=torch.int32), n, BLOCK=64)),
    ("a counter", lambda: last_merges[(PROGRAMS,)](x, torch.zeros(PROGRAMS), torch.zeros(1, dtype=torch.int32),
                                                   torch.zeros(1), n, BLOCK=64)),
    ("a flag", lambda: flag_then_read[(2,)](x, torch.zeros(1), torch.zeros(1, dtype=torch.int32), torch.zeros(2), n,
                                            BLOCK=64)),
])
def test_programs_ordered_by_an_atomic_are_let_through(name, launch):
    assert _graded(launch) is None, name


def test_the_sums_are_right_where_let_through():
    out = torch.zeros(1)
    with counters.record(races=True):
        locked_add[(PROGRAMS,)](x, out, torch.zeros(1, dtype=torch.int32), n, BLOCK=64)
    assert torch.allclose(out, x.sum(), atol=1e-4)


def test_only_a_recording_that_asks_checks_races():
    out = torch.zeros(1)
    with counters.record():
        plain_add[(PROGRAMS,)](x, out, n, BLOCK=64)  # the interpreter's order: every addition lands
    plain_add[(PROGRAMS,)](x, out, n, BLOCK=64)
    assert torch.allclose(out, 2 * x.sum(), atol=1e-4)
    assert counters._state.races is None  # nothing logged after a launch


def test_a_refusal_the_code_catches_stays_on_the_recording():
    """The grader raises it again after the call (worker.py): catching it does not undo the race."""
    with counters.record(races=True) as rec:
        try:
            plain_add[(PROGRAMS,)](x, torch.zeros(1), n, BLOCK=64)
        except races.RaceBetweenPrograms:
            pass
    assert [type(e) for e in rec.refused] == [races.RaceBetweenPrograms]


def test_a_log_switched_off_while_the_launch_runs_is_refused():
    """The grid callable is the learner's code and runs inside the launch, after the log is made."""
    def grid(meta):
        counters._state.races = None
        return (PROGRAMS,)

    said = _graded(lambda: plain_add[grid](x, torch.zeros(1), n, BLOCK=64))
    assert said is not None and "log of this launch's accesses was replaced while it ran" in said
