/* format_kernels_avx512.c — AVX-512 versions of the cache kernels of
 * src/codec/format_kernels.h (compiled with the AVX-512 flags only; reached through
 * sjk_fmt_kernels_get() when sjk_cpu_features() reports SJK_CPU_AVX512). Entries not
 * overridden here keep their AVX2 versions. Decoders are bit-identical to the references;
 * dot products use FMA and a different summation order (format_kernels.h). */
#include "codec/format_kernels_table.h"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "codec/format.h"
#include "common/fp16.h"
#include "common/util.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF /* x*id and + 8.5f stay two roundings, as the reference */
#endif

static inline float blk_scale(const uint8_t *x) { return sjk_fp16_to_f32(sjk_rd_u16le(x)); }

/* ---- q8_0 / q4_0 encode: the reference's steps lane by lane ----------------------------
 * max|x| is a max (order-free, exact); d, 1/d and the fp16 scale are the same scalar
 * operations; x*id (+ 8.5) are single IEEE operations per lane; roundf is rebuilt exactly
 * (truncate, add ±1 where the exact fraction is >= 0.5); float->int follows cvttps2dq
 * (0x80000000 for NaN/Inf, low byte 0), as the reference's trunc_i32. A block holding
 * NaN/Inf or needing an out-of-range scale takes the reference path. */
static inline int fp16_ok(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }

static void encode_q8_0_avx512(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    const __m512 fmax = _mm512_set1_ps(FLT_MAX), half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32((int)0x80000000u));
    for (size_t b = 0; b < n / SJK_QK; b++, y += SJK_Q8_0_NBYTES, src += SJK_QK) {
        const __m512 x0 = _mm512_loadu_ps(src), x1 = _mm512_loadu_ps(src + 16);
        const __m512 a0 = _mm512_abs_ps(x0), a1 = _mm512_abs_ps(x1);
        const __mmask16 f0 = _mm512_cmp_ps_mask(a0, fmax, _CMP_LE_OQ), f1 = _mm512_cmp_ps_mask(a1, fmax, _CMP_LE_OQ);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = sjk_f32_to_fp16(d);
        if (f0 != 0xFFFF || f1 != 0xFFFF || !fp16_ok(dh)) {
            sjk_encode_q8_0_ref(y, src, SJK_QK);
            continue;
        }
        sjk_wr_u16le(y, dh);
        const __m512 idv = _mm512_set1_ps(id);
        const __m512 xs[2] = { x0, x1 };
        for (int h = 0; h < 2; h++) {
            const __m512 v = _mm512_mul_ps(xs[h], idv);
            const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), half, _CMP_GE_OQ);
            const __m512 r = _mm512_mask_add_ps(t, up, t, _mm512_or_ps(one, _mm512_and_ps(v, sign)));
            _mm_storeu_si128((__m128i *)(void *)(y + 2 + 16 * h), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r)));
        }
    }
}

static void encode_q4_0_avx512(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    const __m512 fmax = _mm512_set1_ps(FLT_MAX), k85 = _mm512_set1_ps(8.5f);
    const __m512i k15 = _mm512_set1_epi32(15);
    for (size_t b = 0; b < n / SJK_QK; b++, y += SJK_Q4_0_NBYTES, src += SJK_QK) {
        const __m512 x0 = _mm512_loadu_ps(src), x1 = _mm512_loadu_ps(src + 16);
        const __m512 a0 = _mm512_abs_ps(x0), a1 = _mm512_abs_ps(x1);
        const __mmask16 f0 = _mm512_cmp_ps_mask(a0, fmax, _CMP_LE_OQ), f1 = _mm512_cmp_ps_mask(a1, fmax, _CMP_LE_OQ);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        float max = 0.0f; /* the reference keeps +0 when no |x| exceeds 0 */
        if (amax > 0.0f) {
            const __m512 av = _mm512_set1_ps(amax);
            const uint32_t eq = (uint32_t)_mm512_cmp_ps_mask(a0, av, _CMP_EQ_OQ) |
                                ((uint32_t)_mm512_cmp_ps_mask(a1, av, _CMP_EQ_OQ) << 16);
            max = src[__builtin_ctz(eq)]; /* the first element of largest |x| */
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = sjk_f32_to_fp16(d);
        if (f0 != 0xFFFF || f1 != 0xFFFF || !fp16_ok(dh)) {
            sjk_encode_q4_0_ref(y, src, SJK_QK);
            continue;
        }
        sjk_wr_u16le(y, dh);
        const __m512 idv = _mm512_set1_ps(id);
        __m512i q[2];
        const __m512 xs[2] = { x0, x1 };
        for (int h = 0; h < 2; h++) {
            const __m512 w = _mm512_add_ps(_mm512_mul_ps(xs[h], idv), k85);
            const __m512i t = _mm512_cvttps_epi32(w);
            q[h] = _mm512_min_epi32(_mm512_srai_epi32(_mm512_slli_epi32(t, 24), 24), k15); /* MIN(15, (int8_t)t) */
        }
        const __m512i packed = _mm512_or_si512(q[0], _mm512_slli_epi32(q[1], 4));
        _mm_storeu_si128((__m128i *)(void *)(y + 2), _mm512_cvtepi32_epi8(packed));
    }
}

static void encode_f16_avx512(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(void *)(y + 2 * i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) sjk_wr_u16le(y + 2 * i, sjk_f32_to_fp16(src[i]));
}

static void decode_f16_avx512(float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(x + 2 * i))));
    for (; i < n; i++) dst[i] = sjk_fp16_to_f32(sjk_rd_u16le(x + 2 * i));
}

static float dot_f16_avx512(const float *q, const void *src, size_t n)
{
    const uint8_t *x = src;
    __m512 acc = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(x + 2 * i)));
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), v, acc);
    }
    float s = _mm512_reduce_add_ps(acc);
    for (; i < n; i++) s += q[i] * sjk_fp16_to_f32(sjk_rd_u16le(x + 2 * i));
    return s;
}

/* 32 int8 codes of a q8_0 block as 2 x 16 floats. */
static inline void q8_codes(__m512 c[2], const uint8_t *qs)
{
    c[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)qs)));
    c[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(qs + 16))));
}

/* 32 codes (q - 8) of a q4_0 block, element order, as 2 x 16 floats. */
static inline void q4_codes(__m512 c[2], const uint8_t *qs)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)(const void *)qs);
    const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(raw, m4), eight);
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), eight);
    c[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
    c[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
}

#define BLOCK_KERNELS(fmt, NB, CODES)                                                         \
    static void decode_##fmt##_avx512(float *dst, const void *src, size_t n)                  \
    {                                                                                         \
        const uint8_t *x = src;                                                               \
        for (size_t b = 0; b < n / SJK_QK; b++, x += NB, dst += SJK_QK) {                     \
            const __m512 d = _mm512_set1_ps(blk_scale(x));                                    \
            __m512 c[2];                                                                      \
            CODES(c, x + 2);                                                                  \
            _mm512_storeu_ps(dst, _mm512_mul_ps(c[0], d));                                    \
            _mm512_storeu_ps(dst + 16, _mm512_mul_ps(c[1], d));                               \
        }                                                                                     \
    }                                                                                         \
    static float dot_##fmt##_avx512(const float *q, const void *src, size_t n)                \
    {                                                                                         \
        const uint8_t *x = src;                                                               \
        __m512 acc = _mm512_setzero_ps();                                                     \
        for (size_t b = 0; b < n / SJK_QK; b++, x += NB, q += SJK_QK) {                       \
            __m512 c[2];                                                                      \
            CODES(c, x + 2);                                                                  \
            __m512 t = _mm512_mul_ps(_mm512_loadu_ps(q), c[0]);                               \
            t = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16), c[1], t);                            \
            acc = _mm512_fmadd_ps(t, _mm512_set1_ps(blk_scale(x)), acc);                      \
        }                                                                                     \
        return _mm512_reduce_add_ps(acc);                                                     \
    }

BLOCK_KERNELS(q8_0, SJK_Q8_0_NBYTES, q8_codes)
BLOCK_KERNELS(q4_0, SJK_Q4_0_NBYTES, q4_codes)

/* ---- tq6_0_stage (rotated basis) ------------------------------------------------------
 * 16 codes at a time, straight from the split planes: 8 bytes of qs give 16 nibbles in
 * element order (even j low nibble, odd j high), 4 bytes of qh give the 16 high 2-bit
 * fields (element j at bits 2*(j%4) of qh[j/4]); the 64-entry codebook lives in four
 * registers and is read with two permutex2var and a blend on bit 5 of the code. */
typedef struct tq6_table { __m512 t0, t1, t2, t3; } tq6_table;

static inline tq6_table tq6_load_table(void)
{
    tq6_table t;
    t.t0 = _mm512_loadu_ps(sjk_tq6_centroids);
    t.t1 = _mm512_loadu_ps(sjk_tq6_centroids + 16);
    t.t2 = _mm512_loadu_ps(sjk_tq6_centroids + 32);
    t.t3 = _mm512_loadu_ps(sjk_tq6_centroids + 48);
    return t;
}

/* Centroids of elements 16k .. 16k+15 of the block. */
static inline __m512 tq6_values16(const tq6_table *t, const uint8_t *blk, int k)
{
    const __m128i b8 = _mm_loadl_epi64((const __m128i *)(const void *)(blk + 2 + 8 * k));
    const __m128i w = _mm_cvtepu8_epi16(b8);
    const __m128i lo = _mm_or_si128(_mm_and_si128(w, _mm_set1_epi16(0x000F)),
                                    _mm_and_si128(_mm_slli_epi16(w, 4), _mm_set1_epi16(0x0F00)));
    uint32_t h4;
    memcpy(&h4, blk + 66 + 4 * k, 4);
    const __m128i hb = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)h4),
                                        _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
    const __m512i sh = _mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6);
    const __m512i hi = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(hb), sh), _mm512_set1_epi32(3));
    const __m512i code = _mm512_or_si512(_mm512_cvtepu8_epi32(lo), _mm512_slli_epi32(hi, 4));
    const __m512 a = _mm512_permutex2var_ps(t->t0, code, t->t1);
    const __m512 b = _mm512_permutex2var_ps(t->t2, code, t->t3);
    const __mmask16 upper = _mm512_test_epi32_mask(code, _mm512_set1_epi32(32));
    return _mm512_mask_blend_ps(upper, a, b);
}

static void decode_tq6_0_stage_avx512(float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    const tq6_table t = tq6_load_table();
    for (size_t b = 0; b < n / SJK_TQ_BLOCK; b++, x += SJK_TQ6_0_NBYTES, dst += SJK_TQ_BLOCK) {
        const __m512 nv = _mm512_set1_ps(blk_scale(x));
        for (int k = 0; k < 8; k++) _mm512_storeu_ps(dst + 16 * k, _mm512_mul_ps(tq6_values16(&t, x, k), nv));
    }
}

static float dot_tq6_0_stage_avx512(const float *q, const void *src, size_t n)
{
    const uint8_t *x = src;
    const tq6_table t = tq6_load_table();
    __m512 acc = _mm512_setzero_ps();
    for (size_t b = 0; b < n / SJK_TQ_BLOCK; b++, x += SJK_TQ6_0_NBYTES, q += SJK_TQ_BLOCK) {
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        for (int k = 0; k < 8; k += 2) {
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * k), tq6_values16(&t, x, k), s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * k + 16), tq6_values16(&t, x, k + 1), s1);
        }
        acc = _mm512_fmadd_ps(_mm512_add_ps(s0, s1), _mm512_set1_ps(blk_scale(x)), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

static void axpy_tq6_0_stage_avx512(float *y, float a, const void *src, size_t n)
{
    const uint8_t *x = src;
    const tq6_table t = tq6_load_table();
    for (size_t b = 0; b < n / SJK_TQ_BLOCK; b++, x += SJK_TQ6_0_NBYTES, y += SJK_TQ_BLOCK) {
        const __m512 s = _mm512_set1_ps(a * blk_scale(x));
        for (int k = 0; k < 8; k++)
            _mm512_storeu_ps(y + 16 * k, _mm512_fmadd_ps(tq6_values16(&t, x, k), s, _mm512_loadu_ps(y + 16 * k)));
    }
}

/* The TurboQuant rotation: the reference's operations, 16 lanes at a time. Stages
 * h = 1..8 pair lanes inside a register (partner = lane ^ h; the lower lane keeps a + b,
 * the upper b' - a' with the same operands as the scalar butterfly), h = 16..64 pair
 * whole registers. Sign flips are XORs of the sign bit, exactly as the reference. */
static inline __m512 flip16(__m512 v, uint32_t bits)
{
    return _mm512_mask_xor_ps(v, (__mmask16)bits, v, _mm512_set1_ps(-0.0f));
}

static void rht128_avx512(float *x, const uint32_t first[4], const uint32_t last[4])
{
    __m512 v[8];
    for (int k = 0; k < 8; k++) v[k] = flip16(_mm512_loadu_ps(x + 16 * k), first[k >> 1] >> (16 * (k & 1)));
    static const __mmask16 upper[4] = { 0xAAAA, 0xCCCC, 0xF0F0, 0xFF00 };
    for (int s = 0; s < 4; s++) {
        const int h = 1 << s;
        const __m512i idx = _mm512_xor_si512(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32(h));
        for (int k = 0; k < 8; k++) {
            const __m512 p = _mm512_permutexvar_ps(idx, v[k]);
            v[k] = _mm512_mask_blend_ps(upper[s], _mm512_add_ps(v[k], p), _mm512_sub_ps(p, v[k]));
        }
    }
    for (int h = 1; h < 8; h <<= 1) { /* 16, 32, 64 values apart */
        for (int i = 0; i < 8; i += 2 * h) {
            for (int j = i; j < i + h; j++) {
                const __m512 a = v[j], b = v[j + h];
                v[j] = _mm512_add_ps(a, b);
                v[j + h] = _mm512_sub_ps(a, b);
            }
        }
    }
    const __m512 sc = _mm512_set1_ps((float)(1.0 / sqrt(128.0)));
    for (int k = 0; k < 8; k++)
        _mm512_storeu_ps(x + 16 * k, flip16(_mm512_mul_ps(v[k], sc), last[k >> 1] >> (16 * (k & 1))));
}

/* The TurboQuant ladder, 16 values at a time: a branchless binary search whose table
 * reads are register permutes (the up to 63 midpoints live in four registers). */
static void tq_codes128_avx512(uint8_t *codes, const float *u, const float *mid, unsigned bits)
{
    const unsigned nmid = (1u << bits) - 1;
    __m512 t[4];
    for (unsigned k = 0; k < 4; k++) {
        const unsigned start = 16 * k;
        const __mmask16 m = start >= nmid ? 0 : nmid - start >= 16 ? 0xFFFF : (__mmask16)((1u << (nmid - start)) - 1);
        t[k] = _mm512_maskz_loadu_ps(m, mid + start);
    }
    const __m512i bit5 = _mm512_set1_epi32(32);
    for (int i = 0; i < SJK_TQ_BLOCK; i += 16) {
        const __m512 r = _mm512_loadu_ps(u + i);
        __m512i c = _mm512_setzero_si512();
        for (unsigned step = 1u << (bits - 1); step; step >>= 1) {
            const __m512i idx = _mm512_add_epi32(c, _mm512_set1_epi32((int)step - 1));
            const __m512 lo = _mm512_permutex2var_ps(t[0], idx, t[1]);
            const __m512 hi = _mm512_permutex2var_ps(t[2], idx, t[3]);
            const __m512 m = _mm512_mask_blend_ps(_mm512_test_epi32_mask(idx, bit5), lo, hi);
            const __mmask16 le = _mm512_cmp_ps_mask(m, r, _CMP_LE_OQ);
            c = _mm512_mask_add_epi32(c, le, c, _mm512_set1_epi32((int)step));
        }
        _mm_storeu_si128((__m128i *)(void *)(codes + i), _mm512_cvtepi32_epi8(c));
    }
}

void sjk_fmt_kernels_init_avx512(sjk_fmt_kernels *k)
{
    k->name = "avx512";
    k->encode_q8_0 = encode_q8_0_avx512;
    k->encode_q4_0 = encode_q4_0_avx512;
    k->tq_codes128 = tq_codes128_avx512;
    k->rht128 = rht128_avx512;
    k->encode_f16 = encode_f16_avx512;
    k->decode_f16 = decode_f16_avx512;
    k->decode_q8_0 = decode_q8_0_avx512;
    k->decode_q4_0 = decode_q4_0_avx512;
    k->dot_f16 = dot_f16_avx512;
    k->dot_q8_0 = dot_q8_0_avx512;
    k->dot_q4_0 = dot_q4_0_avx512;
    k->decode_tq6_0_stage = decode_tq6_0_stage_avx512;
    k->dot_tq6_0_stage = dot_tq6_0_stage_avx512;
    k->axpy_tq6_0_stage = axpy_tq6_0_stage_avx512;
}
#else
void sjk_fmt_kernels_init_avx512(sjk_fmt_kernels *k) { (void)k; }
#endif
