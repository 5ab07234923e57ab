# exercise: fusion.softmax
# function: softmax
# graded-by: test_launch_paths.py
"""Right: a row softmax in the manner of Triton's fused-softmax tutorial. At import it asks the driver
about the device (SM count, registers, shared memory); per call it compiles the kernel with `warmup`,
reads the compiled kernel's registers and shared memory to size a persistent grid by occupancy, and
launches the handle `warmup` returned, `handle[(programs, 1, 1)](...)`, with every argument in order.
Each program walks rows `tl.range(first, rows, step, num_stages=...)`.

Under the interpreter the driver, the warm-up handle and its registers answer as an H100/H200 would;
on a GPU the launch goes through the compiled kernel's own launcher, not through `JITFunction.run`."""
import torch
import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()
PROPS = triton.runtime.driver.active.utils.get_device_properties(DEVICE.index)
SMS, REGS_PER_SM, SHARED_PER_SM = PROPS["multiprocessor_count"], PROPS["max_num_regs"], PROPS["max_shared_mem"]
IS_CUDA = triton.runtime.driver.active.get_current_target().backend == "cuda"


@triton.jit
def row_softmax(out_ptr, in_ptr, in_stride, out_stride, rows, cols, BLOCK: tl.constexpr, num_stages: tl.constexpr):
    step = tl.num_programs(0)
    for row in tl.range(tl.program_id(0), rows, step, num_stages=num_stages):
        lanes = tl.arange(0, BLOCK)
        keep = lanes < cols
        vals = tl.load(in_ptr + row * in_stride + lanes, mask=keep, other=-float("inf"))
        shifted = vals - tl.max(vals, axis=0)
        e = tl.exp(shifted)
        tl.store(out_ptr + row * out_stride + lanes, e / tl.sum(e, axis=0), mask=keep)


def softmax(x):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    warps, stages = 8, (4 if SHARED_PER_SM > 200_000 else 2)
    out = torch.empty_like(x)
    handle = row_softmax.warmup(out, x, x.stride(0), out.stride(0), rows, cols, BLOCK=block, num_stages=stages,
                                num_warps=warps, grid=(1,))
    handle._init_handles()
    per_sm = REGS_PER_SM // (handle.n_regs * 32 * warps)  # programs resident per SM, by registers
    if handle.metadata.shared:
        per_sm = min(per_sm, SHARED_PER_SM // handle.metadata.shared)
    programs = max(1, min(SMS * per_sm, rows))
    handle[(programs, 1, 1)](out, x, x.stride(0), out.stride(0), rows, cols, block, stages)
    return out
