"""Weight-only quantised matmul for decoding: y = x · (w · scale)ᵀ with w stored in 8 bits.

    x [M, K] (bf16, or float32 under the interpreter), w [N, K] int8 (or float8_e4m3fn on a GPU),
    scale [N] float32 (one per output channel), y [M, N] in x's dtype

A decode step multiplies a few rows of activations by every weight of the model: the time is the
weights' bytes over the bandwidth, and storing them in 8 bits instead of 16 halves it. The
arithmetic stays in bf16 (each weight tile is converted on the chip, after the load), so only the
bytes change. One program per (rows of x, BLOCK_N output channels) walks the whole K dimension; M
is padded to 16 rows for `tl.dot`, which costs nothing here, memory being the bound. (At batch 1 the fused decode
step uses `decode_step.fused_linear` instead: smaller tiles, more programs, no `tl.dot`.)

`quantize(w)` makes (w8, scale) per output channel: symmetric, scale = max|w_row| / 127 for int8,
/ 448 for float8_e4m3fn (its largest finite value).
"""

import torch
import triton
import triton.language as tl

QMAX = {torch.int8: 127.0, torch.float8_e4m3fn: 448.0}


@triton.jit
def weight_only_matmul_kernel(X, W, Scale, Y, M, N, K, sxm, swn, sym,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        x = tl.load(X + offs_m[:, None].to(tl.int64) * sxm + ks[None, :],
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        w = tl.load(W + offs_n[:, None].to(tl.int64) * swn + ks[None, :],
                    mask=(offs_n[:, None] < N) & (ks[None, :] < K), other=0.0)  # 0.0: fp8 takes no int constant
        acc = tl.dot(x, w.to(x.dtype).T, acc)  # 8-bit weights widened on the chip
    scale = tl.load(Scale + offs_n, mask=offs_n < N, other=0.0)
    y = acc * scale[None, :]
    tl.store(Y + offs_m[:, None].to(tl.int64) * sym + offs_n[None, :], y.to(Y.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


CPU_BLOCKS = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64}


def gpu_blocks(n: int) -> dict:
    """From tools/tune_decode.py on an H200 (2026-12-03, M = 1, int8; docs/decoding-h200.md#matvec): 64 output
    channels per program for the wide weights (the head: 75.5 µs against 85.4 with 32; w13: 16.4 against 17.0),
    32 for the narrow ones, where fewer programs would not fill the GPU (all within 5 % of each other there)."""
    if n >= 16384:
        return {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 256, "num_warps": 4, "num_stages": 3}
    return {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 256, "num_warps": 4, "num_stages": 4}


def quantize(w: torch.Tensor, dtype: torch.dtype = torch.int8) -> tuple[torch.Tensor, torch.Tensor]:
    """(w8 [N, K] in `dtype`, scale [N] float32): symmetric, one scale per output channel."""
    scale = (w.float().abs().amax(dim=1) / QMAX[dtype]).clamp_min(1e-12)
    q = w.float() / scale[:, None]
    q = q.round().clamp(-127, 127) if dtype == torch.int8 else q.clamp(-448, 448)
    return q.to(dtype).contiguous(), scale.contiguous()


def weight_only_matmul(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor,
                       blocks: dict | None = None) -> torch.Tensor:
    """x [M, K] · (w [N, K] · scale[:, None])ᵀ -> [M, N] in x's dtype."""
    M, K = x.shape
    N = w.shape[0]
    assert w.shape[1] == K and x.stride(1) == 1 and w.stride(1) == 1, "x [M, K] and w [N, K], rows contiguous"
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    cfg = dict(blocks or (gpu_blocks(N) if x.is_cuda else CPU_BLOCKS))
    grid = (triton.cdiv(M, cfg["BLOCK_M"]), triton.cdiv(N, cfg["BLOCK_N"]))
    weight_only_matmul_kernel[grid](x, w, scale, y, M, N, K, x.stride(0), w.stride(0), y.stride(0), **cfg)
    return y


def dequantized_linear(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The same product in PyTorch: widen the whole weight, then multiply (the 16-bit copy of the weight
    is written and read again: more bytes than bf16 alone, unless torch.compile fuses it)."""
    return torch.nn.functional.linear(x, w.to(x.dtype)) * scale.to(x.dtype)
