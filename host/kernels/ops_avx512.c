/* ops_avx512.c — AVX-512 versions of ops.h (compiled with the AVX-512 flags, reached
 * through sjkh_ops_get() when the CPU has SJK_CPU_AVX512).
 *
 * The exact-activation matmul has two kernels here. The row tile (mm_f32_tile) is the
 * AVX2 4-rows x 2-tokens kernel widened to 16 lanes, for a few tokens (decode). Prefill
 * uses the packed panel (mm_f32_panel): a panel of SJKH_MM_PANEL = 32 weight rows laid
 * out column by column,
 *
 *   wp [n][32]:  wp[i*32 + r] = w[r][i]      (one zmm load = 16 output rows at input i)
 *
 * so that each input i costs 2 loads of the panel, one broadcast per token and 2 FMAs per
 * token, with 12 tokens x 32 rows = 24 accumulators: FMA-bound, not load-bound, and the
 * accumulators are stored as rows of y without a horizontal sum. Every output is the
 * plain sequential FMA sum over i. The panel (up to 32 x 2048 floats) streams from L2
 * once per block of 12 tokens; cutting the inputs into L1-sized chunks (accumulators
 * round-tripping through y) measured no faster on a Sapphire Rapids core (80-130
 * GFLOP/s either way, n = 640, 512 tokens, on a busy machine), so the loop stays simple. */
#include <immintrin.h>

#include "hsum_avx512.h"
#include "tr16_avx512.h"

#include "hcommon.h"
#include "ops.h"

#define MM_NT 12  /* tokens per register block */

_Static_assert(SJKH_MM_PANEL == 32, "the panel kernel holds a panel row in two zmm");

/* ---- fp16 attention rows ------------------------------------------------------------ */

static inline __m512 ld_f16x16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }


void sjkh_dot_f16_multi_avx512(const uint16_t *k, const float *q, size_t q_stride, size_t nq, size_t n, float *out)
{
    if (nq > 16 || n % 16) {
        sjkh_dot_f16_multi_avx2(k, q, q_stride, nq, n, out);
        return;
    }
    if (nq == 4) { /* Gemma 3 270M's GQA group: one combined reduction */
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const float *q0 = q, *q1 = q + q_stride, *q2 = q + 2 * q_stride, *q3 = q + 3 * q_stride;
        for (size_t d = 0; d < n; d += 16) {
            __m512 kv = ld_f16x16(k + d);
            a0 = _mm512_fmadd_ps(kv, _mm512_loadu_ps(q0 + d), a0);
            a1 = _mm512_fmadd_ps(kv, _mm512_loadu_ps(q1 + d), a1);
            a2 = _mm512_fmadd_ps(kv, _mm512_loadu_ps(q2 + d), a2);
            a3 = _mm512_fmadd_ps(kv, _mm512_loadu_ps(q3 + d), a3);
        }
        _mm_storeu_ps(out, sjkh_hsum4x16(a0, a1, a2, a3));
        return;
    }
    __m512 acc[16];
    for (size_t h = 0; h < nq; h++) acc[h] = _mm512_setzero_ps();
    for (size_t d = 0; d < n; d += 16) {
        __m512 kv = ld_f16x16(k + d);
        for (size_t h = 0; h < nq; h++) acc[h] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(q + h * q_stride + d), acc[h]);
    }
    for (size_t h = 0; h < nq; h++) out[h] = _mm512_reduce_add_ps(acc[h]);
}

/* Two positions x four heads per pass (8 accumulators share each q load), with the
 * accumulation and reduction of dot_f16_multi_avx512, so each score is bit-identical to it. */
void sjkh_scores_f16_multi_avx512(const uint16_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                                  size_t nq, size_t n, float *out)
{
    size_t t = 0;
    if (nq == 4 && n % 16 == 0) {
        const float *q0 = q, *q1 = q + q_stride, *q2 = q + 2 * q_stride, *q3 = q + 3 * q_stride;
        for (; t + 2 <= n_t; t += 2) {
            const uint16_t *ka = k + t * k_stride, *kb = ka + k_stride;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            for (size_t d = 0; d < n; d += 16) {
                __m512 va = ld_f16x16(ka + d), vb = ld_f16x16(kb + d);
                __m512 x0 = _mm512_loadu_ps(q0 + d), x1 = _mm512_loadu_ps(q1 + d);
                __m512 x2 = _mm512_loadu_ps(q2 + d), x3 = _mm512_loadu_ps(q3 + d);
                a0 = _mm512_fmadd_ps(va, x0, a0);
                a1 = _mm512_fmadd_ps(va, x1, a1);
                a2 = _mm512_fmadd_ps(va, x2, a2);
                a3 = _mm512_fmadd_ps(va, x3, a3);
                b0 = _mm512_fmadd_ps(vb, x0, b0);
                b1 = _mm512_fmadd_ps(vb, x1, b1);
                b2 = _mm512_fmadd_ps(vb, x2, b2);
                b3 = _mm512_fmadd_ps(vb, x3, b3);
            }
            _mm_storeu_ps(out + t * 4, sjkh_hsum4x16(a0, a1, a2, a3));
            _mm_storeu_ps(out + t * 4 + 4, sjkh_hsum4x16(b0, b1, b2, b3));
        }
    }
    for (; t < n_t; t++) sjkh_dot_f16_multi_avx512(k + t * k_stride, q, q_stride, nq, n, out + t * nq);
}

void sjkh_axpy_f16_multi_avx512(const float *w, const uint16_t *v, float *o, size_t o_stride, size_t nq, size_t n)
{
    if (nq > 16 || n % 16) {
        sjkh_axpy_f16_multi_avx2(w, v, o, o_stride, nq, n);
        return;
    }
    __m512 wv[16];
    for (size_t h = 0; h < nq; h++) wv[h] = _mm512_set1_ps(w[h]);
    for (size_t d = 0; d < n; d += 16) {
        __m512 vv = ld_f16x16(v + d);
        for (size_t h = 0; h < nq; h++) {
            float *y = o + h * o_stride + d;
            _mm512_storeu_ps(y, _mm512_fmadd_ps(wv[h], vv, _mm512_loadu_ps(y)));
        }
    }
}

/* NQ heads x DB 16-wide blocks of dims (constants after inlining) in registers, over
 * all n_t rows of v: each accumulator takes the FMAs in order of t,
 * exactly as n_t calls of axpy_f16_multi would. */
static inline __attribute__((always_inline)) void wsum_block(const float *w, size_t w_stride, const uint16_t *v,
                                                             size_t v_stride, size_t n_t, float *o, size_t o_stride,
                                                             const int NQ, const int DB)
{
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int h = 0; h < NQ; h++)
#pragma GCC unroll 4
        for (int b = 0; b < DB; b++) acc[h][b] = _mm512_loadu_ps(o + (size_t)h * o_stride + 16 * b);
    for (size_t t = 0; t < n_t; t++, w += w_stride, v += v_stride) {
        __m512 vv[4];
#pragma GCC unroll 4
        for (int b = 0; b < DB; b++) vv[b] = ld_f16x16(v + 16 * b);
#pragma GCC unroll 4
        for (int h = 0; h < NQ; h++) {
            __m512 wv = _mm512_set1_ps(w[h]);
#pragma GCC unroll 4
            for (int b = 0; b < DB; b++) acc[h][b] = _mm512_fmadd_ps(wv, vv[b], acc[h][b]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < NQ; h++)
#pragma GCC unroll 4
        for (int b = 0; b < DB; b++) _mm512_storeu_ps(o + (size_t)h * o_stride + 16 * b, acc[h][b]);
}

#define WSUM_CASE(NQ)                                                                                 \
    case NQ:                                                                                          \
        for (; d + 64 <= n; d += 64) wsum_block(w, w_stride, v + d, v_stride, n_t, o + d, o_stride, NQ, 4); \
        for (; d < n; d += 16) wsum_block(w, w_stride, v + d, v_stride, n_t, o + d, o_stride, NQ, 1);        \
        break;

void sjkh_wsum_f16_multi_avx512(const float *w, size_t w_stride, const uint16_t *v, size_t v_stride, size_t n_t,
                                float *o, size_t o_stride, size_t nq, size_t n)
{
    if (nq > 4 || n % 16) { /* wider groups: one row at a time */
        for (size_t t = 0; t < n_t; t++)
            sjkh_axpy_f16_multi_avx512(w + t * w_stride, v + t * v_stride, o, o_stride, nq, n);
        return;
    }
    size_t d = 0;
    switch (nq) {
        WSUM_CASE(1)
        WSUM_CASE(2)
        WSUM_CASE(3)
        WSUM_CASE(4)
    default: break;
    }
}
#undef WSUM_CASE

void sjkh_round_f16_avx512(const float *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(h));
    }
}

/* ---- row tile (few tokens) ---------------------------------------------------------- */

/* 4 weight rows x 2 tokens in 8 zmm accumulators, the tail of n < 16 under a mask; rows
 * past nr alias row 0 and are not stored, a lone last token aliases its second pointer. */
void sjkh_mm_f32_tile_avx512(const float *w, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys)
{
    const float *w0 = w, *w1 = nr > 1 ? w + n : w, *w2 = nr > 2 ? w + 2 * n : w, *w3 = nr > 3 ? w + 3 * n : w;
    __mmask16 tail = (__mmask16)((1u << (n % 16)) - 1);
    size_t nfull = n - n % 16;
    for (size_t t = 0; t < nt; t += 2) {
        const float *xa = x + t * n, *xb = t + 1 < nt ? xa + n : xa;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (size_t i = 0; i <= n; i += 16) {
            __mmask16 m = i < nfull ? (__mmask16)0xFFFF : tail;
            if (!m) break;
            __m512 va = _mm512_maskz_loadu_ps(m, xa + i), vb = _mm512_maskz_loadu_ps(m, xb + i);
            __m512 q0 = _mm512_maskz_loadu_ps(m, w0 + i), q1 = _mm512_maskz_loadu_ps(m, w1 + i);
            __m512 q2 = _mm512_maskz_loadu_ps(m, w2 + i), q3 = _mm512_maskz_loadu_ps(m, w3 + i);
            a0 = _mm512_fmadd_ps(q0, va, a0);
            a1 = _mm512_fmadd_ps(q1, va, a1);
            a2 = _mm512_fmadd_ps(q2, va, a2);
            a3 = _mm512_fmadd_ps(q3, va, a3);
            b0 = _mm512_fmadd_ps(q0, vb, b0);
            b1 = _mm512_fmadd_ps(q1, vb, b1);
            b2 = _mm512_fmadd_ps(q2, vb, b2);
            b3 = _mm512_fmadd_ps(q3, vb, b3);
        }
        float ra[4] = {_mm512_reduce_add_ps(a0), _mm512_reduce_add_ps(a1), _mm512_reduce_add_ps(a2),
                       _mm512_reduce_add_ps(a3)};
        float rb[4] = {_mm512_reduce_add_ps(b0), _mm512_reduce_add_ps(b1), _mm512_reduce_add_ps(b2),
                       _mm512_reduce_add_ps(b3)};
        for (size_t r = 0; r < nr; r++) {
            y[t * ys + r] = ra[r];
            if (t + 1 < nt) y[(t + 1) * ys + r] = rb[r];
        }
    }
}

/* ---- packed panel (prefill) --------------------------------------------------------- */

/* Same layout as sjkh_mm_f32_pack_ref; full 16 x 16 blocks go through registers. */
void sjkh_mm_f32_pack_avx512(const float *w, size_t nr, size_t n, float *wp)
{
    size_t nfull = n - n % 16;
    for (size_t h = 0; h < SJKH_MM_PANEL; h += 16) {
        if (h + 16 > nr) { /* a partial half: zeros past nr */
            for (size_t i = 0; i < n; i++)
                for (size_t r = h; r < h + 16; r++) wp[i * SJKH_MM_PANEL + r] = r < nr ? w[r * n + i] : 0.0f;
            continue;
        }
        for (size_t i = 0; i < nfull; i += 16) {
            __m512 r[16];
            for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_ps(w + (h + (size_t)j) * n + i);
            sjkh_tr16(r);
            for (int j = 0; j < 16; j++) _mm512_storeu_ps(wp + (i + (size_t)j) * SJKH_MM_PANEL + h, r[j]);
        }
        for (size_t i = nfull; i < n; i++)
            for (size_t r = h; r < h + 16; r++) wp[i * SJKH_MM_PANEL + r] = w[r * n + i];
    }
}

/* T tokens (T <= MM_NT, a constant after inlining) x 32 rows; rows past the masks are
 * computed (from the zero padding) but not stored. */
static inline __attribute__((always_inline)) void panel_block(const float *wp, const float *x, size_t n, float *y,
                                                              size_t ys, int T, __mmask16 m0, __mmask16 m1)
{
    __m512 a[MM_NT], b[MM_NT];
#pragma GCC unroll 12
    for (int t = 0; t < T; t++) a[t] = b[t] = _mm512_setzero_ps();
    const float *xi = x, *wi = wp;
    for (size_t i = 0; i < n; i++, xi++, wi += SJKH_MM_PANEL) {
        __m512 w0 = _mm512_loadu_ps(wi), w1 = _mm512_loadu_ps(wi + 16);
#pragma GCC unroll 12
        for (int t = 0; t < T; t++) {
            __m512 xv = _mm512_set1_ps(xi[(size_t)t * n]);
            a[t] = _mm512_fmadd_ps(w0, xv, a[t]);
            b[t] = _mm512_fmadd_ps(w1, xv, b[t]);
        }
    }
#pragma GCC unroll 12
    for (int t = 0; t < T; t++) {
        _mm512_mask_storeu_ps(y + (size_t)t * ys, m0, a[t]);
        _mm512_mask_storeu_ps(y + (size_t)t * ys + 16, m1, b[t]);
    }
}

void sjkh_mm_f32_panel_avx512(const float *wp, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys)
{
    __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
    __mmask16 m1 = (__mmask16)(nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
    size_t t = 0;
    for (; t + MM_NT <= nt; t += MM_NT) panel_block(wp, x + t * n, n, y + t * ys, ys, MM_NT, m0, m1);
    const float *xt = x + t * n;
    float *yt = y + t * ys;
    switch (nt - t) {
    case 0: break;
    case 1: panel_block(wp, xt, n, yt, ys, 1, m0, m1); break;
    case 2: panel_block(wp, xt, n, yt, ys, 2, m0, m1); break;
    case 3: panel_block(wp, xt, n, yt, ys, 3, m0, m1); break;
    case 4: panel_block(wp, xt, n, yt, ys, 4, m0, m1); break;
    case 5: panel_block(wp, xt, n, yt, ys, 5, m0, m1); break;
    case 6: panel_block(wp, xt, n, yt, ys, 6, m0, m1); break;
    case 7: panel_block(wp, xt, n, yt, ys, 7, m0, m1); break;
    case 8: panel_block(wp, xt, n, yt, ys, 8, m0, m1); break;
    case 9: panel_block(wp, xt, n, yt, ys, 9, m0, m1); break;
    case 10: panel_block(wp, xt, n, yt, ys, 10, m0, m1); break;
    default: panel_block(wp, xt, n, yt, ys, 11, m0, m1); break;
    }
}

/* ---- GELU (tanh form) --------------------------------------------------------------- */

/* e^z for z in about [-87, 88]: z = k ln2 + r with |r| <= ln2/2 (ln2 in two parts), e^r by
 * its Taylor series to r^7 (truncation < 6e-9 relative), times 2^k by scalef, which
 * also gives +inf and 0 outside the range instead of wrapping the exponent. */
static inline __m512 exp16(__m512 z)
{
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(z, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), z); /* ln2 high part, exact in k * it */
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);    /* ln2 - high part */
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k);
}

/* x / (1 + e^-x) * u; the exponent clamped to [-88, 88] as in gelu_mul (past 88 the
 * result is x / 1.7e38, a denormal or -0 where libm gives -0; below -88, 1 + e^-88 == 1). */
void sjkh_silu_mul_avx512(float *h, const float *u, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f), hi = _mm512_set1_ps(88.0f), lo = _mm512_set1_ps(-88.0f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, h + i), uv = _mm512_maskz_loadu_ps(m, u + i);
        __m512 z = _mm512_max_ps(_mm512_min_ps(_mm512_sub_ps(_mm512_setzero_ps(), x), hi), lo);
        __m512 g = _mm512_div_ps(x, _mm512_add_ps(one, exp16(z)));
        _mm512_mask_storeu_ps(h + i, m, _mm512_mul_ps(g, uv));
    }
}

/* 0.5 x (1 + tanh a) = x / (1 + e^(-2a)), a = sqrt(2/pi) (x + 0.044715 x^3): no 1 + tanh
 * cancellation for negative x; e^(-2a) -> inf gives -0 and -> 0 gives x, as the tanh form
 * does. The exponent is clamped to [-88, 88] to keep the range reduction exact; past 88
 * the result is x * 0 (|gelu| < 1e-37 there, and the tanh form gives -0 too), below -88
 * 1 + e^-88 == 1 anyway. A NaN x stays NaN through the division. */
void sjkh_gelu_mul_avx512(float *h, const float *u, size_t n)
{
    const __m512 c2 = _mm512_set1_ps(-2.0f * 0.79788456080286535587989211986876f), c3 = _mm512_set1_ps(0.044715f);
    const __m512 one = _mm512_set1_ps(1.0f), hi = _mm512_set1_ps(88.0f), lo = _mm512_set1_ps(-88.0f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 x = _mm512_maskz_loadu_ps(m, h + i);
        __m512 z = _mm512_mul_ps(_mm512_mul_ps(c2, x), _mm512_fmadd_ps(_mm512_mul_ps(c3, x), x, one)); /* -2a */
        __m512 g = _mm512_div_ps(x, _mm512_add_ps(one, exp16(_mm512_max_ps(_mm512_min_ps(z, hi), lo))));
        g = _mm512_mask_mul_ps(g, _mm512_cmp_ps_mask(z, hi, _CMP_GT_OQ), x, _mm512_setzero_ps());
        _mm512_mask_storeu_ps(h + i, m, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

/* ggml's table GELU (ops.h gelu_table_mul): vcvtps2ph rounds to nearest even as
 * sjkh_f32_to_f16 does, the 16 f16 patterns index the table through a 32-bit gather (scale
 * 2; the table's two pad entries keep the last index inside it), and the low halves are
 * the f16 results. Tail: the reference. */
void sjkh_gelu_table_mul_avx512(float *h, const float *u, size_t n)
{
    const uint16_t *tab = sjkh_gelu_f16_table();
    const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(h + i);
        __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m512i g = _mm512_i32gather_epi32(idx, (const void *)tab, 2);
        __m512 y = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x);
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), _mm512_setzero_ps());
        _mm512_storeu_ps(h + i, _mm512_mul_ps(y, _mm512_loadu_ps(u + i)));
    }
    sjkh_gelu_table_mul_ref(h + i, u + i, n - i);
}
