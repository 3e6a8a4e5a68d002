/* format_kernels_table.h — the hot kernels of the value formats, one dispatch table (the
 * contract each instruction set implements; format_kernels.h dispatches):
 *  - for a KV cache's reads of f16, q8_0, q4_0 and tq6_0_stage rows: decode, dot product
 *    with a query row (attention scores) and y += a * row (attention output);
 *  - for its appends: f16, q8_0 and q4_0 encoders, and the TurboQuant rotation and ladder
 *    that every tq / turbo encoder uses.
 *
 * Every kernel has a scalar reference (sjk_fmt_kernels_ref()); sjk_fmt_kernels_get()
 * returns the table chosen once per process from sjk_cpu_features() (AVX-512, AVX2 or
 * the references). Tolerances against the reference (tests/test_formats.c checks every
 * path the CPU has, in one process):
 *  - encoders, rht128, tq_codes128 and decoders: bit-identical (the same IEEE operations
 *    lane by lane, exact comparisons, or one product of exact operands), so encoded bytes
 *    never depend on the dispatch path;
 *  - dot: |simd - ref| <= 1e-5 * sum_i |q_i * x_i| + 1e-30 (FMA, other summation order);
 *  - axpy: |simd - ref| <= 1e-6 * (|y_i| + |a * x_i|) (FMA, a folded into the scale).
 * tq6_0_stage values are in the rotated (Hadamard) basis: no inverse rotation is applied.
 * n must be a multiple of the format's block size; buffers must not overlap. Thread-safe,
 * never allocates. */
#ifndef SJK_FORMAT_KERNELS_TABLE_H
#define SJK_FORMAT_KERNELS_TABLE_H

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
    /* The TurboQuant rotation of one 128-value block, in place: flip the signs named by
     * first (bit e of word e/32), the Walsh-Hadamard butterfly (h = 1, 2, ..., 64, pairs
     * (a, b) -> (a + b, a - b)), times (float)(1/sqrt(128)), flip the signs named by last.
     * The same IEEE operations on every path, so bit-identical. */
    void (*rht128)(float *x, const uint32_t first[4], const uint32_t last[4]);
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

/* Overrides the entries an instruction set implements (src/codec/format_kernels_*.c). */
void sjk_fmt_kernels_init_avx2(sjk_fmt_kernels *k);
void sjk_fmt_kernels_init_avx512(sjk_fmt_kernels *k);

#endif
