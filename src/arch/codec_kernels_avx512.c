/* codec_kernels_avx512.c — AVX-512 twins of the seal and decode kernels
 * (src/codec/codec_kernels.c is the reference; results are bit-identical: same
 * operations, same order, no FMA). Compiled with the AVX-512 flags only; reached through
 * sjk_codec_kernels_get(). */
#if defined(__x86_64__)
#include <immintrin.h>

#include "codec/codec_kernels.h"
#include "codec/record.h"

static void col_sweep_avx512(const float *M, size_t R, size_t C, const float *rs, float *sum, float *sq)
{
    /* 64 columns at a time: 4 vectors of sums and 4 of squares stay in registers */
    for (size_t j = 0; j < C; j += 64) {
        const size_t nv = (C - j) >= 64 ? 4 : (C - j) / 16;
        __m512 s[4], q[4], k[4];
        const __m512 r0 = _mm512_set1_ps(rs[0]);
        for (size_t v = 0; v < nv; v++) {
            s[v] = _mm512_setzero_ps();
            q[v] = _mm512_setzero_ps();
            k[v] = _mm512_mul_ps(_mm512_loadu_ps(M + j + 16 * v), r0);
        }
        for (size_t i = 0; i < R; i++) {
            const float *m = M + i * C + j;
            const __m512 ri = _mm512_set1_ps(rs[i]);
            for (size_t v = 0; v < nv; v++) {
                __m512 d = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(m + 16 * v), ri), k[v]);
                s[v] = _mm512_add_ps(s[v], d);
                q[v] = _mm512_add_ps(q[v], _mm512_mul_ps(d, d));
            }
        }
        for (size_t v = 0; v < nv; v++) {
            _mm512_storeu_ps(sum + j + 16 * v, s[v]);
            _mm512_storeu_ps(sq + j + 16 * v, q[v]);
        }
    }
}

/* The reference tree: p[l] += p[l+8]; p[l] += p[l+4]; p[l] += p[l+2]; p[0] += p[1]. */
static inline float tree16(__m512 p)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(p), _mm512_extractf32x8_ps(p, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    __m128 d = _mm_add_ss(c, _mm_shuffle_ps(c, c, 1));
    return _mm_cvtss_f32(d);
}

static void row_sweep_avx512(const float *M, size_t R, size_t C, const float *cs, float *sum, float *sq)
{
    for (size_t i = 0; i < R; i++) {
        const float *m = M + i * C;
        const __m512 x0 = _mm512_set1_ps(m[0] * cs[0]);
        __m512 p = _mm512_setzero_ps(), q = _mm512_setzero_ps();
        for (size_t j = 0; j < C; j += 16) {
            __m512 d = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(m + j), _mm512_loadu_ps(cs + j)), x0);
            p = _mm512_add_ps(p, d);
            q = _mm512_add_ps(q, _mm512_mul_ps(d, d));
        }
        sum[i] = tree16(p);
        sq[i] = tree16(q);
    }
}

static void scale_row_avx512(const float *m, size_t n, float ir, const float *ic, float *b)
{
    const __m512 r = _mm512_set1_ps(ir);
    for (size_t j = 0; j < n; j += 16)
        _mm512_storeu_ps(b + j, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(m + j), _mm512_loadu_ps(ic + j)), r));
}

static void rtn_row_avx512(const float *m, size_t n, float ir, const float *ic, unsigned qmax,
                           uint8_t *codes, float *lo_out, float *step_out)
{
    const __m512 r = _mm512_set1_ps(ir);
    __m512 vlo = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(m), _mm512_loadu_ps(ic)), r), vhi = vlo;
    for (size_t j = 16; j < n; j += 16) {
        __m512 b = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(m + j), _mm512_loadu_ps(ic + j)), r);
        vlo = _mm512_min_ps(vlo, b);
        vhi = _mm512_max_ps(vhi, b);
    }
    float lo = _mm512_reduce_min_ps(vlo), hi = _mm512_reduce_max_ps(vhi);
    lo += 0.0f;
    float step = (hi - lo) / (float)qmax;
    if (!(step >= 1e-10f)) step = 1e-10f;
    const __m512 vl = _mm512_set1_ps(lo), vs = _mm512_set1_ps(step);
    const __m512 zero = _mm512_setzero_ps(), vq = _mm512_set1_ps((float)qmax);
    for (size_t j = 0; j < n; j += 16) {
        __m512 b = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(m + j), _mm512_loadu_ps(ic + j)), r);
        __m512 q = _mm512_roundscale_ps(_mm512_div_ps(_mm512_sub_ps(b, vl), vs),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q = _mm512_min_ps(_mm512_max_ps(q, zero), vq);
        _mm_storeu_si128((__m128i *)(codes + j), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(q)));
    }
    *lo_out = lo;
    *step_out = step;
}

/* Codes i..i+15 (i % 16 == 0) of a payload row of n codes, as 32-bit lanes. */
static inline __m512i unpack16(const uint8_t *row, size_t n, unsigned bits, size_t i)
{
    if (bits == 4) {
        __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + (i / 32) * 16)));
        return _mm512_and_si512(_mm512_srli_epi32(b, (unsigned)(4 * ((i % 32) / 16))), _mm512_set1_epi32(15));
    }
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + (i / 64) * 16)));
    __m512i c = _mm512_and_si512(_mm512_srli_epi32(b, (unsigned)(2 * ((i % 64) / 16))), _mm512_set1_epi32(3));
    if (bits == 3) {
        __mmask16 h = (__mmask16)sjk_rd_u16le(row + n / 4 + i / 8);
        c = _mm512_mask_or_epi32(c, h, c, _mm512_set1_epi32(4));
    }
    return c;
}

static void decode_k16_avx512(float *k, size_t D, const uint8_t *payload, size_t row_nbytes,
                              unsigned bits, const float *scale, const float *zero, const float *tok)
{
    for (size_t t0 = 0; t0 < SJK_GROUP; t0 += 16) {
        const __m512 vt = _mm512_loadu_ps(tok + t0);
        __m512 r[16], t[16], u[16];
        for (size_t c = 0; c < 16; c++) {
            __m512 q = _mm512_cvtepi32_ps(unpack16(payload + c * row_nbytes, SJK_GROUP, bits, t0));
            r[c] = _mm512_mul_ps(_mm512_add_ps(_mm512_mul_ps(q, _mm512_set1_ps(scale[c])),
                                               _mm512_set1_ps(zero[c])), vt);
        }
        /* 16 x 16 transpose: r[c] holds channel c over tokens; write token rows */
        for (int a = 0; a < 16; a += 2) {
            t[a] = _mm512_unpacklo_ps(r[a], r[a + 1]);
            t[a + 1] = _mm512_unpackhi_ps(r[a], r[a + 1]);
        }
        for (int g = 0; g < 4; g++) {
            __m512 *tt = t + 4 * g;
            u[4 * g + 0] = _mm512_shuffle_ps(tt[0], tt[2], 0x44);
            u[4 * g + 1] = _mm512_shuffle_ps(tt[0], tt[2], 0xEE);
            u[4 * g + 2] = _mm512_shuffle_ps(tt[1], tt[3], 0x44);
            u[4 * g + 3] = _mm512_shuffle_ps(tt[1], tt[3], 0xEE);
        }
        for (int b = 0; b < 4; b++) {
            __m512 va = _mm512_shuffle_f32x4(u[b], u[4 + b], 0x88);
            __m512 vb = _mm512_shuffle_f32x4(u[b], u[4 + b], 0xDD);
            __m512 vc = _mm512_shuffle_f32x4(u[8 + b], u[12 + b], 0x88);
            __m512 vd = _mm512_shuffle_f32x4(u[8 + b], u[12 + b], 0xDD);
            _mm512_storeu_ps(k + (t0 + b) * D, _mm512_shuffle_f32x4(va, vc, 0x88));
            _mm512_storeu_ps(k + (t0 + 8 + b) * D, _mm512_shuffle_f32x4(va, vc, 0xDD));
            _mm512_storeu_ps(k + (t0 + 4 + b) * D, _mm512_shuffle_f32x4(vb, vd, 0x88));
            _mm512_storeu_ps(k + (t0 + 12 + b) * D, _mm512_shuffle_f32x4(vb, vd, 0xDD));
        }
    }
}

static void decode_v_row_avx512(float *v, size_t n, const uint8_t *row, unsigned bits, float scale,
                                float zero, const float *ch)
{
    const __m512 vs = _mm512_set1_ps(scale), vz = _mm512_set1_ps(zero);
    for (size_t d = 0; d < n; d += 16) {
        __m512 q = _mm512_cvtepi32_ps(unpack16(row, n, bits, d));
        _mm512_storeu_ps(v + d, _mm512_mul_ps(_mm512_add_ps(_mm512_mul_ps(q, vs), vz), _mm512_loadu_ps(ch + d)));
    }
}

const sjk_codec_kernels sjk_codec_kernels_table_avx512 = {
    "avx512", col_sweep_avx512, row_sweep_avx512, scale_row_avx512, rtn_row_avx512,
    decode_k16_avx512, decode_v_row_avx512,
};
#else
typedef int sjk_codec_kernels_avx512_unused;
#endif
