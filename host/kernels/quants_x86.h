/* quants_x86.h — the x86 SIMD dot products and activation quantizers, written once and
 * compiled twice: quants_avx2.c (AVX2/FMA/F16C) and quants_avx512.c (the same code with
 * AVX512-VNNI's vpdpbusd in place of vpmaddubsw + vpmaddwd). Include it after defining
 * SJKH_SFX(name) (the suffix of the exported names) and SJKH_VNNI (0 or 1).
 *
 * Every kernel computes the same integer block sums as its `_ref` twin in quants.c; only
 * the order of the float accumulation differs (tests: relative error <= 1e-5). The
 * quantizers are bit-exact with their references. (Not a normal header: no include guard,
 * included by exactly those two files.) */
#include <immintrin.h>
#include <math.h>

#include "hcommon.h"
#include "quants.h"

static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float f16(uint16_t h) { return _cvtsh_ss(h); }

/* 16 packed bytes of nibbles -> 32 bytes: [0..15] low nibbles, [16..31] high nibbles. */
static inline __m256i nibbles32(const uint8_t *p)
{
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

/* 32 bits -> 32 bytes, 0xFF where the bit is set (byte i <- bit i). */
static inline __m256i bits32(const uint8_t *p)
{
    uint32_t v = sjkh_rd_u32(p);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), shuf);
    const __m256i m = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(b, m), m);
}

/* unsigned x (0..127) times signed y, summed in groups of 4, as 8 float partial sums */
static inline __m256 dot_u8(__m256i x, __m256i y)
{
#if SJKH_VNNI
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), x, y));
#else
    __m256i p = _mm256_maddubs_epi16(x, y);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
}

/* sum of signed x[i]*y[i] over 32 int8 pairs (x > -128), as 8 float partial sums */
static inline __m256 dot_i8(__m256i x, __m256i y)
{
    return dot_u8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

float SJKH_SFX(sjkh_vec_dot_q4_0)(size_t n, const void *w, const void *xv)
{
    const blk_q4_0 *a = w;
    const blk_q8_0 *x = xv;
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < n / QK; b++) {
        __m256 d = _mm256_set1_ps(f16(a[b].d) * f16(x[b].d));
        __m256i q = _mm256_sub_epi8(nibbles32(a[b].qs), _mm256_set1_epi8(8));
        __m256i y = _mm256_loadu_si256((const __m256i *)x[b].qs);
        acc = _mm256_fmadd_ps(d, dot_i8(q, y), acc);
    }
    return hsum8(acc);
}

float SJKH_SFX(sjkh_vec_dot_q5_0)(size_t n, const void *w, const void *xv)
{
    const blk_q5_0 *a = w;
    const blk_q8_0 *x = xv;
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < n / QK; b++) {
        __m256 d = _mm256_set1_ps(f16(a[b].d) * f16(x[b].d));
        /* nib | 0xF0 (as int8: nib - 16) where the fifth bit is clear, nib where set */
        __m256i hi = _mm256_andnot_si256(bits32(a[b].qh), _mm256_set1_epi8((char)0xF0));
        __m256i q = _mm256_or_si256(nibbles32(a[b].qs), hi);
        __m256i y = _mm256_loadu_si256((const __m256i *)x[b].qs);
        acc = _mm256_fmadd_ps(d, dot_i8(q, y), acc);
    }
    return hsum8(acc);
}

float SJKH_SFX(sjkh_vec_dot_q8_0)(size_t n, const void *w, const void *xv)
{
    const blk_q8_0 *a = w;
    const blk_q8_0 *x = xv;
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < n / QK; b++) {
        __m256 d = _mm256_set1_ps(f16(a[b].d) * f16(x[b].d));
        __m256i q = _mm256_loadu_si256((const __m256i *)a[b].qs);
        __m256i y = _mm256_loadu_si256((const __m256i *)x[b].qs);
        acc = _mm256_fmadd_ps(d, dot_i8(q, y), acc);
    }
    return hsum8(acc);
}

float SJKH_SFX(sjkh_vec_dot_q4_1)(size_t n, const void *w, const void *xv)
{
    const blk_q4_1 *a = w;
    const blk_q8_1 *x = xv;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (size_t b = 0; b < n / QK; b++) {
        summs += f16(a[b].m) * f16(x[b].s);
        __m256 d = _mm256_set1_ps(f16(a[b].d) * f16(x[b].d));
        __m256i y = _mm256_loadu_si256((const __m256i *)x[b].qs);
        acc = _mm256_fmadd_ps(d, dot_u8(nibbles32(a[b].qs), y), acc);
    }
    return hsum8(acc) + summs;
}

float SJKH_SFX(sjkh_vec_dot_q5_1)(size_t n, const void *w, const void *xv)
{
    const blk_q5_1 *a = w;
    const blk_q8_1 *x = xv;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (size_t b = 0; b < n / QK; b++) {
        summs += f16(a[b].m) * f16(x[b].s);
        __m256 d = _mm256_set1_ps(f16(a[b].d) * f16(x[b].d));
        __m256i hi = _mm256_and_si256(bits32(a[b].qh), _mm256_set1_epi8(0x10));
        __m256i q = _mm256_or_si256(nibbles32(a[b].qs), hi);
        __m256i y = _mm256_loadu_si256((const __m256i *)x[b].qs);
        acc = _mm256_fmadd_ps(d, dot_u8(q, y), acc);
    }
    return hsum8(acc) + summs;
}

/* sum over the 8 sub-blocks of mn_k * (bsums of its 32 values) */
static inline int k_mins_dot(const uint8_t *scales, const int16_t *bsums, uint8_t sc[8])
{
    int summ = 0;
    for (int k = 0; k < 8; k++) {
        uint8_t m;
        sjkh_k_scale_min(k, scales, &sc[k], &m);
        summ += m * (bsums[2 * k] + bsums[2 * k + 1]);
    }
    return summ;
}

/* Q4_K and Q5_K against Q8_K: one body, the fifth bits (Q5_K's qh) only where five is set
 * (a constant after inlining, so each entry compiles to its own straight loop). */
static inline __attribute__((always_inline)) float k45_dot(size_t n, const void *w, const void *xv, int five)
{
    const blk_q8_K *x = xv;
    const size_t bb = five ? sizeof(blk_q5_K) : sizeof(blk_q4_K);
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float accm = 0;
    for (size_t b = 0; b < n / QK_K; b++) {
        const uint8_t *blk = (const uint8_t *)w + b * bb; /* d, dmin, scales[12], (qh[32]), qs[128] */
        const uint8_t *qs = blk + (five ? offsetof(blk_q5_K, qs) : offsetof(blk_q4_K, qs));
        uint8_t sc[8];
        int summ = k_mins_dot(blk + 4, x[b].bsums, sc);
        float d = x[b].d * f16(sjkh_rd_u16(blk));
        accm += x[b].d * f16(sjkh_rd_u16(blk + 2)) * (float)summ;
        __m256i qh = five ? _mm256_loadu_si256((const __m256i *)(blk + offsetof(blk_q5_K, qh))) : _mm256_setzero_si256();
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(qh, one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4));
                qh = _mm256_srli_epi16(qh, 2);
            }
            __m256i ylo = _mm256_loadu_si256((const __m256i *)(x[b].qs + 64 * j));
            __m256i yhi = _mm256_loadu_si256((const __m256i *)(x[b].qs + 64 * j + 32));
            __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_set1_epi16(sc[2 * j]));
            __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yhi), _mm256_set1_epi16(sc[2 * j + 1]));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum8(acc) - accm;
}

float SJKH_SFX(sjkh_vec_dot_q4_K)(size_t n, const void *w, const void *xv) { return k45_dot(n, w, xv, 0); }

float SJKH_SFX(sjkh_vec_dot_q5_K)(size_t n, const void *w, const void *xv) { return k45_dot(n, w, xv, 1); }

float SJKH_SFX(sjkh_vec_dot_q6_K)(size_t n, const void *w, const void *xv)
{
    const blk_q6_K *a = w;
    const blk_q8_K *x = xv;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3), m32 = _mm256_set1_epi8(32);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < n / QK_K; b++) {
        float d = x[b].d * f16(a[b].d);
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = a[b].ql + 64 * h;
            const int8_t *sc = a[b].scales + 8 * h, *y = x[b].qs + 128 * h;
            __m256i l1 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(a[b].qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l2, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l2, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            for (int g = 0; g < 4; g++) {
                __m256i yv = _mm256_loadu_si256((const __m256i *)(y + 32 * g));
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q[g], yv), _mm256_maddubs_epi16(m32, yv));
                __m256i s = _mm256_set_m128i(_mm_set1_epi16(sc[2 * g + 1]), _mm_set1_epi16(sc[2 * g]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum8(acc);
}

float SJKH_SFX(sjkh_vec_dot_f32)(size_t n, const void *w, const void *xv)
{
    const float *a = w, *x = xv;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
    }
    float s = hsum8(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) s += sjkh_rd_f32(a + i) * x[i];
    return s;
}

float SJKH_SFX(sjkh_vec_dot_f16)(size_t n, const void *w, const void *xv)
{
    const uint16_t *a = w;
    const float *x = xv;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
        __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8)));
        acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), acc1);
    }
    float s = hsum8(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) s += sjkh_f16_to_f32(sjkh_rd_u16(a + i)) * x[i];
    return s;
}

float SJKH_SFX(sjkh_vec_dot_bf16)(size_t n, const void *w, const void *xv)
{
    const uint16_t *a = w;
    const float *x = xv;
    __m256 acc = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(a + i)));
        __m256 wv = _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
        acc = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i), acc);
    }
    float s = hsum8(acc);
    for (; i < n; i++) s += sjkh_bf16_to_f32(sjkh_rd_u16(a + i)) * x[i];
    return s;
}

/* ---- four activation rows at once (batched prefill) --------------------------------
 * One weight row against four activation rows: the weight block is unpacked once and
 * reused, which is most of the per-block work. Same integer sums as vec_dot. */
static inline __attribute__((always_inline)) void dot4_legacy(const uint32_t type, size_t n, const uint8_t *w, const uint8_t *x, size_t xs,
                               float *out)
{
    const int sgn = type == SJKH_TYPE_Q4_0 || type == SJKH_TYPE_Q5_0 || type == SJKH_TYPE_Q8_0;
    const size_t wbs = type == SJKH_TYPE_Q4_0 ? 18 : type == SJKH_TYPE_Q4_1 ? 20 : type == SJKH_TYPE_Q5_0 ? 22
                     : type == SJKH_TYPE_Q5_1 ? 24 : 34;
    const size_t xbs = sgn ? sizeof(blk_q8_0) : sizeof(blk_q8_1), xoff = sgn ? 2 : 4;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    float summ[4] = {0, 0, 0, 0};
    for (size_t b = 0; b < n / QK; b++) {
        const uint8_t *wk = w + b * wbs;
        __m256i q;
        switch (type) {
        case SJKH_TYPE_Q4_0: q = _mm256_sub_epi8(nibbles32(wk + 2), _mm256_set1_epi8(8)); break;
        case SJKH_TYPE_Q4_1: q = nibbles32(wk + 4); break;
        case SJKH_TYPE_Q5_0:
            q = _mm256_or_si256(nibbles32(wk + 6), _mm256_andnot_si256(bits32(wk + 2), _mm256_set1_epi8((char)0xF0)));
            break;
        case SJKH_TYPE_Q5_1:
            q = _mm256_or_si256(nibbles32(wk + 8), _mm256_and_si256(bits32(wk + 4), _mm256_set1_epi8(0x10)));
            break;
        default: q = _mm256_loadu_si256((const __m256i *)(wk + 2)); break;
        }
        const float dw = f16(sjkh_rd_u16(wk));
        const __m256i aq = sgn ? _mm256_sign_epi8(q, q) : q;
        /* written out per token so the accumulators stay in registers */
#define TOK(t)                                                                                       \
    do {                                                                                             \
        const uint8_t *xk = x + (size_t)(t) * xs + b * xbs;                                          \
        __m256i y = _mm256_loadu_si256((const __m256i *)(xk + xoff));                                \
        if (sgn) y = _mm256_sign_epi8(y, q);                                                         \
        acc##t = _mm256_fmadd_ps(_mm256_set1_ps(dw * f16(sjkh_rd_u16(xk))), dot_u8(aq, y), acc##t);  \
        if (!sgn) summ[t] += f16(sjkh_rd_u16(wk + 2)) * f16(sjkh_rd_u16(xk + 2));                    \
    } while (0)
        TOK(0);
        TOK(1);
        TOK(2);
        TOK(3);
#undef TOK
    }
    out[0] = hsum8(acc0) + summ[0];
    out[1] = hsum8(acc1) + summ[1];
    out[2] = hsum8(acc2) + summ[2];
    out[3] = hsum8(acc3) + summ[3];
}

void SJKH_SFX(sjkh_vec_dot4_q4_0)(size_t n, const void *w, const void *x, size_t xs, float *out)
{
    dot4_legacy(SJKH_TYPE_Q4_0, n, w, x, xs, out);
}
void SJKH_SFX(sjkh_vec_dot4_q4_1)(size_t n, const void *w, const void *x, size_t xs, float *out)
{
    dot4_legacy(SJKH_TYPE_Q4_1, n, w, x, xs, out);
}
void SJKH_SFX(sjkh_vec_dot4_q5_0)(size_t n, const void *w, const void *x, size_t xs, float *out)
{
    dot4_legacy(SJKH_TYPE_Q5_0, n, w, x, xs, out);
}
void SJKH_SFX(sjkh_vec_dot4_q5_1)(size_t n, const void *w, const void *x, size_t xs, float *out)
{
    dot4_legacy(SJKH_TYPE_Q5_1, n, w, x, xs, out);
}
void SJKH_SFX(sjkh_vec_dot4_q8_0)(size_t n, const void *w, const void *x, size_t xs, float *out)
{
    dot4_legacy(SJKH_TYPE_Q8_0, n, w, x, xs, out);
}

void SJKH_SFX(sjkh_vec_dot4_q4_K)(size_t n, const void *w, const void *xv, size_t xs, float *out)
{
    const blk_q4_K *a = w;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    float accm[4] = {0, 0, 0, 0};
    for (size_t b = 0; b < n / QK_K; b++) {
        uint8_t sc[8], mn[8];
        for (int k = 0; k < 8; k++) sjkh_k_scale_min(k, a[b].scales, &sc[k], &mn[k]);
        const float dw = f16(a[b].d), dmw = f16(a[b].dmin);
        __m256i lo[4], hi[4];
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(a[b].qs + 32 * j));
            lo[j] = _mm256_and_si256(q, m4);
            hi[j] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        }
#define TOK(t)                                                                                          \
    do {                                                                                                \
        const blk_q8_K *x = (const blk_q8_K *)((const uint8_t *)xv + (size_t)(t) * xs) + b;             \
        int summ = 0;                                                                                   \
        for (int k = 0; k < 8; k++) summ += mn[k] * (x->bsums[2 * k] + x->bsums[2 * k + 1]);            \
        accm[t] += x->d * dmw * (float)summ;                                                            \
        __m256i sumi = _mm256_setzero_si256();                                                          \
        for (int j = 0; j < 4; j++) {                                                                   \
            __m256i ylo = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j));                        \
            __m256i yhi = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j + 32));                   \
            __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[j], ylo), _mm256_set1_epi16(sc[2 * j])); \
            __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[j], yhi), _mm256_set1_epi16(sc[2 * j + 1])); \
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));                                  \
        }                                                                                               \
        acc##t = _mm256_fmadd_ps(_mm256_set1_ps(x->d * dw), _mm256_cvtepi32_ps(sumi), acc##t);          \
    } while (0)
        TOK(0);
        TOK(1);
        TOK(2);
        TOK(3);
#undef TOK
    }
    out[0] = hsum8(acc0) - accm[0];
    out[1] = hsum8(acc1) - accm[1];
    out[2] = hsum8(acc2) - accm[2];
    out[3] = hsum8(acc3) - accm[3];
}

void SJKH_SFX(sjkh_vec_dot4_q6_K)(size_t n, const void *w, const void *xv, size_t xs, float *out)
{
    const blk_q6_K *a = w;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3), m32 = _mm256_set1_epi8(32);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (size_t b = 0; b < n / QK_K; b++) {
        const float dw = f16(a[b].d);
        __m256i q[2][4], s[2][4];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = a[b].ql + 64 * h;
            const int8_t *sc = a[b].scales + 8 * h;
            __m256i l1 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(a[b].qh + 32 * h));
            q[h][0] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            q[h][1] = _mm256_or_si256(_mm256_and_si256(l2, m4),
                                      _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            q[h][2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                      _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            q[h][3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l2, 4), m4),
                                      _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            for (int g = 0; g < 4; g++)
                s[h][g] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * g + 1]), _mm_set1_epi16(sc[2 * g]));
        }
#define TOK(t)                                                                                          \
    do {                                                                                                \
        const blk_q8_K *x = (const blk_q8_K *)((const uint8_t *)xv + (size_t)(t) * xs) + b;             \
        __m256i sumi = _mm256_setzero_si256();                                                          \
        for (int h = 0; h < 2; h++)                                                                     \
            for (int g = 0; g < 4; g++) {                                                               \
                __m256i yv = _mm256_loadu_si256((const __m256i *)(x->qs + 128 * h + 32 * g));           \
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q[h][g], yv), _mm256_maddubs_epi16(m32, yv)); \
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s[h][g]));                           \
            }                                                                                           \
        acc##t = _mm256_fmadd_ps(_mm256_set1_ps(x->d * dw), _mm256_cvtepi32_ps(sumi), acc##t);          \
    } while (0)
        TOK(0);
        TOK(1);
        TOK(2);
        TOK(3);
#undef TOK
    }
    out[0] = hsum8(acc0);
    out[1] = hsum8(acc1);
    out[2] = hsum8(acc2);
    out[3] = hsum8(acc3);
}

/* ---- activation quantizers (bit-exact with the references) ------------------------- */

static inline __m256i q8_block(const float *x, float *d_out, int *sum_out)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float amax = _mm_cvtss_f32(m4);
    *d_out = amax / 127.0f;
    __m256 id = _mm256_set1_ps(amax ? 127.0f / amax : 0.0f);
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
    if (sum_out) {
        __m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_hadd_epi32(s4, s4);
        s4 = _mm_hadd_epi32(s4, s4);
        *sum_out = _mm_cvtsi128_si32(s4);
    }
    i0 = _mm256_packs_epi32(i0, i1);
    i2 = _mm256_packs_epi32(i2, i3);
    i0 = _mm256_packs_epi16(i0, i2);
    return _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void SJKH_SFX(sjkh_quantize_q8_0)(const float *x, void *dst, size_t n)
{
    blk_q8_0 *y = dst;
    for (size_t b = 0; b < n / QK; b++) {
        float d;
        __m256i q = q8_block(x + b * QK, &d, NULL);
        y[b].d = sjkh_f32_to_f16(d);
        _mm256_storeu_si256((__m256i *)y[b].qs, q);
    }
}

void SJKH_SFX(sjkh_quantize_q8_1)(const float *x, void *dst, size_t n)
{
    blk_q8_1 *y = dst;
    for (size_t b = 0; b < n / QK; b++) {
        float d;
        int sum;
        __m256i q = q8_block(x + b * QK, &d, &sum);
        y[b].d = sjkh_f32_to_f16(d);
        y[b].s = sjkh_f32_to_f16((float)sum * d);
        _mm256_storeu_si256((__m256i *)y[b].qs, q);
    }
}

#if SJKH_VNNI
/* ---- many weight rows against up to SJKH_DOTN_MAX_TOK activation rows (AVX-512 only) --
 * The batched decode step: two weight rows share one 512-bit register (row r in the low
 * 256 bits, row r + 1 in the high), each weight block is unpacked once and dotted with
 * every activation row, whose 256-bit block is broadcast to both halves. Each half does
 * exactly what the 256-bit vec_dot above does for its row (the same integer lanes, the
 * same products of scales, the same fused multiply-adds in block order, the same final
 * hsum8), so every output is bit-identical to vec_dot of that row and token, whatever
 * the number of rows and tokens of the call (tests/test_host_quants.c checks both). The
 * token count is a compile-time constant of each instance, so the accumulators stay in
 * registers. */

static inline __m512i pair_i(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
static inline __m512 pair_f(float lo, float hi)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(lo)), _mm256_set1_ps(hi), 1);
}
static inline __m512i bcast256(const void *p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)); }
static inline float hsum_lo(__m512 v) { return hsum8(_mm512_castps512_ps256(v)); }
static inline float hsum_hi(__m512 v) { return hsum8(_mm512_extractf32x8_ps(v, 1)); }

/* The 32 int8 weights of one legacy block, as vec_dot's kernels above form them. */
static inline __m256i legacy_q(const uint32_t type, const uint8_t *wk)
{
    switch (type) {
    case SJKH_TYPE_Q4_0: return _mm256_sub_epi8(nibbles32(wk + 2), _mm256_set1_epi8(8));
    case SJKH_TYPE_Q4_1: return nibbles32(wk + 4);
    case SJKH_TYPE_Q5_0:
        return _mm256_or_si256(nibbles32(wk + 6), _mm256_andnot_si256(bits32(wk + 2), _mm256_set1_epi8((char)0xF0)));
    case SJKH_TYPE_Q5_1:
        return _mm256_or_si256(nibbles32(wk + 8), _mm256_and_si256(bits32(wk + 4), _mm256_set1_epi8(0x10)));
    default: return _mm256_loadu_si256((const __m256i *)(wk + 2));
    }
}

/* Legacy types against prepared activation rows (quants.h sjkh_dotn_prepare): the int8
 * values of a Q8_0 row as unsigned q + 128, so that vpdpbusd takes the signed weights as
 * they are: lane = sum (y + 128) w - 128 sum w = sum y w, the very lane of vec_dot's
 * sign trick, with the - 128 sum w of each weight block formed once for all tokens. */
/* legacy_q of two blocks in one register (row k0 low, k1 high): the same 64 bytes, with
 * the nibbles of both split at once and Q5_0's fifth bits taken as a 64-bit mask. */
static inline __m512i legacy_q_pair(const uint32_t type, const uint8_t *k0, const uint8_t *k1)
{
    if (type != SJKH_TYPE_Q4_0 && type != SJKH_TYPE_Q5_0) return pair_i(legacy_q(type, k0), legacy_q(type, k1));
    const size_t qs = type == SJKH_TYPE_Q4_0 ? 2 : 6;
    const __m256i t = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(k1 + qs)),
                                       _mm_loadu_si128((const __m128i *)(k0 + qs)));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    /* [lo0 | lo1 | hi0 | hi1] -> [lo0 | hi0 | lo1 | hi1]: each row as nibbles32 lays it out */
    const __m512i a = pair_i(_mm256_and_si256(t, m4), _mm256_and_si256(_mm256_srli_epi16(t, 4), m4));
    const __m512i nib = _mm512_shuffle_i64x2(a, a, 0xD8);
    if (type == SJKH_TYPE_Q4_0) return _mm512_sub_epi8(nib, _mm512_set1_epi8(8));
    /* value i of a row has its fifth bit at bit i of qh: clear -> nib - 16 (nib | 0xF0) */
    const __mmask64 hi = _cvtu64_mask64((uint64_t)sjkh_rd_u32(k0 + 2) | (uint64_t)sjkh_rd_u32(k1 + 2) << 32);
    return _mm512_mask_blend_epi8(hi, _mm512_or_si512(nib, _mm512_set1_epi8((char)0xF0)), nib);
}

static inline __attribute__((always_inline)) void rows_legacy(const uint32_t type, const int NT, size_t n,
                                                              const uint8_t *w, size_t ws, size_t nr,
                                                              const uint8_t *x, size_t xs, float *y, size_t ys)
{
    const int sgn = type == SJKH_TYPE_Q4_0 || type == SJKH_TYPE_Q5_0 || type == SJKH_TYPE_Q8_0;
    const size_t wbs = type == SJKH_TYPE_Q4_0 ? 18 : type == SJKH_TYPE_Q4_1 ? 20 : type == SJKH_TYPE_Q5_0 ? 22
                     : type == SJKH_TYPE_Q5_1 ? 24 : 34;
    const size_t nb = n / QK;
    const __m512i b128 = _mm512_set1_epi8((char)0x80);
    for (size_t r = 0; r < nr; r += 2) {
        const uint8_t *w0 = w + r * ws, *w1 = r + 1 < nr ? w0 + ws : w0;
        __m512 acc[SJKH_DOTN_MAX_TOK];
        float summ[SJKH_DOTN_MAX_TOK][2];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            acc[t] = _mm512_setzero_ps();
            summ[t][0] = summ[t][1] = 0.0f;
        }
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *k0 = w0 + b * wbs, *k1 = w1 + b * wbs;
            const __m512i q = legacy_q_pair(type, k0, k1);
            /* signed weights: every lane starts at - 128 * (the sum of its 4 weights) */
            const __m512i base =
                sgn ? _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), b128, q))
                    : _mm512_setzero_si512();
            const __m512 wd = pair_f(f16(sjkh_rd_u16(k0)), f16(sjkh_rd_u16(k1)));
            const float m0 = sgn ? 0.0f : f16(sjkh_rd_u16(k0 + 2)), m1 = sgn ? 0.0f : f16(sjkh_rd_u16(k1 + 2));
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const uint8_t *xr = x + (size_t)t * xs;
                const float *xd = (const float *)(xr + nb * QK);
                const __m512i yv = bcast256(xr + b * QK);
                const __m512 s = _mm512_cvtepi32_ps(sgn ? _mm512_dpbusd_epi32(base, yv, q)
                                                        : _mm512_dpbusd_epi32(base, q, yv));
                acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(wd, _mm512_set1_ps(xd[b])), s, acc[t]);
                if (!sgn) {
                    const float sx = xd[nb + b];
                    summ[t][0] += m0 * sx;
                    summ[t][1] += m1 * sx;
                }
            }
        }
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            y[(size_t)t * ys + r] = hsum_lo(acc[t]) + summ[t][0];
            if (r + 1 < nr) y[(size_t)t * ys + r + 1] = hsum_hi(acc[t]) + summ[t][1];
        }
    }
}

static inline __attribute__((always_inline)) void rows_q4_K(const int NT, size_t n, const uint8_t *w, size_t ws,
                                                            size_t nr, const uint8_t *x, size_t xs, float *y,
                                                            size_t ys)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (size_t r = 0; r < nr; r += 2) {
        const blk_q4_K *a0 = (const blk_q4_K *)(w + r * ws);
        const blk_q4_K *a1 = r + 1 < nr ? (const blk_q4_K *)(w + (r + 1) * ws) : a0;
        __m512 acc[SJKH_DOTN_MAX_TOK];
        float accm[SJKH_DOTN_MAX_TOK][2];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            acc[t] = _mm512_setzero_ps();
            accm[t][0] = accm[t][1] = 0.0f;
        }
        for (size_t b = 0; b < n / QK_K; b++) {
            uint8_t sc0[8], mn0[8], sc1[8], mn1[8];
            for (int k = 0; k < 8; k++) {
                sjkh_k_scale_min(k, a0[b].scales, &sc0[k], &mn0[k]);
                sjkh_k_scale_min(k, a1[b].scales, &sc1[k], &mn1[k]);
            }
            const __m512 wd = pair_f(f16(a0[b].d), f16(a1[b].d));
            const float dm0 = f16(a0[b].dmin), dm1 = f16(a1[b].dmin);
            __m512i lo[4], hi[4], slo[4], shi[4];
            for (int j = 0; j < 4; j++) {
                const __m512i q = pair_i(_mm256_loadu_si256((const __m256i *)(a0[b].qs + 32 * j)),
                                         _mm256_loadu_si256((const __m256i *)(a1[b].qs + 32 * j)));
                lo[j] = _mm512_and_si512(q, m4);
                hi[j] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
                slo[j] = pair_i(_mm256_set1_epi16(sc0[2 * j]), _mm256_set1_epi16(sc1[2 * j]));
                shi[j] = pair_i(_mm256_set1_epi16(sc0[2 * j + 1]), _mm256_set1_epi16(sc1[2 * j + 1]));
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const blk_q8_K *xb = (const blk_q8_K *)(x + (size_t)t * xs) + b;
                int s0 = 0, s1 = 0;
                for (int k = 0; k < 8; k++) {
                    const int bs = xb->bsums[2 * k] + xb->bsums[2 * k + 1];
                    s0 += mn0[k] * bs;
                    s1 += mn1[k] * bs;
                }
                accm[t][0] += xb->d * dm0 * (float)s0;
                accm[t][1] += xb->d * dm1 * (float)s1;
                __m512i sumi = _mm512_setzero_si512();
                for (int j = 0; j < 4; j++) {
                    const __m512i plo = _mm512_madd_epi16(_mm512_maddubs_epi16(lo[j], bcast256(xb->qs + 64 * j)), slo[j]);
                    const __m512i phi =
                        _mm512_madd_epi16(_mm512_maddubs_epi16(hi[j], bcast256(xb->qs + 64 * j + 32)), shi[j]);
                    sumi = _mm512_add_epi32(sumi, _mm512_add_epi32(plo, phi));
                }
                acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(xb->d), wd), _mm512_cvtepi32_ps(sumi), acc[t]);
            }
        }
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            y[(size_t)t * ys + r] = hsum_lo(acc[t]) - accm[t][0];
            if (r + 1 < nr) y[(size_t)t * ys + r + 1] = hsum_hi(acc[t]) - accm[t][1];
        }
    }
}

static inline __attribute__((always_inline)) void rows_q6_K(const int NT, size_t n, const uint8_t *w, size_t ws,
                                                            size_t nr, const uint8_t *x, size_t xs, float *y,
                                                            size_t ys)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3), m32 = _mm512_set1_epi8(32);
    for (size_t r = 0; r < nr; r += 2) {
        const blk_q6_K *a0 = (const blk_q6_K *)(w + r * ws);
        const blk_q6_K *a1 = r + 1 < nr ? (const blk_q6_K *)(w + (r + 1) * ws) : a0;
        __m512 acc[SJKH_DOTN_MAX_TOK];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
        for (size_t b = 0; b < n / QK_K; b++) {
            const __m512 wd = pair_f(f16(a0[b].d), f16(a1[b].d));
            __m512i q[2][4], s[2][4];
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql0 = a0[b].ql + 64 * h, *ql1 = a1[b].ql + 64 * h;
                const int8_t *c0 = a0[b].scales + 8 * h, *c1 = a1[b].scales + 8 * h;
                const __m512i l1 = pair_i(_mm256_loadu_si256((const __m256i *)ql0), _mm256_loadu_si256((const __m256i *)ql1));
                const __m512i l2 = pair_i(_mm256_loadu_si256((const __m256i *)(ql0 + 32)),
                                          _mm256_loadu_si256((const __m256i *)(ql1 + 32)));
                const __m512i qh = pair_i(_mm256_loadu_si256((const __m256i *)(a0[b].qh + 32 * h)),
                                          _mm256_loadu_si256((const __m256i *)(a1[b].qh + 32 * h)));
                q[h][0] = _mm512_or_si512(_mm512_and_si512(l1, m4), _mm512_slli_epi16(_mm512_and_si512(qh, m2), 4));
                q[h][1] = _mm512_or_si512(_mm512_and_si512(l2, m4),
                                          _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 2), m2), 4));
                q[h][2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                                          _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 4), m2), 4));
                q[h][3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l2, 4), m4),
                                          _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 6), m2), 4));
                for (int g = 0; g < 4; g++)
                    s[h][g] = pair_i(_mm256_set_m128i(_mm_set1_epi16(c0[2 * g + 1]), _mm_set1_epi16(c0[2 * g])),
                                     _mm256_set_m128i(_mm_set1_epi16(c1[2 * g + 1]), _mm_set1_epi16(c1[2 * g])));
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const blk_q8_K *xb = (const blk_q8_K *)(x + (size_t)t * xs) + b;
                __m512i sumi = _mm512_setzero_si512();
                for (int h = 0; h < 2; h++)
                    for (int g = 0; g < 4; g++) {
                        const __m512i yv = bcast256(xb->qs + 128 * h + 32 * g);
                        const __m512i p = _mm512_sub_epi16(_mm512_maddubs_epi16(q[h][g], yv), _mm512_maddubs_epi16(m32, yv));
                        sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p, s[h][g]));
                    }
                acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(xb->d), wd), _mm512_cvtepi32_ps(sumi), acc[t]);
            }
        }
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            y[(size_t)t * ys + r] = hsum_lo(acc[t]);
            if (r + 1 < nr) y[(size_t)t * ys + r + 1] = hsum_hi(acc[t]);
        }
    }
}

/* One exported kernel per weight type: nt (1..SJKH_DOTN_MAX_TOK) picks the instance. */
#define ROWS_DISPATCH(call)                                                                                    \
    switch (nt) {                                                                                              \
    case 1: call(1); break;                                                                                    \
    case 2: call(2); break;                                                                                    \
    case 3: call(3); break;                                                                                    \
    case 4: call(4); break;                                                                                    \
    case 5: call(5); break;                                                                                    \
    case 6: call(6); break;                                                                                    \
    case 7: call(7); break;                                                                                    \
    default: call(8); break;                                                                                   \
    }
#define ROWS_LEGACY(ty, name)                                                                                  \
    void SJKH_SFX(name)(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,   \
                        float *y, size_t ys)                                                                   \
    {                                                                                                          \
        if (!nt || nt > SJKH_DOTN_MAX_TOK) return;                                                             \
        const uint8_t *wb = w, *xb = x;                                                                        \
        const uint32_t ty_ = ty;                                                                               \
        ROWS_DISPATCH(ROWS_LEGACY_CALL)                                                                        \
    }
#define ROWS_LEGACY_CALL(NT) rows_legacy(ty_, NT, n, wb, ws, nr, xb, xs, y, ys)
_Static_assert(SJKH_DOTN_MAX_TOK == 8, "ROWS_DISPATCH has one instance per token count");
ROWS_LEGACY(SJKH_TYPE_Q4_0, sjkh_vec_dotn_q4_0)
ROWS_LEGACY(SJKH_TYPE_Q4_1, sjkh_vec_dotn_q4_1)
ROWS_LEGACY(SJKH_TYPE_Q5_0, sjkh_vec_dotn_q5_0)
ROWS_LEGACY(SJKH_TYPE_Q5_1, sjkh_vec_dotn_q5_1)
ROWS_LEGACY(SJKH_TYPE_Q8_0, sjkh_vec_dotn_q8_0)

#define ROWS_Q4K_CALL(NT) rows_q4_K(NT, n, wb, ws, nr, xb, xs, y, ys)
#define ROWS_Q6K_CALL(NT) rows_q6_K(NT, n, wb, ws, nr, xb, xs, y, ys)
void SJKH_SFX(sjkh_vec_dotn_q4_K)(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                                  float *y, size_t ys)
{
    if (!nt || nt > SJKH_DOTN_MAX_TOK) return;
    const uint8_t *wb = w, *xb = x;
    ROWS_DISPATCH(ROWS_Q4K_CALL)
}
void SJKH_SFX(sjkh_vec_dotn_q6_K)(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                                  float *y, size_t ys)
{
    if (!nt || nt > SJKH_DOTN_MAX_TOK) return;
    const uint8_t *wb = w, *xb = x;
    ROWS_DISPATCH(ROWS_Q6K_CALL)
}

/* Q8_K activations (the dot type of Q4_K/Q5_K/Q6_K), bit-exact with
 * sjkh_quantize_q8_K_ref for every input, NaN and Inf included: the first element of
 * largest magnitude (NaN never wins: maxps returns its second operand when the first is
 * NaN) sets iscale = -127 / x; q = round-to-nearest-even of iscale * x, clamped to 127
 * and cut to its low byte as the reference's int8 cast does; bsums from those bytes. */
void SJKH_SFX(sjkh_quantize_q8_K)(const float *x, void *dst, size_t n)
{
    blk_q8_K *y = dst;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (size_t b = 0; b < n / QK_K; b++, x += QK_K) {
        __m512 m = _mm512_setzero_ps();
        for (int i = 0; i < QK_K; i += 16) m = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + i)), m);
        const float amax = _mm512_reduce_max_ps(m);
        if (!(amax > 0.0f)) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        float mx = 0.0f;
        const __m512 av = _mm512_set1_ps(amax);
        for (int i = 0; i < QK_K; i += 16) {
            __mmask16 k = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + i)), av, _CMP_EQ_OQ);
            if (k) {
                mx = x[i + __builtin_ctz((unsigned)k)];
                break;
            }
        }
        const float iscale = -127.0f / mx;
        const __m512 is = _mm512_set1_ps(iscale);
        const __m512i c127 = _mm512_set1_epi32(127);
        for (int j = 0; j < QK_K / 16; j++) {
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(is, _mm512_loadu_ps(x + 16 * j)));
            __m128i q = _mm512_cvtepi32_epi8(_mm512_min_epi32(v, c127));
            _mm_storeu_si128((__m128i *)(y[b].qs + 16 * j), q);
            y[b].bsums[j] = (int16_t)_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q));
        }
        y[b].d = 1.0f / iscale;
    }
}
#undef ROWS_Q4K_CALL
#undef ROWS_Q6K_CALL
#undef ROWS_LEGACY_CALL
#undef ROWS_LEGACY
#undef ROWS_DISPATCH
#endif /* SJKH_VNNI */
