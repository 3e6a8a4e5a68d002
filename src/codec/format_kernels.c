/* format_kernels.c — scalar references of the cache kernels (format_kernels.h), the
 * one-time choice of the dispatched table, and the format entry points that go through
 * it (sjk_encode_f16, sjk_decode_q8_0, ...). Below it the scalar formats (format_ggml.c,
 * format_turbo_blocks.c) and the SIMD tables (format_kernels_avx*.c); above it the
 * TurboQuant encoders (format_turbo.c). */
#include <pthread.h>
#include <string.h>

#include "codec/format.h"
#include "codec/format_kernels.h"
#include "codec/hadamard.h"
#include "common/cpu.h"
#include "common/fp16.h"
#include "common/util.h"

/* ---- TurboQuant rotation ------------------------------------------------------------ */

/* Flips the sign bit of x[e] where the mask bit is set (branch-free: the masks are
 * random, so a branch would mispredict half the time). */
static void apply_signs(float *x, const uint32_t s[4])
{
    uint32_t u[SJK_TQ_BLOCK];
    memcpy(u, x, sizeof u);
    for (int e = 0; e < SJK_TQ_BLOCK; e++) u[e] ^= ((s[e >> 5] >> (e & 31)) & 1u) << 31;
    memcpy(x, u, sizeof u);
}

static void rht128_ref(float *x, const uint32_t first[4], const uint32_t last[4])
{
    apply_signs(x, first);
    sjk_hadamard_block_ref(x, SJK_TQ_BLOCK);
    apply_signs(x, last);
}

/* ---- TurboQuant ladder: branchless binary search over the sorted midpoints --------- */

/* One step of the branch-free search: take the upper half when mid[c + s - 1] <= r. */
#define TQ_STEP(s) c += (s) & (0u - (unsigned)(mid[c + (s) - 1] <= r))

static void tq_codes6(uint8_t *codes, const float *u, const float *mid)
{
    for (int i = 0; i < SJK_TQ_BLOCK; i++) {
        const float r = u[i];
        unsigned c = 0;
        TQ_STEP(32); TQ_STEP(16); TQ_STEP(8); TQ_STEP(4); TQ_STEP(2); TQ_STEP(1);
        codes[i] = (uint8_t)c;
    }
}
static void tq_codes5(uint8_t *codes, const float *u, const float *mid)
{
    for (int i = 0; i < SJK_TQ_BLOCK; i++) {
        const float r = u[i];
        unsigned c = 0;
        TQ_STEP(16); TQ_STEP(8); TQ_STEP(4); TQ_STEP(2); TQ_STEP(1);
        codes[i] = (uint8_t)c;
    }
}
static void tq_codes4(uint8_t *codes, const float *u, const float *mid)
{
    for (int i = 0; i < SJK_TQ_BLOCK; i++) {
        const float r = u[i];
        unsigned c = 0;
        TQ_STEP(8); TQ_STEP(4); TQ_STEP(2); TQ_STEP(1);
        codes[i] = (uint8_t)c;
    }
}
static void tq_codes3(uint8_t *codes, const float *u, const float *mid)
{
    for (int i = 0; i < SJK_TQ_BLOCK; i++) {
        const float r = u[i];
        unsigned c = 0;
        TQ_STEP(4); TQ_STEP(2); TQ_STEP(1);
        codes[i] = (uint8_t)c;
    }
}
#undef TQ_STEP

static void tq_codes128_ref(uint8_t *codes, const float *u, const float *mid, unsigned bits)
{
    switch (bits) {
    case 6: tq_codes6(codes, u, mid); break;
    case 5: tq_codes5(codes, u, mid); break;
    case 4: tq_codes4(codes, u, mid); break;
    default: tq_codes3(codes, u, mid); break;
    }
}

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
/* y += a * decode(src) for n values in blocks of blk values of nbytes bytes each. */
static void axpy_blocks(float *y, float a, const void *src, size_t n,
                        void (*decode)(float *, const void *, size_t), size_t blk, size_t nbytes)
{
    float tmp[SJK_TQ_BLOCK]; /* the largest block */
    const uint8_t *x = src;
    for (size_t i = 0; i < n; i += blk, x += nbytes) {
        decode(tmp, x, blk);
        for (size_t j = 0; j < blk; j++) y[i + j] += a * tmp[j];
    }
}
_Static_assert(SJK_QK <= SJK_TQ_BLOCK, "axpy_blocks' scratch holds any block");
static void axpy_q8_0_ref(float *y, float a, const void *src, size_t n)
{
    axpy_blocks(y, a, src, n, sjk_decode_q8_0_ref, SJK_QK, SJK_Q8_0_NBYTES);
}
static void axpy_q4_0_ref(float *y, float a, const void *src, size_t n)
{
    axpy_blocks(y, a, src, n, sjk_decode_q4_0_ref, SJK_QK, SJK_Q4_0_NBYTES);
}
static void axpy_tq6_0_stage_ref(float *y, float a, const void *src, size_t n)
{
    axpy_blocks(y, a, src, n, sjk_decode_tq6_0_stage_ref, SJK_TQ_BLOCK, SJK_TQ6_0_NBYTES);
}

static const sjk_fmt_kernels g_ref = {
    .name = "ref",
    .encode_f16 = sjk_encode_f16_ref,
    .encode_q8_0 = sjk_encode_q8_0_ref,
    .encode_q4_0 = sjk_encode_q4_0_ref,
    .rht128 = rht128_ref,
    .tq_codes128 = tq_codes128_ref,
    .decode_f16 = sjk_decode_f16_ref,
    .decode_q8_0 = sjk_decode_q8_0_ref,
    .decode_q4_0 = sjk_decode_q4_0_ref,
    .decode_tq6_0_stage = sjk_decode_tq6_0_stage_ref,
    .dot_f16 = dot_f16_ref,
    .dot_q8_0 = dot_q8_0_ref,
    .dot_q4_0 = dot_q4_0_ref,
    .dot_tq6_0_stage = dot_tq6_0_stage_ref,
    .axpy_f16 = axpy_f16_ref,
    .axpy_q8_0 = axpy_q8_0_ref,
    .axpy_q4_0 = axpy_q4_0_ref,
    .axpy_tq6_0_stage = axpy_tq6_0_stage_ref,
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

/* ---- the dispatched format entry points (format.h) ----------------------------------- */

void sjk_encode_f16(void *dst, const float *src, size_t n) { sjk_fmt_kernels_get()->encode_f16(dst, src, n); }
void sjk_decode_f16(float *dst, const void *src, size_t n) { sjk_fmt_kernels_get()->decode_f16(dst, src, n); }
void sjk_encode_q8_0(void *dst, const float *src, size_t n) { sjk_fmt_kernels_get()->encode_q8_0(dst, src, n); }
void sjk_decode_q8_0(float *dst, const void *src, size_t n) { sjk_fmt_kernels_get()->decode_q8_0(dst, src, n); }
void sjk_encode_q4_0(void *dst, const float *src, size_t n) { sjk_fmt_kernels_get()->encode_q4_0(dst, src, n); }
void sjk_decode_q4_0(float *dst, const void *src, size_t n) { sjk_fmt_kernels_get()->decode_q4_0(dst, src, n); }
