/* codec_kernels_avx2.c — AVX2 twins of the seal and decode kernels
 * (src/codec/codec_kernels.c is the reference; results are bit-identical: same
 * operations, same order, no FMA). Compiled with the AVX2 flags only; reached through
 * sjk_codec_kernels_get(). */
#if defined(__x86_64__)
#include <immintrin.h>

#include "codec/codec_kernels.h"
#include "codec/record_layout.h"

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
    /* two rows at a time: independent accumulator chains, each row in the reference order */
    for (size_t i = 0; i < R; i += 2) {
        const float *m = M + i * C;
        __m256 x0[2], pa[2], pb[2], qa[2], qb[2];
        for (int r = 0; r < 2; r++) {
            x0[r] = _mm256_set1_ps(m[r * C] * cs[0]);
            pa[r] = pb[r] = qa[r] = qb[r] = _mm256_setzero_ps();
        }
        for (size_t j = 0; j < C; j += 16) {
            const __m256 ca = _mm256_loadu_ps(cs + j), cb = _mm256_loadu_ps(cs + j + 8);
            for (int r = 0; r < 2; r++) {
                __m256 da = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(m + r * C + j), ca), x0[r]);
                __m256 db = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(m + r * C + j + 8), cb), x0[r]);
                pa[r] = _mm256_add_ps(pa[r], da);
                pb[r] = _mm256_add_ps(pb[r], db);
                qa[r] = _mm256_add_ps(qa[r], _mm256_mul_ps(da, da));
                qb[r] = _mm256_add_ps(qb[r], _mm256_mul_ps(db, db));
            }
        }
        for (int r = 0; r < 2; r++) {
            sum[i + r] = tree16(pa[r], pb[r]);
            sq[i + r] = tree16(qa[r], qb[r]);
        }
    }
}

static void stds_avx2(const float *sum, const float *sq, size_t n, float cnt, const float *f, float *out)
{
    const __m256 vc = _mm256_set1_ps(cnt), vc1 = _mm256_set1_ps(cnt - 1.0f), zero = _mm256_setzero_ps();
    for (size_t j = 0; j < n; j += 8) {
        __m256 s = _mm256_loadu_ps(sum + j);
        __m256 v = _mm256_div_ps(_mm256_sub_ps(_mm256_loadu_ps(sq + j), _mm256_div_ps(_mm256_mul_ps(s, s), vc)), vc1);
        __m256 r = _mm256_sqrt_ps(_mm256_max_ps(v, zero));
        if (f) r = _mm256_mul_ps(_mm256_loadu_ps(f + j), r);
        _mm256_storeu_ps(out + j, r);
    }
}

/* sjk_fast_logf / sjk_fast_expf (codec_kernels.c), 8 lanes, the same operations. */
static inline __m256 fast_log8(__m256 x)
{
    const __m256i u = _mm256_castps_si256(x);
    __m256i e = _mm256_sub_epi32(_mm256_and_si256(_mm256_srli_epi32(u, 23), _mm256_set1_epi32(0xFF)),
                                 _mm256_set1_epi32(127));
    __m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFF)),
                                                   _mm256_set1_epi32(0x3F800000)));
    const __m256 big = _mm256_cmp_ps(m, _mm256_set1_ps(1.41421356f), _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), big);
    e = _mm256_add_epi32(e, _mm256_and_si256(_mm256_castps_si256(big), _mm256_set1_epi32(1)));
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 s = _mm256_div_ps(_mm256_sub_ps(m, one), _mm256_add_ps(m, one));
    __m256 z = _mm256_mul_ps(s, s);
    __m256 p = _mm256_set1_ps(0.11111111f);
    p = _mm256_add_ps(_mm256_mul_ps(p, z), _mm256_set1_ps(0.14285715f));
    p = _mm256_add_ps(_mm256_mul_ps(p, z), _mm256_set1_ps(0.2f));
    p = _mm256_add_ps(_mm256_mul_ps(p, z), _mm256_set1_ps(0.33333334f));
    p = _mm256_add_ps(_mm256_mul_ps(p, z), one);
    __m256 lm = _mm256_mul_ps(_mm256_add_ps(s, s), p);
    __m256 fe = _mm256_cvtepi32_ps(e);
    return _mm256_add_ps(_mm256_add_ps(lm, _mm256_mul_ps(fe, _mm256_set1_ps(1.428606765330187e-06f))),
                         _mm256_mul_ps(fe, _mm256_set1_ps(0.693145751953125f)));
}

static inline __m256 fast_exp8(__m256 y)
{
    __m256 n = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(1.44269504f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_sub_ps(_mm256_sub_ps(y, _mm256_mul_ps(n, _mm256_set1_ps(0.693145751953125f))),
                             _mm256_mul_ps(n, _mm256_set1_ps(1.428606765330187e-06f)));
    __m256 p = _mm256_set1_ps(1.98412698e-4f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.38888889e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.33333333e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.16666667e-2f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.166666667f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    __m256i b = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(b));
}

static void update_scales_avx2(float *a, float *inv, const float *st, size_t n, float std_lo,
                               float std_hi, float log_lo, float log_hi, int skip)
{
    const __m256 slo = _mm256_set1_ps(std_lo), shi = _mm256_set1_ps(std_hi);
    const __m256 llo = _mm256_set1_ps(log_lo), lhi = _mm256_set1_ps(log_hi);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (size_t j = 0; j < n; j += 8) {
        __m256 s = _mm256_loadu_ps(st + j), va = _mm256_loadu_ps(a + j);
        __m256 c = _mm256_min_ps(_mm256_max_ps(s, slo), shi);
        __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(va, fast_log8(c)), llo), lhi);
        __m256 keep = skip ? _mm256_cmp_ps(s, _mm256_setzero_ps(), _CMP_EQ_OQ) : _mm256_setzero_ps();
        va = _mm256_blendv_ps(t, va, keep);
        _mm256_storeu_ps(a + j, va);
        _mm256_storeu_ps(inv + j, fast_exp8(_mm256_xor_ps(va, sign)));
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

/* 8 x 8 transpose: r[c] holds column c of an 8 x 8 block (lane = row); writes row i to
 * out + i * stride. */
static inline void transpose8_store(const __m256 r[8], float *out, size_t stride)
{
    __m256 t[8], u[8];
    for (int a = 0; a < 8; a += 2) {
        t[a] = _mm256_unpacklo_ps(r[a], r[a + 1]);
        t[a + 1] = _mm256_unpackhi_ps(r[a], r[a + 1]);
    }
    for (int g = 0; g < 2; g++) {
        const __m256 *tt = t + 4 * g;
        u[4 * g + 0] = _mm256_shuffle_ps(tt[0], tt[2], 0x44);
        u[4 * g + 1] = _mm256_shuffle_ps(tt[0], tt[2], 0xEE);
        u[4 * g + 2] = _mm256_shuffle_ps(tt[1], tt[3], 0x44);
        u[4 * g + 3] = _mm256_shuffle_ps(tt[1], tt[3], 0xEE);
    }
    for (int b = 0; b < 4; b++) {
        _mm256_storeu_ps(out + (size_t)b * stride, _mm256_permute2f128_ps(u[b], u[4 + b], 0x20));
        _mm256_storeu_ps(out + (size_t)(4 + b) * stride, _mm256_permute2f128_ps(u[b], u[4 + b], 0x31));
    }
}

static inline __m256 sanitize8(__m256 x)
{
    const __m256i e = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7F800000));
    const __m256i bad = _mm256_or_si256(_mm256_cmpeq_epi32(e, _mm256_set1_epi32(0x7F800000)),
                                        _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-65504.0f)), _mm256_set1_ps(65504.0f));
    return _mm256_andnot_ps(_mm256_castsi256_ps(bad), x);
}

static void load_tiles_avx2(float *kt, float *vt, const float *k, const float *v, size_t D)
{
    const size_t G = SJK_GROUP;
    for (size_t i = 0; i < G * D; i += 8) _mm256_storeu_ps(vt + i, sanitize8(_mm256_loadu_ps(v + i)));
    for (size_t t0 = 0; t0 < G; t0 += 8)
        for (size_t d0 = 0; d0 < D; d0 += 8) {
            __m256 r[8];
            for (int t = 0; t < 8; t++) r[t] = sanitize8(_mm256_loadu_ps(k + (t0 + (size_t)t) * D + d0));
            transpose8_store(r, kt + d0 * G + t0, G);
        }
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
    "avx2", col_sweep_avx2, row_sweep_avx2, stds_avx2, update_scales_avx2, load_tiles_avx2, scale_row_avx2, rtn_row_avx2,
    decode_k16_avx2, decode_v_row_avx2,
};
#else
typedef int sjk_codec_kernels_avx2_unused;
#endif
