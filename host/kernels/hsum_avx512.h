/* hsum_avx512.h — horizontal sums shared by the host's AVX-512 kernels. Include only from
 * files compiled with AVX-512 flags (*_avx512.c). */
#ifndef SJKH_HSUM_AVX512_H
#define SJKH_HSUM_AVX512_H

#include <immintrin.h>

/* The four horizontal sums {sum a, sum b, sum c, sum d} with shared shuffles. */
static inline __m128 sjkh_hsum4x16(__m512 a, __m512 b, __m512 c, __m512 d)
{
    /* 128-bit lanes: ab = {a0+a2, a1+a3, b0+b2, b1+b3}, cd likewise */
    __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
    /* lanes {a, b, c, d}, four partial sums each */
    __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
    s = _mm512_add_ps(s, _mm512_shuffle_ps(s, s, 0x4E));
    s = _mm512_add_ps(s, _mm512_shuffle_ps(s, s, 0xB1));
    const __m512i first = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(first, s));
}

#endif
