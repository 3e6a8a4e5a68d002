/* format_ggml.c — llama.cpp's KV-cache value formats, byte-identical to its scalar
 * reference quantizers (ggml-quants.c *_ref; rules restated in
 * docs/BACKGROUND.md, "ggml block formats").
 *
 * Block layouts (32 values per block, little-endian, d and m are IEEE binary16):
 *
 *   q8_0  34 B  | d | qs[32] int8                      x = qs[j] * d
 *   q5_1  24 B  | d | m | qh u32 | qs[16]              x = q * d + m
 *   q5_0  22 B  | d | qh u32 | qs[16]                  x = (q - 16) * d
 *   q4_1  20 B  | d | m | qs[16]                       x = q * d + m
 *   q4_0  18 B  | d | qs[16]                           x = (q - 8) * d
 *
 *   qs[j] (j < 16): low nibble = element j, high nibble = element j + 16;
 *   q5_x: bit 4 of element j is bit j of qh.
 *
 * The rules that make the bytes identical (each one observable in the golden vectors):
 *  - codes are computed with the *unrounded* fp32 scale (and its fp32 reciprocal); the
 *    stored scale is that scale rounded to fp16 (RNE); decode uses the stored one;
 *  - q4_0/q5_0 keep the signed value of the first element with the largest |x| (strict
 *    '<' in the scan) and divide it by -8 / -16;
 *  - q8_0 rounds with roundf (ties away from zero; the host's activation quantizer rounds
 *    ties to even, as llama.cpp's x86 path: docs/DESIGN.md §3, "Two q8_0 quantizers"),
 *    the others truncate x*id + 8.5 / 16.5 / 0.5 toward zero and clamp at 15 / 31
 *    (q5_1: no clamp, as the reference);
 *  - a float that is not representable as an int (only possible when 1/d overflowed for
 *    a block of denormals) converts the way x86-64 does (cvttss2si: 0x80000000), whose low
 *    byte is 0 — the bytes llama.cpp produces on x86-64, without C undefined behaviour.
 *
 * Non-finite input (llama.cpp: undefined): a block that contains NaN or ±Inf, or whose
 * stored scale or minimum would overflow fp16 (values beyond the format's range), is
 * encoded from a sanitised copy: NaN -> 0, values clamped to ±limit, where limit keeps
 * every stored fp16 field finite (q8_0 127*65504, q4_0 8*65504, q5_0 16*65504, q4_1 and
 * q5_1 65504). Such blocks are not byte-identical to llama.cpp (which would store an Inf
 * scale); no NaN or Inf is ever stored by a quantized format. f32/f16/bf16 are IEEE
 * storage: NaN stays NaN (quiet), ±Inf stays ±Inf, f16 overflow rounds to ±Inf.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "codec/format.h"
#include "common/fp16.h"
#include "common/util.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF /* x*id + 8.5f must be two roundings, as in llama.cpp */
#endif

#define LIM_Q8_0 8319008.0f  /* 127 * 65504: d = 65504 exactly */
#define LIM_Q4_0 524032.0f   /*   8 * 65504 */
#define LIM_Q5_0 1048064.0f  /*  16 * 65504 */
#define LIM_Q_1 65504.0f     /* m must stay finite in fp16 */

/* float -> int32 the way x86-64's cvttss2si does: truncation, and 0x80000000 for NaN and
 * out-of-range values. Callers keep only the low bits, like llama.cpp's int8/uint8 casts. */
static inline int32_t trunc_i32(float v)
{
    if (v >= -2147483648.0f && v < 2147483648.0f) return (int32_t)v;
    return INT32_MIN;
}
/* The low byte of v as a signed value: C's (int8_t) cast under two's complement. */
static inline int lowbyte_s8(int32_t v)
{
    int b = (int)((uint32_t)v & 0xFFu);
    return b >= 128 ? b - 256 : b;
}
static inline int lowbyte_u8(int32_t v) { return (int)((uint32_t)v & 0xFFu); }

static inline int fp16_finite(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }

/* Copies a block, NaN -> 0, clamped to [-lim, lim]. */
static void sanitize_block(float *dst, const float *src, float lim)
{
    for (int j = 0; j < SJK_QK; j++) {
        float v = src[j];
        if (v != v) v = 0.0f;
        dst[j] = v > lim ? lim : (v < -lim ? -lim : v);
    }
}

/* ---- f32 / f16 / bf16 ----------------------------------------------------------------- */

void sjk_encode_f32(void *dst, const float *src, size_t n) { memcpy(dst, src, n * sizeof(float)); }
void sjk_decode_f32(float *dst, const void *src, size_t n) { memcpy(dst, src, n * sizeof(float)); }

void sjk_encode_f16_ref(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    for (size_t i = 0; i < n; i++) sjk_wr_u16le(y + 2 * i, sjk_f32_to_fp16(src[i]));
}
void sjk_decode_f16_ref(float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    for (size_t i = 0; i < n; i++) dst[i] = sjk_fp16_to_f32(sjk_rd_u16le(x + 2 * i));
}

void sjk_encode_bf16(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    for (size_t i = 0; i < n; i++) sjk_wr_u16le(y + 2 * i, sjk_f32_to_bf16(src[i]));
}
void sjk_decode_bf16(float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    for (size_t i = 0; i < n; i++) dst[i] = sjk_bf16_to_f32(sjk_rd_u16le(x + 2 * i));
}

/* ---- q8_0 --------------------------------------------------------------------------- */

/* Returns 0 (and writes nothing useful) if the block needs the sanitised path. */
static int q8_0_block(uint8_t *y, const float *x)
{
    float amax = 0.0f;
    int bad = 0;
    for (int j = 0; j < SJK_QK; j++) {
        const float a = fabsf(x[j]);
        bad |= !(a <= FLT_MAX);
        amax = amax > a ? amax : a; /* ggml's MAX(amax, fabsf(v)) */
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = sjk_f32_to_fp16(d);
    if (bad || !fp16_finite(dh)) return 0;
    sjk_wr_u16le(y, dh);
    for (int j = 0; j < SJK_QK; j++) {
        const float x0 = x[j] * id;
        y[2 + j] = (uint8_t)lowbyte_u8(trunc_i32(roundf(x0)));
    }
    return 1;
}

void sjk_encode_q8_0_ref(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    for (size_t b = 0; b < n / SJK_QK; b++, y += SJK_Q8_0_NBYTES, src += SJK_QK) {
        if (!q8_0_block(y, src)) {
            float tmp[SJK_QK];
            sanitize_block(tmp, src, LIM_Q8_0);
            (void)q8_0_block(y, tmp);
        }
    }
}

void sjk_decode_q8_0_ref(float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    for (size_t b = 0; b < n / SJK_QK; b++, x += SJK_Q8_0_NBYTES, dst += SJK_QK) {
        const float d = sjk_fp16_to_f32(sjk_rd_u16le(x));
        for (int j = 0; j < SJK_QK; j++) dst[j] = (float)(int8_t)x[2 + j] * d;
    }
}

/* ---- q4_0 / q5_0: symmetric, signed max ---------------------------------------------- */

/* The first element of largest magnitude, signed; *bad set if any value is not finite. */
static float signed_absmax(const float *x, int *bad)
{
    float amax = 0.0f, max = 0.0f;
    int b = 0;
    for (int j = 0; j < SJK_QK; j++) {
        const float v = x[j];
        b |= !(fabsf(v) <= FLT_MAX);
        if (amax < fabsf(v)) {
            amax = fabsf(v);
            max = v;
        }
    }
    *bad = b;
    return max;
}

static int q4_0_block(uint8_t *y, const float *x)
{
    int bad;
    const float max = signed_absmax(x, &bad);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = sjk_f32_to_fp16(d);
    if (bad || !fp16_finite(dh)) return 0;
    sjk_wr_u16le(y, dh);
    for (int j = 0; j < SJK_QK / 2; j++) {
        const float x0 = x[j] * id;
        const float x1 = x[SJK_QK / 2 + j] * id;
        const int xi0 = SJK_MIN(15, lowbyte_s8(trunc_i32(x0 + 8.5f)));
        const int xi1 = SJK_MIN(15, lowbyte_s8(trunc_i32(x1 + 8.5f)));
        y[2 + j] = (uint8_t)((unsigned)xi0 | ((unsigned)xi1 << 4));
    }
    return 1;
}

void sjk_encode_q4_0_ref(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    for (size_t b = 0; b < n / SJK_QK; b++, y += SJK_Q4_0_NBYTES, src += SJK_QK) {
        if (!q4_0_block(y, src)) {
            float tmp[SJK_QK];
            sanitize_block(tmp, src, LIM_Q4_0);
            (void)q4_0_block(y, tmp);
        }
    }
}

void sjk_decode_q4_0_ref(float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    for (size_t b = 0; b < n / SJK_QK; b++, x += SJK_Q4_0_NBYTES, dst += SJK_QK) {
        const float d = sjk_fp16_to_f32(sjk_rd_u16le(x));
        for (int j = 0; j < SJK_QK / 2; j++) {
            dst[j] = (float)((x[2 + j] & 0x0F) - 8) * d;
            dst[j + SJK_QK / 2] = (float)((x[2 + j] >> 4) - 8) * d;
        }
    }
}

static int q5_0_block(uint8_t *y, const float *x)
{
    int bad;
    const float max = signed_absmax(x, &bad);
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = sjk_f32_to_fp16(d);
    if (bad || !fp16_finite(dh)) return 0;
    sjk_wr_u16le(y, dh);
    uint32_t qh = 0;
    for (int j = 0; j < SJK_QK / 2; j++) {
        const float x0 = x[j] * id;
        const float x1 = x[SJK_QK / 2 + j] * id;
        const unsigned xi0 = (unsigned)SJK_MIN(31, lowbyte_s8(trunc_i32(x0 + 16.5f)));
        const unsigned xi1 = (unsigned)SJK_MIN(31, lowbyte_s8(trunc_i32(x1 + 16.5f)));
        y[6 + j] = (uint8_t)((xi0 & 0x0Fu) | ((xi1 & 0x0Fu) << 4));
        qh |= ((xi0 & 0x10u) >> 4) << j;
        qh |= ((xi1 & 0x10u) >> 4) << (j + SJK_QK / 2);
    }
    sjk_wr_u32le(y + 2, qh);
    return 1;
}

void sjk_encode_q5_0(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    for (size_t b = 0; b < n / SJK_QK; b++, y += SJK_Q5_0_NBYTES, src += SJK_QK) {
        if (!q5_0_block(y, src)) {
            float tmp[SJK_QK];
            sanitize_block(tmp, src, LIM_Q5_0);
            (void)q5_0_block(y, tmp);
        }
    }
}

void sjk_decode_q5_0(float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    for (size_t b = 0; b < n / SJK_QK; b++, x += SJK_Q5_0_NBYTES, dst += SJK_QK) {
        const float d = sjk_fp16_to_f32(sjk_rd_u16le(x));
        const uint32_t qh = sjk_rd_u32le(x + 2);
        for (int j = 0; j < SJK_QK / 2; j++) {
            const int h0 = (int)((qh >> j) & 1u) << 4;
            const int h1 = (int)((qh >> (j + SJK_QK / 2)) & 1u) << 4;
            dst[j] = (float)(((x[6 + j] & 0x0F) | h0) - 16) * d;
            dst[j + SJK_QK / 2] = (float)(((x[6 + j] >> 4) | h1) - 16) * d;
        }
    }
}

/* ---- q4_1 / q5_1: asymmetric, min and step ------------------------------------------- */

static void block_minmax(const float *x, float *mn, float *mx, int *bad)
{
    float min = FLT_MAX, max = -FLT_MAX;
    int b = 0;
    for (int j = 0; j < SJK_QK; j++) {
        const float v = x[j];
        b |= !(fabsf(v) <= FLT_MAX);
        if (v < min) min = v;
        if (v > max) max = v;
    }
    *mn = min;
    *mx = max;
    *bad = b;
}

static int q4_1_block(uint8_t *y, const float *x)
{
    float min, max;
    int bad;
    block_minmax(x, &min, &max, &bad);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = sjk_f32_to_fp16(d), mh = sjk_f32_to_fp16(min);
    if (bad || !fp16_finite(dh) || !fp16_finite(mh)) return 0;
    sjk_wr_u16le(y, dh);
    sjk_wr_u16le(y + 2, mh);
    for (int j = 0; j < SJK_QK / 2; j++) {
        const float x0 = (x[j] - min) * id;
        const float x1 = (x[SJK_QK / 2 + j] - min) * id;
        const int xi0 = SJK_MIN(15, lowbyte_s8(trunc_i32(x0 + 0.5f)));
        const int xi1 = SJK_MIN(15, lowbyte_s8(trunc_i32(x1 + 0.5f)));
        y[4 + j] = (uint8_t)((unsigned)xi0 | ((unsigned)xi1 << 4));
    }
    return 1;
}

void sjk_encode_q4_1(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    for (size_t b = 0; b < n / SJK_QK; b++, y += SJK_Q4_1_NBYTES, src += SJK_QK) {
        if (!q4_1_block(y, src)) {
            float tmp[SJK_QK];
            sanitize_block(tmp, src, LIM_Q_1);
            (void)q4_1_block(y, tmp);
        }
    }
}

void sjk_decode_q4_1(float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    for (size_t b = 0; b < n / SJK_QK; b++, x += SJK_Q4_1_NBYTES, dst += SJK_QK) {
        const float d = sjk_fp16_to_f32(sjk_rd_u16le(x));
        const float m = sjk_fp16_to_f32(sjk_rd_u16le(x + 2));
        for (int j = 0; j < SJK_QK / 2; j++) {
            const float p0 = (float)(x[4 + j] & 0x0F) * d;
            const float p1 = (float)(x[4 + j] >> 4) * d;
            dst[j] = p0 + m;
            dst[j + SJK_QK / 2] = p1 + m;
        }
    }
}

static int q5_1_block(uint8_t *y, const float *x)
{
    float min, max;
    int bad;
    block_minmax(x, &min, &max, &bad);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = sjk_f32_to_fp16(d), mh = sjk_f32_to_fp16(min);
    if (bad || !fp16_finite(dh) || !fp16_finite(mh)) return 0;
    sjk_wr_u16le(y, dh);
    sjk_wr_u16le(y + 2, mh);
    uint32_t qh = 0;
    for (int j = 0; j < SJK_QK / 2; j++) {
        const float x0 = (x[j] - min) * id;
        const float x1 = (x[SJK_QK / 2 + j] - min) * id;
        /* The reference has no clamp: (x - min) * id + 0.5 never reaches 32. */
        const unsigned xi0 = (unsigned)lowbyte_u8(trunc_i32(x0 + 0.5f));
        const unsigned xi1 = (unsigned)lowbyte_u8(trunc_i32(x1 + 0.5f));
        y[8 + j] = (uint8_t)((xi0 & 0x0Fu) | ((xi1 & 0x0Fu) << 4));
        qh |= ((xi0 & 0x10u) >> 4) << j;
        qh |= ((xi1 & 0x10u) >> 4) << (j + SJK_QK / 2);
    }
    sjk_wr_u32le(y + 4, qh);
    return 1;
}

void sjk_encode_q5_1(void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    for (size_t b = 0; b < n / SJK_QK; b++, y += SJK_Q5_1_NBYTES, src += SJK_QK) {
        if (!q5_1_block(y, src)) {
            float tmp[SJK_QK];
            sanitize_block(tmp, src, LIM_Q_1);
            (void)q5_1_block(y, tmp);
        }
    }
}

void sjk_decode_q5_1(float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    for (size_t b = 0; b < n / SJK_QK; b++, x += SJK_Q5_1_NBYTES, dst += SJK_QK) {
        const float d = sjk_fp16_to_f32(sjk_rd_u16le(x));
        const float m = sjk_fp16_to_f32(sjk_rd_u16le(x + 2));
        const uint32_t qh = sjk_rd_u32le(x + 4);
        for (int j = 0; j < SJK_QK / 2; j++) {
            const int h0 = (int)((qh >> j) & 1u) << 4;
            const int h1 = (int)((qh >> (j + SJK_QK / 2)) & 1u) << 4;
            const float p0 = (float)((x[8 + j] & 0x0F) | h0) * d;
            const float p1 = (float)((x[8 + j] >> 4) | h1) * d;
            dst[j] = p0 + m;
            dst[j + SJK_QK / 2] = p1 + m;
        }
    }
}
