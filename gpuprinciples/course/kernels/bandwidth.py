"""Reading memory as fast as it goes, over working sets of every size: the cache hierarchy's cliffs.

`read_kernel` reads a buffer `passes` times and keeps one running sum per program (so no load can be
skipped). The buffer is cut into one chunk per program; on pass p, program i reads chunk (i + p·step) mod P:

* step = 0: every program re-reads its own chunk, so a chunk small enough for the SM's L1 is served from
  there (loads cached in L1: `cache=".ca"`);
* step = 1 and `cache=".cg"` (cache in L2 only): each pass reads what another program read the pass
  before; a buffer that fits in L2 is served from L2, one that does not comes from HBM every pass.

Bandwidth = passes × buffer bytes / time. `pointer_chase` measures latency instead: one thread follows a
random cycle of indices, so each load waits for the one before. Little's law ties the two: the bytes a GPU
must keep in flight to reach a bandwidth = bandwidth × latency.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def read_kernel(X, Out, chunk, passes, step, BLOCK: tl.constexpr, CACHE: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for p in range(passes):
        start = ((pid + p * step) % programs).to(tl.int64) * chunk
        for off in range(0, chunk, BLOCK):
            acc += tl.load(X + start + off + offs, cache_modifier=CACHE)
    tl.store(Out + pid * BLOCK + offs, acc)


@triton.jit
def chase_kernel(Next, Out, steps, CACHE: tl.constexpr):
    i = tl.load(Next)  # a scalar: every load's address is the value the one before returned
    for _ in range(steps):
        i = tl.load(Next + i, cache_modifier=CACHE)
    tl.store(Out, i)


def read_once(x: torch.Tensor, programs: int, passes: int, step: int, block: int = 4096, cache: str = ".cg",
              num_warps: int = 4) -> torch.Tensor:
    """Launch read_kernel over float32 `x` (its numel a multiple of programs × block)."""
    chunk = x.numel() // programs
    assert chunk * programs == x.numel() and chunk % block == 0, "the buffer must split into whole blocks"
    out = torch.empty(programs * block, device=x.device, dtype=torch.float32)
    read_kernel[(programs,)](x, out, chunk, passes, step, BLOCK=block, CACHE=cache, num_warps=num_warps)
    return out


def _sms(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def working_set_bandwidth(nbytes: int, *, level: str = "l2", programs_per_sm: int = 4, block: int | None = None,
                          num_warps: int = 4, min_bytes_read: float = 2e9, budget_s: float = 0.3,
                          device="cuda") -> dict:
    """Read bandwidth (bytes/s) when the GPU reads a buffer of `nbytes` over and over.

    level "l2": rotate the chunks between programs and cache in L2 only (the L2 / HBM cliff);
    level "l1": every program re-reads its own chunk, cached in L1 (the L1 / L2 cliff, per SM).
    Passes are chosen so that each launch reads at least `min_bytes_read`: the first pass, which comes from
    HBM whatever the size, is then a small part of it. The buffer is rounded down to whole blocks per program
    (the size used is returned): `block` defaults to 4096 floats ("l2") or 512 ("l1"), halved (down to 128)
    until every program has at least 8 blocks, so that the rounding costs at most an eighth."""
    from ...measure import timing

    programs = _sms(device) * programs_per_sm
    if block is None:
        block = 4096 if level == "l2" else 512
        while block > 128 and programs * block * 4 * 8 > nbytes:
            block //= 2
    unit = programs * block * 4
    nbytes = max(unit, nbytes // unit * unit)  # whole blocks per program
    passes = max(2, int(-(-min_bytes_read // nbytes)))
    x = torch.rand(nbytes // 4, device=device)
    step, cache = (1, ".cg") if level == "l2" else (0, ".ca")
    t = timing.time_fn(lambda: read_once(x, programs, passes, step, block, cache, num_warps), device=device,
                       budget_s=budget_s)
    return {"bytes": nbytes, "passes": passes, "seconds": t.median, "bandwidth": passes * nbytes / t.median,
            "per_sm_bytes": nbytes / _sms(device), "spread": t.spread}


def random_cycle(n: int, device="cuda", seed: int = 0) -> torch.Tensor:
    """int32 `next` with next[perm[i]] = perm[i + 1]: following it visits all n entries in a random order."""
    gen = torch.Generator(device=device).manual_seed(seed)
    perm = torch.randperm(n, device=device, generator=gen)
    nxt = torch.empty(n, dtype=torch.int32, device=device)
    nxt[perm] = perm.roll(-1).to(torch.int32)
    return nxt


def pointer_chase(nbytes: int, steps: int = 20000, cache: str = ".cg", device="cuda", warm: bool | None = None
                  ) -> float:
    """Seconds per dependent load, chasing a random cycle through a buffer of `nbytes`.

    `warm` (by default: when the buffer fits in half the L2): read the whole buffer just before each timed
    chase, so that it sits in L2, instead of flushing the L2. Otherwise a chase of `steps` loads through a
    buffer of more than `steps` lines meets each line for the first time, and every load misses to HBM,
    whatever the buffer's size."""
    from ...measure import timing

    nxt = random_cycle(max(nbytes // 4, 2), device)
    out = torch.empty(1, dtype=torch.int32, device=device)
    if warm is None:
        warm = nbytes <= torch.cuda.get_device_properties(device).L2_cache_size // 2

    def run(k):
        chase_kernel[(1,)](nxt, out, k, CACHE=cache, num_warps=1)

    def fill_l2():  # outside the timed window: a read of every byte, through the L2
        nxt.sum()
        return ()

    options = {"make_args": fill_l2, "flush": False} if warm else {}
    # the difference of two lengths removes the launch and the kernel's fixed cost
    long = timing.time_fn(lambda: run(steps), device=device, budget_s=0.2, min_rounds=3, **options)
    short = timing.time_fn(lambda: run(steps // 10), device=device, budget_s=0.2, min_rounds=3, **options)
    return (long.median - short.median) / (steps - steps // 10)
