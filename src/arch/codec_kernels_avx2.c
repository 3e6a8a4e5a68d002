/* codec_kernels_avx2.c — AVX2 twins of the seal and decode kernels
 * (src/codec/codec_kernels.c is the reference; results are bit-identical: same
 * operations, same order, no FMA). Compiled with the AVX2 flags only; reached through
 * sjk_codec_kernels_get(). */
#if defined(__x86_64__)
#include <immintrin.h>

#include "codec/codec_kernels.h"
#include "codec/record.h"

static void col_sweep_avx2(const float *M, size_t R, size_t C, const float *rs, float *sum, float *sq)
{
    for (size_t j = 0; j < C; j += 32) {
        const size_t nv = (C - j) >= 32 ? 4 : (C - j) / 8;
        __m256 s[4], q[4], k[4];
        const __m256 r0 = _mm256_set1_ps(rs[0]);
        for (size_t v = 0; v < nv; v++) {
            s[v] = _mm256_setzero_ps();
            q[v] = _mm256_setzero_ps();
            k[v] = _mm256_mul_ps(_mm256_loadu_ps(M + j + 8 * v), r0);
        }
        for (size_t i = 0; i < R; i++) {
            const float *m = M + i * C + j;
            const __m256 ri = _mm256_set1_ps(rs[i]);
            for (size_t v = 0; v < nv; v++) {
                __m256 d = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(m + 8 * v), ri), k[v]);
                s[v] = _mm256_add_ps(s[v], d);
                q[v] = _mm256_add_ps(q[v], _mm256_mul_ps(d, d));
            }
        }
        for (size_t v = 0; v < nv; v++) {
            _mm256_storeu_ps(sum + j + 8 * v, s[v]);
            _mm256_storeu_ps(sq + j + 8 * v, q[v]);
        }
    }
}

/* Partials 0..7 in a, 8..15 in b; the reference tree. */
static inline float tree16(__m256 a, __m256 b)
{
    __m256 s = _mm256_add_ps(a, b);
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    __m128 y = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(y, _mm_shuffle_ps(y, y, 1)));
}

static void row_sweep_avx2(const float *M, size_t R, size_t C, const float *cs, float *sum, float *sq)
{
    for (size_t i = 0; i < R; i++) {
        const float *m = M + i * C;
        const __m256 x0 = _mm256_set1_ps(m[0] * cs[0]);
        __m256 pa = _mm256_setzero_ps(), pb = pa, qa = pa, qb = pa;
        for (size_t j = 0; j < C; j += 16) {
            __m256 da = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(m + j), _mm256_loadu_ps(cs + j)), x0);
            __m256 db = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(m + j + 8), _mm256_loadu_ps(cs + j + 8)), x0);
            pa = _mm256_add_ps(pa, da);
            pb = _mm256_add_ps(pb, db);
            qa = _mm256_add_ps(qa, _mm256_mul_ps(da, da));
            qb = _mm256_add_ps(qb, _mm256_mul_ps(db, db));
        }
        sum[i] = tree16(pa, pb);
        sq[i] = tree16(qa, qb);
    }
}

static void scale_row_avx2(const float *m, size_t n, float ir, const float *ic, float *b)
{
    const __m256 r = _mm256_set1_ps(ir);
    for (size_t j = 0; j < n; j += 8)
        _mm256_storeu_ps(b + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(m + j), _mm256_loadu_ps(ic + j)), r));
}

static inline float hmin8(__m256 v)
{
    __m128 x = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_min_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_min_ss(x, _mm_shuffle_ps(x, x, 1)));
}
static inline float hmax8(__m256 v)
{
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_shuffle_ps(x, x, 1)));
}

static void rtn_row_avx2(const float *m, size_t n, float ir, const float *ic, unsigned qmax,
                         uint8_t *codes, float *lo_out, float *step_out)
{
    const __m256 r = _mm256_set1_ps(ir);
    __m256 vlo = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(m), _mm256_loadu_ps(ic)), r), vhi = vlo;
    for (size_t j = 8; j < n; j += 8) {
        __m256 b = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(m + j), _mm256_loadu_ps(ic + j)), r);
        vlo = _mm256_min_ps(vlo, b);
        vhi = _mm256_max_ps(vhi, b);
    }
    float lo = hmin8(vlo), hi = hmax8(vhi);
    lo += 0.0f;
    float step = (hi - lo) / (float)qmax;
    if (!(step >= 1e-10f)) step = 1e-10f;
    const __m256 vl = _mm256_set1_ps(lo), vs = _mm256_set1_ps(step);
    const __m256 zero = _mm256_setzero_ps(), vq = _mm256_set1_ps((float)qmax);
    for (size_t j = 0; j < n; j += 16) {
        __m256i qi[2];
        for (int h = 0; h < 2; h++) {
            const size_t jj = j + 8 * (size_t)h;
            __m256 b = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(m + jj), _mm256_loadu_ps(ic + jj)), r);
            __m256 q = _mm256_round_ps(_mm256_div_ps(_mm256_sub_ps(b, vl), vs),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            q = _mm256_min_ps(_mm256_max_ps(q, zero), vq);
            qi[h] = _mm256_cvttps_epi32(q);
        }
        /* 16 int32 (0..15) -> 16 bytes in order */
        __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(qi[0], qi[1]), 0xD8);
        __m128i b8 = _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
        _mm_storeu_si128((__m128i *)(codes + j), b8);
    }
    *lo_out = lo;
    *step_out = step;
}

/* Codes i..i+7 (i % 8 == 0) of a payload row of n codes, as 32-bit lanes. */
static inline __m256i unpack8(const uint8_t *row, size_t n, unsigned bits, size_t i)
{
    if (bits == 4) {
        __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + (i / 32) * 16 + i % 16)));
        return _mm256_and_si256(_mm256_srli_epi32(b, (int)(4 * ((i % 32) / 16))), _mm256_set1_epi32(15));
    }
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + (i / 64) * 16 + i % 16)));
    __m256i c = _mm256_and_si256(_mm256_srli_epi32(b, (int)(2 * ((i % 64) / 16))), _mm256_set1_epi32(3));
    if (bits == 3) {
        const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        __m256i h = _mm256_and_si256(_mm256_set1_epi32(row[n / 4 + i / 8]), sel);
        c = _mm256_or_si256(c, _mm256_and_si256(_mm256_cmpeq_epi32(h, sel), _mm256_set1_epi32(4)));
    }
    return c;
}

static void decode_k16_avx2(float *k, size_t D, const uint8_t *payload, size_t row_nbytes,
                            unsigned bits, const float *scale, const float *zero, const float *tok)
{
    for (size_t t0 = 0; t0 < SJK_GROUP; t0 += 8) {
        const __m256 vt = _mm256_loadu_ps(tok + t0);
        for (size_t c0 = 0; c0 < 16; c0 += 8) {
            __m256 r[8], t[8], u[8];
            for (size_t c = 0; c < 8; c++) {
                __m256 q = _mm256_cvtepi32_ps(unpack8(payload + (c0 + c) * row_nbytes, SJK_GROUP, bits, t0));
                r[c] = _mm256_mul_ps(_mm256_add_ps(_mm256_mul_ps(q, _mm256_set1_ps(scale[c0 + c])),
                                                   _mm256_set1_ps(zero[c0 + c])), vt);
            }
            for (int a = 0; a < 8; a += 2) {
                t[a] = _mm256_unpacklo_ps(r[a], r[a + 1]);
                t[a + 1] = _mm256_unpackhi_ps(r[a], r[a + 1]);
            }
            for (int g = 0; g < 2; g++) {
                __m256 *tt = t + 4 * g;
                u[4 * g + 0] = _mm256_shuffle_ps(tt[0], tt[2], 0x44);
                u[4 * g + 1] = _mm256_shuffle_ps(tt[0], tt[2], 0xEE);
                u[4 * g + 2] = _mm256_shuffle_ps(tt[1], tt[3], 0x44);
                u[4 * g + 3] = _mm256_shuffle_ps(tt[1], tt[3], 0xEE);
            }
            for (int b = 0; b < 4; b++) {
                _mm256_storeu_ps(k + (t0 + b) * D + c0, _mm256_permute2f128_ps(u[b], u[4 + b], 0x20));
                _mm256_storeu_ps(k + (t0 + 4 + b) * D + c0, _mm256_permute2f128_ps(u[b], u[4 + b], 0x31));
            }
        }
    }
}

static void decode_v_row_avx2(float *v, size_t n, const uint8_t *row, unsigned bits, float scale,
                              float zero, const float *ch)
{
    const __m256 vs = _mm256_set1_ps(scale), vz = _mm256_set1_ps(zero);
    for (size_t d = 0; d < n; d += 8) {
        __m256 q = _mm256_cvtepi32_ps(unpack8(row, n, bits, d));
        _mm256_storeu_ps(v + d, _mm256_mul_ps(_mm256_add_ps(_mm256_mul_ps(q, vs), vz), _mm256_loadu_ps(ch + d)));
    }
}

const sjk_codec_kernels sjk_codec_kernels_table_avx2 = {
    "avx2", col_sweep_avx2, row_sweep_avx2, scale_row_avx2, rtn_row_avx2,
    decode_k16_avx2, decode_v_row_avx2,
};
#else
typedef int sjk_codec_kernels_avx2_unused;
#endif
