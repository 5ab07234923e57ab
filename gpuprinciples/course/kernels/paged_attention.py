"""Paged decode attention: the KV cache in fixed-size pages, found through a block table.

    q [B, Hq, D], k_pages and v_pages [P, Hkv, PAGE, D], block_table [B, max_pages] (int32),
    seq_lens [B] (int32)

Position t of sequence b lives in page block_table[b, t // PAGE], row t % PAGE. A server allocates
pages as sequences grow, so no sequence reserves S_max positions up front and memory is not lost
to padding (vLLM's PagedAttention, Kwon et al. 2023). The pages of one sequence are anywhere in
the pool: a tile of keys is a gather, one page number per row, so it is loaded with pointers, not
with a tensor descriptor (a descriptor addresses one rectangular tile).

The split-KV plan and the merge are those of `decode_attention.py`; only the loads differ. Rows past
the sequence's length, and the block-table entries past its last page, are neither read nor used.
"""

import torch
import triton
import triton.language as tl

from .decode_attention import attend, check_shapes, finish, launch, load_queries, plan

# On a GPU, from tools/tune_decode.py on an H200 (pages of 16, the long context; docs/decoding-h200.md#paged):
# run 2 timed 64-key tiles, 4 warps, 2 stages (the contiguous kernel's tiles) at 263 µs (96 % of copy), where
# run 1's choice, 32-key tiles, took 300 µs (84 %), and 64-key tiles with 3 stages 348 µs in run 1 (73 %).
GPU_TILES = {"block_n": 64, "num_warps": 4, "num_stages": 2}


@triton.jit
def paged_split_kv_kernel(Q, KP, VP, BlockTable, SeqLens, Out, OPart, LsePart, Hkv, chunk, qk_scale,
                          sqb, sqh, skp, skh, sks, svp, svh, svs, sbb, sob, soh, spb, sph, sps, slb, slh,
                          PAGE, G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
                          SINGLE: tl.constexpr, PRECISION: tl.constexpr):
    b, hkv, split, seq_len, start, end, heads, rows, offs_d, q = load_queries(Q, SeqLens, Hkv, chunk, sqb, sqh,
                                                                              G, BLOCK_G, D)
    m_i = tl.full([BLOCK_G], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    table = BlockTable + b * sbb
    for n in range(start, end, BLOCK_N):
        pos = n + tl.arange(0, BLOCK_N)
        ok = pos < end
        page = tl.load(table + pos // PAGE, mask=ok, other=0).to(tl.int64)  # one page number per row
        within = (pos % PAGE)[:, None]
        k = tl.load(KP + page[:, None] * skp + hkv * skh + within * sks + offs_d[None, :], mask=ok[:, None], other=0.0)
        v = tl.load(VP + page[:, None] * svp + hkv * svh + within * svs + offs_d[None, :], mask=ok[:, None], other=0.0)
        m_i, l_i, acc = attend(q, k, v, ok, m_i, l_i, acc, qk_scale, PRECISION)
    finish(acc, l_i, m_i, rows, heads, offs_d, b, split, Out, OPart, LsePart, sob, soh, spb, sph, sps, slb, slh, SINGLE)


def paged_decode_attention(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor, block_table: torch.Tensor,
                           seq_lens: torch.Tensor, *, splits: int | None = None, block_n: int | None = None,
                           num_warps: int | None = None, num_stages: int | None = None) -> torch.Tensor:
    """decode_attention over a paged cache; the longest sequence the table can hold sets the split plan."""
    _, Hkv, page_size, D = k_pages.shape
    assert v_pages.shape == k_pages.shape and k_pages.stride(-1) == v_pages.stride(-1) == 1
    assert block_table.dtype == torch.int32 and block_table.shape[0] == q.shape[0]
    G = check_shapes(q, Hkv, D, seq_lens)
    s_max = block_table.shape[1] * page_size
    cfg = plan(q, Hkv, s_max, splits, block_n, num_warps, num_stages, tiles=GPU_TILES)
    return launch(paged_split_kv_kernel, q, seq_lens, Hkv, G, (k_pages, v_pages, block_table),
                  (*k_pages.stride()[:3], *v_pages.stride()[:3], block_table.stride(0)), cfg, after=(page_size,))


def gather_pages(pages: torch.Tensor, block_table: torch.Tensor, length: int) -> torch.Tensor:
    """The first `length` positions of every sequence as a contiguous cache [B, Hkv, length, D] (a copy)."""
    P, Hkv, page_size, D = pages.shape
    n_pages = triton.cdiv(length, page_size)
    picked = pages[block_table[:, :n_pages].long()]  # [B, n_pages, Hkv, PAGE, D]
    return picked.transpose(1, 2).reshape(block_table.shape[0], Hkv, n_pages * page_size, D)[:, :, :length]
