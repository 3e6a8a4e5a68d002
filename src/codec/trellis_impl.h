/* trellis_impl.h — shared inline helpers of the trellis search, included by trellis.c and
 * the SIMD kernels in src/codec/trellis_*.c (each compiled with its own ISA flags). */
#ifndef SJK_TRELLIS_IMPL_H
#define SJK_TRELLIS_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "codec/trellis.h"

/* Floats in one step of the cost history: [64 states][LANES]. */
#define SJK_TRELLIS_STEP_FLOATS ((size_t)SJK_TRELLIS_STATES * SJK_TRELLIS_LANES)

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
