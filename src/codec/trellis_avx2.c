/* trellis_avx2.c — the trellis search block with one sequence per lane, two ymm per
 * block of 16 sequences. Bit-identical to sjk_trellis_block_ref (same metric: sub, then
 * fused multiply-add; same first-minimum rule in the traceback). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "codec/trellis.h"
#include "codec/trellis_impl.h"

_Static_assert(SJK_TRELLIS_LANES == 16, "two ymm per block");

static inline __attribute__((always_inline)) void
block_k(const float *cb, const unsigned k, uint8_t *codes, const float *u, size_t T,
        size_t stride, const uint8_t *init_state, const uint8_t *end_state, float *hist,
        uint8_t *state_at)
{
    const unsigned nb = 1u << k, sh = SJK_TRELLIS_STATE_BITS - k;
    const __m256 inf = _mm256_set1_ps(INFINITY), zero = _mm256_setzero_ps();
    for (int s = 0; s < SJK_TRELLIS_STATES; s++) {
        for (int h = 0; h < 2; h++) {
            __m256 v = zero;
            if (init_state) {
                __m256i s0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(init_state + 8 * h)));
                __m256 eq = _mm256_castsi256_ps(_mm256_cmpeq_epi32(s0, _mm256_set1_epi32(s)));
                v = _mm256_blendv_ps(inf, zero, eq);
            }
            _mm256_storeu_ps(hist + s * 16 + 8 * h, v);
        }
    }

    for (size_t t = 0; t < T; t++) {
        const float *prev = hist + t * SJK_TRELLIS_STEP_FLOATS;
        float *cur = hist + (t + 1) * SJK_TRELLIS_STEP_FLOATS;
        const __m256 u0 = _mm256_loadu_ps(u + t * stride), u1 = _mm256_loadu_ps(u + t * stride + 8);
        for (unsigned ns = 0; ns < SJK_TRELLIS_STATES; ns++) {
            const float *cw = cb + (ns << k);
            const float *pp = prev + ((ns << k) & 63u) * 16; /* predecessors: 2^k in a row */
            __m256 a0 = inf, a1 = inf;
#pragma GCC unroll 16
            for (unsigned j = 0; j < nb; j++) {
                __m256 c = _mm256_broadcast_ss(cw + j);
                __m256 d0 = _mm256_sub_ps(u0, c), d1 = _mm256_sub_ps(u1, c);
                a0 = _mm256_min_ps(_mm256_fmadd_ps(d0, d0, _mm256_loadu_ps(pp + j * 16)), a0);
                a1 = _mm256_min_ps(_mm256_fmadd_ps(d1, d1, _mm256_loadu_ps(pp + j * 16 + 8)), a1);
            }
            _mm256_storeu_ps(cur + ns * 16, a0);
            _mm256_storeu_ps(cur + ns * 16 + 8, a1);
        }
    }

    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m63 = _mm256_set1_epi32(63);
    for (int h = 0; h < 2; h++) {
        __m256i s;
        if (end_state) {
            s = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(end_state + 8 * h)));
        } else {
            const float *last = hist + T * SJK_TRELLIS_STEP_FLOATS + 8 * h;
            __m256 best = _mm256_loadu_ps(last);
            s = _mm256_setzero_si256();
            for (int q = 1; q < SJK_TRELLIS_STATES; q++) {
                __m256 v = _mm256_loadu_ps(last + q * 16);
                __m256 m = _mm256_cmp_ps(v, best, _CMP_LT_OQ);
                best = _mm256_blendv_ps(best, v, m);
                s = _mm256_blendv_epi8(s, _mm256_set1_epi32(q), _mm256_castps_si256(m));
            }
        }
        for (size_t t = T; t-- > 0;) {
            const float *prev = hist + t * SJK_TRELLIS_STEP_FLOATS + 8 * h;
            int32_t sv[8];
            _mm256_storeu_si256((__m256i *)sv, s);
            for (int l = 0; l < 8; l++) {
                if (state_at) state_at[(t + 1) * 16 + 8 * h + l] = (uint8_t)sv[l];
                codes[t * stride + 8 * h + l] = (uint8_t)(sv[l] >> sh);
            }
            const __m256 ut = _mm256_loadu_ps(u + t * stride + 8 * h);
            const __m256i base = _mm256_slli_epi32(s, (int)k);
            __m256 best = _mm256_set1_ps(INFINITY);
            __m256i bj = _mm256_setzero_si256();
            for (unsigned j = 0; j < nb; j++) {
                __m256i w = _mm256_or_si256(base, _mm256_set1_epi32((int)j));
                __m256i p = _mm256_and_si256(w, m63);
                __m256 c = _mm256_i32gather_ps(cb, w, 4);
                __m256 pc = _mm256_i32gather_ps(prev, _mm256_add_epi32(_mm256_slli_epi32(p, 4), lane), 4);
                __m256 d = _mm256_sub_ps(ut, c);
                __m256 cand = _mm256_fmadd_ps(d, d, pc);
                __m256 m = _mm256_cmp_ps(cand, best, _CMP_LT_OQ);
                best = _mm256_blendv_ps(best, cand, m);
                bj = _mm256_blendv_epi8(bj, _mm256_set1_epi32((int)j), _mm256_castps_si256(m));
            }
            s = _mm256_and_si256(_mm256_or_si256(base, bj), m63);
        }
        if (state_at) {
            int32_t sv[8];
            _mm256_storeu_si256((__m256i *)sv, s);
            for (int l = 0; l < 8; l++) state_at[8 * h + l] = (uint8_t)sv[l];
        }
    }
}

void sjk_trellis_block_avx2(const float *cb, unsigned k, uint8_t *codes, const float *u,
                            size_t T, size_t stride, const uint8_t *init_state,
                            const uint8_t *end_state, float *hist, uint8_t *state_at)
{
    switch (k) {
    case 2: block_k(cb, 2, codes, u, T, stride, init_state, end_state, hist, state_at); break;
    case 3: block_k(cb, 3, codes, u, T, stride, init_state, end_state, hist, state_at); break;
    default: block_k(cb, 4, codes, u, T, stride, init_state, end_state, hist, state_at); break;
    }
}

/* ---- decode of a token-axis tile (see trellis_avx512.c): 16 channels as two halves of
 * 8 lanes. Lanes 0..7 of a step are its bits 0 .. 8k-1, lanes 8..15 the next 8k bits, so
 * each half is one 32-bit word shifted per lane. */
static inline __attribute__((always_inline)) void
decode_token_k(float *out, size_t D, size_t G, const float *cb, const unsigned k,
               const uint8_t *payload, const float *row_scale, const float *row_zero,
               const float *col_scale, int rows_are_channels)
{
    const size_t step_nbytes = 2 * k, group_nbytes = G * step_nbytes;
    const unsigned lead = (SJK_TRELLIS_STATE_BITS + k - 1) / k;
    const __m256i sh = _mm256_setr_epi32(0, (int)k, (int)(2 * k), (int)(3 * k), (int)(4 * k),
                                         (int)(5 * k), (int)(6 * k), (int)(7 * k));
    const __m256i mk = _mm256_set1_epi32((int)((1u << k) - 1));
    const __m256 one = _mm256_set1_ps(1.0f);
    for (size_t d0 = 0; d0 < D; d0 += 16) {
        const uint8_t *g = payload + d0 / 16 * group_nbytes;
        for (int h = 0; h < 2; h++) {
            const size_t dh = d0 + 8 * (size_t)h;
            __m256 a = one, b = one, col = one;
            if (rows_are_channels) {
                a = _mm256_loadu_ps(row_scale + dh);
                b = _mm256_loadu_ps(row_zero + dh);
            } else if (col_scale) {
                col = _mm256_loadu_ps(col_scale + dh);
            }
#define STEP2(t)                                                                             \
    do {                                                                                     \
        uint32_t x_ = (uint32_t)(sjk_trellis_load_step(g + (t) * step_nbytes, k) >> (8 * k * (unsigned)h)); \
        __m256i s_ = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)x_), sh), mk); \
        w = _mm256_or_si256(_mm256_slli_epi32(s_, 6), _mm256_srli_epi32(w, (int)k));         \
    } while (0)
            __m256i w = _mm256_setzero_si256();
            for (size_t t = G - lead; t < G; t++) STEP2(t);
            for (size_t t = 0; t < G; t++) {
                STEP2(t);
                __m256 c = _mm256_i32gather_ps(cb, w, 4);
                __m256 at = a, bt = b, ct = col;
                if (rows_are_channels) {
                    if (col_scale) ct = _mm256_set1_ps(col_scale[t]);
                } else {
                    at = _mm256_set1_ps(row_scale[t]);
                    bt = _mm256_set1_ps(row_zero[t]);
                }
                __m256 y = _mm256_add_ps(_mm256_mul_ps(c, at), bt);
                if (col_scale) y = _mm256_mul_ps(y, ct);
                _mm256_storeu_ps(out + t * D + dh, y);
            }
#undef STEP2
        }
    }
}

void sjk_trellis_decode_token_avx2(float *out, size_t D, size_t G, const float *cb, unsigned k,
                                   const uint8_t *payload, const float *row_scale,
                                   const float *row_zero, const float *col_scale,
                                   int rows_are_channels)
{
    switch (k) {
    case 2: decode_token_k(out, D, G, cb, 2, payload, row_scale, row_zero, col_scale, rows_are_channels); break;
    case 3: decode_token_k(out, D, G, cb, 3, payload, row_scale, row_zero, col_scale, rows_are_channels); break;
    default: decode_token_k(out, D, G, cb, 4, payload, row_scale, row_zero, col_scale, rows_are_channels); break;
    }
}
