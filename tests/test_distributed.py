"""Lesson 09: real torch.distributed on gloo ranks: the grader, the counters, and no orphans.

The grading runs are started together (two at a time: each spawns a child that forks its ranks)
in one fixture, so the file stays well under a minute on two cores.
"""

import os
import signal
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from gpuprinciples.course.lab import distributed as D
from gpuprinciples.grader.grading import grade
from gpuprinciples.sandbox.submission import from_path

SUBMISSIONS = Path(__file__).parent / "submissions" / "distributed"
PACKAGE_FILE = Path(D.__file__)

SOLUTIONS = {  # exercise -> the package's reference solution
    "distributed.allreduce_gradients": f"{PACKAGE_FILE}:allreduce_gradients",
    "distributed.ring_allreduce": f"{PACKAGE_FILE}:ring_allreduce",
    "distributed.zero_memory": f"{PACKAGE_FILE}:zero_memory",
}

# (file, exercise, words that must appear in one reason): each fails for its own reason
ADVERSARIAL = [
    ("ddp_sums.py", "distributed.allreduce_gradients", ["all_reduce sums", "divide by the world size"]),
    ("ddp_twice.py", "distributed.allreduce_gradients", ["all-reduce each gradient once", "(2×)"]),
    ("ddp_broadcast.py", "distributed.allreduce_gradients", ["rank 0's own gradients", "broadcast"]),
    ("ddp_divide_by_two.py", "distributed.allreduce_gradients", ["1.5×", "divided by 3"]),
    ("ring_uses_allreduce.py", "distributed.ring_allreduce", ["called all_reduce", "send and recv only"]),
    ("ring_naive.py", "distributed.ring_allreduce", ["a ring all-reduce sends 2(n−1)/n·S"]),
    ("ring_wrong_chunk.py", "distributed.ring_allreduce", ["not the sum over ranks", "chunk"]),
    # they walk frames and memory for seeds and other ranks' data: found nothing, so nothing is summed
    ("ring_peeks.py", "distributed.ring_allreduce", ["returned its own input", "nothing was summed"]),
    ("ddp_peeks.py", "distributed.allreduce_gradients", ["kept its own local gradients"]),
    ("zero_floor.py", "distributed.zero_memory", ["not a multiple of N", "ceil(Ψ/N)"]),
    ("zero_wrong_shard.py", "distributed.zero_memory", ["grads", "not sharded before stage 2"]),
    ("ring_exits.py", "distributed.ring_allreduce", ["ended before it could report", "os._exit"]),
]


@pytest.fixture(scope="module")
def reports():
    jobs = {("solution", ex): (ex, spec) for ex, spec in SOLUTIONS.items()}
    jobs.update({(name, ex): (ex, f"{SUBMISSIONS / name}:{ex.split('.')[1]}") for name, ex, _ in ADVERSARIAL})
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(grade, ex, from_path(spec)) for key, (ex, spec) in jobs.items()}
        return {key: f.result() for key, f in futures.items()}


@pytest.mark.parametrize("exercise", sorted(SOLUTIONS))
def test_reference_solution_passes(reports, exercise):
    report = reports[("solution", exercise)]
    assert report.passed, report.reasons


@pytest.mark.parametrize("name,exercise,words", ADVERSARIAL, ids=[a[0] for a in ADVERSARIAL])
def test_adversarial_submission_fails_for_its_reason(reports, name, exercise, words):
    report = reports[(name, exercise)]
    assert not report.passed
    assert report.status == "failed", (report.status, report.reasons)
    assert any(all(w in reason for w in words) for reason in report.reasons), report.reasons


def test_twice_reduced_gradients_are_right_but_fail_on_the_counted_bytes(reports):
    # the values match the reference: only the counted collectives can catch it
    reasons = reports[("ddp_twice.py", "distributed.allreduce_gradients")].reasons
    assert reasons and all("all-reduced" in r for r in reasons)


def test_peeking_ranks_found_nothing(reports):
    # they print what their search found; with the data isolated per rank it is nothing, on every rank
    for name, exercise in (("ring_peeks.py", "distributed.ring_allreduce"),
                           ("ddp_peeks.py", "distributed.allreduce_gradients")):
        report = reports[(name, exercise)]
        assert "found the answer" not in report.output
        assert all("values wrong" not in r and "differs" not in r for r in report.reasons), report.reasons


def test_naive_ring_is_right_but_sends_too_much(reports):
    reasons = reports[("ring_naive.py", "distributed.ring_allreduce")].reasons
    assert reasons and all(" sent " in r for r in reasons)


def test_bubble_prediction():
    assert grade("distributed.bubble", 3 / 15).passed
    wrong = grade("distributed.bubble", 3 / 12)  # (p - 1) / m: forgot the ramp
    assert not wrong.passed and wrong.reasons
    assert grade("distributed.bubble", None).status == "not attempted"


def test_zero_memory_reproduces_the_papers_figure_1():
    gb = [sum(D.zero_memory(7_500_000_000, 64, stage).values()) / 1e9 for stage in range(4)]
    assert [round(g, 1) for g in gb] == [120.0, 31.4, 16.6, 1.9]


# ---------------------------------------------------------------------------------------------
# Counting collectives on real gloo ranks
# ---------------------------------------------------------------------------------------------


def _collectives_rank(rank, world):
    import torch.distributed as dist
    x = torch.ones(100)
    shard = torch.empty(50)
    with D.count_collectives() as c:
        dist.all_reduce(x)
        D.reduce_scatter(shard, x)
        D.all_gather(x, shard)
        dist.broadcast(x, src=0)
        if rank == 0:
            dist.send(torch.ones(7), 1)
        else:
            dist.recv(torch.empty(7), 0)
    return {"record": c.as_dict(), "x": x}


def test_count_collectives_sees_every_kind_with_its_size():
    results = D.run_ranks(_collectives_rank, 2, timeout=60)
    for rank, result in enumerate(results):
        record = result["record"]
        counts = record["counts"]
        assert counts["all_reduce"] == counts["reduce_scatter"] == counts["all_gather"] == counts["broadcast"] == 1
        assert record["bytes"]["all_reduce"] == 400
        assert record["bytes"]["reduce_scatter"] == 400  # S is the full input
        assert record["bytes"]["all_gather"] == 400  # S is the gathered output
        assert counts.get("send" if rank == 0 else "recv") == 1
        # ring model: 2(n-1)/n·S + (n-1)/n·S + (n-1)/n·S + S (+ 28 bytes sent by rank 0)
        assert record["sent_bytes"] == 400 + 200 + 200 + 400 + (28 if rank == 0 else 0)
        assert torch.equal(result["x"], torch.full((100,), 4.0))


def test_spawned_ranks_run_a_learner_function():
    # the path the grader takes where CUDA is initialised (a fork could not be trusted there)
    from gpuprinciples.course.exercises.distributed import _ring_rank
    xs = [torch.randn(33), torch.randn(33)]
    results = D.run_ranks(_ring_rank, 2, (D.ring_allreduce,), per_rank=[(x,) for x in xs], method="spawn",
                          timeout=120)
    for result in results:
        assert torch.allclose(result["out"], xs[0] + xs[1])
        assert result["collectives"]["counts"] == {"send": 2, "recv": 2}


def _what_this_rank_holds(rank, world, mine):
    """The 5-element tensors this rank can reach through the garbage collector, and whether any frame
    it can walk holds the caller's local `caller_secret`."""
    import gc
    import inspect
    return {"tensors": [t.clone() for t in gc.get_objects() if type(t) is torch.Tensor and t.numel() == 5],
            "secret": any(v == "caller-secret-7f3a" for info in inspect.stack() for v in info.frame.f_locals.values()
                          if isinstance(v, str))}


def test_per_rank_data_reaches_its_rank_only():
    shares = [torch.full((5,), 10.0 + r) for r in range(3)]
    caller_secret = "caller-secret-7f3a"  # noqa: F841  (a local of this frame: a forked rank could walk to it)

    def others_seen(results):
        return [(rank, other) for rank, result in enumerate(results) for other in range(3)
                if other != rank and any(torch.equal(t, shares[other]) for t in result["tensors"])]

    isolated = D.run_ranks(_what_this_rank_holds, 3, per_rank=[(s,) for s in shares], timeout=120)
    for rank, result in enumerate(isolated):
        assert any(torch.equal(t, shares[rank]) for t in result["tensors"]), "the rank lost its own share"
        assert not result["secret"]
    assert others_seen(isolated) == []
    # the same with plain fork: every rank holds every share and the caller's frames (the check can fail)
    forked = D.run_ranks(_what_this_rank_holds, 3, per_rank=[(s,) for s in shares], method="fork", timeout=120)
    assert len(others_seen(forked)) == 6 and all(r["secret"] for r in forked)
    with pytest.raises(ValueError, match="2 entries for 3 ranks"):
        D.run_ranks(_what_this_rank_holds, 3, per_rank=[(1,), (2,)])


# ---------------------------------------------------------------------------------------------
# The graded ranks' collectives behave as NCCL's where gloo's differ (sandbox/ranks.py, AsOnNccl)
# ---------------------------------------------------------------------------------------------


def _nccl_like_rank(rank, world):
    """Each of gloo's differences from NCCL, on real ranks; the values NCCL would give."""
    import torch.distributed as dist
    out = {}
    # a dropped isend request still arrives (gloo cancelled it when the request was garbage-collected)
    if rank == 0:
        dist.isend(torch.full((3,), 7.0), 1)
    else:
        got = torch.empty(3)
        dist.recv(got, 0)
        out["dropped_isend"] = got
    # PREMUL_SUM (gloo has none): each rank's tensor scaled, then summed
    x = torch.full((4,), float(rank + 1))
    dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.5))
    out["premul"] = x
    x = torch.full((4,), float(rank + 1))
    dist.all_reduce(x, op=dist._make_nccl_premul_sum(torch.tensor([0.25])))  # the factor may be a tensor
    out["premul_tensor"] = x
    # reduce leaves a non-root rank's tensor as it was (gloo wrote partial sums into it)
    y = torch.full((4,), float(rank + 1))
    dist.reduce(y, dst=0)
    out["reduce"] = y
    # a second wait on a request returns (gloo's waited for another message)
    peer = 1 - rank
    pair = [dist.isend(torch.ones(2), peer), dist.irecv(torch.empty(2), peer)]
    for _ in range(2):
        for request in pair:
            request.wait()
    # one batch_isend_irecv is one request, as NCCL's: waiting the first waits the receive
    z = torch.zeros(2)
    ops = [dist.P2POp(dist.irecv, z, peer), dist.P2POp(dist.isend, torch.full((2,), 3.0), peer)]
    dist.batch_isend_irecv(ops)[0].wait()
    out["batch"] = z.clone()
    # DDP's collectives come from its C++ (the reducer in backward, the buffers' broadcast), which waits for them
    # itself: not the learner's requests, and its own reads of its buckets are no race
    torch.manual_seed(0)
    ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)))
    for step in range(2):
        ddp(torch.randn(4, 3, generator=torch.Generator().manual_seed(10 * rank + step))).sum().backward()
    out["ddp"] = [p.grad.clone() for p in ddp.parameters()]
    return out


def test_graded_ranks_behave_as_nccl_where_gloo_differs():
    results = D.run_ranks(_nccl_like_rank, 2, timeout=60, collective_timeout=20)
    for rank, out in enumerate(results):
        if rank == 1:
            assert torch.equal(out["dropped_isend"], torch.full((3,), 7.0))
        assert torch.equal(out["premul"], torch.full((4,), 1.5))  # 0.5 * 1 + 0.5 * 2
        assert torch.equal(out["premul_tensor"], torch.full((4,), 0.75))
        assert torch.equal(out["reduce"], torch.full((4,), 3.0 if rank == 0 else 2.0))
        assert torch.equal(out["batch"], torch.full((2,), 3.0))
    first, second = (out["ddp"] for out in results)
    assert all(torch.allclose(a, b) for a, b in zip(first, second))  # averaged over the ranks, so the same on both


def _touches_unwaited(rank, world, touch):
    import torch.distributed as dist
    grad = torch.full((8,), float(rank))
    work = dist.all_reduce(grad, async_op=True)
    if touch == "neighbour":  # a tensor beside it in the same storage: no race
        buffer = torch.zeros(16)
        pending = buffer[:8]
        work2 = dist.all_reduce(pending, async_op=True)
        buffer[8:].fill_(1.0)
        work2.wait()
    if touch == "write":
        grad /= world
    if touch == "read":
        grad.sum()
    work.wait()
    return grad


@pytest.mark.parametrize("touch,race", [("write", "wrote to"), ("read", "read"), ("neighbour", None), ("none", None)])
def test_a_tensor_touched_before_its_request_is_waited_for_is_a_race(touch, race):
    # on a GPU the rank's kernels and NCCL's transfer race (two streams); on gloo the outcome was timing's too
    if race is None:
        results = D.run_ranks(_touches_unwaited, 2, (touch,), timeout=60, collective_timeout=20)
        assert all(torch.equal(r, torch.ones(8)) for r in results)
        return
    with pytest.raises(D.RankError, match="CollectiveRace") as raised:
        D.run_ranks(_touches_unwaited, 2, (touch,), timeout=60, collective_timeout=20)
    assert race in str(raised.value) and "all_reduce" in str(raised.value)


def test_reduce_scatter_and_all_gather_padded_by_n_minus_1_elements_are_within_the_budget():
    # 3 ranks, 133 float32 gradient elements in one buffer padded to 135: the budget to the byte (floats made the
    # halves' 720 bytes 719.9999999999999 + 1e-13 over it, and a right answer failed on such a draw)
    from gpuprinciples.course.exercises.distributed import _ddp_traffic
    calls = [{"kind": kind, "element_size": 4} for kind in ("reduce_scatter", "all_gather")]
    counted = {"counts": {"reduce_scatter": 1, "all_gather": 1}, "bytes": {"reduce_scatter": 540, "all_gather": 540},
               "calls": calls}
    assert _ddp_traffic(0, 3, counted, 133 * 4, "") == []
    counted["bytes"]["all_gather"] += 4  # one element more than any padding needs
    assert "combining the gradients once" in _ddp_traffic(0, 3, counted, 133 * 4, "")[0]


def test_ring_bytes_model():
    assert D.ring_bytes_sent("all_reduce", 1000, 4) == 1500
    assert D.ring_bytes_sent("reduce_scatter", 1000, 4) == 750
    assert D.ring_bytes_sent("all_gather", 1000, 1) == 0


def _raises_on_rank_one(rank, world):
    if rank == 1:
        raise ValueError("boom on purpose")
    return rank


def test_run_ranks_reports_the_failing_rank():
    with pytest.raises(D.RankError, match="rank 1 of 2 raised: ValueError: boom on purpose"):
        D.run_ranks(_raises_on_rank_one, 2, timeout=60)


def _cuda_in_a_fork():
    raise RuntimeError("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
                       "you must use the 'spawn' start method")


class _LoadsLikeACudaTensor:
    """Unpickling it fails as a CUDA tensor's unpickling fails in a rank forked after CUDA was initialised
    (what lesson 09's cases did on a GPU): the rank dies before its function runs."""

    def __reduce__(self):
        return (_cuda_in_a_fork, ())


def _returns_rank(rank, world, *_):
    return rank


@pytest.fixture
def zygote():
    from gpuprinciples.sandbox import forkserver
    forkserver.Zygote.current = z = forkserver.Zygote()
    yield z
    forkserver.Zygote.current = None
    z.sock.close()
    os.waitpid(z.pid, 0)


def test_a_rank_that_dies_loading_its_payload_says_why_not_an_exit_code(zygote):
    started = time.monotonic()
    with pytest.raises(D.RankError) as raised:
        D.run_ranks(_returns_rank, 2, per_rank=[(1,), (_LoadsLikeACudaTensor(),)], timeout=120,
                    collective_timeout=60)
    # rank 0 waits for rank 1 at the rendezvous: it is stopped soon after rank 1 dies, not at the 60 s timeout
    assert time.monotonic() - started < 30
    message = str(raised.value)
    assert "rank 1 of 2 ended before it could report a result" in message
    assert "Cannot re-initialize CUDA in forked subprocess" in message and "gloo" in message
    assert "exit code" not in message


def _exits(rank, world):
    os._exit(0)


def test_a_rank_that_exits_without_a_result_is_a_sentence(zygote):
    # both ranks exit at once: the sentence names whichever the grader saw end first
    with pytest.raises(D.RankError, match=r"rank [01] of 2 ended before it could report a result: .*os\._exit"):
        D.run_ranks(_exits, 2, per_rank=[(), ()], timeout=60)


def _exits_while_rank_zero_waits(rank, world):
    import torch.distributed as dist
    if rank == 1:
        time.sleep(0.5)  # rank 0 is inside the all-reduce by then, connected to this rank
        os._exit(0)
    dist.all_reduce(torch.ones(1000))


def test_the_rank_that_exited_is_named_not_the_rank_that_found_its_connection_closed():
    # rank 0's own error is gloo's "Connection closed by peer ... a remote worker crashing": true, but it
    # only says rank 0 was left waiting; the report must name rank 1, which ended (CI saw rank 0's once)
    with pytest.raises(D.RankError) as raised:
        D.run_ranks(_exits_while_rank_zero_waits, 2, timeout=60)
    message = str(raised.value)
    assert message.startswith("rank 1 of 2 ended before it could report a result"), message
    assert "os._exit" in message


def _hangs(rank, world, folder):
    Path(folder, f"pid{rank}").write_text(str(os.getpid()))
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)


def test_run_ranks_stops_hung_ranks(tmp_path):
    # where this process has used CUDA the ranks are spawned, and import torch before they hang
    spawned = torch.cuda.is_available() and torch.cuda.is_initialized()
    with pytest.raises(D.RankError, match="still running"):
        D.run_ranks(_hangs, 2, (str(tmp_path),), timeout=60 if spawned else 5)
    pids = [int(p.read_text()) for p in tmp_path.glob("pid*")]
    assert len(pids) == 2
    assert not [pid for pid in pids if _alive(pid)]


# ---------------------------------------------------------------------------------------------
# torchrun from a notebook: results back, and nothing left running
# ---------------------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, only not reaped
    except OSError:
        return False


def _wait_dead(pids, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def test_launch_kills_launcher_and_ranks_on_timeout(tmp_path):
    # The ranks ignore SIGTERM and never finish; launch() must still leave nothing behind.
    script = tmp_path / "hang.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open(os.path.join({str(tmp_path)!r}, "pid" + os.environ["RANK"]), "w").write(str(os.getpid()))
        time.sleep(600)
    """))
    started = time.monotonic()
    with pytest.raises(D.LaunchError, match="did not finish within"):
        D.launch(script, 2, timeout=20, backend="gloo")
    assert time.monotonic() - started < 60
    pids = [int(p.read_text()) for p in tmp_path.glob("pid*")]
    assert len(pids) == 2, "the ranks never started: the test proves nothing"
    assert _wait_dead(pids) == []
    assert not [p for p in D.descendants(os.getpid()) if D.is_rank_or_launcher(p)]


def test_launch_returns_each_ranks_result(tmp_path):
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent("""
        import torch
        import torch.distributed as dist
        from gpuprinciples import distributed as D
        rank, world, device = D.init()
        x = torch.tensor([float(rank + 1)])
        dist.all_reduce(x)
        D.save({"rank": rank, "world": world, "sum": x.item()})
        D.finish()
    """))
    results = D.launch(script, 2, timeout=120, backend="gloo", show_output=False)
    assert results == [{"rank": 0, "world": 2, "sum": 3.0}, {"rank": 1, "world": 2, "sum": 3.0}]


def test_finish_ends_each_rank_cleanly_after_a_device_mesh(tmp_path, capsys):
    # A DeviceMesh keeps gloo's threads alive past destroy_process_group(); with 200 all-reduces still queued
    # there, an interpreter shutdown under them aborted a rank in about half the runs ("terminate called
    # without an active exception", SIGABRT): lesson 09's tensor-parallel script met the same, rarely.
    script = tmp_path / "mesh.py"
    script.write_text(textwrap.dedent("""
        import torch
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from gpuprinciples import distributed as D
        rank, world, device = D.init()
        mesh = init_device_mesh("cpu", (world,))
        works = [dist.all_reduce(torch.ones(2**16), async_op=True) for _ in range(200)]
        del works  # their tensors now live only in gloo's queue
        D.save(rank)
        D.finish()
        print("after finish")  # never runs: finish() ended the process
    """))
    assert D.launch(script, 2, timeout=120, backend="gloo", progress=False) == [0, 1]
    assert "after finish" not in capsys.readouterr().out


def test_finish_outside_torchrun_keeps_the_process(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert D.finish() is None  # a notebook's kernel that calls it lives on (this test process too)


def test_launch_reports_the_failing_ranks_error(tmp_path):
    script = tmp_path / "fails.py"  # no torch in the ranks: only the launcher's import is paid
    script.write_text('import os\nif os.environ["RANK"] == "1":\n    raise RuntimeError("rank one gives up")\n')
    with pytest.raises(D.LaunchError, match="rank one gives up") as error:
        D.launch(script, 2, timeout=120, backend="gloo")
    assert "exitcode" in str(error.value)  # torchrun's summary: which rank, which exit code
    assert not [p for p in D.descendants(os.getpid()) if D.is_rank_or_launcher(p)]


def test_multi_node_command():
    cmd = D.torchrun_command("train.py", 8, ("--lr", 1), nnodes=2, endpoint="node0:29500", job_id="j")
    assert cmd[1:] == ["-m", "torch.distributed.run", "--nproc-per-node=8", "--nnodes=2", "--rdzv-backend=c10d",
                       "--rdzv-endpoint=node0:29500", "--rdzv-id=j", "train.py", "--lr", "1"]
    assert "--standalone" in D.torchrun_command("train.py", 2)


def test_is_rank_or_launcher_reads_processes_with_psutil():
    """A rank is known by its environment (the results variable), a launcher by its command line; a process
    that is gone is neither. No /proc of our own reading: psutil does it on every platform."""
    import inspect
    import subprocess
    import sys
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                            env={**os.environ, D.RESULTS_ENV: "/tmp/x"})
    plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert D.is_rank_or_launcher(rank.pid) and not D.is_rank_or_launcher(plain.pid)
    finally:
        for p in (rank, plain):
            p.kill()
            p.wait()
    assert not D.is_rank_or_launcher(rank.pid)  # gone
    assert "/proc" not in inspect.getsource(D.is_rank_or_launcher).split('"""')[2]
