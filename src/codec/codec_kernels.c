/* codec_kernels.c — scalar references of the seal and decode inner loops, and the
 * run-time choice of path. The orders of operations here are the contract the SIMD twins
 * in src/arch/codec_kernels_*.c reproduce bit for bit (codec_kernels.h). */
#include <math.h>
#include <pthread.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#include "codec/codec_kernels.h"
#include "codec/record.h"
#include "common/cpu.h"

static void col_sweep_ref(const float *M, size_t R, size_t C, const float *rs, float *sum, float *sq)
{
    for (size_t j = 0; j < C; j++) sum[j] = 0.0f, sq[j] = 0.0f;
    for (size_t i = 0; i < R; i++) {
        const float *m = M + i * C;
        for (size_t j = 0; j < C; j++) {
            float d = m[j] * rs[i] - M[j] * rs[0];
            sum[j] += d;
            sq[j] += d * d;
        }
    }
}

/* The fixed reduction tree of 16 partial sums. */
static inline float tree16(float p[16])
{
    for (int w = 8; w >= 1; w >>= 1)
        for (int l = 0; l < w; l++) p[l] += p[l + w];
    return p[0];
}

static void row_sweep_ref(const float *M, size_t R, size_t C, const float *cs, float *sum, float *sq)
{
    for (size_t i = 0; i < R; i++) {
        const float *m = M + i * C;
        const float x0 = m[0] * cs[0];
        float p[16] = {0}, q[16] = {0};
        for (size_t j = 0; j < C; j += 16)
            for (int l = 0; l < 16; l++) {
                float d = m[j + l] * cs[j + l] - x0;
                p[l] += d;
                q[l] += d * d;
            }
        sum[i] = tree16(p);
        sq[i] = tree16(q);
    }
}

static void scale_row_ref(const float *m, size_t n, float ir, const float *ic, float *b)
{
    for (size_t j = 0; j < n; j++) b[j] = (m[j] * ic[j]) * ir;
}

static void rtn_row_ref(const float *m, size_t n, float ir, const float *ic, unsigned qmax,
                        uint8_t *codes, float *lo_out, float *step_out)
{
    float lo = (m[0] * ic[0]) * ir, hi = lo;
    for (size_t j = 1; j < n; j++) {
        float b = (m[j] * ic[j]) * ir;
        lo = b < lo ? b : lo;
        hi = b > hi ? b : hi;
    }
    lo += 0.0f; /* -0 -> +0: every path stores the same bytes */
    float step = (hi - lo) / (float)qmax;
    if (!(step >= 1e-10f)) step = 1e-10f;
    const float fq = (float)qmax;
    for (size_t j = 0; j < n; j++) {
        float b = (m[j] * ic[j]) * ir;
        float q = rintf((b - lo) / step);
        q = q < 0.0f ? 0.0f : (q > fq ? fq : q);
        codes[j] = (uint8_t)q;
    }
    *lo_out = lo;
    *step_out = step;
}

static void decode_k16_ref(float *k, size_t D, const uint8_t *payload, size_t row_nbytes,
                           unsigned bits, const float *scale, const float *zero, const float *tok)
{
    for (size_t c = 0; c < 16; c++) {
        const uint8_t *row = payload + c * row_nbytes;
        for (size_t t = 0; t < SJK_GROUP; t++) {
            float q = (float)sjk_payload_get(row, SJK_GROUP, bits, t);
            k[t * D + c] = (q * scale[c] + zero[c]) * tok[t];
        }
    }
}

static void decode_v_row_ref(float *v, size_t n, const uint8_t *row, unsigned bits, float scale,
                             float zero, const float *ch)
{
    for (size_t d = 0; d < n; d++) {
        float q = (float)sjk_payload_get(row, n, bits, d);
        v[d] = (q * scale + zero) * ch[d];
    }
}

const sjk_codec_kernels sjk_codec_kernels_table_ref = {
    "ref", col_sweep_ref, row_sweep_ref, scale_row_ref, rtn_row_ref, decode_k16_ref, decode_v_row_ref,
};

const sjk_codec_kernels *sjk_codec_kernels_ref(void) { return &sjk_codec_kernels_table_ref; }

const sjk_codec_kernels *sjk_codec_kernels_avx2(void)
{
#if defined(__x86_64__)
    return (sjk_cpu_features() & SJK_CPU_AVX2) ? &sjk_codec_kernels_table_avx2 : NULL;
#else
    return NULL;
#endif
}

const sjk_codec_kernels *sjk_codec_kernels_avx512(void)
{
#if defined(__x86_64__)
    return (sjk_cpu_features() & SJK_CPU_AVX512) ? &sjk_codec_kernels_table_avx512 : NULL;
#else
    return NULL;
#endif
}

static const sjk_codec_kernels *g_kern; /* set once under g_once, then read-only */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const sjk_codec_kernels *k = sjk_codec_kernels_avx512();
    if (!k) k = sjk_codec_kernels_avx2();
    g_kern = k ? k : &sjk_codec_kernels_table_ref;
}

const sjk_codec_kernels *sjk_codec_kernels_get(void)
{
    pthread_once(&g_once, choose);
    return g_kern;
}
