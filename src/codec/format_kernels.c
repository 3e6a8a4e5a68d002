/* format_kernels.c — scalar references of the cache kernels (format_kernels.h) and the
 * one-time choice of the dispatched table. */
#include <pthread.h>

#include "codec/format.h"
#include "codec/format_kernels.h"
#include "common/cpu.h"
#include "common/fp16.h"
#include "common/util.h"

/* ---- dot: accumulate in double, the most accurate order, as the yardstick ----------- */

static float dot_f16_ref(const float *q, const void *src, size_t n)
{
    const uint8_t *x = src;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)q[i] * sjk_fp16_to_f32(sjk_rd_u16le(x + 2 * i));
    return (float)s;
}

static float dot_q8_0_ref(const float *q, const void *src, size_t n)
{
    const uint8_t *x = src;
    double s = 0;
    for (size_t b = 0; b < n / SJK_QK; b++, x += SJK_Q8_0_NBYTES, q += SJK_QK) {
        const double d = sjk_fp16_to_f32(sjk_rd_u16le(x));
        double t = 0;
        for (int j = 0; j < SJK_QK; j++) t += (double)q[j] * (int8_t)x[2 + j];
        s += t * d;
    }
    return (float)s;
}

static float dot_q4_0_ref(const float *q, const void *src, size_t n)
{
    const uint8_t *x = src;
    double s = 0;
    for (size_t b = 0; b < n / SJK_QK; b++, x += SJK_Q4_0_NBYTES, q += SJK_QK) {
        const double d = sjk_fp16_to_f32(sjk_rd_u16le(x));
        double t = 0;
        for (int j = 0; j < SJK_QK / 2; j++) {
            t += (double)q[j] * ((x[2 + j] & 0x0F) - 8);
            t += (double)q[j + SJK_QK / 2] * ((x[2 + j] >> 4) - 8);
        }
        s += t * d;
    }
    return (float)s;
}

static float dot_tq6_0_stage_ref(const float *q, const void *src, size_t n)
{
    const uint8_t *x = src;
    double s = 0;
    for (size_t b = 0; b < n / SJK_TQ_BLOCK; b++, x += SJK_TQ6_0_NBYTES, q += SJK_TQ_BLOCK) {
        const double norm = sjk_fp16_to_f32(sjk_rd_u16le(x));
        const uint8_t *qs = x + 2, *qh = x + 66;
        double t = 0;
        for (int j = 0; j < SJK_TQ_BLOCK; j++) {
            const unsigned c = ((qs[j / 2] >> (4 * (j & 1))) & 0x0Fu) | (((qh[j / 4] >> (2 * (j & 3))) & 3u) << 4);
            t += (double)q[j] * sjk_tq6_centroids[c];
        }
        s += t * norm;
    }
    return (float)s;
}

/* ---- axpy: y += a * decode(src), one block at a time through the reference decoders -- */

static void axpy_f16_ref(float *y, float a, const void *src, size_t n)
{
    const uint8_t *x = src;
    for (size_t i = 0; i < n; i++) y[i] += a * sjk_fp16_to_f32(sjk_rd_u16le(x + 2 * i));
}
static void axpy_q8_0_ref(float *y, float a, const void *src, size_t n)
{
    float tmp[SJK_QK];
    const uint8_t *x = src;
    for (size_t i = 0; i < n; i += SJK_QK, x += SJK_Q8_0_NBYTES) {
        sjk_decode_q8_0_ref(tmp, x, SJK_QK);
        for (int j = 0; j < SJK_QK; j++) y[i + j] += a * tmp[j];
    }
}
static void axpy_q4_0_ref(float *y, float a, const void *src, size_t n)
{
    float tmp[SJK_QK];
    const uint8_t *x = src;
    for (size_t i = 0; i < n; i += SJK_QK, x += SJK_Q4_0_NBYTES) {
        sjk_decode_q4_0_ref(tmp, x, SJK_QK);
        for (int j = 0; j < SJK_QK; j++) y[i + j] += a * tmp[j];
    }
}
static void axpy_tq6_0_stage_ref(float *y, float a, const void *src, size_t n)
{
    float tmp[SJK_TQ_BLOCK];
    const uint8_t *x = src;
    for (size_t i = 0; i < n; i += SJK_TQ_BLOCK, x += SJK_TQ6_0_NBYTES) {
        sjk_decode_tq6_0_stage_ref(tmp, x, SJK_TQ_BLOCK);
        for (int j = 0; j < SJK_TQ_BLOCK; j++) y[i + j] += a * tmp[j];
    }
}

static const sjk_fmt_kernels g_ref = {
    "ref",
    sjk_decode_f16_ref, sjk_decode_q8_0_ref, sjk_decode_q4_0_ref, sjk_decode_tq6_0_stage_ref,
    dot_f16_ref, dot_q8_0_ref, dot_q4_0_ref, dot_tq6_0_stage_ref,
    axpy_f16_ref, axpy_q8_0_ref, axpy_q4_0_ref, axpy_tq6_0_stage_ref,
};

static sjk_fmt_kernels g_best; /* written once under g_once, then read-only */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    sjk_fmt_kernels k = g_ref;
    const unsigned f = sjk_cpu_features();
    if (f & SJK_CPU_AVX2) sjk_fmt_kernels_init_avx2(&k);
    if (f & SJK_CPU_AVX512) sjk_fmt_kernels_init_avx512(&k);
    g_best = k;
}

const sjk_fmt_kernels *sjk_fmt_kernels_get(void)
{
    pthread_once(&g_once, choose);
    return &g_best;
}

const sjk_fmt_kernels *sjk_fmt_kernels_ref(void) { return &g_ref; }
