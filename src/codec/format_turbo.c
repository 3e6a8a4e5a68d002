/* format_turbo.c — the TurboQuant-family value formats of llamAmpere: tq6_0, tq5_0,
 * turbo4, turbo3, and tq6_0_stage (the SJ-KVaRN staging ring). Definitions:
 * docs/BACKGROUND.md, "TurboQuant formats"; tables in format_turbo_tables.c.
 *
 * One 128-value block, the same pipeline for every type:
 *
 *   n  = sqrt(sum x_i^2)            fp32, sequential sum
 *   u  = x * (1/n)                  fp32 reciprocal, then a multiply, as the fork's
 *                                   CPU reference (u = 0 if n <= 1e-10)
 *   r  = RHT(u)                     signed WHT128: D2 H D1 u / sqrt(128); skipped by
 *                                   tq6_0_stage, whose input is already rotated
 *   q  = #{ midpoints m_k <= r_i }  (a value on a midpoint goes to the upper cell)
 *   rho = sqrt(sum c[q_i]^2)        fp32
 *   norm = fp16(n / rho)            (n if rho <= 1e-10): ||decode|| = ||x|| up to fp16
 *
 * Decode: r^_i = c[q_i] * norm, then the inverse RHT (not for tq6_0_stage). Attention
 * reads the rotated values directly (sjk_turbo_decode_rotated) with a rotated query.
 *
 * Byte layouts (per 128 values, element j = 0..127, norm = fp16 LE at [0..1]):
 *
 *   tq6_0   98 B  [2..65]  qs: low 4 bits of code, low nibble if j even, high if odd
 *                 [66..97] qh: high 2 bits at bits 2*(j%4) of qh[j/4]
 *   tq5_0   82 B  [2..65]  qs: magnitude m (nibbles as above)
 *                 [66..81] qh: sign (1 = negative) at bit j%8 of qh[j/8];
 *                          code = 15 - m if negative, else 16 + m
 *   turbo4  66 B  [2..65]  qs: 4-bit code (nibbles as above)
 *   turbo3  50 B  [2..33]  qs: low 2 bits of code at bits 2*(j%4) of qs[j/4]
 *                 [34..49] signs: bit 2 of code (1 <=> positive) at bit j%8 of signs[j/8]
 *
 * Non-finite input: a block holding NaN or a value with |x| > 65504 is encoded from a
 * copy with NaN -> 0 and values clamped to ±65504; a stored norm that would overflow
 * fp16 saturates at 65504. Encoding is identical on every dispatch path: the sums are
 * sequential scalar fp32, and the only SIMD step (the ladder, tq_codes128 in
 * format_kernels.h) is made of exact comparisons. The block layouts and their
 * rotated-domain decode are format_turbo_blocks.c.
 */
#include <math.h>
#include <string.h>

#include "codec/format.h"
#include "codec/format_kernels.h"
#include "codec/format_turbo_blocks.h"
#include "common/fp16.h"
#include "common/util.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define TQ SJK_TQ_BLOCK
#define TQ_LIMIT 65504.0f

/* ---- rotation ----------------------------------------------------------------------- */

/* Both directions go through the dispatched kernel, which is bit-identical on every path
 * (format_kernels.h), so encoding stays the same everywhere. */
void sjk_rht128_forward(float *x) { sjk_fmt_kernels_get()->rht128(x, sjk_rht_signs1, sjk_rht_signs2); }
void sjk_rht128_inverse(float *x) { sjk_fmt_kernels_get()->rht128(x, sjk_rht_signs2, sjk_rht_signs1); }

/* ---- encode ------------------------------------------------------------------------- */

static void encode_block(const sjk_tq_type *t, int rotate, uint8_t *blk, const float *x)
{
    float u[TQ];
    uint8_t codes[TQ];
    int bad = 0;
    for (int i = 0; i < TQ; i++) bad |= !(fabsf(x[i]) <= TQ_LIMIT);
    if (bad) {
        for (int i = 0; i < TQ; i++) {
            float v = x[i];
            if (v != v) v = 0.0f;
            u[i] = v > TQ_LIMIT ? TQ_LIMIT : (v < -TQ_LIMIT ? -TQ_LIMIT : v);
        }
    } else {
        memcpy(u, x, sizeof u);
    }
    float acc = 0.0f;
    for (int i = 0; i < TQ; i++) acc += u[i] * u[i];
    const float n = sqrtf(acc);
    if (n > 1e-10f) {
        const float inv = 1.0f / n; /* the fork multiplies by the reciprocal: keep its bits */
        for (int i = 0; i < TQ; i++) u[i] = u[i] * inv;
    } else {
        memset(u, 0, sizeof u);
    }
    if (rotate) sjk_rht128_forward(u);
    /* codes: exact comparisons, so every dispatch path gives the same codes */
    sjk_fmt_kernels_get()->tq_codes128(codes, u, t->midpoints, (unsigned)t->bits);
    float rho2 = 0.0f;
    for (int i = 0; i < TQ; i++) {
        const float c = t->centroids[codes[i]];
        rho2 += c * c; /* sequential fp32 sum, as the reference */
    }
    const float rho = sqrtf(rho2);
    const float norm = rho > 1e-10f ? n / rho : n;
    uint16_t h = sjk_f32_to_fp16(norm);
    if ((h & 0x7C00u) == 0x7C00u) h = 0x7BFFu; /* saturate at 65504 */
    sjk_wr_u16le(blk, h);
    t->pack(blk, codes);
}

static void encode_rows(const sjk_tq_type *t, int rotate, void *dst, const float *src, size_t n)
{
    uint8_t *y = dst;
    for (size_t b = 0; b < n / TQ; b++, y += t->nbytes, src += TQ) encode_block(t, rotate, y, src);
}

/* ---- decode ------------------------------------------------------------------------- */

static void decode_rows(const sjk_tq_type *t, int unrotate, float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    for (size_t b = 0; b < n / TQ; b++, x += t->nbytes, dst += TQ) {
        sjk_tq_decode_rotated(t, dst, x, TQ);
        if (unrotate) sjk_rht128_inverse(dst);
    }
}

void sjk_encode_tq6_0(void *dst, const float *src, size_t n) { encode_rows(&sjk_tq_tq6, 1, dst, src, n); }
void sjk_decode_tq6_0(float *dst, const void *src, size_t n) { decode_rows(&sjk_tq_tq6, 1, dst, src, n); }
void sjk_encode_tq5_0(void *dst, const float *src, size_t n) { encode_rows(&sjk_tq_tq5, 1, dst, src, n); }
void sjk_decode_tq5_0(float *dst, const void *src, size_t n) { decode_rows(&sjk_tq_tq5, 1, dst, src, n); }
void sjk_encode_turbo4(void *dst, const float *src, size_t n) { encode_rows(&sjk_tq_turbo4, 1, dst, src, n); }
void sjk_decode_turbo4(float *dst, const void *src, size_t n) { decode_rows(&sjk_tq_turbo4, 1, dst, src, n); }
void sjk_encode_turbo3(void *dst, const float *src, size_t n) { encode_rows(&sjk_tq_turbo3, 1, dst, src, n); }
void sjk_decode_turbo3(float *dst, const void *src, size_t n) { decode_rows(&sjk_tq_turbo3, 1, dst, src, n); }
void sjk_encode_tq6_0_stage(void *dst, const float *src, size_t n) { encode_rows(&sjk_tq_tq6, 0, dst, src, n); }
void sjk_decode_tq6_0_stage(float *dst, const void *src, size_t n)
{
    sjk_fmt_kernels_get()->decode_tq6_0_stage(dst, src, n);
}

void sjk_turbo_decode_rotated(sjk_format f, float *dst, const void *src, size_t n)
{
    switch (f) {
    case SJK_FMT_TQ6_0:
    case SJK_FMT_TQ6_0_STAGE: sjk_decode_tq6_0_stage(dst, src, n); break;
    case SJK_FMT_TQ5_0: decode_rows(&sjk_tq_tq5, 0, dst, src, n); break;
    case SJK_FMT_TURBO4: decode_rows(&sjk_tq_turbo4, 0, dst, src, n); break;
    case SJK_FMT_TURBO3: decode_rows(&sjk_tq_turbo3, 0, dst, src, n); break;
    default: break;
    }
}
