"""timing.py on the CPU: the clock, the rounds, the interleaving and the bootstrap interval."""

import time

import numpy as np
import pytest
import torch

from gpuprinciples.measure import timing


def sleeper(seconds):
    def fn():
        time.sleep(seconds)  # sleeps at least this long
        return seconds
    return fn


def test_time_fn_median_of_a_sleep_is_sane():
    t = timing.time_fn(sleeper(0.002), device="cpu", budget_s=0.05, min_rounds=5, max_rounds=20)
    assert t.device == "cpu"
    assert 5 <= t.n <= 20 and len(t.samples) == t.n
    assert 0.002 <= t.median < 0.05
    assert t.p10 <= t.median <= t.p90
    assert t.spread == pytest.approx((t.p90 - t.p10) / t.median)
    assert "cpu" in str(t)


def test_clock_captured_at_import(monkeypatch):
    # A learner's cell that replaces time.perf_counter must not change what the grader measures.
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    t = timing.time_fn(sleeper(0.002), device="cpu", budget_s=0.0, min_rounds=5)
    assert t.median >= 0.002


def test_rounds_adapt_to_the_budget():
    cheap = timing.time_fn(lambda: None, device="cpu", budget_s=0.5, min_rounds=3, max_rounds=20)
    assert cheap.n == 20  # far more than 20 calls fit in the budget: capped
    dear = timing.time_fn(sleeper(0.01), device="cpu", budget_s=0.02, min_rounds=4, max_rounds=200)
    assert dear.n == 4  # two calls fit in the budget: raised to min_rounds


def test_warmup_untimed_fresh_args_and_every_output_seen():
    calls, made, seen = [], [], []

    def make_args():
        made.append(len(made))
        return (torch.full((3,), float(len(made))),)

    def fn(x):
        calls.append(x)
        return x * 2

    t = timing.time_fn(fn, make_args=make_args, device="cpu", warmup=3, budget_s=0.0, min_rounds=6,
                       on_result=seen.append)
    assert t.n == 6
    assert len(calls) == len(made) == 3 + 6  # warm-up calls too, each with fresh inputs
    assert len(seen) == 6
    for x, out in zip(calls[3:], seen):  # on_result got the timed calls' outputs, not the warm-up's
        assert torch.equal(out, x * 2)


def test_flush_is_a_noop_on_cpu_and_cuda_is_refused_without_a_gpu():
    timing.flush_l2("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA GPU"):
            timing.time_fn(lambda: None, device="cuda")
    with pytest.raises(ValueError):
        timing.time_fn(lambda: None, device="meta")


def test_compare_rotates_the_order_and_sees_every_output():
    log, seen = [], []

    def make(name):
        def fn():
            log.append(name)
            return name
        return fn

    names = ["a", "b", "c"]
    cmp = timing.compare({n: make(n) for n in names}, device="cpu", warmup=1, budget_s=0.0, min_rounds=7,
                         on_result=lambda name, out: seen.append((name, out)))
    timed = log[len(names):]  # after one warm-up call each
    assert len(cmp.rounds) == len(cmp.orders) == 7
    for r, order in enumerate(cmp.orders):
        assert order == tuple(names[(r + i) % 3] for i in range(3))
        assert tuple(timed[3 * r:3 * r + 3]) == order  # the calls really ran in that order
        assert set(cmp.rounds[r]) == set(names)
    assert seen == [(n, n) for n in timed]
    assert all(cmp.timings[n].n == 7 and cmp.timings[n].device == "cpu" for n in names)


def lognormal_rounds(n, ratio, seed):
    rng = np.random.default_rng(seed)
    base = rng.uniform(1e-3, 2e-3, n)  # round-to-round drift, shared by both in a round
    t_a = base * rng.lognormal(0.0, 0.1, n)
    t_b = ratio * base * rng.lognormal(0.0, 0.1, n)
    return t_a, t_b


def test_bootstrap_interval_contains_the_truth_and_narrows():
    small = timing.bootstrap_speedup(*lognormal_rounds(30, 2.0, seed=1))
    large = timing.bootstrap_speedup(*lognormal_rounds(3000, 2.0, seed=2))
    for s in (small, large):
        assert s.ci_low <= 2.0 <= s.ci_high
        assert s.ci_low <= s.ratio <= s.ci_high
    assert large.ci_high - large.ci_low < (small.ci_high - small.ci_low) / 4
    assert large.ci_low > 1.9  # tight enough to reject a wrong ratio
    # Deterministic: same data, same seed, same interval.
    assert timing.bootstrap_speedup(*lognormal_rounds(30, 2.0, seed=1)) == small


def test_comparison_speedup_pairs_rounds_and_table_names_the_device():
    t_a, t_b = lognormal_rounds(40, 3.0, seed=3)
    rounds = tuple({"fast": a, "slow": b} for a, b in zip(t_a, t_b))
    cmp = timing.Comparison(
        timings={k: timing.Timings.from_samples([r[k] for r in rounds], "cpu") for k in ("slow", "fast")},
        rounds=rounds, orders=(), device="cpu")
    s = cmp.speedup("fast", "slow")
    assert s.ratio == pytest.approx(float(np.median(t_b / t_a)))
    assert s.ci_low <= 3.0 <= s.ci_high
    assert cmp.speedup("slow", "fast").ratio == pytest.approx(1 / s.ratio, rel=0.05)
    table = cmp.table()
    assert "timed on cpu" in table and "speedup vs slow" in table
    assert f"{s.ratio:.2f}x" in table.splitlines()[-1]


@pytest.mark.gpu
def test_a_slow_host_enqueue_is_not_timed_as_device_time():
    """A call whose host part (here 2 ms of Python before a tiny launch) outlasts the shortest hold is still
    timed at its device time: the hold grows to outlast the host, so the window holds no idle GPU."""
    x = torch.zeros(1024, device="cuda")

    def slow_host():
        time.sleep(0.002)
        return x + 1

    fast = timing.compare({"slow host": slow_host, "plain": lambda: x + 1}, device="cuda", budget_s=0.05,
                          min_rounds=5, max_rounds=20)
    assert fast.timings["slow host"].median < 0.5e-3, fast.table()
    assert fast.timings["slow host"].median < 3 * fast.timings["plain"].median + 20e-6, fast.table()


def test_the_hold_outlasts_twice_the_slowest_host_enqueue_within_its_bounds(monkeypatch):
    """_hold_cycles with the GPU's pieces replaced: the sleep runs at 1 ns a cycle, and each call of a function
    takes its host time on a fake clock. The hold is twice the slowest median, never below HOLD_CYCLES, never
    past MAX_HOLD_S."""
    import contextlib

    clock = [0.0]

    class Event:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self, stream=None):
            self.at = clock[0]

        def elapsed_time(self, other):  # milliseconds
            return (other.at - self.at) * 1e3

    def sleep(cycles):
        clock[0] += cycles * 1e-9

    monkeypatch.setattr(timing, "_Event", Event)
    monkeypatch.setattr(timing, "_sleep", sleep)
    monkeypatch.setattr(timing, "_synchronize", lambda dev=None: None)
    monkeypatch.setattr(timing, "_perf_counter", lambda: clock[0])
    monkeypatch.setattr(torch.cuda, "device", lambda dev: contextlib.nullcontext())

    def host(seconds):
        def fn():
            clock[0] += seconds
        return fn

    dev = torch.device("cuda", 0)
    cycles, seconds = timing._hold_cycles([host(1e-4), host(1.2e-3)], lambda: (), dev)
    assert cycles == 2_400_000 and seconds == pytest.approx(2.4e-3)
    assert timing._hold_cycles([host(1e-5)], lambda: (), dev)[0] == timing.HOLD_CYCLES
    assert timing._hold_cycles([host(1.0)], lambda: (), dev)[1] == pytest.approx(timing.MAX_HOLD_S)
    assert timing._hold([host(1.0)], lambda: (), torch.device("cpu"), True) == (0, 0.0)
    assert timing._hold([host(1.0)], lambda: (), dev, False) == (0, 0.0)
