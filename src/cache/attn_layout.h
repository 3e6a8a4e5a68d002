/* attn_layout.h — what the cache reserves for its reader, fused attention: the scratch
 * and work sizes of the attention kernels, the position splits, and the one place that
 * says how a unit's partial state is laid out. A leaf of src/cache: the cache sizes its
 * scratch and partial-state area from these at create; src/attention (attn_kernels.h,
 * attend.c) includes it, fills and merges them. The dependency runs one way, attention
 * on the cache; a kernel that needs more work or scratch changes the sizes here.
 *
 * Partial state of one unit (KV head, position split) for R query rows, floats:
 *
 *   m[R]      running maximum of the scores (online softmax; -inf before any key)
 *   l[R]      running sum of exp(score - m)
 *   cq[R]     ring centering: q . mu_K of the row (attend.c ring_enter)
 *   l_brd[R]  ring centering: l and m as the ring was entered
 *   m_brd[R]
 *   acc[R][D] running sum of exp(score - m) * V
 *
 * The caller's thread merges a head's splits with log-sum-exp weights from m and l. */
#ifndef SJK_ATTN_LAYOUT_H
#define SJK_ATTN_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define SJK_ATTN_ALIGN 64 /* bytes; every scratch array starts on such a boundary */

#define SJK_ATTN_RB_MAX 8 /* rows per block of the kernels that take up to 8 (AVX-512: R 5..8 in one block) */
#define SJK_ATTN_MANY_MIN 16 /* rows per KV head from which attend.c uses chunk_f32_many */
#define SJK_ATTN_MANY_RB 32  /* query rows per block inside chunk_f32_many */

/* Bytes of the buffer sjk_attn_qint_prep fills for R rows of D channels. */
#define SJK_ATTN_QINT_NBYTES(R, D) ((size_t)(R) * (2 * (size_t)(D) + (size_t)(D) + 4 * ((size_t)(D) / 32) + 4 + 2 * (size_t)(D)) + 64)

/* Floats of `work` the chunk kernels need for head dim D: the larger of two layouts.
 * Decode kernels (RB = SJK_ATTN_RB_MAX, the most rows of one block): [RB][G] scores,
 * [RB][D] folded queries, [D] zeros, then a second area of RB*G*16 (+16 for alignment)
 * floats: the trellis kernel's score partials [16][RB][16], carried windows [D/16][16]
 * and lane-ordered queries [RB][2D] (10752 floats at D = 512), or the tq6 kernel's block
 * norms [2][G][D/128], norm-weighted probabilities [D/128][RB][G] and one block's values
 * per row [RB][128]. chunk_f32_many: transposed queries [D][MANY_RB], scores then
 * probabilities [G][MANY_RB] (row r of the block in column r), factors [MANY_RB]. */
#define SJK_ATTN_DECODE_WORK_FLOATS(D) ((size_t)SJK_ATTN_RB_MAX * (2 * (D) + 4 * 128 + 8) + (size_t)SJK_ATTN_RB_MAX * 128 * 16 + 16)
#define SJK_ATTN_MANY_WORK_FLOATS(D) ((size_t)SJK_ATTN_MANY_RB * ((D) + 128 + 1))
#define SJK_ATTN_WORK_FLOATS(D) \
    (SJK_ATTN_DECODE_WORK_FLOATS(D) > SJK_ATTN_MANY_WORK_FLOATS(D) ? SJK_ATTN_DECODE_WORK_FLOATS(D) : SJK_ATTN_MANY_WORK_FLOATS(D))

/* Floats of one unit's partial state for R rows of head dimension D. */
#define SJK_ATTN_PART_FLOATS(R, D) ((size_t)(R) * ((size_t)(D) + 5))

typedef struct sjk_attn_part {
    float *m, *l, *cq, *l_brd, *m_brd; /* [R] each */
    float *acc;                        /* [R][D] */
} sjk_attn_part;

/* The arrays of the partial state that starts at p (SJK_ATTN_PART_FLOATS(R, D) floats). */
static inline sjk_attn_part sjk_attn_part_at(float *p, size_t R)
{
    sjk_attn_part s;
    s.m = p;
    s.l = s.m + R;
    s.cq = s.l + R;
    s.l_brd = s.cq + R;
    s.m_brd = s.l_brd + R;
    s.acc = s.m_brd + R;
    return s;
}

/* Attention scratch bytes per thread for head dim D. */
size_t sjk_attn_scratch_nbytes(size_t D);

/* Position splits per KV head when `threads` threads attend over `heads` KV heads: the
 * count, at least ceil(threads / heads) and at most twice that, whose heads x splits
 * units divide most evenly among the threads. */
uint32_t sjk_attn_splits(uint32_t heads, uint32_t threads);

#endif
