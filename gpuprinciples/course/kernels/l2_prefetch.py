"""Weights prefetched into L2 by a kernel that leaves memory idle: a hint, with no value of its own.

At batch 1 a decode step's attention is short and latency-bound (LLAMA_1B on an H200: 8 MB of KV cache a
layer at a fifth of the copy rate), and the matrix-vector products after it are bandwidth-bound. So while its
programs wait on their loads, the split kernel can ask the memory system for the bytes the next kernels will
stream (the output projection, then the first rows of the MLP's gate | up weights): they arrive in L2 at no
cost to the attention, and the next kernels read them from there. No kernel of the step writes weights, so
the prefetch may run before the kernel's PDL wait.

`prefetch_l2` spreads a byte range over every program of the grid and every lane of a program:

* BULK: one `cp.async.bulk.prefetch.L2` per lane (sm_90+), the bulk copy engine fetching the lane's chunk;
* else one `prefetch.global.L2` per 128-byte line, from each lane in turn.

Only the GPU has an L2 to fill: the interpreter never runs it (`gpu_prefetch` says when a launch may).
"""

import torch
import triton
import triton.language as tl

LINE = 128  # bytes of an L2 line; a bulk prefetch's size and address must be multiples of 16


@triton.jit
def prefetch_l2(base, nbytes, me, programs, LANES: tl.constexpr, BULK: tl.constexpr):
    """Program `me` of `programs`: its LANES lanes' share of bytes [0, nbytes) from `base`, prefetched into L2."""
    per_lane = tl.cdiv(tl.cdiv(nbytes, programs * LANES), 128) * 128  # whole lines, so lanes never share one
    start = (me * LANES + tl.arange(0, LANES)).to(tl.int64) * per_lane
    size = tl.minimum(tl.maximum(nbytes - start, 0), per_lane).to(tl.int32)
    first = base.to(tl.pointer_type(tl.int8)) + start
    if BULK:
        tl.inline_asm_elementwise(
            "{ .reg .pred live; setp.ne.s32 live, $2, 0; @live cp.async.bulk.prefetch.L2.global [$1], $2; "
            "mov.u32 $0, 0; }", "=r,l,r", [first, size], dtype=tl.int32, is_pure=False, pack=1)
    else:
        for line in range(0, per_lane, 128):
            tl.inline_asm_elementwise(
                "{ .reg .pred live; setp.lt.s32 live, $2, $3; @live prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
                "=r,l,r,r", [first + line, tl.full([LANES], line, tl.int32), size], dtype=tl.int32, is_pure=False,
                pack=1)


def gpu_prefetch(x: torch.Tensor) -> bool:
    """Whether a launch on x's device may prefetch: a CUDA GPU of sm_90 or newer (the bulk prefetch's and the
    kernel's own requirement; the interpreter and older GPUs launch the kernel without it)."""
    return x.is_cuda and torch.cuda.get_device_capability(x.device)[0] >= 9


def regions(tensors, budget: int) -> tuple:
    """(tensor, bytes) for each of `tensors` in order: their leading bytes, `budget` in all, each a multiple of
    LINE (a tensor's storage from its first element: weights are contiguous)."""
    out = []
    for t in tensors:
        assert t.is_contiguous()
        take = min(t.numel() * t.element_size(), max(budget, 0)) // LINE * LINE
        budget -= take
        out.append((t, take))
    return tuple(out)


def kernel_arguments(prefetch: tuple, num_warps: int, bulk: bool) -> dict:
    """A split kernel's prefetch arguments for two regions ((tensor, bytes), (tensor, bytes)): one lane per thread
    of a program (a 1-D tensor as long as the threads is not replicated over warps)."""
    (first, first_bytes), (second, second_bytes) = prefetch
    return {"Pf1": first, "pf1_bytes": first_bytes, "Pf2": second, "pf2_bytes": second_bytes, "PREFETCH": True,
            "LANES": 32 * num_warps, "BULK": bulk}

