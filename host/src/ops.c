/* ops.c — scalar references of ops.h and the one-time dispatch. */
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

void sjkh_mm_f32_tile_ref(const float *w, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys)
{
    for (size_t t = 0; t < nt; t++)
        for (size_t r = 0; r < nr; r++) {
            float acc = 0;
            for (size_t i = 0; i < n; i++) acc += w[r * n + i] * x[t * n + i];
            y[t * ys + r] = acc;
        }
}

static sjkh_ops g_ops; /* written once under g_once */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void ops_init(void)
{
    g_ops = (sjkh_ops){sjkh_dot_f16_ref, sjkh_axpy_f16_ref, sjkh_to_f16_ref, sjkh_dot_f16_multi_ref,
                       sjkh_axpy_f16_multi_ref, sjkh_mm_f32_tile_ref};
#if defined(__x86_64__)
    if (sjk_cpu_features() & SJK_CPU_AVX2)
        g_ops = (sjkh_ops){sjkh_dot_f16_avx2, sjkh_axpy_f16_avx2, sjkh_to_f16_avx2, sjkh_dot_f16_multi_avx2,
                           sjkh_axpy_f16_multi_avx2, sjkh_mm_f32_tile_avx2};
#endif
}

const sjkh_ops *sjkh_ops_get(void)
{
    pthread_once(&g_once, ops_init);
    return &g_ops;
}
