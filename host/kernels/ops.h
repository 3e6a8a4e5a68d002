/* ops.h — small vector kernels of the forward pass and the host's attention (fp16 rows
 * against f32 queries), each with a scalar reference and AVX2/F16C (ops_avx2.c) and
 * AVX-512 (ops_avx512.c) twins picked once from sjk_cpu_features(). */
#ifndef SJKH_OPS_H
#define SJKH_OPS_H

#include <stddef.h>
#include <stdint.h>

/* Output rows of one packed weight panel (mm_f32_pack / mm_f32_panel). */
#define SJKH_MM_PANEL 32

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
    /* out[t*nq + h] = sum_d f16(k[t*k_stride + d]) * q[h*q_stride + d] for t < n_t: the
     * same numbers as n_t calls of dot_f16_multi (bit for bit in each ISA), h < nq <= 16 */
    void (*scores_f16_multi)(const uint16_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride, size_t nq,
                             size_t n, float *out);
    /* o[h*o_stride + d] += sum_t w[t*w_stride + h] * f16(v[t*v_stride + d]) for t < n_t,
     * h < nq <= 16, d < n, each sum taken in order of t: the same numbers as n_t calls of
     * axpy_f16_multi (bit for bit in each ISA), in one pass that keeps o in registers */
    void (*wsum_f16_multi)(const float *w, size_t w_stride, const uint16_t *v, size_t v_stride, size_t n_t, float *o,
                           size_t o_stride, size_t nq, size_t n);
    /* The same two for q8_0 rows (ggml blocks of 32: fp16 scale + 32 int8; ops_q8.c),
     * the sliding-window cache's --window q8_0 storage: k_stride / v_stride in bytes, n a
     * multiple of 32, nq <= 16. Values are dequantized exactly (d * qs in f32), so the
     * SIMD versions differ from the references only in summation order and FMA: within
     * 1e-5 * sum |k q| (scores) and 1e-5 * sum |w v| (+ |o|) (weighted sums) in
     * tests/test_host_ops.c. */
    void (*scores_q8_0_multi)(const uint8_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                              size_t nq, size_t n, float *out);
    void (*wsum_q8_0_multi)(const float *w, size_t w_stride, const uint8_t *v, size_t v_stride, size_t n_t, float *o,
                            size_t o_stride, size_t nq, size_t n);
    /* dst[i] = f32(f16(src[i])), round to nearest even (dst may be src) */
    void (*round_f16)(const float *src, float *dst, size_t n);
    /* Exact-activation matmul tile: y[t*ys + r] = sum_i w[r*n + i] * x[t*n + i] for
     * r < nr <= 4 (w: nr f32 rows of n, contiguous), t < nt (x: nt rows of n). The AVX2
     * version blocks 4 rows x 2 tokens in registers; f32 FMA accumulation, so it agrees
     * with the reference to float rounding. */
    void (*mm_f32_tile)(const float *w, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys);
    /* Packed form of the same product, for many tokens (prefill); NULL where the ISA has
     * no panel kernel (then mm_f32_tile serves; the reference table, whose panel is for
     * tests). mm_f32_pack lays nr <= SJKH_MM_PANEL rows of n (w, contiguous) out column
     * by column, zeros past nr (bit-identical in every version):
     *   wp [n][SJKH_MM_PANEL]:  wp[i*SJKH_MM_PANEL + r] = w[r*n + i]
     * mm_f32_panel: y[t*ys + r] = sum_i wp[i*SJKH_MM_PANEL + r] * x[t*n + i] for r < nr,
     * t < nt, each sum accumulated in order of i (with FMA in the SIMD versions). */
    void (*mm_f32_pack)(const float *w, size_t nr, size_t n, float *wp);
    void (*mm_f32_panel)(const float *wp, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys);
    /* h[i] = gelu(h[i]) * u[i], GELU in its tanh form (sjkh_gelu_ref). The SIMD
     * versions (AVX2, AVX-512) compute x / (1 + exp(-2 tanh_arg)) with its own exp; it stays within
     * 1e-7 |x| + 1e-6 |gelu x| of the libm form (tests/test_host_ops.c). */
    void (*gelu_mul)(float *h, const float *u, size_t n);
    /* h[i] = silu(h[i]) * u[i] = h[i] / (1 + e^-h[i]) * u[i] (the SwiGLU gate of llama and
     * qwen2). The SIMD versions use their own exp (the one of gelu_mul) and stay within
     * 2e-7 |x u| + 1e-6 |silu(x) u| of the libm form (tests/test_host_ops.c); a NaN stays
     * NaN, and an exponent past 88 gives the limit (x, or -0 times u) where libm's e^-x
     * overflows. */
    void (*silu_mul)(float *h, const float *u, size_t n);
    /* h[i] = g(h[i]) * u[i] with GELU as ggml's CPU backend computes it: g(x) = 0 for
     * x <= -10, x for x >= 10, else f32(table[f16(x)]) (sjkh_gelu_f16_table; f16 rounding
     * to nearest even). The SIMD versions (F16C conversions, an 8- or 16-lane gather) are
     * bit-identical to the reference for every non-NaN input (tests/test_host_ops.c). */
    void (*gelu_table_mul)(float *h, const float *u, size_t n);
} sjkh_ops;

/* f16(gelu(f16 x)) for every f16 bit pattern x (sjkh_gelu_ref in f32), 65536 entries and
 * two zero pads (the AVX-512 gather reads 32 bits at each entry). Built once,
 * thread-safe, read-only after. */
const uint16_t *sjkh_gelu_f16_table(void);

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) with libm's tanhf */
float sjkh_gelu_ref(float x);

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
void sjkh_mm_f32_pack_avx2(const float *w, size_t nr, size_t n, float *wp);
void sjkh_mm_f32_panel_avx2(const float *wp, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys);
void sjkh_silu_mul_avx2(float *h, const float *u, size_t n);
void sjkh_gelu_mul_avx2(float *h, const float *u, size_t n);
void sjkh_gelu_table_mul_avx2(float *h, const float *u, size_t n);
void sjkh_mm_f32_pack_ref(const float *w, size_t nr, size_t n, float *wp);
void sjkh_mm_f32_panel_ref(const float *wp, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys);
void sjkh_gelu_mul_ref(float *h, const float *u, size_t n);
void sjkh_silu_mul_ref(float *h, const float *u, size_t n);
void sjkh_silu_mul_avx512(float *h, const float *u, size_t n);
void sjkh_gelu_table_mul_ref(float *h, const float *u, size_t n);
void sjkh_wsum_f16_multi_ref(const float *w, size_t w_stride, const uint16_t *v, size_t v_stride, size_t n_t, float *o,
                             size_t o_stride, size_t nq, size_t n);
void sjkh_wsum_f16_multi_avx2(const float *w, size_t w_stride, const uint16_t *v, size_t v_stride, size_t n_t,
                              float *o, size_t o_stride, size_t nq, size_t n);
void sjkh_wsum_f16_multi_avx512(const float *w, size_t w_stride, const uint16_t *v, size_t v_stride, size_t n_t,
                                float *o, size_t o_stride, size_t nq, size_t n);
void sjkh_scores_f16_multi_ref(const uint16_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                               size_t nq, size_t n, float *out);
void sjkh_scores_f16_multi_avx2(const uint16_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                                size_t nq, size_t n, float *out);
void sjkh_scores_f16_multi_avx512(const uint16_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                                  size_t nq, size_t n, float *out);
void sjkh_scores_q8_0_multi_ref(const uint8_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                                size_t nq, size_t n, float *out);
void sjkh_scores_q8_0_multi_avx2(const uint8_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                                 size_t nq, size_t n, float *out);
void sjkh_scores_q8_0_multi_avx512(const uint8_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                                   size_t nq, size_t n, float *out);
void sjkh_wsum_q8_0_multi_ref(const float *w, size_t w_stride, const uint8_t *v, size_t v_stride, size_t n_t,
                              float *o, size_t o_stride, size_t nq, size_t n);
void sjkh_wsum_q8_0_multi_avx2(const float *w, size_t w_stride, const uint8_t *v, size_t v_stride, size_t n_t,
                               float *o, size_t o_stride, size_t nq, size_t n);
void sjkh_wsum_q8_0_multi_avx512(const float *w, size_t w_stride, const uint8_t *v, size_t v_stride, size_t n_t,
                                 float *o, size_t o_stride, size_t nq, size_t n);
void sjkh_round_f16_ref(const float *src, float *dst, size_t n);
void sjkh_round_f16_avx2(const float *src, float *dst, size_t n);
void sjkh_round_f16_avx512(const float *src, float *dst, size_t n);
void sjkh_gelu_mul_avx512(float *h, const float *u, size_t n);
void sjkh_gelu_table_mul_avx512(float *h, const float *u, size_t n);
void sjkh_dot_f16_multi_avx512(const uint16_t *k, const float *q, size_t q_stride, size_t nq, size_t n, float *out);
void sjkh_axpy_f16_multi_avx512(const float *w, const uint16_t *v, float *o, size_t o_stride, size_t nq, size_t n);
void sjkh_mm_f32_tile_avx512(const float *w, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys);
void sjkh_mm_f32_pack_avx512(const float *w, size_t nr, size_t n, float *wp);
void sjkh_mm_f32_panel_avx512(const float *wp, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys);

#endif
