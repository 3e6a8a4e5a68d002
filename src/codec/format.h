/* format.h — internal entry points of the value formats (see "Value formats" in
 * include/sjkvarn.h and docs/FORMAT.md "## Value formats").
 *
 * Every format has one encode and one decode with the signatures of sjk_format_info;
 * format_traits.c lists them in the one table that drives everything else. The
 * functions here trust their arguments (n a multiple of the block size, buffers large
 * enough); the checked public wrappers are sjk_format_encode_row/decode_row.
 *
 * Non-finite inputs: the quantized formats never store NaN or Inf. A block that holds a
 * NaN or Inf, or whose llama.cpp scale would overflow fp16, is re-encoded from a
 * sanitised copy (NaN -> 0, values clamped to the format's sjk_fmt_clamp_limit). Blocks
 * without such values take the plain path and are byte-identical to llama.cpp.
 */
#ifndef SJK_FORMAT_H
#define SJK_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "sjkvarn.h"

/* ---- ggml block formats (format_ggml.c) -------------------------------------------- */
#define SJK_QK 32 /* values per ggml block */

#define SJK_Q8_0_NBYTES 34
#define SJK_Q5_1_NBYTES 24
#define SJK_Q5_0_NBYTES 22
#define SJK_Q4_1_NBYTES 20
#define SJK_Q4_0_NBYTES 18

void sjk_encode_f32(void *dst, const float *src, size_t n);
void sjk_decode_f32(float *dst, const void *src, size_t n);
void sjk_encode_f16(void *dst, const float *src, size_t n);
void sjk_decode_f16(float *dst, const void *src, size_t n);
void sjk_encode_bf16(void *dst, const float *src, size_t n);
void sjk_decode_bf16(float *dst, const void *src, size_t n);
void sjk_encode_q8_0(void *dst, const float *src, size_t n);
void sjk_decode_q8_0(float *dst, const void *src, size_t n);
void sjk_encode_q5_1(void *dst, const float *src, size_t n);
void sjk_decode_q5_1(float *dst, const void *src, size_t n);
void sjk_encode_q5_0(void *dst, const float *src, size_t n);
void sjk_decode_q5_0(float *dst, const void *src, size_t n);
void sjk_encode_q4_1(void *dst, const float *src, size_t n);
void sjk_decode_q4_1(float *dst, const void *src, size_t n);
void sjk_encode_q4_0(void *dst, const float *src, size_t n);
void sjk_decode_q4_0(float *dst, const void *src, size_t n);

/* f16, q8_0 and q4_0 above go through the dispatched kernels (format_kernels.c); these
 * are their scalar references (format_ggml.c; encoders give identical bytes on every
 * path). */
void sjk_encode_f16_ref(void *dst, const float *src, size_t n);
void sjk_encode_q8_0_ref(void *dst, const float *src, size_t n);
void sjk_encode_q4_0_ref(void *dst, const float *src, size_t n);
void sjk_decode_f16_ref(float *dst, const void *src, size_t n);
void sjk_decode_q8_0_ref(float *dst, const void *src, size_t n);
void sjk_decode_q4_0_ref(float *dst, const void *src, size_t n);

/* ---- TurboQuant family (format_turbo.c), 128-value blocks -------------------------- */
#define SJK_TQ_BLOCK 128
#define SJK_TQ6_0_NBYTES 98
#define SJK_TQ5_0_NBYTES 82
#define SJK_TURBO4_NBYTES 66
#define SJK_TURBO3_NBYTES 50

void sjk_encode_tq6_0(void *dst, const float *src, size_t n);
void sjk_decode_tq6_0(float *dst, const void *src, size_t n);
void sjk_encode_tq5_0(void *dst, const float *src, size_t n);
void sjk_decode_tq5_0(float *dst, const void *src, size_t n);
void sjk_encode_turbo4(void *dst, const float *src, size_t n);
void sjk_decode_turbo4(float *dst, const void *src, size_t n);
void sjk_encode_turbo3(void *dst, const float *src, size_t n);
void sjk_decode_turbo3(float *dst, const void *src, size_t n);
void sjk_encode_tq6_0_stage(void *dst, const float *src, size_t n);
void sjk_decode_tq6_0_stage(float *dst, const void *src, size_t n);
void sjk_decode_tq6_0_stage_ref(float *dst, const void *src, size_t n); /* format_turbo_blocks.c */

/* The signed 128-point rotation of the TurboQuant formats (RHT, docs/BACKGROUND.md, "TurboQuant formats"):
 * forward y = D2 H D1 x / sqrt(128), inverse x = D1 H D2 y / sqrt(128), in place on one
 * block of 128 values. Attention rotates the query with the forward transform when K is a
 * turbo format, and un-rotates its output with the inverse when V is. */
void sjk_rht128_forward(float *x);
void sjk_rht128_inverse(float *x);

/* Decode turbo blocks into the rotated domain (c[code] * norm, no inverse RHT): what
 * attention reads. For tq6_0_stage this is the same as its plain decode. */
void sjk_turbo_decode_rotated(sjk_format f, float *dst, const void *src, size_t n);

/* ---- tables (format_turbo_tables.c) ----------------------------------------------- */
extern const uint32_t sjk_rht_signs1[4];
extern const uint32_t sjk_rht_signs2[4];
/* Full sorted codebooks (2^bits entries, ascending) and their 2^bits - 1 midpoints. */
extern const float sjk_tq6_centroids[64];
extern const float sjk_tq6_midpoints[63];
extern const float sjk_tq5_centroids[32];
extern const float sjk_tq5_midpoints[31];
extern const float sjk_turbo4_centroids[16];
extern const float sjk_turbo4_midpoints[15];
extern const float sjk_turbo3_centroids[8];
extern const float sjk_turbo3_midpoints[7];

#endif
