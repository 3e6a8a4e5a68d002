/* attn_layout.c — the attention sizes the cache plans with (attn_layout.h). */
#include "cache/attn_layout.h"
#include "sjkvarn.h"

size_t sjk_attn_scratch_nbytes(size_t D)
{
    size_t n = 2 * (size_t)SJK_GROUP * D * sizeof(float)   /* fp32 K, V chunk */
             + 2 * (size_t)SJK_GROUP * D                    /* K, V codes */
             + (3 * D + 3 * (size_t)SJK_GROUP) * sizeof(float) /* scales */
             + SJK_ATTN_WORK_FLOATS(D) * sizeof(float)
             + SJK_ATTN_QINT_NBYTES(SJK_ATTN_MANY_MIN, D) /* int8 query pieces (decode) */
             + 9 * SJK_ATTN_ALIGN;
    return n;
}

/* The units (KV head, position split) go to the threads one at a time as they free up,
 * so with equal units the slowest thread runs ceil(units / threads) of them. One split
 * per head when heads >= threads left 3 heads on 2 threads at 2 units against 1.5: here
 * the splits s from s0 = ceil(threads / heads) to 2 * s0 are tried and the one with the
 * least makespan ceil(h s / t) / (h s / t) wins (the smallest on ties: fewer merges). */
uint32_t sjk_attn_splits(uint32_t heads, uint32_t threads)
{
    if (heads == 0 || threads <= 1) return 1;
    const uint32_t s0 = (threads + heads - 1) / heads;
    uint32_t best = s0;
    uint64_t best_num = 0, best_den = 1; /* makespan ratio best_num / best_den */
    for (uint32_t s = s0; s <= 2 * s0; s++) {
        const uint64_t units = (uint64_t)heads * s, rounds = (units + threads - 1) / threads;
        /* ratio rounds * threads / units; compare a/b < c/d as a*d < c*b */
        const uint64_t num = rounds * threads, den = units;
        if (best_num == 0 || num * best_den < best_num * den) {
            best = s;
            best_num = num;
            best_den = den;
        }
    }
    return best;
}
