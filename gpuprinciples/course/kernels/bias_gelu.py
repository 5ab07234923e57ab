"""y = gelu(x + bias), exact (erf) GELU, in one kernel: eager PyTorch writes x + bias to memory and
reads it back for the GELU; here it never leaves registers.

Each program handles one [BLOCK_M, BLOCK_N] tile. The tile of x is loaded through a tensor
descriptor (`tl.make_tensor_descriptor`): the descriptor knows the tensor's shape, so the edges
are padded on load and clipped on store without a mask. The bias is loaded once per tile and
broadcast over its BLOCK_M rows, so it is re-read only once per BLOCK_M rows.

How far it goes (`bias_gelu_flat`, below): the layout torch.compile's Inductor generates, the tensor as one
flat range and the bias read by index % N, ran at 95 % of the copy ceiling on an H200 where these tiles ran at
84 % and torch.compile at 97 %, as fast as `copy_` of the same bytes (docs/roof-h200.md). The exercise keeps
the tiled kernel, which is what lesson 07 teaches (tensor descriptors).

A descriptor needs 16-byte-aligned row strides (N a multiple of 4 for float32, of 8 for bf16);
`bias_gelu` checks that and says so. On Hopper a descriptor load is a TMA copy, whose box is at
most 256 elements along each dimension: BLOCK_M and BLOCK_N stay at or below 256.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def gelu(x):
    """The exact (erf) GELU of x, in float32: 0.7071… is 1/sqrt(2)."""
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def bias_gelu_kernel(x_ptr, b_ptr, y_ptr, M, N, x_row_stride, y_row_stride,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[x_row_stride, 1],
                                       block_shape=[BLOCK_M, BLOCK_N])
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[y_row_stride, 1],
                                       block_shape=[BLOCK_M, BLOCK_N])
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    b = tl.load(b_ptr + cols, mask=cols < N).to(tl.float32)
    x = x_desc.load([pid_m * BLOCK_M, pid_n * BLOCK_N]).to(tl.float32) + b[None, :]
    y_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], gelu(x).to(y_ptr.dtype.element_ty))


def bias_gelu(x: torch.Tensor, bias: torch.Tensor, *, block_m: int | None = None, block_n: int | None = None,
              num_warps: int | None = None) -> torch.Tensor:
    assert x.ndim == 2 and x.stride(1) == 1, "rows must be contiguous"
    if (x.stride(0) * x.element_size()) % 16 or x.data_ptr() % 16:
        raise ValueError("a tensor descriptor needs 16-byte-aligned rows: N a multiple of "
                         f"{16 // x.element_size()} for {x.dtype}")
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    # the bias is re-read once per BLOCK_M rows (1/64 extra bytes at 32); 32 × 256 tiles with 4 warps
    # were the fastest on an H200 (tools/tune_fusion.py: 151 µs, 84% of copy, for 8192² float32)
    block_m = block_m or (32 if x.is_cuda else 16)
    block_n = block_n or (256 if x.is_cuda else 128)
    assert block_m <= 256 and block_n <= 256, "a TMA box is at most 256 elements per dimension"
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    bias_gelu_kernel[grid](x, bias, y, m, n, x.stride(0), y.stride(0), BLOCK_M=block_m, BLOCK_N=block_n,
                           num_warps=num_warps or 4)
    return y


@triton.jit
def bias_gelu_flat_kernel(x_ptr, b_ptr, y_ptr, numel, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    # x is read once (evict first); the bias, N elements, is re-read by every row: keep it in L2 (evict last)
    x = tl.load(x_ptr + offs, mask=mask, eviction_policy="evict_first").to(tl.float32)
    x += tl.load(b_ptr + offs % N, mask=mask, eviction_policy="evict_last").to(tl.float32)
    tl.store(y_ptr + offs, gelu(x).to(y_ptr.dtype.element_ty), mask=mask)


def bias_gelu_flat(x: torch.Tensor, bias: torch.Tensor, *, block: int = 1024, num_warps: int = 4) -> torch.Tensor:
    """gelu(x + bias) over x as one flat range (contiguous x): 1,024 elements and 4 warps per program were the
    fastest of 12 on an H200 (tools/tune_fusion.py bias_gelu)."""
    assert x.ndim == 2 and x.is_contiguous(), "the flat layout needs a contiguous x"
    y = torch.empty_like(x)
    bias_gelu_flat_kernel[(triton.cdiv(x.numel(), block),)](x, bias, y, x.numel(), x.shape[1], BLOCK=block,
                                                            num_warps=num_warps)
    return y
