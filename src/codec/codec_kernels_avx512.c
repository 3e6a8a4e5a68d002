/* codec_kernels_avx512.c — AVX-512 twins of the seal and decode kernels
 * (src/codec/codec_kernels.c is the reference; results are bit-identical: same
 * operations, same order, no FMA). Compiled with the AVX-512 flags only; reached through
 * sjk_codec_kernels_get(). */
#if defined(__x86_64__)
#include <immintrin.h>

#include "codec/codec_kernels.h"
#include "codec/record_layout.h"

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
    /* four rows at a time: independent accumulator chains, each row in the reference order */
    for (size_t i = 0; i < R; i += 4) {
        const float *m = M + i * C;
        __m512 x0[4], p[4], q[4];
        for (int r = 0; r < 4; r++) {
            x0[r] = _mm512_set1_ps(m[r * C] * cs[0]);
            p[r] = _mm512_setzero_ps();
            q[r] = _mm512_setzero_ps();
        }
        for (size_t j = 0; j < C; j += 16) {
            const __m512 c = _mm512_loadu_ps(cs + j);
            for (int r = 0; r < 4; r++) {
                __m512 d = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(m + r * C + j), c), x0[r]);
                p[r] = _mm512_add_ps(p[r], d);
                q[r] = _mm512_add_ps(q[r], _mm512_mul_ps(d, d));
            }
        }
        for (int r = 0; r < 4; r++) {
            sum[i + r] = tree16(p[r]);
            sq[i + r] = tree16(q[r]);
        }
    }
}

static void stds_avx512(const float *sum, const float *sq, size_t n, float cnt, const float *f, float *out)
{
    const __m512 vc = _mm512_set1_ps(cnt), vc1 = _mm512_set1_ps(cnt - 1.0f), zero = _mm512_setzero_ps();
    for (size_t j = 0; j < n; j += 16) {
        __m512 s = _mm512_loadu_ps(sum + j);
        __m512 v = _mm512_div_ps(_mm512_sub_ps(_mm512_loadu_ps(sq + j), _mm512_div_ps(_mm512_mul_ps(s, s), vc)), vc1);
        __m512 r = _mm512_sqrt_ps(_mm512_max_ps(v, zero));
        if (f) r = _mm512_mul_ps(_mm512_loadu_ps(f + j), r);
        _mm512_storeu_ps(out + j, r);
    }
}

/* sjk_fast_logf / sjk_fast_expf (codec_kernels.c), 16 lanes, the same operations. */
static inline __m512 fast_log16(__m512 x)
{
    const __m512i u = _mm512_castps_si512(x);
    __m512i e = _mm512_sub_epi32(_mm512_and_si512(_mm512_srli_epi32(u, 23), _mm512_set1_epi32(0xFF)),
                                 _mm512_set1_epi32(127));
    __m512 m = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFF)),
                                                   _mm512_set1_epi32(0x3F800000)));
    const __mmask16 big = _mm512_cmp_ps_mask(m, _mm512_set1_ps(1.41421356f), _CMP_GT_OQ);
    m = _mm512_mask_mul_ps(m, big, m, _mm512_set1_ps(0.5f));
    e = _mm512_mask_add_epi32(e, big, e, _mm512_set1_epi32(1));
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 s = _mm512_div_ps(_mm512_sub_ps(m, one), _mm512_add_ps(m, one));
    __m512 z = _mm512_mul_ps(s, s);
    __m512 p = _mm512_set1_ps(0.11111111f);
    p = _mm512_add_ps(_mm512_mul_ps(p, z), _mm512_set1_ps(0.14285715f));
    p = _mm512_add_ps(_mm512_mul_ps(p, z), _mm512_set1_ps(0.2f));
    p = _mm512_add_ps(_mm512_mul_ps(p, z), _mm512_set1_ps(0.33333334f));
    p = _mm512_add_ps(_mm512_mul_ps(p, z), one);
    __m512 lm = _mm512_mul_ps(_mm512_add_ps(s, s), p);
    __m512 fe = _mm512_cvtepi32_ps(e);
    return _mm512_add_ps(_mm512_add_ps(lm, _mm512_mul_ps(fe, _mm512_set1_ps(1.428606765330187e-06f))),
                         _mm512_mul_ps(fe, _mm512_set1_ps(0.693145751953125f)));
}

static inline __m512 fast_exp16(__m512 y)
{
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(y, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(_mm512_sub_ps(y, _mm512_mul_ps(n, _mm512_set1_ps(0.693145751953125f))),
                             _mm512_mul_ps(n, _mm512_set1_ps(1.428606765330187e-06f)));
    __m512 p = _mm512_set1_ps(1.98412698e-4f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.38888889e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.33333333e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.16666667e-2f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.166666667f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    __m512i b = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(b));
}

static void update_scales_avx512(float *a, float *inv, const float *st, size_t n, float std_lo,
                                 float std_hi, float log_lo, float log_hi, int skip)
{
    const __m512 slo = _mm512_set1_ps(std_lo), shi = _mm512_set1_ps(std_hi);
    const __m512 llo = _mm512_set1_ps(log_lo), lhi = _mm512_set1_ps(log_hi);
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (size_t j = 0; j < n; j += 16) {
        __m512 s = _mm512_loadu_ps(st + j), va = _mm512_loadu_ps(a + j);
        __m512 c = _mm512_min_ps(_mm512_max_ps(s, slo), shi);
        __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(va, fast_log16(c)), llo), lhi);
        __mmask16 keep = skip ? _mm512_cmp_ps_mask(s, _mm512_setzero_ps(), _CMP_EQ_OQ) : 0;
        va = _mm512_mask_blend_ps(keep, t, va);
        _mm512_storeu_ps(a + j, va);
        _mm512_storeu_ps(inv + j, fast_exp16(_mm512_xor_ps(va, sign)));
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

/* 16 x 16 transpose: r[c] holds column c of a 16 x 16 block (lane = row); writes row i
 * (lanes = columns 0..15) to out + i * stride. */
static inline void transpose16_store(const __m512 r[16], float *out, size_t stride)
{
    __m512 t[16], u[16];
    for (int a = 0; a < 16; a += 2) {
        t[a] = _mm512_unpacklo_ps(r[a], r[a + 1]);
        t[a + 1] = _mm512_unpackhi_ps(r[a], r[a + 1]);
    }
    for (int g = 0; g < 4; g++) {
        const __m512 *tt = t + 4 * g;
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
        _mm512_storeu_ps(out + (size_t)b * stride, _mm512_shuffle_f32x4(va, vc, 0x88));
        _mm512_storeu_ps(out + (size_t)(8 + b) * stride, _mm512_shuffle_f32x4(va, vc, 0xDD));
        _mm512_storeu_ps(out + (size_t)(4 + b) * stride, _mm512_shuffle_f32x4(vb, vd, 0x88));
        _mm512_storeu_ps(out + (size_t)(12 + b) * stride, _mm512_shuffle_f32x4(vb, vd, 0xDD));
    }
}

static inline __m512 sanitize16(__m512 x)
{
    const __m512i e = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7F800000));
    const __mmask16 ok = _mm512_cmpneq_epi32_mask(e, _mm512_set1_epi32(0x7F800000)) &
                         _mm512_cmpneq_epi32_mask(e, _mm512_setzero_si512());
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-65504.0f)), _mm512_set1_ps(65504.0f));
    return _mm512_maskz_mov_ps(ok, x);
}

static void load_tiles_avx512(float *kt, float *vt, const float *k, const float *v, size_t D)
{
    const size_t G = SJK_GROUP;
    for (size_t i = 0; i < G * D; i += 16) _mm512_storeu_ps(vt + i, sanitize16(_mm512_loadu_ps(v + i)));
    for (size_t t0 = 0; t0 < G; t0 += 16)
        for (size_t d0 = 0; d0 < D; d0 += 16) {
            __m512 r[16];
            for (int t = 0; t < 16; t++) r[t] = sanitize16(_mm512_loadu_ps(k + (t0 + (size_t)t) * D + d0));
            transpose16_store(r, kt + d0 * G + t0, G);
        }
}

static void decode_k16_avx512(float *k, size_t D, const uint8_t *payload, size_t row_nbytes,
                              unsigned bits, const float *scale, const float *zero, const float *tok)
{
    for (size_t t0 = 0; t0 < SJK_GROUP; t0 += 16) {
        const __m512 vt = _mm512_loadu_ps(tok + t0);
        __m512 r[16];
        for (size_t c = 0; c < 16; c++) {
            __m512 q = _mm512_cvtepi32_ps(unpack16(payload + c * row_nbytes, SJK_GROUP, bits, t0));
            r[c] = _mm512_mul_ps(_mm512_add_ps(_mm512_mul_ps(q, _mm512_set1_ps(scale[c])),
                                               _mm512_set1_ps(zero[c])), vt);
        }
        transpose16_store(r, k + t0 * D, D);
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
    "avx512", col_sweep_avx512, row_sweep_avx512, stds_avx512, update_scales_avx512, load_tiles_avx512, scale_row_avx512, rtn_row_avx512,
    decode_k16_avx512, decode_v_row_avx512,
};
#else
typedef int sjk_codec_kernels_avx512_unused;
#endif
