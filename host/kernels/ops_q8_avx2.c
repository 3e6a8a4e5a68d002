/* ops_q8_avx2.c — AVX2 versions of the q8_0 window-row kernels (ops_q8.c has the layout
 * and the references), 8 lanes at a time; otherwise as ops_q8_avx512.c. */
#include <immintrin.h>

#include "hcommon.h"
#include "ops.h"

#define QK 32
#define Q8_NB 34

static inline float q8_scale(const uint8_t *blk) { return _cvtsh_ss((unsigned short)(blk[0] | blk[1] << 8)); }

/* values 8*part .. 8*part + 7 of a block, dequantized */
static inline __m256 q8_part(const uint8_t *blk, int part, __m256 d)
{
    __m128i b = _mm_loadl_epi64((const __m128i *)(blk + 2 + 8 * part));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), d);
}

static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void sjkh_scores_q8_0_multi_avx2(const uint8_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                                 size_t nq, size_t n, float *out)
{
    if (nq > 16) {
        sjkh_scores_q8_0_multi_ref(k, k_stride, n_t, q, q_stride, nq, n, out);
        return;
    }
    for (size_t t = 0; t < n_t; t++) {
        const uint8_t *row = k + t * k_stride;
        __m256 acc[16];
        for (size_t h = 0; h < nq; h++) acc[h] = _mm256_setzero_ps();
        for (size_t b = 0; b < n / QK; b++) {
            const uint8_t *blk = row + b * Q8_NB;
            __m256 d = _mm256_set1_ps(q8_scale(blk));
            for (int part = 0; part < 4; part++) {
                __m256 kv = q8_part(blk, part, d);
                for (size_t h = 0; h < nq; h++)
                    acc[h] = _mm256_fmadd_ps(kv, _mm256_loadu_ps(q + h * q_stride + b * QK + 8 * (size_t)part), acc[h]);
            }
        }
        for (size_t h = 0; h < nq; h++) out[t * nq + h] = hsum8(acc[h]);
    }
}

void sjkh_wsum_q8_0_multi_avx2(const float *w, size_t w_stride, const uint8_t *v, size_t v_stride, size_t n_t,
                               float *o, size_t o_stride, size_t nq, size_t n)
{
    if (nq > 16) {
        sjkh_wsum_q8_0_multi_ref(w, w_stride, v, v_stride, n_t, o, o_stride, nq, n);
        return;
    }
    for (size_t dd = 0; dd < n; dd += 8) {
        const size_t b = dd / QK;
        const int part = (int)(dd % QK) / 8;
        __m256 acc[16];
        for (size_t h = 0; h < nq; h++) acc[h] = _mm256_loadu_ps(o + h * o_stride + dd);
        for (size_t t = 0; t < n_t; t++) {
            const uint8_t *blk = v + t * v_stride + b * Q8_NB;
            __m256 x = q8_part(blk, part, _mm256_set1_ps(q8_scale(blk)));
            for (size_t h = 0; h < nq; h++) acc[h] = _mm256_fmadd_ps(_mm256_set1_ps(w[t * w_stride + h]), x, acc[h]);
        }
        for (size_t h = 0; h < nq; h++) _mm256_storeu_ps(o + h * o_stride + dd, acc[h]);
    }
}
