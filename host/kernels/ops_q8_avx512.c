/* ops_q8_avx512.c — AVX-512 versions of the q8_0 window-row kernels (ops_q8.c has the
 * layout and the references). Each block's 32 int8 become two zmm of exact f32 values
 * (sign-extend, convert, times the block scale, converted by F16C). Scores keep one
 * accumulator per query head of the group and reduce once per row (the four heads of a
 * Gemma 3 group in one shuffle tree); the weighted sum keeps the group's outputs for one
 * block of 32 dimensions in registers across all rows, so each block's scale is read
 * once per row. The bodies are inlined with nq a constant for the usual group sizes (1,
 * 2, 4) so that the accumulators stay in registers. */
#include <immintrin.h>

#include "hsum_avx512.h"

#include "hcommon.h"
#include "ops.h"

#define QK 32
#define Q8_NB 34
#define INLINE static inline __attribute__((always_inline))

INLINE __m512 q8_scale(const uint8_t *blk)
{
    return _mm512_set1_ps(_cvtsh_ss((unsigned short)(blk[0] | blk[1] << 8)));
}

/* values 16*half .. 16*half + 15 of a block, dequantized */
INLINE __m512 q8_half(const uint8_t *blk, int half, __m512 d)
{
    __m128i b = _mm_loadu_si128((const __m128i *)(blk + 2 + 16 * half));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), d);
}


INLINE void scores_body(const uint8_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride, size_t nq,
                        size_t n, float *out)
{
    size_t t = 0;
    if (nq <= 4) /* two rows at a time: each query load serves both */
        for (; t + 2 <= n_t; t += 2) {
            const uint8_t *ra = k + t * k_stride, *rb = ra + k_stride;
            __m512 a[4], c[4];
            for (size_t h = 0; h < nq; h++) a[h] = c[h] = _mm512_setzero_ps();
            for (size_t b = 0; b < n / QK; b++) {
                const uint8_t *ba = ra + b * Q8_NB, *bb = rb + b * Q8_NB;
                __m512 da = q8_scale(ba), db = q8_scale(bb);
                __m512 a0 = q8_half(ba, 0, da), a1 = q8_half(ba, 1, da);
                __m512 b0 = q8_half(bb, 0, db), b1 = q8_half(bb, 1, db);
                for (size_t h = 0; h < nq; h++) {
                    const float *qh = q + h * q_stride + b * QK;
                    __m512 x0 = _mm512_loadu_ps(qh), x1 = _mm512_loadu_ps(qh + 16);
                    a[h] = _mm512_fmadd_ps(a1, x1, _mm512_fmadd_ps(a0, x0, a[h]));
                    c[h] = _mm512_fmadd_ps(b1, x1, _mm512_fmadd_ps(b0, x0, c[h]));
                }
            }
            if (nq == 4) {
                _mm_storeu_ps(out + t * 4, sjkh_hsum4x16(a[0], a[1], a[2], a[3]));
                _mm_storeu_ps(out + t * 4 + 4, sjkh_hsum4x16(c[0], c[1], c[2], c[3]));
            } else
                for (size_t h = 0; h < nq; h++) {
                    out[t * nq + h] = _mm512_reduce_add_ps(a[h]);
                    out[(t + 1) * nq + h] = _mm512_reduce_add_ps(c[h]);
                }
        }
    for (; t < n_t; t++) {
        const uint8_t *row = k + t * k_stride;
        __m512 acc[16];
        for (size_t h = 0; h < nq; h++) acc[h] = _mm512_setzero_ps();
        for (size_t b = 0; b < n / QK; b++) {
            const uint8_t *blk = row + b * Q8_NB;
            __m512 d = q8_scale(blk);
            __m512 k0 = q8_half(blk, 0, d), k1 = q8_half(blk, 1, d);
            for (size_t h = 0; h < nq; h++) {
                const float *qh = q + h * q_stride + b * QK;
                acc[h] = _mm512_fmadd_ps(k0, _mm512_loadu_ps(qh), acc[h]);
                acc[h] = _mm512_fmadd_ps(k1, _mm512_loadu_ps(qh + 16), acc[h]);
            }
        }
        if (nq == 4) _mm_storeu_ps(out + t * 4, sjkh_hsum4x16(acc[0], acc[1], acc[2], acc[3]));
        else
            for (size_t h = 0; h < nq; h++) out[t * nq + h] = _mm512_reduce_add_ps(acc[h]);
    }
}

void sjkh_scores_q8_0_multi_avx512(const uint8_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                                   size_t nq, size_t n, float *out)
{
    switch (nq) {
    case 1: scores_body(k, k_stride, n_t, q, q_stride, 1, n, out); break;
    case 2: scores_body(k, k_stride, n_t, q, q_stride, 2, n, out); break;
    case 4: scores_body(k, k_stride, n_t, q, q_stride, 4, n, out); break;
    default:
        if (nq > 16) sjkh_scores_q8_0_multi_ref(k, k_stride, n_t, q, q_stride, nq, n, out);
        else scores_body(k, k_stride, n_t, q, q_stride, nq, n, out);
    }
}

INLINE void wsum_body(const float *w, size_t w_stride, const uint8_t *v, size_t v_stride, size_t n_t, float *o,
                      size_t o_stride, size_t nq, size_t n)
{
    for (size_t b = 0; b < n / QK; b++) { /* one block: 32 dimensions of every head of the group */
        __m512 lo[16], hi[16];
        for (size_t h = 0; h < nq; h++) {
            lo[h] = _mm512_loadu_ps(o + h * o_stride + b * QK);
            hi[h] = _mm512_loadu_ps(o + h * o_stride + b * QK + 16);
        }
        for (size_t t = 0; t < n_t; t++) {
            const uint8_t *blk = v + t * v_stride + b * Q8_NB;
            __m512 d = q8_scale(blk);
            __m512 x0 = q8_half(blk, 0, d), x1 = q8_half(blk, 1, d);
            for (size_t h = 0; h < nq; h++) {
                __m512 wt = _mm512_set1_ps(w[t * w_stride + h]);
                lo[h] = _mm512_fmadd_ps(wt, x0, lo[h]);
                hi[h] = _mm512_fmadd_ps(wt, x1, hi[h]);
            }
        }
        for (size_t h = 0; h < nq; h++) {
            _mm512_storeu_ps(o + h * o_stride + b * QK, lo[h]);
            _mm512_storeu_ps(o + h * o_stride + b * QK + 16, hi[h]);
        }
    }
}

void sjkh_wsum_q8_0_multi_avx512(const float *w, size_t w_stride, const uint8_t *v, size_t v_stride, size_t n_t,
                                 float *o, size_t o_stride, size_t nq, size_t n)
{
    switch (nq) {
    case 1: wsum_body(w, w_stride, v, v_stride, n_t, o, o_stride, 1, n); break;
    case 2: wsum_body(w, w_stride, v, v_stride, n_t, o, o_stride, 2, n); break;
    case 4: wsum_body(w, w_stride, v, v_stride, n_t, o, o_stride, 4, n); break;
    default:
        if (nq > 16) sjkh_wsum_q8_0_multi_ref(w, w_stride, v, v_stride, n_t, o, o_stride, nq, n);
        else wsum_body(w, w_stride, v, v_stride, n_t, o, o_stride, nq, n);
    }
}
