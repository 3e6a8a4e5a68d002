/* format_kernels_avx512.c — AVX-512 versions of the cache kernels of
 * src/codec/format_kernels.h (compiled with the AVX-512 flags only; reached through
 * sjk_fmt_kernels_get() when sjk_cpu_features() reports SJK_CPU_AVX512). Entries not
 * overridden here keep their AVX2 versions. Decoders are bit-identical to the references;
 * dot products use FMA and a different summation order (format_kernels.h). */
#include "codec/format_kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

#include "codec/format.h"
#include "common/fp16.h"
#include "common/util.h"

static inline float blk_scale(const uint8_t *x) { return sjk_fp16_to_f32(sjk_rd_u16le(x)); }

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

void sjk_fmt_kernels_init_avx512(sjk_fmt_kernels *k)
{
    k->name = "avx512";
    k->decode_f16 = decode_f16_avx512;
    k->decode_q8_0 = decode_q8_0_avx512;
    k->decode_q4_0 = decode_q4_0_avx512;
    k->dot_f16 = dot_f16_avx512;
    k->dot_q8_0 = dot_q8_0_avx512;
    k->dot_q4_0 = dot_q4_0_avx512;
}
#else
void sjk_fmt_kernels_init_avx512(sjk_fmt_kernels *k) { (void)k; }
#endif
