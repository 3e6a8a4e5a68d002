/* quants.h — ggml weight block formats, dequantization, activation quantization and the
 * dot-product kernels the matmuls are built from.
 *
 * Numerics follow llama.cpp's CPU backend: a weight row is never expanded to f32 for a
 * matmul; instead the activation row is quantized once to the weight type's "dot type"
 * (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants, F32 for float
 * weights) and dotted with integer arithmetic per block. Each kernel has a scalar `_ref`
 * twin (quants.c); the AVX2 versions (quants_avx2.c) give the same integer sums and so
 * agree with the reference to float rounding (tests/test_host_quants.c: relative 1e-5). */
#ifndef SJKH_QUANTS_H
#define SJKH_QUANTS_H

#include <stddef.h>
#include <stdint.h>

#include "sjkhost.h"

#define QK 32    /* legacy block */
#define QK_K 256 /* K-quant super-block */

typedef struct { uint16_t d; uint8_t qs[16]; } blk_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[16]; } blk_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } blk_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } blk_q5_1;
typedef struct { uint16_t d; int8_t qs[32]; } blk_q8_0;
typedef struct { uint16_t d, s; int8_t qs[32]; } blk_q8_1; /* s = d * sum(qs) */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } blk_q4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } blk_q5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } blk_q6_K;
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } blk_q8_K; /* activations only */

_Static_assert(sizeof(blk_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(blk_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(blk_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(blk_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(blk_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(blk_q8_1) == 36, "q8_1 block");
_Static_assert(sizeof(blk_q4_K) == 144, "q4_K block");
_Static_assert(sizeof(blk_q5_K) == 176, "q5_K block");
_Static_assert(sizeof(blk_q6_K) == 210, "q6_K block");
_Static_assert(sizeof(blk_q8_K) == 292, "q8_K block");

/* Dot of one weight row (n values of its type) with one activation row already quantized
 * to the matching dot type. */
typedef float (*sjkh_vec_dot_fn)(size_t n, const void *w, const void *x);
/* The same for four activation rows x, x + x_stride, ... (bytes): out[0..3]. */
typedef void (*sjkh_vec_dot4_fn)(size_t n, const void *w, const void *x, size_t x_stride, float *out);
/* Rows r < nr of weights (w + r * ws bytes, n values each) against nt activation rows
 * (x + t * xs bytes) in the dot type as sjkh_dotn_prepare leaves it, 1 <= nt <=
 * SJKH_DOTN_MAX_TOK: y[t * ys + r]. Every output is bit-identical to vec_dot of that
 * weight row and the activation row before preparation, whatever nr and nt are, so a
 * batch of rows computes exactly what one row alone does. */
#define SJKH_DOTN_MAX_TOK 8
typedef void (*sjkh_vec_dotn_fn)(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                                 float *y, size_t ys);
/* The activation row of vec_dotn: for the Q8_0 and Q8_1 dot types, n / 32 runs of 32
 * int8 values (Q8_0: stored as q + 128, unsigned), then the n / 32 block scales d as f32,
 * then (Q8_1) the n / 32 block sums s as f32; for Q8_K the row unchanged. Bytes of one
 * prepared row, and the preparation of one quantized row (src, n values) into dst. */
size_t sjkh_dotn_row_nbytes(uint32_t dot_type, size_t n);
void sjkh_dotn_prepare(uint32_t dot_type, const void *src, void *dst, size_t n);
/* Many activation rows against many weight rows (prefill chunks): rows r < nr of weights
 * (w + r * ws bytes, n values each) against nt activation rows in the dot type as
 * sjkh_dotn_prepare leaves them (x + t * xs bytes): y[t * ys + r] = vec_dot_ref of that
 * weight row and the activation row before preparation, bit for bit (mm_k_avx512.c says
 * when that holds; tests/test_host_quants.c checks it). The scalar reference is vec_dot_ref
 * itself. scratch: at least sjkh_mm_many_scratch_nbytes(n) bytes, any alignment, the
 * caller's; nothing is allocated. */
typedef void (*sjkh_mm_many_fn)(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                                float *y, size_t ys, void *scratch);
/* Bytes of packed weights per 32 inputs of a 16-row panel (mm_k_avx512.c). */
#define SJKH_MM_MANY_NBYTES_PER_32 720
size_t sjkh_mm_many_scratch_nbytes(size_t n);
/* Quantizes n activations (a multiple of the dot type's block) into dst. */
typedef void (*sjkh_quantize_fn)(const float *x, void *dst, size_t n);

/* Dequantizes n values (a multiple of the type's block) of one weight row. */
typedef void (*sjkh_dequant_fn)(const void *src, float *dst, size_t n);

/* Per weight type: everything a matmul needs. */
typedef struct sjkh_qtraits {
    uint32_t dot_type;          /* SJKH_TYPE_Q8_0, _Q8_1, _Q8_K or _F32 */
    sjkh_quantize_fn quantize;  /* activation -> dot_type (NULL for F32: use as is) */
    sjkh_vec_dot_fn vec_dot;    /* fastest available */
    sjkh_vec_dot_fn vec_dot_ref;/* scalar reference */
    sjkh_vec_dot4_fn vec_dot4;  /* four activation rows at once, or NULL */
    sjkh_vec_dotn_fn vec_dotn;  /* many weight rows x up to 8 activation rows, bit-identical
                                   to vec_dot (the batched decode step), or NULL */
    sjkh_dequant_fn dequant;    /* SIMD row dequantization, bit-identical to sjkh_dequant_row,
                                   or NULL (use sjkh_dequant_row) */
    sjkh_mm_many_fn mm_many;    /* many tokens x many rows with integer products (prefill),
                                   bit-identical to vec_dot_ref, or NULL */
} sjkh_qtraits;

/* Traits for a compute weight type, or NULL. The fast path is chosen once per process
 * from sjk_cpu_features(). Thread-safe. */
const sjkh_qtraits *sjkh_qtraits_get(uint32_t type);

/* Bytes of n activations in the dot type (n a multiple of its block). */
size_t sjkh_dot_row_nbytes(uint32_t dot_type, size_t n);

/* Expands n activations quantized to a dot type (Q8_0, Q8_1, Q8_K; anything else is
 * copied as f32) back to f32: dst[i] = d * q[i], and for Q8_1 (when gap is not NULL)
 * gap[b] = s - d * sum(q) of every block b (the fp16 rounding of the stored block sum s).
 * A float dot of a dequantized weight row with dst (plus, for Q4_1/Q5_1 weights, the sum
 * over blocks of the weight's min times gap) has the same terms as the integer vec_dot,
 * summed in another order (tests/test_host_quants.c: within 1e-5 of sum |w x|). */
void sjkh_dequant_dot_row(uint32_t dot_type, const void *src, float *dst, float *gap, size_t n);

/* Dequantizes n values (a multiple of the block size) of a compute type. Scalar reference. */
void sjkh_dequant_row(uint32_t type, const void *src, float *dst, size_t n);

/* Scalar references, exposed for the tests and the SIMD files. */
void sjkh_quantize_q8_0_ref(const float *x, void *dst, size_t n);
void sjkh_quantize_q8_1_ref(const float *x, void *dst, size_t n);
void sjkh_quantize_q8_K_ref(const float *x, void *dst, size_t n);
/* Weight quantizers (ggml's reference rounding), for tests and synthetic models. */
void sjkh_quantize_row_ref(uint32_t type, const float *x, void *dst, size_t n);

float sjkh_vec_dot_q4_0_ref(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q4_1_ref(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q5_0_ref(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q5_1_ref(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q8_0_ref(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q4_K_ref(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q5_K_ref(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q6_K_ref(size_t n, const void *w, const void *x);
float sjkh_vec_dot_f32_ref(size_t n, const void *w, const void *x);
float sjkh_vec_dot_f16_ref(size_t n, const void *w, const void *x);
float sjkh_vec_dot_bf16_ref(size_t n, const void *w, const void *x);

/* AVX2/FMA versions (quants_avx2.c); only call when sjk_cpu_features() has SJK_CPU_AVX2. */
void sjkh_quantize_q8_0_avx2(const float *x, void *dst, size_t n);
void sjkh_quantize_q8_1_avx2(const float *x, void *dst, size_t n);
void sjkh_vec_dot4_q4_0_avx2(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q4_1_avx2(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q5_0_avx2(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q5_1_avx2(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q8_0_avx2(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q4_K_avx2(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q6_K_avx2(size_t n, const void *w, const void *x, size_t xs, float *out);
float sjkh_vec_dot_q4_0_avx2(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q4_1_avx2(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q5_0_avx2(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q5_1_avx2(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q8_0_avx2(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q4_K_avx2(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q5_K_avx2(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q6_K_avx2(size_t n, const void *w, const void *x);
float sjkh_vec_dot_f32_avx2(size_t n, const void *w, const void *x);
float sjkh_vec_dot_f16_avx2(size_t n, const void *w, const void *x);
float sjkh_vec_dot_bf16_avx2(size_t n, const void *w, const void *x);

/* AVX2 row dequantization for the exact-activation matmul (dequant_avx2.c). */
void sjkh_dequant_q4_0_avx2(const void *src, float *dst, size_t n);
void sjkh_dequant_q4_1_avx2(const void *src, float *dst, size_t n);
void sjkh_dequant_q5_0_avx2(const void *src, float *dst, size_t n);
void sjkh_dequant_q5_1_avx2(const void *src, float *dst, size_t n);
void sjkh_dequant_q8_0_avx2(const void *src, float *dst, size_t n);
void sjkh_dequant_q4_K_avx2(const void *src, float *dst, size_t n);
void sjkh_dequant_q6_K_avx2(const void *src, float *dst, size_t n);

/* AVX512-VNNI versions (quants_avx512.c); only call when sjk_cpu_features() has SJK_CPU_AVX512. */
void sjkh_quantize_q8_0_avx512(const float *x, void *dst, size_t n);
void sjkh_quantize_q8_1_avx512(const float *x, void *dst, size_t n);
void sjkh_quantize_q8_K_avx512(const float *x, void *dst, size_t n);
void sjkh_vec_dot4_q4_0_avx512(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q4_1_avx512(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q5_0_avx512(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q5_1_avx512(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q8_0_avx512(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q4_K_avx512(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dot4_q6_K_avx512(size_t n, const void *w, const void *x, size_t xs, float *out);
void sjkh_vec_dotn_q4_0_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                               float *y, size_t ys);
void sjkh_vec_dotn_q4_1_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                               float *y, size_t ys);
void sjkh_vec_dotn_q5_0_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                               float *y, size_t ys);
void sjkh_vec_dotn_q5_1_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                               float *y, size_t ys);
void sjkh_vec_dotn_q8_0_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                               float *y, size_t ys);
void sjkh_vec_dotn_q4_K_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                               float *y, size_t ys);
void sjkh_vec_dotn_q6_K_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                               float *y, size_t ys);
void sjkh_mm_q4_K_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                         float *y, size_t ys, void *scratch);
void sjkh_mm_q6_K_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                         float *y, size_t ys, void *scratch);
void sjkh_mm_q8_0_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                         float *y, size_t ys, void *scratch);
void sjkh_mm_q5_0_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                         float *y, size_t ys, void *scratch);
float sjkh_vec_dot_q4_0_avx512(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q4_1_avx512(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q5_0_avx512(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q5_1_avx512(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q8_0_avx512(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q4_K_avx512(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q5_K_avx512(size_t n, const void *w, const void *x);
float sjkh_vec_dot_q6_K_avx512(size_t n, const void *w, const void *x);
float sjkh_vec_dot_f32_avx512(size_t n, const void *w, const void *x);
float sjkh_vec_dot_f16_avx512(size_t n, const void *w, const void *x);
float sjkh_vec_dot_bf16_avx512(size_t n, const void *w, const void *x);

/* Decodes the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block. */
static inline void sjkh_k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#endif
