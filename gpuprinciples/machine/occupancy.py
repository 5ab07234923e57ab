"""How many warps of a kernel one streaming multiprocessor (SM) holds at once: its occupancy.

An SM keeps every resident warp's registers and every resident block's shared memory on chip, so a
kernel's registers per thread, shared memory per block and warps per block decide how many of its
blocks fit side by side. Four budgets, whichever runs out first:

* warp slots: at most `max_warps` warps (64 on Hopper, 2048 threads);
* blocks: at most `max_blocks` blocks (32);
* registers: 65536 per SM, split into 4 sub-partitions of 16384 (one per warp scheduler); a warp lives
  in one sub-partition, and gets `registers per thread × 32` rounded UP to a multiple of 256;
* shared memory: 228 KiB per SM, allocated per block in units of 128 bytes, with 1 KiB per block
  reserved by the CUDA runtime; a block may use at most 227 KiB.

The rules and numbers are those of NVIDIA's occupancy calculator as the CUDA Toolkit ships it
(`cuda_occupancy.h`: `cudaOccMaxBlocksPerSMRegsLimit`, `cudaOccMaxBlocksPerSMSmemLimit`,
`cudaOccMaxBlocksPerSMWarpsLimit`, with its compute capability 9.0 constants) and of the CUDA C++
Programming Guide's table of technical specifications per compute capability (9.0: 64 warps, 32
blocks, 64 K registers, 255 registers per thread, 228 KB of shared memory per SM, 227 KB per block).
The header's limit on block barriers (two per resident block slot) never binds a kernel with one
barrier, as Triton's are, and is left out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SMLimits:
    name: str
    max_warps: int  # resident warps per SM
    max_blocks: int  # resident blocks per SM
    registers: int  # 32-bit registers per SM
    sub_partitions: int  # the register file is split evenly between these (one warp scheduler each)
    register_unit: int  # registers are given to a warp in multiples of this
    max_registers_per_thread: int
    max_threads_per_block: int
    shared_bytes: int  # shared memory per SM, bytes
    shared_per_block: int  # the most one block may ask for (opt-in), bytes
    shared_reserved: int  # per block, taken by the CUDA runtime, bytes
    shared_unit: int  # shared memory is given to a block in multiples of this, bytes


# H100 and H200 (compute capability 9.0)
SM90 = SMLimits("sm_90 (H100, H200)", max_warps=64, max_blocks=32, registers=65536, sub_partitions=4,
                register_unit=256, max_registers_per_thread=255, max_threads_per_block=1024,
                shared_bytes=228 * 1024, shared_per_block=227 * 1024, shared_reserved=1024, shared_unit=128)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


@dataclass(frozen=True)
class Occupancy:
    blocks: int  # resident blocks per SM
    warps: int  # resident warps per SM
    fraction: float  # warps / max_warps
    by_warps: int  # the block limit each budget alone would set
    by_blocks: int
    by_registers: int
    by_shared: int
    registers_per_warp: int  # as allocated (rounded up)
    shared_per_block: int  # as allocated (reserved part and rounding included)

    @property
    def limited_by(self) -> list[str]:
        limits = {"warp slots": self.by_warps, "blocks": self.by_blocks, "registers": self.by_registers,
                  "shared memory": self.by_shared}
        return [name for name, value in limits.items() if value == self.blocks]


def occupancy(registers_per_thread: int, shared_per_block: int, num_warps: int, sm: SMLimits = SM90) -> Occupancy:
    """Resident blocks and warps per SM for a kernel of `num_warps` warps per block, each thread using
    `registers_per_thread` registers and each block `shared_per_block` bytes of shared memory (what Triton's
    compiled kernel reports as `shared`; the runtime's reserved KiB is added here)."""
    if registers_per_thread < 0 or shared_per_block < 0 or num_warps < 1:
        raise ValueError("registers and shared memory must be >= 0 and num_warps >= 1")
    threads = 32 * num_warps
    by_warps = sm.max_warps // num_warps if threads <= sm.max_threads_per_block else 0

    per_warp = _round_up(registers_per_thread * 32, sm.register_unit)
    # the hardware checks a block's registers as if its warps were spread over every sub-partition at once
    assumed = per_warp * _round_up(num_warps, sm.sub_partitions)
    too_many = registers_per_thread > sm.max_registers_per_thread
    if too_many or assumed > sm.registers or per_warp * num_warps > sm.registers:
        by_registers = 0
    elif per_warp == 0:
        by_registers = sm.max_blocks
    else:
        warps_per_quarter = (sm.registers // sm.sub_partitions) // per_warp
        by_registers = warps_per_quarter * sm.sub_partitions // num_warps

    allocated = _round_up(shared_per_block + sm.shared_reserved, sm.shared_unit)
    if shared_per_block > sm.shared_per_block:
        by_shared = 0
    else:
        by_shared = sm.shared_bytes // allocated

    blocks = min(by_warps, sm.max_blocks, by_registers, by_shared)
    return Occupancy(blocks, blocks * num_warps, blocks * num_warps / sm.max_warps, by_warps, sm.max_blocks,
                     by_registers, by_shared, per_warp, allocated)


def resident_warps(registers_per_thread: int, shared_per_block: int, num_warps: int) -> int:
    """Warps of this kernel one H100/H200 SM holds at once (what `hierarchy.occupancy` asks for)."""
    return occupancy(registers_per_thread, shared_per_block, num_warps).warps
