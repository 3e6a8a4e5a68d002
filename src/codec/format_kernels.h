/* format_kernels.h — the hot kernels over encoded rows that a KV cache needs: decode,
 * dot product with a query row (attention scores) and y += a * row (attention output),
 * for the formats a cache reads most (f16, q8_0, q4_0, tq6_0_stage).
 *
 * Every kernel has a scalar reference (sjk_fmt_kernels_ref()); sjk_fmt_kernels_get()
 * returns the table chosen once per process from sjk_cpu_features() (AVX-512, AVX2 or
 * the references). Tolerances against the reference (tests/test_formats.c):
 *  - encoders, tq_codes128 and decoders: bit-identical (each output is one correctly rounded
 *    conversion or one product of exact operands);
 *  - dot: |simd - ref| <= 1e-5 * sum_i |q_i * x_i| + 1e-30 (summation order differs);
 *  - axpy: bit-identical when the target has no FMA contraction difference; tested with
 *    a relative tolerance of 1e-6.
 * tq6_0_stage values are in the rotated (Hadamard) basis: no inverse rotation is applied.
 * n must be a multiple of the format's block size; buffers must not overlap. Thread-safe,
 * never allocates. */
#ifndef SJK_FORMAT_KERNELS_H
#define SJK_FORMAT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct sjk_fmt_kernels {
    const char *name; /* "ref", "avx2", "avx512" */
    /* dst = fp16 bytes of src[0..n): bit-identical on every path (F16C rounds to nearest
     * even exactly like the reference, NaN payloads included) */
    void (*encode_f16)(void *dst, const float *src, size_t n);
    /* llama.cpp's q8_0 / q4_0 bytes: the same rounding steps lane by lane (blocks that
     * need the non-finite/out-of-range treatment go to the reference), bit-identical */
    void (*encode_q8_0)(void *dst, const float *src, size_t n);
    void (*encode_q4_0)(void *dst, const float *src, size_t n);
    /* codes[i] = number of mid[k] <= u[i] for 128 values (mid: 2^bits - 1 ascending
     * midpoints, bits 3..6): the TurboQuant ladder; exact, so identical on every path */
    void (*tq_codes128)(uint8_t *codes, const float *u, const float *mid, unsigned bits);
    /* dst[0..n) = decode(src) */
    void (*decode_f16)(float *dst, const void *src, size_t n);
    void (*decode_q8_0)(float *dst, const void *src, size_t n);
    void (*decode_q4_0)(float *dst, const void *src, size_t n);
    void (*decode_tq6_0_stage)(float *dst, const void *src, size_t n);
    /* returns sum_i q[i] * decode(src)[i] */
    float (*dot_f16)(const float *q, const void *src, size_t n);
    float (*dot_q8_0)(const float *q, const void *src, size_t n);
    float (*dot_q4_0)(const float *q, const void *src, size_t n);
    float (*dot_tq6_0_stage)(const float *q, const void *src, size_t n);
    /* y[i] += a * decode(src)[i] */
    void (*axpy_f16)(float *y, float a, const void *src, size_t n);
    void (*axpy_q8_0)(float *y, float a, const void *src, size_t n);
    void (*axpy_q4_0)(float *y, float a, const void *src, size_t n);
    void (*axpy_tq6_0_stage)(float *y, float a, const void *src, size_t n);
} sjk_fmt_kernels;

/* The dispatched table (initialised once, thread-safely). */
const sjk_fmt_kernels *sjk_fmt_kernels_get(void);
/* The scalar references. */
const sjk_fmt_kernels *sjk_fmt_kernels_ref(void);

/* Overrides the entries an instruction set implements (src/arch/format_kernels_*.c). */
void sjk_fmt_kernels_init_avx2(sjk_fmt_kernels *k);
void sjk_fmt_kernels_init_avx512(sjk_fmt_kernels *k);

#endif
