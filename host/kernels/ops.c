/* ops.c — scalar references of ops.h and the one-time dispatch. */
#include <math.h>
#include <pthread.h>

#include "hcommon.h"
#include "ops.h"
#include "sjkvarn.h"

float sjkh_dot_f16_ref(const uint16_t *a, const float *b, size_t n)
{
    float s = 0;
    for (size_t i = 0; i < n; i++) s += sjkh_f16_to_f32(a[i]) * b[i];
    return s;
}

void sjkh_axpy_f16_ref(float s, const uint16_t *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] += s * sjkh_f16_to_f32(x[i]);
}

void sjkh_to_f16_ref(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = sjkh_f32_to_f16(src[i]);
}

void sjkh_dot_f16_multi_ref(const uint16_t *k, const float *q, size_t q_stride, size_t nq, size_t n, float *out)
{
    for (size_t h = 0; h < nq; h++) out[h] = sjkh_dot_f16_ref(k, q + h * q_stride, n);
}

void sjkh_axpy_f16_multi_ref(const float *w, const uint16_t *v, float *o, size_t o_stride, size_t nq, size_t n)
{
    for (size_t h = 0; h < nq; h++) sjkh_axpy_f16_ref(w[h], v, o + h * o_stride, n);
}

void sjkh_wsum_f16_multi_ref(const float *w, size_t w_stride, const uint16_t *v, size_t v_stride, size_t n_t, float *o,
                             size_t o_stride, size_t nq, size_t n)
{
    for (size_t t = 0; t < n_t; t++) sjkh_axpy_f16_multi_ref(w + t * w_stride, v + t * v_stride, o, o_stride, nq, n);
}

void sjkh_scores_f16_multi_ref(const uint16_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                               size_t nq, size_t n, float *out)
{
    for (size_t t = 0; t < n_t; t++) sjkh_dot_f16_multi_ref(k + t * k_stride, q, q_stride, nq, n, out + t * nq);
}

void sjkh_round_f16_ref(const float *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = sjkh_f16_to_f32(sjkh_f32_to_f16(src[i]));
}

void sjkh_mm_f32_tile_ref(const float *w, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys)
{
    for (size_t t = 0; t < nt; t++)
        for (size_t r = 0; r < nr; r++) {
            float acc = 0;
            for (size_t i = 0; i < n; i++) acc += w[r * n + i] * x[t * n + i];
            y[t * ys + r] = acc;
        }
}

void sjkh_mm_f32_pack_ref(const float *w, size_t nr, size_t n, float *wp)
{
    for (size_t i = 0; i < n; i++)
        for (size_t r = 0; r < SJKH_MM_PANEL; r++) wp[i * SJKH_MM_PANEL + r] = r < nr ? w[r * n + i] : 0.0f;
}

void sjkh_mm_f32_panel_ref(const float *wp, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys)
{
    for (size_t t = 0; t < nt; t++)
        for (size_t r = 0; r < nr; r++) {
            float acc = 0;
            for (size_t i = 0; i < n; i++) acc += wp[i * SJKH_MM_PANEL + r] * x[t * n + i];
            y[t * ys + r] = acc;
        }
}

float sjkh_gelu_ref(float x)
{
    const float c = 0.79788456080286535587989211986876f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(c * x * (1.0f + 0.044715f * x * x)));
}

void sjkh_silu_mul_ref(float *h, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++) h[i] = h[i] / (1.0f + expf(-h[i])) * u[i];
}

void sjkh_gelu_mul_ref(float *h, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++) h[i] = sjkh_gelu_ref(h[i]) * u[i];
}

static uint16_t g_gelu_f16[(1 << 16) + 2]; /* written once under g_gelu_once */
static pthread_once_t g_gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void)
{
    for (uint32_t i = 0; i < (1u << 16); i++)
        g_gelu_f16[i] = sjkh_f32_to_f16(sjkh_gelu_ref(sjkh_f16_to_f32((uint16_t)i)));
}

const uint16_t *sjkh_gelu_f16_table(void)
{
    pthread_once(&g_gelu_once, gelu_table_init);
    return g_gelu_f16;
}

void sjkh_gelu_table_mul_ref(float *h, const float *u, size_t n)
{
    const uint16_t *tab = sjkh_gelu_f16_table();
    for (size_t i = 0; i < n; i++) {
        float x = h[i], y;
        if (x <= -10.0f) y = 0.0f;
        else if (x >= 10.0f) y = x;
        else y = sjkh_f16_to_f32(tab[sjkh_f32_to_f16(x)]);
        h[i] = y * u[i];
    }
}

static sjkh_ops g_ops; /* written once under g_once */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void ops_init(void)
{
    g_ops = (sjkh_ops){
        .dot_f16 = sjkh_dot_f16_ref,
        .axpy_f16 = sjkh_axpy_f16_ref,
        .to_f16 = sjkh_to_f16_ref,
        .dot_f16_multi = sjkh_dot_f16_multi_ref,
        .axpy_f16_multi = sjkh_axpy_f16_multi_ref,
        .scores_f16_multi = sjkh_scores_f16_multi_ref,
        .wsum_f16_multi = sjkh_wsum_f16_multi_ref,
        .scores_q8_0_multi = sjkh_scores_q8_0_multi_ref,
        .wsum_q8_0_multi = sjkh_wsum_q8_0_multi_ref,
        .round_f16 = sjkh_round_f16_ref,
        .mm_f32_tile = sjkh_mm_f32_tile_ref,
        .mm_f32_pack = NULL, /* the reference panel is for tests; the row tile serves */
        .mm_f32_panel = NULL,
        .gelu_mul = sjkh_gelu_mul_ref,
        .silu_mul = sjkh_silu_mul_ref,
        .gelu_table_mul = sjkh_gelu_table_mul_ref,
    };
#if defined(__x86_64__)
    unsigned f = sjk_cpu_features();
    if (f & SJK_CPU_AVX2) {
        g_ops.dot_f16 = sjkh_dot_f16_avx2;
        g_ops.axpy_f16 = sjkh_axpy_f16_avx2;
        g_ops.to_f16 = sjkh_to_f16_avx2;
        g_ops.dot_f16_multi = sjkh_dot_f16_multi_avx2;
        g_ops.axpy_f16_multi = sjkh_axpy_f16_multi_avx2;
        g_ops.scores_f16_multi = sjkh_scores_f16_multi_avx2;
        g_ops.wsum_f16_multi = sjkh_wsum_f16_multi_avx2;
        g_ops.scores_q8_0_multi = sjkh_scores_q8_0_multi_avx2;
        g_ops.wsum_q8_0_multi = sjkh_wsum_q8_0_multi_avx2;
        g_ops.round_f16 = sjkh_round_f16_avx2;
        g_ops.mm_f32_tile = sjkh_mm_f32_tile_avx2;
        g_ops.mm_f32_pack = sjkh_mm_f32_pack_avx2;
        g_ops.mm_f32_panel = sjkh_mm_f32_panel_avx2;
        g_ops.gelu_mul = sjkh_gelu_mul_avx2;
        g_ops.silu_mul = sjkh_silu_mul_avx2;
        g_ops.gelu_table_mul = sjkh_gelu_table_mul_avx2;
    }
    if (f & SJK_CPU_AVX512) { /* implies AVX2; dot_f16, axpy_f16, to_f16 stay AVX2 */
        g_ops.dot_f16_multi = sjkh_dot_f16_multi_avx512;
        g_ops.axpy_f16_multi = sjkh_axpy_f16_multi_avx512;
        g_ops.scores_f16_multi = sjkh_scores_f16_multi_avx512;
        g_ops.wsum_f16_multi = sjkh_wsum_f16_multi_avx512;
        g_ops.scores_q8_0_multi = sjkh_scores_q8_0_multi_avx512;
        g_ops.wsum_q8_0_multi = sjkh_wsum_q8_0_multi_avx512;
        g_ops.round_f16 = sjkh_round_f16_avx512;
        g_ops.mm_f32_tile = sjkh_mm_f32_tile_avx512;
        g_ops.mm_f32_pack = sjkh_mm_f32_pack_avx512;
        g_ops.mm_f32_panel = sjkh_mm_f32_panel_avx512;
        g_ops.gelu_mul = sjkh_gelu_mul_avx512;
        g_ops.silu_mul = sjkh_silu_mul_avx512;
        g_ops.gelu_table_mul = sjkh_gelu_table_mul_avx512;
    }
#endif
}

const sjkh_ops *sjkh_ops_get(void)
{
    pthread_once(&g_once, ops_init);
    return &g_ops;
}
