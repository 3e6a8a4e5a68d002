/* tr16_avx512.h — the 16 x 16 transpose of 32-bit lanes shared by the host's AVX-512
 * kernels (the f32 panel packing, ops_avx512.c; the K-quant panel packing,
 * mm_k_avx512.c). Include only from files compiled with AVX-512 flags (*_avx512.c). */
#ifndef SJKH_TR16_AVX512_H
#define SJKH_TR16_AVX512_H

#include <immintrin.h>

/* 16 x 16 transpose in registers: r[j] = row j in, column j out. */
static inline void sjkh_tr16(__m512 r[16])
{
    __m512 t[16], u[16];
    for (int p = 0; p < 8; p++) {
        t[2 * p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);
        t[2 * p + 1] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
    }
    /* u[4m + c]: lane k holds column 4k + c of rows 4m .. 4m + 3 */
    for (int m = 0; m < 4; m++) {
        u[4 * m + 0] = _mm512_shuffle_ps(t[4 * m], t[4 * m + 2], 0x44);
        u[4 * m + 1] = _mm512_shuffle_ps(t[4 * m], t[4 * m + 2], 0xEE);
        u[4 * m + 2] = _mm512_shuffle_ps(t[4 * m + 1], t[4 * m + 3], 0x44);
        u[4 * m + 3] = _mm512_shuffle_ps(t[4 * m + 1], t[4 * m + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        __m512 va = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), vb = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
        __m512 wa = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        __m512 wb = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_f32x4(va, wa, 0x88);
        r[c + 8] = _mm512_shuffle_f32x4(va, wa, 0xDD);
        r[c + 4] = _mm512_shuffle_f32x4(vb, wb, 0x88);
        r[c + 12] = _mm512_shuffle_f32x4(vb, wb, 0xDD);
    }
}

#endif
