"""A right persistent kernel that widens its loop counter for 64-bit offsets, `tile.to(tl.int64) * BLOCK`. On a GPU a
`tl.range` counter is a tensor; Triton's interpreter makes it a Python int, and `.to` raised AttributeError, so a
right kernel failed on a CPU only. The interpreter's counters now take `.to` as a GPU's do. (The reference's
tiles, 4096 elements and 8 warps: with 1024 and 4 an H100 measured it at 0.80× torch.compile, under the 0.9× bar;
with these it passed, 2026-12-05.)"""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: passed
import torch
import triton
import triton.language as tl


@triton.jit
def cos_cos_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    for tile in tl.range(tl.program_id(0), tl.cdiv(n, BLOCK), tl.num_programs(0)):
        offs = tile.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        y = tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32)))
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def cos_cos(x):
    y = torch.empty_like(x)
    programs = min(triton.cdiv(x.numel(), 4096), 4 * torch.cuda.get_device_properties(x.device).multi_processor_count)
    cos_cos_kernel[(max(programs, 1),)](x, y, x.numel(), BLOCK=4096, num_warps=8)
    return y
