/* attn_layout.h — what the cache must know to size fused attention, and the one place
 * that says how a unit's partial state is laid out. A leaf: the cache (src/cache) sizes
 * its scratch and partial-state area from these at create, attend.c fills and merges
 * them; neither needs the other for it.
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
