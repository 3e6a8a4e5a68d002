/* dequant_avx2.c — AVX2 dequantization of weight rows for the exact-activation matmul
 * (compiled with -mavx2 -mfma -mf16c; reached through sjkh_qtraits.dequant). Each
 * computes the same float operations as quants.c's scalar dq_* (q * d, or q * d + m, no
 * fused multiply-add), so the output is bit-identical to sjkh_dequant_row. */
#include <immintrin.h>

#include "hcommon.h"
#include "quants.h"

/* 16 bytes of 4-bit pairs -> low nibbles in lanes 0..15, high nibbles in 16..31 */
static inline __m256i nibbles(const uint8_t *qs)
{
    __m128i b = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0xF);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

/* 32 int8 values (as a __m256i) times d (+ m) into y[0..31] */
static inline void store32(__m256i q, __m256 d, const __m256 *m, float *y)
{
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m256 f[4] = {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)),
                   _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))),
                   _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)),
                   _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))};
    for (int i = 0; i < 4; i++) {
        __m256 v = _mm256_mul_ps(f[i], d);
        if (m) v = _mm256_add_ps(v, *m);
        _mm256_storeu_ps(y + 8 * i, v);
    }
}

void sjkh_dequant_q8_0_avx2(const void *src, float *y, size_t n)
{
    const blk_q8_0 *x = src;
    for (size_t b = 0; b < n / QK; b++, y += QK)
        store32(_mm256_loadu_si256((const __m256i *)x[b].qs), _mm256_set1_ps(sjkh_f16_to_f32(x[b].d)), NULL, y);
}

void sjkh_dequant_q4_0_avx2(const void *src, float *y, size_t n)
{
    const blk_q4_0 *x = src;
    for (size_t b = 0; b < n / QK; b++, y += QK)
        store32(_mm256_sub_epi8(nibbles(x[b].qs), _mm256_set1_epi8(8)), _mm256_set1_ps(sjkh_f16_to_f32(x[b].d)), NULL,
                y);
}

void sjkh_dequant_q4_1_avx2(const void *src, float *y, size_t n)
{
    const blk_q4_1 *x = src;
    for (size_t b = 0; b < n / QK; b++, y += QK) {
        __m256 m = _mm256_set1_ps(sjkh_f16_to_f32(x[b].m));
        store32(nibbles(x[b].qs), _mm256_set1_ps(sjkh_f16_to_f32(x[b].d)), &m, y);
    }
}

/* bit j of qh (32 bits) -> 0x10 in byte j */
static inline __m256i high_bits(const uint8_t *qh4)
{
    uint32_t qh = sjkh_rd_u32(qh4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

void sjkh_dequant_q5_0_avx2(const void *src, float *y, size_t n)
{
    const blk_q5_0 *x = src;
    for (size_t b = 0; b < n / QK; b++, y += QK) {
        __m256i q = _mm256_or_si256(nibbles(x[b].qs), high_bits(x[b].qh));
        store32(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), _mm256_set1_ps(sjkh_f16_to_f32(x[b].d)), NULL, y);
    }
}

void sjkh_dequant_q5_1_avx2(const void *src, float *y, size_t n)
{
    const blk_q5_1 *x = src;
    for (size_t b = 0; b < n / QK; b++, y += QK) {
        __m256 m = _mm256_set1_ps(sjkh_f16_to_f32(x[b].m));
        store32(_mm256_or_si256(nibbles(x[b].qs), high_bits(x[b].qh)), _mm256_set1_ps(sjkh_f16_to_f32(x[b].d)), &m, y);
    }
}
