# exercise: decoding.paged_decode_attention
# function: paged_decode_attention
# verdict: failed
# not-says: values wrong
# modes: cpu
# says: entries past a sequence's last page
# says: pages the block table does not point to, or rows of a sequence's last page at or past its length
# seed: 10
"""Adversarial (paged): reads every block-table entry and every row of each page it names, up to the table's
end, then masks the scores (and zeroes V) past the length: right values, but pages and table entries past each
sequence's end are read."""

import triton
import triton.language as tl

from gpuprinciples.course.kernels.decode_attention import attend, check_shapes, finish, launch, load_queries, plan


@triton.jit
def whole_table_kernel(Q, KP, VP, BlockTable, SeqLens, Out, OPart, LsePart, Hkv, chunk, qk_scale,
                       sqb, sqh, skp, skh, sks, svp, svh, svs, sbb, sob, soh, spb, sph, sps, slb, slh, PAGE, S_MAX,
                       G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
                       SINGLE: tl.constexpr, PRECISION: tl.constexpr):
    b, hkv, split, seq_len, start, end, heads, rows, offs_d, q = load_queries(Q, SeqLens, Hkv, chunk, sqb, sqh,
                                                                              G, BLOCK_G, D)
    m_i = tl.full([BLOCK_G], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    for n in range(start, tl.minimum(start + chunk, S_MAX), BLOCK_N):
        pos = n + tl.arange(0, BLOCK_N)
        inside = pos < S_MAX  # the mistake: the table's end, not the sequence's
        page = tl.load(BlockTable + b * sbb + pos // PAGE, mask=inside, other=0)
        off = page[:, None] * skp + hkv * skh + (pos % PAGE)[:, None] * sks + offs_d[None, :]
        k = tl.load(KP + off, mask=inside[:, None], other=0.0)
        v = tl.load(VP + off, mask=inside[:, None], other=0.0)
        live = pos < seq_len
        m_i, l_i, acc = attend(q, k, tl.where(live[:, None], v, 0.0), live, m_i, l_i, acc, qk_scale, PRECISION)
    finish(acc, l_i, m_i, rows, heads, offs_d, b, split, Out, OPart, LsePart, sob, soh, spb, sph, sps, slb, slh, SINGLE)


def paged_decode_attention(q, k_pages, v_pages, block_table, seq_lens):
    _, Hkv, page, D = k_pages.shape
    G = check_shapes(q, Hkv, D, seq_lens)
    s_max = block_table.shape[1] * page
    return launch(whole_table_kernel, q, seq_lens, Hkv, G, (k_pages, v_pages, block_table),
                  (*k_pages.stride()[:3], *v_pages.stride()[:3], block_table.stride(0)), plan(q, Hkv, s_max),
                  after=(page, s_max))
