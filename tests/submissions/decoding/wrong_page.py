# exercise: decoding.paged_decode_attention
# function: paged_decode_attention
# verdict: failed
# cpu-says: pages the block table does not point to
# cpu-says: never loaded by a triton kernel
# cpu-says: of block_table
# says: values wrong (
# seed: 10
"""Adversarial (paged): takes the pages of sequence b to be b·max_pages, b·max_pages + 1, ... as if the pool
were a contiguous cache, never reading the block table: the wrong pages."""

import triton
import triton.language as tl

from gpuprinciples.course.kernels.decode_attention import attend, check_shapes, finish, launch, load_queries, plan


@triton.jit
def assumed_pages_kernel(Q, KP, VP, SeqLens, Out, OPart, LsePart, Hkv, chunk, qk_scale,
                         sqb, sqh, skp, skh, sks, svp, svh, svs, sob, soh, spb, sph, sps, slb, slh, PAGE, MAX_PAGES,
                         G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
                         SINGLE: tl.constexpr, PRECISION: tl.constexpr):
    b, hkv, split, seq_len, start, end, heads, rows, offs_d, q = load_queries(Q, SeqLens, Hkv, chunk, sqb, sqh,
                                                                              G, BLOCK_G, D)
    m_i = tl.full([BLOCK_G], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    for n in range(start, end, BLOCK_N):
        pos = n + tl.arange(0, BLOCK_N)
        ok = pos < end
        page = b * MAX_PAGES + pos // PAGE  # the mistake: no block_table lookup
        off = page[:, None] * skp + hkv * skh + (pos % PAGE)[:, None] * sks + offs_d[None, :]
        k = tl.load(KP + off, mask=ok[:, None], other=0.0)
        v = tl.load(VP + off, mask=ok[:, None], other=0.0)
        m_i, l_i, acc = attend(q, k, v, ok, m_i, l_i, acc, qk_scale, PRECISION)
    finish(acc, l_i, m_i, rows, heads, offs_d, b, split, Out, OPart, LsePart, sob, soh, spb, sph, sps, slb, slh, SINGLE)


def paged_decode_attention(q, k_pages, v_pages, block_table, seq_lens):
    _, Hkv, page, D = k_pages.shape
    G = check_shapes(q, Hkv, D, seq_lens)
    max_pages = block_table.shape[1]
    return launch(assumed_pages_kernel, q, seq_lens, Hkv, G, (k_pages, v_pages), (*k_pages.stride()[:3],
                  *v_pages.stride()[:3]), plan(q, Hkv, max_pages * page), after=(page, max_pages))
