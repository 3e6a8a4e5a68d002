/* ops.h — small vector kernels of the forward pass and the host's attention (fp16 rows
 * against f32 queries), each with a scalar reference and an AVX2/F16C twin
 * (ops_avx2.c) picked once from sjk_cpu_features(). */
#ifndef SJKH_OPS_H
#define SJKH_OPS_H

#include <stddef.h>
#include <stdint.h>

typedef struct sjkh_ops {
    /* sum_i f16(a[i]) * b[i] */
    float (*dot_f16)(const uint16_t *a, const float *b, size_t n);
    /* y[i] += s * f16(x[i]) */
    void (*axpy_f16)(float s, const uint16_t *x, float *y, size_t n);
    /* dst[i] = f16(src[i]), round to nearest even */
    void (*to_f16)(const float *src, uint16_t *dst, size_t n);
    /* out[h] = sum_d f16(k[d]) * q[h*q_stride + d], h < nq <= 16: one read of k for a
     * GQA group of query heads */
    void (*dot_f16_multi)(const uint16_t *k, const float *q, size_t q_stride, size_t nq, size_t n, float *out);
    /* o[h*o_stride + d] += w[h] * f16(v[d]), h < nq <= 16 */
    void (*axpy_f16_multi)(const float *w, const uint16_t *v, float *o, size_t o_stride, size_t nq, size_t n);
    /* Exact-activation matmul tile: y[t*ys + r] = sum_i w[r*n + i] * x[t*n + i] for
     * r < nr <= 4 (w: nr f32 rows of n, contiguous), t < nt (x: nt rows of n). The AVX2
     * version blocks 4 rows x 2 tokens in registers; f32 FMA accumulation, so it agrees
     * with the reference to float rounding. */
    void (*mm_f32_tile)(const float *w, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys);
} sjkh_ops;

const sjkh_ops *sjkh_ops_get(void);

float sjkh_dot_f16_ref(const uint16_t *a, const float *b, size_t n);
void sjkh_axpy_f16_ref(float s, const uint16_t *x, float *y, size_t n);
void sjkh_to_f16_ref(const float *src, uint16_t *dst, size_t n);
void sjkh_dot_f16_multi_ref(const uint16_t *k, const float *q, size_t q_stride, size_t nq, size_t n, float *out);
void sjkh_axpy_f16_multi_ref(const float *w, const uint16_t *v, float *o, size_t o_stride, size_t nq, size_t n);
void sjkh_dot_f16_multi_avx2(const uint16_t *k, const float *q, size_t q_stride, size_t nq, size_t n, float *out);
void sjkh_axpy_f16_multi_avx2(const float *w, const uint16_t *v, float *o, size_t o_stride, size_t nq, size_t n);
float sjkh_dot_f16_avx2(const uint16_t *a, const float *b, size_t n);
void sjkh_axpy_f16_avx2(float s, const uint16_t *x, float *y, size_t n);
void sjkh_to_f16_avx2(const float *src, uint16_t *dst, size_t n);
void sjkh_mm_f32_tile_ref(const float *w, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys);
void sjkh_mm_f32_tile_avx2(const float *w, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys);

#endif
