/* trellis_impl.h — shared inline helpers of the trellis search, included by trellis.c and
 * the SIMD kernels in src/codec/trellis_*.c (each compiled with its own ISA flags). */
#ifndef SJK_TRELLIS_IMPL_H
#define SJK_TRELLIS_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "codec/trellis.h"

/* Floats in one row of costs: [64 states][LANES]. */
#define SJK_TRELLIS_STEP_FLOATS ((size_t)SJK_TRELLIS_STATES * SJK_TRELLIS_LANES)
/* Bytes of back-pointers per step: [64 states][LANES / 2], two lanes' 4-bit choices per
 * byte (lane 2i in the low nibble, 2i+1 in the high one). */
#define SJK_TRELLIS_BP_STEP ((size_t)SJK_TRELLIS_STATES * SJK_TRELLIS_LANES / 2)

/* The work area of one search block (sjk_trellis_block_fn): two rows of costs (the
 * previous and the current step, alternating) then the back-pointers of every step. */
static inline float *sjk_trellis_cost_row(void *work, size_t t)
{
    return (float *)work + (t & 1) * SJK_TRELLIS_STEP_FLOATS;
}
static inline uint8_t *sjk_trellis_bp_step(void *work, size_t t)
{
    return (uint8_t *)((float *)work + 2 * SJK_TRELLIS_STEP_FLOATS) + t * SJK_TRELLIS_BP_STEP;
}
static inline size_t sjk_trellis_work_nbytes(size_t T)
{
    return 2 * SJK_TRELLIS_STEP_FLOATS * sizeof(float) + T * SJK_TRELLIS_BP_STEP;
}

/* The end of a search block, the same code on every path: the final state of each lane
 * (end_state, or the first minimum of the last row of costs: ties go to the lowest
 * state), then the traceback along the back-pointers, writing codes[t*stride + l] and,
 * if state_at is given, the carried state before each value. The 16 lanes are walked
 * together so that their dependent loads overlap. */
static inline void sjk_trellis_traceback(unsigned k, void *work, uint8_t *codes, size_t T,
                                         size_t stride, const uint8_t *end_state,
                                         uint8_t *state_at)
{
    enum { NL = SJK_TRELLIS_LANES };
    const unsigned sh = SJK_TRELLIS_STATE_BITS - k;
    unsigned s[NL];
    const float *last = sjk_trellis_cost_row(work, T);
    for (unsigned l = 0; l < NL; l++) {
        if (end_state) {
            s[l] = end_state[l];
            continue;
        }
        unsigned b = 0;
        for (unsigned q = 1; q < SJK_TRELLIS_STATES; q++)
            if (last[q * NL + l] < last[b * NL + l]) b = q;
        s[l] = b;
    }
    for (size_t t = T; t-- > 0;) {
        const uint8_t *bp = sjk_trellis_bp_step(work, t);
        for (unsigned l = 0; l < NL; l++) {
            if (state_at) state_at[(t + 1) * NL + l] = (uint8_t)s[l];
            codes[t * stride + l] = (uint8_t)(s[l] >> sh);
            unsigned j = (bp[s[l] * (NL / 2) + l / 2] >> (4 * (l & 1))) & 15u;
            s[l] = ((s[l] << k) | j) & 63u;
        }
    }
    if (state_at)
        for (unsigned l = 0; l < NL; l++) state_at[l] = (uint8_t)s[l];
}

/* Calls fn(K, ...) with K the constant 2, 3 or 4 that k selects (4 for any other k), so
 * that each instantiation's inner loops have fixed trip counts. */
#define SJK_TRELLIS_WITH_K(k, fn, ...)                                                     \
    do {                                                                                   \
        switch (k) {                                                                       \
        case 2: fn(2, __VA_ARGS__); break;                                                 \
        case 3: fn(3, __VA_ARGS__); break;                                                 \
        default: fn(4, __VA_ARGS__); break;                                                \
        }                                                                                  \
    } while (0)

/* The branch metric added to the cost of predecessor p for window w at value x:
 * fma(d, d, cost) with d = x - C[w]. Every path computes exactly this (one rounding for
 * the subtraction, one for the fused multiply-add), so costs are bit-identical. */
static inline float sjk_trellis_cand(float x, float c, float cost)
{
    float d = x - c;
    return fmaf(d, d, cost);
}

/* The 2k bytes of one step of a trellis payload as an integer, assembled from whole
 * loads that end at the step (a read past the last step would leave the payload; a
 * memcpy into a stack word of 6 bytes costs a store-forwarding stall per step). */
static inline __attribute__((always_inline)) uint64_t sjk_trellis_load_step(const uint8_t *p, unsigned k)
{
    uint32_t lo;
    memcpy(&lo, p, 4);
    if (k == 2) return lo;
    if (k == 4) {
        uint64_t q;
        memcpy(&q, p, 8);
        return q;
    }
    uint16_t hi;
    memcpy(&hi, p + 4, 2);
    return lo | ((uint64_t)hi << 32);
}

#endif
