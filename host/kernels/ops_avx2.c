/* ops_avx2.c — F16C/FMA versions of ops.h (compiled with -mavx2 -mfma -mf16c). */
#include <immintrin.h>

#include "hcommon.h"
#include "ops.h"

float sjkh_dot_f16_avx2(const uint16_t *a, const float *b, size_t n)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8))), _mm256_loadu_ps(b + i + 8),
                               acc1);
    }
    acc0 = _mm256_add_ps(acc0, acc1);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    float r = _mm_cvtss_f32(s);
    for (; i < n; i++) r += sjkh_f16_to_f32(a[i]) * b[i];
    return r;
}

void sjkh_axpy_f16_avx2(float s, const uint16_t *x, float *y, size_t n)
{
    __m256 sv = _mm256_set1_ps(s);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(sv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))),
                                                _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += s * sjkh_f16_to_f32(x[i]);
}

void sjkh_to_f16_avx2(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = sjkh_f32_to_f16(src[i]);
}

static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void sjkh_dot_f16_multi_avx2(const uint16_t *k, const float *q, size_t q_stride, size_t nq, size_t n, float *out)
{
    if (nq > 16 || n % 8) {
        for (size_t h = 0; h < nq; h++) out[h] = sjkh_dot_f16_avx2(k, q + h * q_stride, n);
        return;
    }
    __m256 acc[16];
    for (size_t h = 0; h < nq; h++) acc[h] = _mm256_setzero_ps();
    for (size_t d = 0; d < n; d += 8) {
        __m256 kv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + d)));
        for (size_t h = 0; h < nq; h++) acc[h] = _mm256_fmadd_ps(kv, _mm256_loadu_ps(q + h * q_stride + d), acc[h]);
    }
    for (size_t h = 0; h < nq; h++) out[h] = hsum8(acc[h]);
}

void sjkh_axpy_f16_multi_avx2(const float *w, const uint16_t *v, float *o, size_t o_stride, size_t nq, size_t n)
{
    if (nq > 16 || n % 8) {
        for (size_t h = 0; h < nq; h++) sjkh_axpy_f16_avx2(w[h], v, o + h * o_stride, n);
        return;
    }
    __m256 wv[16];
    for (size_t h = 0; h < nq; h++) wv[h] = _mm256_set1_ps(w[h]);
    for (size_t d = 0; d < n; d += 8) {
        __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + d)));
        for (size_t h = 0; h < nq; h++) {
            float *y = o + h * o_stride + d;
            _mm256_storeu_ps(y, _mm256_fmadd_ps(wv[h], vv, _mm256_loadu_ps(y)));
        }
    }
}

void sjkh_scores_f16_multi_avx2(const uint16_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                                size_t nq, size_t n, float *out)
{
    for (size_t t = 0; t < n_t; t++) sjkh_dot_f16_multi_avx2(k + t * k_stride, q, q_stride, nq, n, out + t * nq);
}

void sjkh_wsum_f16_multi_avx2(const float *w, size_t w_stride, const uint16_t *v, size_t v_stride, size_t n_t,
                              float *o, size_t o_stride, size_t nq, size_t n)
{
    for (size_t t = 0; t < n_t; t++) sjkh_axpy_f16_multi_avx2(w + t * w_stride, v + t * v_stride, o, o_stride, nq, n);
}

void sjkh_round_f16_avx2(const float *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i,
                         _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) dst[i] = sjkh_f16_to_f32(sjkh_f32_to_f16(src[i]));
}

/* 4 weight rows x 2 tokens in 8 accumulators; rows past nr alias row 0 and are not stored,
 * a lone last token reuses the same code with its second pointer aliased too. */
void sjkh_mm_f32_tile_avx2(const float *w, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys)
{
    const float *w0 = w, *w1 = nr > 1 ? w + n : w, *w2 = nr > 2 ? w + 2 * n : w, *w3 = nr > 3 ? w + 3 * n : w;
    for (size_t t = 0; t < nt; t += 2) {
        const float *xa = x + t * n, *xb = t + 1 < nt ? xa + n : xa;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256 va = _mm256_loadu_ps(xa + i), vb = _mm256_loadu_ps(xb + i);
            __m256 q0 = _mm256_loadu_ps(w0 + i), q1 = _mm256_loadu_ps(w1 + i);
            __m256 q2 = _mm256_loadu_ps(w2 + i), q3 = _mm256_loadu_ps(w3 + i);
            a0 = _mm256_fmadd_ps(q0, va, a0);
            a1 = _mm256_fmadd_ps(q1, va, a1);
            a2 = _mm256_fmadd_ps(q2, va, a2);
            a3 = _mm256_fmadd_ps(q3, va, a3);
            b0 = _mm256_fmadd_ps(q0, vb, b0);
            b1 = _mm256_fmadd_ps(q1, vb, b1);
            b2 = _mm256_fmadd_ps(q2, vb, b2);
            b3 = _mm256_fmadd_ps(q3, vb, b3);
        }
        float ra[4] = {hsum8(a0), hsum8(a1), hsum8(a2), hsum8(a3)};
        float rb[4] = {hsum8(b0), hsum8(b1), hsum8(b2), hsum8(b3)};
        const float *wr[4] = {w0, w1, w2, w3};
        for (; i < n; i++)
            for (int r = 0; r < 4; r++) {
                ra[r] += wr[r][i] * xa[i];
                rb[r] += wr[r][i] * xb[i];
            }
        for (size_t r = 0; r < nr; r++) {
            y[t * ys + r] = ra[r];
            if (t + 1 < nt) y[(t + 1) * ys + r] = rb[r];
        }
    }
}

/* ---- packing a panel (prefill) --------------------------------------------------------
 * The layout of ops.h (wp[i*32 + r] = w[r][i]), 8 rows by 8 inputs at a time through an
 * 8 x 8 register transpose (unpacks, shuffles, 128-bit permutes: 24 operations for 64
 * values). The reference reads one value per row in turn, 32 rows apart in memory; in
 * the eval's prefill on the Zen 3 (perf of `sjkvarn eval` on the Qwen 1.5B model at 32K)
 * that pack took 7.8 % of the time beside the panel's 60 %. Rows past nr are zero; a
 * partial group of 8 rows and the inputs past the last multiple of 8 are copied one by
 * one. */
static inline void tr8(__m256 r[8])
{
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

void sjkh_mm_f32_pack_avx2(const float *w, size_t nr, size_t n, float *wp)
{
    const size_t nfull = n - n % 8;
    for (size_t h = 0; h < SJKH_MM_PANEL; h += 8) {
        if (h + 8 > nr) { /* a partial group of rows, or none: zeros past nr */
            for (size_t i = 0; i < n; i++)
                for (size_t r = h; r < h + 8; r++) wp[i * SJKH_MM_PANEL + r] = r < nr ? w[r * n + i] : 0.0f;
            continue;
        }
        for (size_t i = 0; i < nfull; i += 8) {
            __m256 r[8];
            for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(w + (h + (size_t)j) * n + i);
            tr8(r);
            for (int j = 0; j < 8; j++) _mm256_storeu_ps(wp + (i + (size_t)j) * SJKH_MM_PANEL + h, r[j]);
        }
        for (size_t i = nfull; i < n; i++)
            for (size_t r = h; r < h + 8; r++) wp[i * SJKH_MM_PANEL + r] = w[r * n + i];
    }
}

/* ---- packed panel (prefill) ---------------------------------------------------------
 * The layout of ops.h (wp[i*32 + r] = w[r][i]) read as two halves of 16 rows: per half
 * and block of 6 tokens, each input i costs 2 loads of the half panel row, one broadcast
 * per token and 2 FMAs per token, in 12 accumulators (2 x 6 of the 16 ymm). That is 12
 * FMAs per 8 loads and 88 bytes, where the row tile (4 rows x 2 tokens) spends 8 FMAs on
 * 6 loads and 192 bytes re-read from L2 every 2 tokens. Every output is the plain
 * sequential FMA sum over i, as in the AVX-512 panel (the same bits). */
#define MM_NT2 6 /* tokens per register block */

static inline __attribute__((always_inline)) void panel_half(const float *wp, const float *x, size_t n, float *y,
                                                             size_t ys, int T, __m256i m0, __m256i m1)
{
    __m256 a[MM_NT2], b[MM_NT2];
#pragma GCC unroll 6
    for (int t = 0; t < T; t++) a[t] = b[t] = _mm256_setzero_ps();
    const float *xi = x, *wi = wp;
    for (size_t i = 0; i < n; i++, xi++, wi += SJKH_MM_PANEL) {
        const __m256 w0 = _mm256_loadu_ps(wi), w1 = _mm256_loadu_ps(wi + 8);
#pragma GCC unroll 6
        for (int t = 0; t < T; t++) {
            const __m256 xv = _mm256_broadcast_ss(xi + (size_t)t * n);
            a[t] = _mm256_fmadd_ps(w0, xv, a[t]);
            b[t] = _mm256_fmadd_ps(w1, xv, b[t]);
        }
    }
#pragma GCC unroll 6
    for (int t = 0; t < T; t++) {
        _mm256_maskstore_ps(y + (size_t)t * ys, m0, a[t]);
        _mm256_maskstore_ps(y + (size_t)t * ys + 8, m1, b[t]);
    }
}

/* Lanes l < k of a maskstore mask (k clamped to 0..8). */
static inline __m256i lanes_below(long k)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(k < 0 ? 0 : k > 8 ? 8 : k)), idx);
}

void sjkh_mm_f32_panel_avx2(const float *wp, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys)
{
    for (size_t h = 0; h < SJKH_MM_PANEL && h < nr; h += 16) {
        const __m256i m0 = lanes_below((long)nr - (long)h), m1 = lanes_below((long)nr - (long)h - 8);
        const float *wh = wp + h;
        size_t t = 0;
        for (; t + MM_NT2 <= nt; t += MM_NT2) panel_half(wh, x + t * n, n, y + t * ys + h, ys, MM_NT2, m0, m1);
        const float *xt = x + t * n;
        float *yt = y + t * ys + h;
        switch (nt - t) {
        case 0: break;
        case 1: panel_half(wh, xt, n, yt, ys, 1, m0, m1); break;
        case 2: panel_half(wh, xt, n, yt, ys, 2, m0, m1); break;
        case 3: panel_half(wh, xt, n, yt, ys, 3, m0, m1); break;
        case 4: panel_half(wh, xt, n, yt, ys, 4, m0, m1); break;
        default: panel_half(wh, xt, n, yt, ys, 5, m0, m1); break;
        }
    }
}

/* ---- SiLU and GELU (tanh form) ------------------------------------------------------
 * e^z for z in [-88, 88] as the AVX-512 exp16: z = k ln2 + r (ln2 in two parts), e^r by
 * its Taylor series to r^7, then times 2^k in two factors 2^(k>>1) and 2^(k-(k>>1)) built
 * in the exponent bits (each within the normal range; the product is scalef's exact
 * 2^k scaling wherever the result is a normal float). */
static inline __m256 exp8(__m256 z)
{
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(z, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), z);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i ki = _mm256_cvtps_epi32(k), k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    const __m256i b = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, b), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, b), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* x / (1 + e^-x) * u, the exponent clamped to [-88, 88] as the AVX-512 version; the last
 * n % 8 values through masked loads and stores. */
void sjkh_silu_mul_avx2(float *h, const float *u, size_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f), hi = _mm256_set1_ps(88.0f), lo = _mm256_set1_ps(-88.0f);
    for (size_t i = 0; i < n; i += 8) {
        const __m256i m = lanes_below((long)(n - i));
        const __m256 x = _mm256_maskload_ps(h + i, m);
        const __m256 z = _mm256_max_ps(_mm256_min_ps(_mm256_sub_ps(_mm256_setzero_ps(), x), hi), lo);
        const __m256 g = _mm256_div_ps(x, _mm256_add_ps(one, exp8(z)));
        _mm256_maskstore_ps(h + i, m, _mm256_mul_ps(g, _mm256_maskload_ps(u + i, m)));
    }
}

/* 0.5 x (1 + tanh a) = x / (1 + e^(-2a)) as the AVX-512 version (past an exponent of 88
 * the result is x * 0); the last n % 8 values through masked loads and stores. */
void sjkh_gelu_mul_avx2(float *h, const float *u, size_t n)
{
    const __m256 c2 = _mm256_set1_ps(-2.0f * 0.79788456080286535587989211986876f), c3 = _mm256_set1_ps(0.044715f);
    const __m256 one = _mm256_set1_ps(1.0f), hi = _mm256_set1_ps(88.0f), lo = _mm256_set1_ps(-88.0f);
    for (size_t i = 0; i < n; i += 8) {
        const __m256i m = lanes_below((long)(n - i));
        const __m256 x = _mm256_maskload_ps(h + i, m);
        const __m256 z = _mm256_mul_ps(_mm256_mul_ps(c2, x), _mm256_fmadd_ps(_mm256_mul_ps(c3, x), x, one)); /* -2a */
        __m256 g = _mm256_div_ps(x, _mm256_add_ps(one, exp8(_mm256_max_ps(_mm256_min_ps(z, hi), lo))));
        g = _mm256_blendv_ps(g, _mm256_mul_ps(x, _mm256_setzero_ps()), _mm256_cmp_ps(z, hi, _CMP_GT_OQ));
        _mm256_maskstore_ps(h + i, m, _mm256_mul_ps(g, _mm256_maskload_ps(u + i, m)));
    }
}

/* ggml's table GELU (ops.h gelu_table_mul), bit-identical to the reference: vcvtps2ph
 * rounds to nearest even as sjkh_f32_to_f16 does, the 8 f16 patterns index the table
 * through a 32-bit gather (scale 2; the table's two pad entries keep the last index
 * inside it), the low halves converted back; x >= 10 keeps x, x <= -10 gives 0. Tail:
 * the reference. */
void sjkh_gelu_table_mul_avx2(float *h, const float *u, size_t n)
{
    const uint16_t *tab = sjkh_gelu_f16_table();
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    const __m256i low16 = _mm256_set1_epi32(0xFFFF);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(h + i);
        const __m256i idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i g = _mm256_and_si256(_mm256_i32gather_epi32((const int *)(const void *)tab, idx, 2), low16);
        /* the 8 words to the low 128 bits, then to f32 */
        const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1));
        __m256 y = _mm256_cvtph_ps(w);
        y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
        y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
        _mm256_storeu_ps(h + i, _mm256_mul_ps(y, _mm256_loadu_ps(u + i)));
    }
    sjkh_gelu_table_mul_ref(h + i, u + i, n - i);
}
