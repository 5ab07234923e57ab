# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# cpu-says: not written by a triton store
# cpu-says: more programs than an h200's 132 sms
# seed: 1
# gpu-says: on the warm-up call
"""A persistent grid (one program per SM, each walking the tiles) whose stride is one too long: right while
every tile fits the first wave (at most 132 tiles of 1024), wrong past it (tile 132 is never computed). A CPU
whose cases all fit 132 programs passed it; an H200's timed inputs (2**28 elements) reach the second wave.
Any seed fails on a GPU, with a reason that depends on it: its bf16 case has 100,000-200,000 elements, past the
first wave (135,168) for seed 1 (190,313: "on the warm-up call"), within it for others, where the large timing
input fails it ("wrong on the large timing input", an H100, 2026-12-07). The seed makes the stated reason the
one; what the warm-up call finds in the tiles never written (NaN or wrong values) is whatever the memory held."""
import torch
import triton
import triton.language as tl

NUM_SMS = 132


@triton.jit
def k(x_ptr, y_ptr, n, n_tiles, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    for tile in range(tl.program_id(0), n_tiles, STRIDE):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32))), mask=mask)


def cos_cos(x):
    y = torch.empty_like(x)
    n_tiles = triton.cdiv(x.numel(), 1024)
    k[(min(n_tiles, NUM_SMS),)](x, y, x.numel(), n_tiles, STRIDE=NUM_SMS + 1, BLOCK=1024)  # BUG: NUM_SMS + 1
    return y
