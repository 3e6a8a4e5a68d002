/* format_kernels_avx2.c — AVX2 + FMA + F16C versions of the cache kernels of
 * src/codec/format_kernels.h. Compiled with -mavx2 -mfma -mf16c only; reached through
 * sjk_fmt_kernels_get() when sjk_cpu_features() reports SJK_CPU_AVX2. Decoders are
 * bit-identical to the references; dot and axpy use FMA and a different summation order
 * (tolerances in format_kernels.h). */
#include "codec/format_kernels_table.h"

#if defined(__x86_64__) && defined(__AVX2__)
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "codec/format.h"
#include "common/fp16.h"
#include "common/util.h"

static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF /* x*id and + 8.5f stay two roundings, as the reference */
#endif

static inline float blk_scale(const uint8_t *x) { return sjk_fp16_to_f32(sjk_rd_u16le(x)); }

/* ---- q8_0 / q4_0 encode: the reference's steps lane by lane (see the AVX-512 file) ---- */
static inline int fp16_ok(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }

static inline __m256 abs256(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

static inline float hmax256(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* 1 if every |x| of the 32 is <= FLT_MAX (no NaN/Inf); *amax gets max |x|. */
static inline int block_absmax(const float *src, __m256 a[4], float *amax)
{
    const __m256 fmax = _mm256_set1_ps(FLT_MAX);
    int ok = 1;
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        a[k] = abs256(_mm256_loadu_ps(src + 8 * k));
        ok &= _mm256_movemask_ps(_mm256_cmp_ps(a[k], fmax, _CMP_LE_OQ)) == 0xFF;
        m = _mm256_max_ps(m, a[k]);
    }
    *amax = hmax256(m);
    return ok;
}

/* 8 int32 lanes (each in [-128, 127], or 0x80000000 meaning "low byte 0") -> 8 bytes. */
static inline void store8_lowbytes(uint8_t *dst, __m256i c)
{
    c = _mm256_andnot_si256(_mm256_cmpeq_epi32(c, _mm256_set1_epi32(INT32_MIN)), c);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    _mm_storel_epi64((__m128i *)(void *)dst, _mm_packs_epi16(w, w));
}

static void encode_q8_0_avx2(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    for (size_t b = 0; b < n / SJK_QK; b++, y += SJK_Q8_0_NBYTES, src += SJK_QK) {
        __m256 a[4];
        float amax;
        const int ok = block_absmax(src, a, &amax);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = sjk_f32_to_fp16(d);
        if (!ok || !fp16_ok(dh)) {
            sjk_encode_q8_0_ref(y, src, SJK_QK);
            continue;
        }
        sjk_wr_u16le(y, dh);
        const __m256 idv = _mm256_set1_ps(id);
        for (int k = 0; k < 4; k++) {
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + 8 * k), idv);
            const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __m256 up = _mm256_cmp_ps(abs256(_mm256_sub_ps(v, t)), half, _CMP_GE_OQ);
            const __m256 r = _mm256_add_ps(t, _mm256_and_ps(up, _mm256_or_ps(one, _mm256_and_ps(v, sign))));
            store8_lowbytes(y + 2 + 8 * k, _mm256_cvttps_epi32(r));
        }
    }
}

static void encode_q4_0_avx2(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    const __m256 k85 = _mm256_set1_ps(8.5f);
    for (size_t b = 0; b < n / SJK_QK; b++, y += SJK_Q4_0_NBYTES, src += SJK_QK) {
        __m256 a[4];
        float amax;
        const int ok = block_absmax(src, a, &amax);
        float max = 0.0f; /* the reference keeps +0 when no |x| exceeds 0 */
        if (amax > 0.0f) {
            const __m256 av = _mm256_set1_ps(amax);
            uint32_t eq = 0;
            for (int k = 0; k < 4; k++) eq |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(a[k], av, _CMP_EQ_OQ)) << (8 * k);
            max = src[__builtin_ctz(eq)]; /* the first element of largest |x| */
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = sjk_f32_to_fp16(d);
        if (!ok || !fp16_ok(dh)) {
            sjk_encode_q4_0_ref(y, src, SJK_QK);
            continue;
        }
        sjk_wr_u16le(y, dh);
        const __m256 idv = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            const __m256 w = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(src + 8 * k), idv), k85);
            const __m256i t = _mm256_cvttps_epi32(w);
            q[k] = _mm256_min_epi32(_mm256_srai_epi32(_mm256_slli_epi32(t, 24), 24), _mm256_set1_epi32(15));
        }
        /* bytes j = 0..15: element j (low nibble) | element j + 16 (high nibble), 0..255 */
        for (int k = 0; k < 2; k++) {
            const __m256i p = _mm256_or_si256(q[k], _mm256_slli_epi32(q[k + 2], 4));
            const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
            _mm_storel_epi64((__m128i *)(void *)(y + 2 + 8 * k), _mm_packus_epi16(w, w));
        }
    }
}

/* 32 int8 codes of a q8_0 block as 4 x 8 floats. */
static inline void q8_codes(__m256 out[4], const uint8_t *qs)
{
    for (int k = 0; k < 4; k++) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(qs + 8 * k));
        out[k] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
    }
}

/* 32 codes (q - 8) of a q4_0 block, element order, as 4 x 8 floats. */
static inline void q4_codes(__m256 out[4], const uint8_t *qs)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)(const void *)qs);
    const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(raw, m4), eight);                    /* elements 0..15 */
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), eight); /* 16..31 */
    out[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
    out[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
    out[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
    out[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
}

/* 128 six-bit codes of a tq6_0 block. */
static inline void tq6_codes(int32_t c[SJK_TQ_BLOCK], const uint8_t *blk)
{
    const uint8_t *qs = blk + 2, *qh = blk + 66;
    for (int k = 0; k < 32; k++) {
        const unsigned h = qh[k];
        const unsigned b0 = qs[2 * k], b1 = qs[2 * k + 1];
        c[4 * k + 0] = (int32_t)((b0 & 15u) | ((h & 3u) << 4));
        c[4 * k + 1] = (int32_t)((b0 >> 4) | (((h >> 2) & 3u) << 4));
        c[4 * k + 2] = (int32_t)((b1 & 15u) | (((h >> 4) & 3u) << 4));
        c[4 * k + 3] = (int32_t)((b1 >> 4) | ((h >> 6) << 4));
    }
}

/* ---- TurboQuant rotation: the reference's operations, 8 lanes at a time ---------------
 * Stages h = 1, 2, 4 pair lanes inside a register (partner = lane ^ h; the lower lane
 * keeps a + b, the upper b' - a', the scalar butterfly's operands), h = 8..64 pair whole
 * registers. Sign flips XOR the sign bit, as the reference. */
static inline __m256 flip8(__m256 v, uint32_t bits)
{
    const __m256i lanes = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i sel = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)(bits & 0xFFu)), lanes), lanes);
    return _mm256_xor_ps(v, _mm256_and_ps(_mm256_castsi256_ps(sel), _mm256_set1_ps(-0.0f)));
}

static void rht128_avx2(float *x, const uint32_t first[4], const uint32_t last[4])
{
    __m256 v[16];
    for (int k = 0; k < 16; k++) v[k] = flip8(_mm256_loadu_ps(x + 8 * k), first[k >> 2] >> (8 * (k & 3)));
    static const int upper[3] = { 0xAA, 0xCC, 0xF0 };
    for (int s = 0; s < 3; s++) {
        const __m256i idx = _mm256_xor_si256(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(1 << s));
        const __m256i lanes = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        const __m256 up = _mm256_castsi256_ps(
            _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(upper[s]), lanes), lanes));
        for (int k = 0; k < 16; k++) {
            const __m256 p = _mm256_permutevar8x32_ps(v[k], idx);
            v[k] = _mm256_blendv_ps(_mm256_add_ps(v[k], p), _mm256_sub_ps(p, v[k]), up);
        }
    }
    for (int h = 1; h < 16; h <<= 1) { /* 8, 16, 32, 64 values apart */
        for (int i = 0; i < 16; i += 2 * h) {
            for (int j = i; j < i + h; j++) {
                const __m256 a = v[j], b = v[j + h];
                v[j] = _mm256_add_ps(a, b);
                v[j + h] = _mm256_sub_ps(a, b);
            }
        }
    }
    const __m256 sc = _mm256_set1_ps((float)(1.0 / sqrt(128.0)));
    for (int k = 0; k < 16; k++)
        _mm256_storeu_ps(x + 8 * k, flip8(_mm256_mul_ps(v[k], sc), last[k >> 2] >> (8 * (k & 3))));
}

/* ---- f16 ------------------------------------------------------------------------------ */

static void encode_f16_avx2(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) sjk_wr_u16le(y + 2 * i, sjk_f32_to_fp16(src[i]));
}

static void decode_f16_avx2(float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + 2 * i))));
    for (; i < n; i++) dst[i] = sjk_fp16_to_f32(sjk_rd_u16le(x + 2 * i));
}

static float dot_f16_avx2(const float *q, const void *src, size_t n)
{
    const uint8_t *x = src;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + 2 * i)));
        __m256 v1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + 2 * i + 16)));
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), v0, acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), v1, acc1);
    }
    float s = hsum256(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++) s += q[i] * sjk_fp16_to_f32(sjk_rd_u16le(x + 2 * i));
    return s;
}

static void axpy_f16_avx2(float *y, float a, const void *src, size_t n)
{
    const uint8_t *x = src;
    const __m256 va = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + 2 * i)));
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, v, _mm256_loadu_ps(y + i)));
    }
    for (; i < n; i++) y[i] += a * sjk_fp16_to_f32(sjk_rd_u16le(x + 2 * i));
}

/* ---- q8_0 / q4_0 ------------------------------------------------------------------------ */

#define BLOCK_KERNELS(fmt, NB, CODES, QOFF)                                                   \
    static void decode_##fmt##_avx2(float *dst, const void *src, size_t n)                    \
    {                                                                                         \
        const uint8_t *x = src;                                                               \
        for (size_t b = 0; b < n / SJK_QK; b++, x += NB, dst += SJK_QK) {                     \
            const __m256 d = _mm256_set1_ps(blk_scale(x));                                    \
            __m256 c[4];                                                                      \
            CODES(c, x + QOFF);                                                               \
            for (int k = 0; k < 4; k++) _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(c[k], d)); \
        }                                                                                     \
    }                                                                                         \
    static float dot_##fmt##_avx2(const float *q, const void *src, size_t n)                  \
    {                                                                                         \
        const uint8_t *x = src;                                                               \
        __m256 acc = _mm256_setzero_ps();                                                     \
        for (size_t b = 0; b < n / SJK_QK; b++, x += NB, q += SJK_QK) {                       \
            __m256 c[4];                                                                      \
            CODES(c, x + QOFF);                                                               \
            __m256 t = _mm256_mul_ps(_mm256_loadu_ps(q), c[0]);                               \
            t = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8), c[1], t);                             \
            t = _mm256_fmadd_ps(_mm256_loadu_ps(q + 16), c[2], t);                            \
            t = _mm256_fmadd_ps(_mm256_loadu_ps(q + 24), c[3], t);                            \
            acc = _mm256_fmadd_ps(t, _mm256_set1_ps(blk_scale(x)), acc);                      \
        }                                                                                     \
        return hsum256(acc);                                                                  \
    }                                                                                         \
    static void axpy_##fmt##_avx2(float *y, float a, const void *src, size_t n)               \
    {                                                                                         \
        const uint8_t *x = src;                                                               \
        for (size_t b = 0; b < n / SJK_QK; b++, x += NB, y += SJK_QK) {                       \
            const __m256 s = _mm256_set1_ps(a * blk_scale(x));                                \
            __m256 c[4];                                                                      \
            CODES(c, x + QOFF);                                                               \
            for (int k = 0; k < 4; k++)                                                       \
                _mm256_storeu_ps(y + 8 * k, _mm256_fmadd_ps(c[k], s, _mm256_loadu_ps(y + 8 * k))); \
        }                                                                                     \
    }

BLOCK_KERNELS(q8_0, SJK_Q8_0_NBYTES, q8_codes, 2)
BLOCK_KERNELS(q4_0, SJK_Q4_0_NBYTES, q4_codes, 2)

/* ---- tq6_0_stage (rotated basis) --------------------------------------------------------- */

static void decode_tq6_0_stage_gather(float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    int32_t c[SJK_TQ_BLOCK];
    for (size_t b = 0; b < n / SJK_TQ_BLOCK; b++, x += SJK_TQ6_0_NBYTES, dst += SJK_TQ_BLOCK) {
        const __m256 nv = _mm256_set1_ps(blk_scale(x));
        tq6_codes(c, x);
        for (int k = 0; k < SJK_TQ_BLOCK; k += 8) {
            __m256i idx = _mm256_loadu_si256((const __m256i *)(const void *)(c + k));
            __m256 v = _mm256_i32gather_ps(sjk_tq6_centroids, idx, 4);
            _mm256_storeu_ps(dst + k, _mm256_mul_ps(v, nv));
        }
    }
}

static float dot_tq6_0_stage_gather(const float *q, const void *src, size_t n)
{
    const uint8_t *x = src;
    int32_t c[SJK_TQ_BLOCK];
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < n / SJK_TQ_BLOCK; b++, x += SJK_TQ6_0_NBYTES, q += SJK_TQ_BLOCK) {
        tq6_codes(c, x);
        __m256 t = _mm256_setzero_ps();
        for (int k = 0; k < SJK_TQ_BLOCK; k += 8) {
            __m256i idx = _mm256_loadu_si256((const __m256i *)(const void *)(c + k));
            t = _mm256_fmadd_ps(_mm256_loadu_ps(q + k), _mm256_i32gather_ps(sjk_tq6_centroids, idx, 4), t);
        }
        acc = _mm256_fmadd_ps(t, _mm256_set1_ps(blk_scale(x)), acc);
    }
    return hsum256(acc);
}

static void axpy_tq6_0_stage_gather(float *y, float a, const void *src, size_t n)
{
    const uint8_t *x = src;
    int32_t c[SJK_TQ_BLOCK];
    for (size_t b = 0; b < n / SJK_TQ_BLOCK; b++, x += SJK_TQ6_0_NBYTES, y += SJK_TQ_BLOCK) {
        const __m256 s = _mm256_set1_ps(a * blk_scale(x));
        tq6_codes(c, x);
        for (int k = 0; k < SJK_TQ_BLOCK; k += 8) {
            __m256i idx = _mm256_loadu_si256((const __m256i *)(const void *)(c + k));
            __m256 v = _mm256_i32gather_ps(sjk_tq6_centroids, idx, 4);
            _mm256_storeu_ps(y + k, _mm256_fmadd_ps(v, s, _mm256_loadu_ps(y + k)));
        }
    }
}

/* ---- tq6_0_stage (rotated basis) ---------------------------------------------------------
 * Block (docs/FORMAT.md): fp16 norm, qs[64] (byte b: element 2b in the low nibble, 2b+1 in
 * the high one), qh[32] (element e's two high bits at bits 2 (e % 4) of byte e / 4); value
 * = centroid[code] * norm, code = 16 high + nibble.
 *
 * The centroids are symmetric (c[63 - j] = -c[j], the Lloyd-Max points of a symmetric
 * density), so a code is a sign and one of 32 magnitudes M[j] = c[32 + j]:
 *   code >= 32 (high bit 1 set):  +M[code - 32]  = +M[16 (high - 2) + nib]
 *   code <  32:                   -M[31 - code]  = -M[16 (1 - high) + (15 - nib)]
 * and the fp32 bytes of M are four byte planes of two 16-entry tables, each looked up by
 * one vpshufb (the nibble, flipped to 15 - nib for negative codes, indexes both halves;
 * one byte blend picks the half; the sign is OR-ed into the top plane). Two rounds of byte
 * and word unpacks put the planes back together into fp32. Per 32 values: 12 shuffles and
 * 4 blends for the planes, 12 ops to lay out the nibbles and the high bits, 8 unpacks, 4
 * multiplies by the norm: about 1.4 instructions a value, against one 8-lane gather per 8
 * values and a scalar unpack before (0.8 G values/s on the AMD EPYC; bench_formats).
 * Bit-identical to the reference: the same fp32 centroid bytes times the same norm.
 *
 * Lane layout: the 32 codes of a group of elements 32 g.. are held with 128-bit lane L,
 * byte 4 m + i = element 8 m + 4 L + i, so that the unpacks leave register m = elements
 * 8 m .. 8 m + 7 in order. tq6_planes_ok is 0 if the table is not symmetric (it is a
 * format constant; the gather path then stays in use). */
typedef struct tq6_planes {
    uint8_t lo[4][16], hi[4][16]; /* byte k of M[j] (lo: j < 16, hi: 16 + j) */
    int ok;
} tq6_planes;

static tq6_planes g_tq6_planes;
static pthread_once_t g_tq6_once = PTHREAD_ONCE_INIT;

static void tq6_planes_build(void)
{
    tq6_planes *p = &g_tq6_planes;
    p->ok = 1;
    for (int j = 0; j < 32; j++) {
        uint32_t m, n;
        memcpy(&m, sjk_tq6_centroids + 32 + j, 4);
        memcpy(&n, sjk_tq6_centroids + 31 - j, 4);
        if ((m >> 31) != 0 || n != (m | 0x80000000u)) p->ok = 0;
        for (int k = 0; k < 4; k++) {
            if (j < 16) p->lo[k][j] = (uint8_t)(m >> (8 * k));
            else p->hi[k][j - 16] = (uint8_t)(m >> (8 * k));
        }
    }
}

static const tq6_planes *tq6_planes_get(void)
{
    pthread_once(&g_tq6_once, tq6_planes_build);
    return &g_tq6_planes;
}

typedef struct tq6_lut { __m256i lo[4], hi[4], qs_idx, qh_idx, b1, b2, m4, sgn; } tq6_lut;

static inline tq6_lut tq6_lut_load(const tq6_planes *p)
{
    tq6_lut t;
    for (int k = 0; k < 4; k++) {
        t.lo[k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p->lo[k]));
        t.hi[k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p->hi[k]));
    }
    /* lane L bytes 0..7 <- qs bytes of element dwords 2 m + L (two qs bytes each) */
    t.qs_idx = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                                2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    /* lane L byte 4 m + i <- qh byte 2 m + L */
    t.qh_idx = _mm256_setr_epi8(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6,
                                1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7);
    t.b1 = _mm256_set1_epi32(0x40100401); /* byte i: 1 << 2i, the low high-bit */
    t.b2 = _mm256_set1_epi32((int)0x80200802u); /* byte i: 2 << 2i */
    t.m4 = _mm256_set1_epi8(0x0F);
    t.sgn = _mm256_set1_epi8((char)0x80);
    return t;
}

/* Elements 32 g .. 32 g + 31 of the block at blk, times nv: v0 = elements 32 g .. 32 g + 7,
 * v1 the next 8, and so on (written out, not looped, so that everything stays in registers). */
static inline __attribute__((always_inline)) void tq6_values32(__m256 *v0, __m256 *v1, __m256 *v2, __m256 *v3,
                                                               const tq6_lut *t, const uint8_t *blk, int g, __m256 nv)
{
    const __m256i qs = _mm256_shuffle_epi8(
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(blk + 2 + 16 * g))), t->qs_idx);
    const __m256i nib = _mm256_unpacklo_epi8(_mm256_and_si256(qs, t->m4), _mm256_and_si256(_mm256_srli_epi16(qs, 4), t->m4));
    long long h8;
    memcpy(&h8, blk + 66 + 8 * g, 8);
    const __m256i qh = _mm256_shuffle_epi8(_mm256_set1_epi64x(h8), t->qh_idx);
    const __m256i h0 = _mm256_cmpeq_epi8(_mm256_and_si256(qh, t->b1), t->b1); /* high bit 0 (code bit 4) */
    const __m256i h1 = _mm256_cmpeq_epi8(_mm256_and_si256(qh, t->b2), t->b2); /* high bit 1: code >= 32 */
    const __m256i sel_lo = _mm256_xor_si256(h0, h1);                          /* magnitude index < 16 */
    const __m256i idx = _mm256_xor_si256(nib, _mm256_andnot_si256(h1, t->m4)); /* nib, or 15 - nib */
#define TQ6_PLANE(k) _mm256_blendv_epi8(_mm256_shuffle_epi8(t->hi[k], idx), _mm256_shuffle_epi8(t->lo[k], idx), sel_lo)
    const __m256i p0 = TQ6_PLANE(0), p1 = TQ6_PLANE(1), p2 = TQ6_PLANE(2);
    const __m256i p3 = _mm256_or_si256(TQ6_PLANE(3), _mm256_andnot_si256(h1, t->sgn));
#undef TQ6_PLANE
    const __m256i l01 = _mm256_unpacklo_epi8(p0, p1), h01 = _mm256_unpackhi_epi8(p0, p1);
    const __m256i l23 = _mm256_unpacklo_epi8(p2, p3), h23 = _mm256_unpackhi_epi8(p2, p3);
    *v0 = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(l01, l23)), nv);
    *v1 = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(l01, l23)), nv);
    *v2 = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(h01, h23)), nv);
    *v3 = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(h01, h23)), nv);
}

static void decode_tq6_0_stage_avx2(float *dst, const void *src, size_t n)
{
    const tq6_planes *pl = tq6_planes_get();
    if (!pl->ok) { decode_tq6_0_stage_gather(dst, src, n); return; }
    const tq6_lut t = tq6_lut_load(pl);
    const uint8_t *x = src;
    for (size_t b = 0; b < n / SJK_TQ_BLOCK; b++, x += SJK_TQ6_0_NBYTES, dst += SJK_TQ_BLOCK) {
        const __m256 nv = _mm256_set1_ps(blk_scale(x));
        for (int g = 0; g < 4; g++) {
            __m256 v0, v1, v2, v3;
            tq6_values32(&v0, &v1, &v2, &v3, &t, x, g, nv);
            _mm256_storeu_ps(dst + 32 * g, v0);
            _mm256_storeu_ps(dst + 32 * g + 8, v1);
            _mm256_storeu_ps(dst + 32 * g + 16, v2);
            _mm256_storeu_ps(dst + 32 * g + 24, v3);
        }
    }
}

static float dot_tq6_0_stage_avx2(const float *q, const void *src, size_t n)
{
    const tq6_planes *pl = tq6_planes_get();
    if (!pl->ok) return dot_tq6_0_stage_gather(q, src, n);
    const tq6_lut t = tq6_lut_load(pl);
    const uint8_t *x = src;
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < n / SJK_TQ_BLOCK; b++, x += SJK_TQ6_0_NBYTES, q += SJK_TQ_BLOCK) {
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        for (int g = 0; g < 4; g++) {
            __m256 v0, v1, v2, v3;
            tq6_values32(&v0, &v1, &v2, &v3, &t, x, g, one);
            const float *qg = q + 32 * g;
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(qg), v0, s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(qg + 8), v1, s1);
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(qg + 16), v2, s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(qg + 24), v3, s1);
        }
        acc = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), _mm256_set1_ps(blk_scale(x)), acc);
    }
    return hsum256(acc);
}

static void axpy_tq6_0_stage_avx2(float *y, float a, const void *src, size_t n)
{
    const tq6_planes *pl = tq6_planes_get();
    if (!pl->ok) { axpy_tq6_0_stage_gather(y, a, src, n); return; }
    const tq6_lut t = tq6_lut_load(pl);
    const uint8_t *x = src;
    for (size_t b = 0; b < n / SJK_TQ_BLOCK; b++, x += SJK_TQ6_0_NBYTES, y += SJK_TQ_BLOCK) {
        const __m256 s = _mm256_set1_ps(a * blk_scale(x));
        for (int g = 0; g < 4; g++) {
            __m256 v0, v1, v2, v3;
            tq6_values32(&v0, &v1, &v2, &v3, &t, x, g, s);
            float *yg = y + 32 * g;
            _mm256_storeu_ps(yg, _mm256_add_ps(_mm256_loadu_ps(yg), v0));
            _mm256_storeu_ps(yg + 8, _mm256_add_ps(_mm256_loadu_ps(yg + 8), v1));
            _mm256_storeu_ps(yg + 16, _mm256_add_ps(_mm256_loadu_ps(yg + 16), v2));
            _mm256_storeu_ps(yg + 24, _mm256_add_ps(_mm256_loadu_ps(yg + 24), v3));
        }
    }
}

void sjk_fmt_kernels_init_avx2(sjk_fmt_kernels *k)
{
    k->name = "avx2";
    k->encode_q8_0 = encode_q8_0_avx2;
    k->rht128 = rht128_avx2;
    k->encode_q4_0 = encode_q4_0_avx2;
    /* tq_codes128 stays scalar here: a gather per search step measured slower than the
     * unrolled scalar search; the AVX-512 version reads the table from registers. */
    k->encode_f16 = encode_f16_avx2;
    k->decode_f16 = decode_f16_avx2;
    k->decode_q8_0 = decode_q8_0_avx2;
    k->decode_q4_0 = decode_q4_0_avx2;
    k->decode_tq6_0_stage = decode_tq6_0_stage_avx2;
    k->dot_f16 = dot_f16_avx2;
    k->dot_q8_0 = dot_q8_0_avx2;
    k->dot_q4_0 = dot_q4_0_avx2;
    k->dot_tq6_0_stage = dot_tq6_0_stage_avx2;
    k->axpy_f16 = axpy_f16_avx2;
    k->axpy_q8_0 = axpy_q8_0_avx2;
    k->axpy_q4_0 = axpy_q4_0_avx2;
    k->axpy_tq6_0_stage = axpy_tq6_0_stage_avx2;
}
#else
void sjk_fmt_kernels_init_avx2(sjk_fmt_kernels *k) { (void)k; }
#endif
