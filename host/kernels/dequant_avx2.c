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

/* 32 int8 values times dlo (values 0..15) and dhi (16..31) into y[0..31] */
static inline void store32_2(__m256i q, __m256 dlo, __m256 dhi, float *y)
{
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), dlo));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), dlo));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), dhi));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), dhi));
}

/* y = (d * sc) * q - dmin * m, computed as (d * sc) * q + (-(dmin * m)): the same rounding */
void sjkh_dequant_q4_K_avx2(const void *src, float *y, size_t n)
{
    const blk_q4_K *x = src;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (size_t b = 0; b < n / QK_K; b++) {
        float d = sjkh_f16_to_f32(x[b].d), dmin = sjkh_f16_to_f32(x[b].dmin);
        const uint8_t *q = x[b].qs;
        for (int j = 0; j < 4; j++, q += 32, y += 64) {
            uint8_t sc1, m1, sc2, m2;
            sjkh_k_scale_min(2 * j, x[b].scales, &sc1, &m1);
            sjkh_k_scale_min(2 * j + 1, x[b].scales, &sc2, &m2);
            __m256i v = _mm256_loadu_si256((const __m256i *)q);
            __m256 mm1 = _mm256_set1_ps(-(dmin * (float)m1)), mm2 = _mm256_set1_ps(-(dmin * (float)m2));
            store32(_mm256_and_si256(v, m4), _mm256_set1_ps(d * (float)sc1), &mm1, y);
            store32(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_set1_ps(d * (float)sc2), &mm2, y + 32);
        }
    }
}

void sjkh_dequant_q6_K_avx2(const void *src, float *y, size_t n)
{
    const blk_q6_K *x = src;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3), o32 = _mm256_set1_epi8(32);
    for (size_t b = 0; b < n / QK_K; b++) {
        float d = sjkh_f16_to_f32(x[b].d);
        for (int h = 0; h < 2; h++, y += 128) {
            const uint8_t *ql = x[b].ql + 64 * h, *qhp = x[b].qh + 32 * h;
            const int8_t *sc = x[b].scales + 8 * h;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)qhp);
            __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4)),
                _mm256_or_si256(_mm256_and_si256(l1, m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4)),
            };
            for (int g = 0; g < 4; g++)
                store32_2(_mm256_sub_epi8(q[g], o32), _mm256_set1_ps(d * (float)sc[2 * g]),
                          _mm256_set1_ps(d * (float)sc[2 * g + 1]), y + 32 * g);
        }
    }
}
