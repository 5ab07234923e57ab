"""Two programs of one launch that touch the same bytes, one of them writing, with nothing ordering them
(under the interpreter).

On a GPU the programs of one launch run at the same time, in an order nobody chose: when program A stores where
program B loads or stores, B may see A's value or the one before it. A read-modify-write of dQ by every key tile's
program loses additions on an H100; the interpreter runs the programs one after another, so every addition lands
and the values cannot show the race. The accesses can: while a graded launch runs (counters.py's hooks), every
load, store and atomic of every program is logged here, and when the launch ends a race is refused in a sentence.

A race is a pair of accesses to one address by two programs where one is a plain store, or an atomic against a
plain load or store. Not a race:
* two atomics (that is what they are for);
* two plain stores of the same bytes (the memory ends the same in either order);
* a pair ordered by an atomic: the earlier program does an atomic on some address after its access, the later one
  an atomic on that address before its own (Triton's atomics default to acquire-release). A lock, a counter whose
  last program merges the others' partial results, a flag: what kernels use to order programs. Only direct pairs
  are followed (A orders B, B orders C does not order A and C); a volatile load counts as an atomic (a spin on a
  flag).
"""

from __future__ import annotations

import numpy as np

LOAD, STORE, ATOMIC = 0, 1, 2
_MOST_PAIRS = 20_000  # pairs looked at for an ordering before the launch is let through (never a doubtful refusal)
_MOST_LANES = 4_000_000  # lanes logged in one launch (about 100 MB to sort); past that the launch is not checked


class RaceBetweenPrograms(RuntimeError):
    """Two programs of one launch raced; the message is the sentence for the learner."""


class Log:
    """Every access of every program of one launch, in the order the interpreter ran them."""

    def __init__(self):
        self.events: list[tuple[int, tuple, np.ndarray, int, np.ndarray | None]] = []  # the order they ran in
        self.lanes = 0
        self.too_many = False  # past _MOST_LANES: nothing more is logged and the launch is not checked

    def note(self, kind: int, program: tuple, addresses: np.ndarray, itemsize: int,
             stored: np.ndarray | None = None) -> None:
        """`stored`: for a plain store, its bytes lane by lane (uint8 [lanes, itemsize]) where they could be read."""
        self.lanes += addresses.size
        if self.lanes > _MOST_LANES:
            self.too_many, self.events = True, []
        if addresses.size and not self.too_many:
            values = None
            if kind == STORE and stored is not None and itemsize in (1, 2, 4, 8) and stored.shape == (addresses.size,
                                                                                                     itemsize):
                values = np.ascontiguousarray(stored).view(f"<u{itemsize}").reshape(-1).astype(np.uint64)
            self.events.append((kind, program, addresses.astype(np.int64), itemsize, values))


def check(log: Log, kernel: str, extents: list[tuple[int, int, str]] | None) -> None:
    """Raise RaceBetweenPrograms for the first unordered pair of the launch `log` holds."""
    if log.too_many or len({event[1] for event in log.events}) < 2:
        return
    race = _first_race(log)
    if race is None:
        return
    first, second, address, kind_first, kind_second, lanes = race
    where = ""
    for start, end, name in extents or ():
        if start <= address < end:
            where = f" of the memory under `{name}`"
            break
    what = {LOAD: "loads it", STORE: "stores there", ATOMIC: "does an atomic there"}
    raise RaceBetweenPrograms(
        f"kernel `{kernel}`: programs {first} and {second} of one launch touch the same {lanes:,} element(s){where} "
        f"and nothing orders them: program {first} {what[kind_first]}, program {second} {what[kind_second]}. On a "
        "GPU the programs of a launch run at the same time, in no set order, so the result depends on which came "
        "first (a read-modify-write loses additions); the interpreter runs them one after another, which hides "
        "the race. Give each program its own output elements, or accumulate with tl.atomic_add")


def _first_race(log: Log):
    kinds = np.array([e[0] for e in log.events], dtype=np.int8)
    sizes = np.array([e[2].size for e in log.events])
    programs = sorted({e[1] for e in log.events})
    rank = {p: i for i, p in enumerate(programs)}
    addr = np.concatenate([e[2] for e in log.events])
    kind = np.repeat(kinds, sizes)
    when = np.repeat(np.arange(len(log.events)), sizes)
    who = np.repeat(np.array([rank[e[1]] for e in log.events]), sizes)
    item = np.repeat(np.array([e[3] for e in log.events]), sizes)
    value = np.concatenate([e[4] if e[4] is not None else np.zeros(e[2].size, np.uint64) for e in log.events])
    known = np.repeat(np.array([e[4] is not None for e in log.events]), sizes)
    atomic_at = {"addr": addr[kind == ATOMIC], "who": who[kind == ATOMIC], "when": when[kind == ATOMIC]}

    # only addresses a plain store touches, or an atomic and a plain load both: nothing else can race
    candidates = np.union1d(addr[kind == STORE], np.intersect1d(addr[kind == ATOMIC], addr[kind == LOAD]))
    keep = np.isin(addr, candidates)
    if not keep.any():
        return None
    addr, kind, when, who, item, value, known = (a[keep] for a in (addr, kind, when, who, item, value, known))
    order = np.lexsort((when, addr))
    addr, kind, when, who, item, value, known = (a[order] for a in (addr, kind, when, who, item, value, known))
    n = addr.size
    index = np.arange(n)
    group = np.r_[0, np.flatnonzero(addr[1:] != addr[:-1]) + 1]
    group_start = np.repeat(group, np.diff(np.r_[group, n]))
    writes = kind != LOAD
    # every access against the last write before it at its address, every load against the next write after it
    last_write = np.maximum.accumulate(np.where(writes, index, -1))
    before = np.r_[-1, last_write[:-1]]
    pairs_a = [np.stack([before, index])[:, before >= group_start]]
    group_end = np.repeat(np.r_[group[1:], n], np.diff(np.r_[group, n]))
    next_write = np.minimum.accumulate(np.where(writes, index, n)[::-1])[::-1]
    after = np.r_[next_write[1:], n]
    loads = (kind == LOAD) & (after < group_end)
    pairs_a.append(np.stack([index, after])[:, loads])
    a, b = np.concatenate(pairs_a, axis=1)
    racing = who[a] != who[b]
    racing &= ~((kind[a] == ATOMIC) & (kind[b] == ATOMIC))
    same_store = (kind[a] == STORE) & (kind[b] == STORE) & known[a] & known[b] & (item[a] == item[b]) & \
        (value[a] == value[b])
    racing &= ~same_store
    racing &= ~((kind[a] == LOAD) & (kind[b] == LOAD))
    a, b = a[racing], b[racing]
    if a.size == 0:
        return None

    # the pairs an atomic orders: one check per (program, time, program, time), not per lane
    ops = np.unique(np.stack([who[a], when[a], who[b], when[b]], axis=1), axis=0)
    by_program = np.lexsort((atomic_at["when"], atomic_at["who"]))
    atom_who, atom_when, atom_addr = (atomic_at[k][by_program] for k in ("who", "when", "addr"))
    for p, t1, q, t2 in ops[:_MOST_PAIRS]:
        if _ordered(atom_who, atom_when, atom_addr, p, t1, q, t2):
            continue
        lanes = (who[a] == p) & (when[a] == t1) & (who[b] == q) & (when[b] == t2)
        i, j = a[lanes][0], b[lanes][0]
        return (programs[p], programs[q], int(addr[i]), int(kind[i]), int(kind[j]), int(np.unique(addr[a[lanes]]).size))
    return None


def _ordered(atom_who, atom_when, atom_addr, p, t1, q, t2) -> bool:
    """Program p did an atomic on some address after time t1 and program q one on that address before t2."""
    lo, hi = np.searchsorted(atom_who, [p, p + 1])
    released = atom_addr[lo:hi][atom_when[lo:hi] > t1]
    lo, hi = np.searchsorted(atom_who, [q, q + 1])
    acquired = atom_addr[lo:hi][atom_when[lo:hi] < t2]
    return released.size > 0 and acquired.size > 0 and np.intersect1d(released, acquired).size > 0
