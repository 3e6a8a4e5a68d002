/* format_traits.c — the one table of value-format traits, and the checked public entry
 * points that read it.
 *
 * Adding a format touches this table (plus its encode/decode functions and the enum in
 * include/sjkvarn.h): every size, name lookup and bounds check below derives from it.
 * The _Static_asserts pin each block size to the bytes the format's layout defines
 * (docs/FORMAT.md "## Value formats").
 */
#include <string.h>

#include "codec/format.h"
#include "common/util.h"
#include "sjkvarn.h"

_Static_assert(SJK_Q8_0_NBYTES == 2 + SJK_QK, "q8_0 block: fp16 d + 32 int8");
_Static_assert(SJK_Q5_1_NBYTES == 2 + 2 + 4 + SJK_QK / 2, "q5_1 block: d, m, qh, 16 nibble bytes");
_Static_assert(SJK_Q5_0_NBYTES == 2 + 4 + SJK_QK / 2, "q5_0 block: d, qh, 16 nibble bytes");
_Static_assert(SJK_Q4_1_NBYTES == 2 + 2 + SJK_QK / 2, "q4_1 block: d, m, 16 nibble bytes");
_Static_assert(SJK_Q4_0_NBYTES == 2 + SJK_QK / 2, "q4_0 block: d, 16 nibble bytes");
_Static_assert(SJK_TQ6_0_NBYTES == 2 + SJK_TQ_BLOCK / 2 + SJK_TQ_BLOCK / 4, "tq6_0: norm, nibbles, 2-bit plane");
_Static_assert(SJK_TQ5_0_NBYTES == 2 + SJK_TQ_BLOCK / 2 + SJK_TQ_BLOCK / 8, "tq5_0: norm, nibbles, sign plane");
_Static_assert(SJK_TURBO4_NBYTES == 2 + SJK_TQ_BLOCK / 2, "turbo4: norm, nibbles");
_Static_assert(SJK_TURBO3_NBYTES == 2 + SJK_TQ_BLOCK / 4 + SJK_TQ_BLOCK / 8, "turbo3: norm, 2-bit plane, sign plane");

#define ROW(fname, bv, bb, enc, dec) { fname, bv, bb, 8.0 * (bb) / (bv), enc, dec }

/* Indexed by sjk_format; the order must follow the enum (checked below). */
static const sjk_format_info g_formats[SJK_FMT_COUNT] = {
    [SJK_FMT_F32]  = ROW("f32", 1, 4, sjk_encode_f32, sjk_decode_f32),
    [SJK_FMT_F16]  = ROW("f16", 1, 2, sjk_encode_f16, sjk_decode_f16),
    [SJK_FMT_BF16] = ROW("bf16", 1, 2, sjk_encode_bf16, sjk_decode_bf16),
    [SJK_FMT_Q8_0] = ROW("q8_0", SJK_QK, SJK_Q8_0_NBYTES, sjk_encode_q8_0, sjk_decode_q8_0),
    [SJK_FMT_Q5_1] = ROW("q5_1", SJK_QK, SJK_Q5_1_NBYTES, sjk_encode_q5_1, sjk_decode_q5_1),
    [SJK_FMT_Q5_0] = ROW("q5_0", SJK_QK, SJK_Q5_0_NBYTES, sjk_encode_q5_0, sjk_decode_q5_0),
    [SJK_FMT_Q4_1] = ROW("q4_1", SJK_QK, SJK_Q4_1_NBYTES, sjk_encode_q4_1, sjk_decode_q4_1),
    [SJK_FMT_Q4_0] = ROW("q4_0", SJK_QK, SJK_Q4_0_NBYTES, sjk_encode_q4_0, sjk_decode_q4_0),
    [SJK_FMT_TQ6_0]  = ROW("tq6_0", SJK_TQ_BLOCK, SJK_TQ6_0_NBYTES, sjk_encode_tq6_0, sjk_decode_tq6_0),
    [SJK_FMT_TQ5_0]  = ROW("tq5_0", SJK_TQ_BLOCK, SJK_TQ5_0_NBYTES, sjk_encode_tq5_0, sjk_decode_tq5_0),
    [SJK_FMT_TURBO4] = ROW("turbo4", SJK_TQ_BLOCK, SJK_TURBO4_NBYTES, sjk_encode_turbo4, sjk_decode_turbo4),
    [SJK_FMT_TURBO3] = ROW("turbo3", SJK_TQ_BLOCK, SJK_TURBO3_NBYTES, sjk_encode_turbo3, sjk_decode_turbo3),
    [SJK_FMT_TQ6_0_STAGE] = ROW("tq6_0_stage", SJK_TQ_BLOCK, SJK_TQ6_0_NBYTES,
                                sjk_encode_tq6_0_stage, sjk_decode_tq6_0_stage),
};
_Static_assert(SJK_ARRAY_LEN(g_formats) == SJK_FMT_COUNT, "one row per sjk_format");

const sjk_format_info *sjk_format_get(sjk_format f)
{
    if ((unsigned)f >= SJK_FMT_COUNT) return NULL;
    return &g_formats[f];
}

sjk_status sjk_format_from_name(const char *name, sjk_format *out)
{
    if (!name || !out) return SJK_ERR_PARAM;
    for (unsigned i = 0; i < SJK_FMT_COUNT; i++) {
        if (strcmp(g_formats[i].name, name) == 0) {
            *out = (sjk_format)i;
            return SJK_OK;
        }
    }
    return SJK_ERR_PARAM;
}

size_t sjk_format_row_nbytes(sjk_format f, size_t n)
{
    const sjk_format_info *fi = sjk_format_get(f);
    size_t nbytes;
    if (!fi || n % fi->block_values) return 0;
    if (!sjk_mul_ok(n / fi->block_values, fi->block_nbytes, &nbytes)) return 0;
    return nbytes;
}

/* n = 0 is a valid empty row (nothing is read or written). */
sjk_status sjk_format_encode_row(sjk_format f, void *dst, size_t dst_cap, const float *src, size_t n)
{
    const sjk_format_info *fi = sjk_format_get(f);
    if (!fi || n % fi->block_values) return SJK_ERR_PARAM;
    if (n == 0) return SJK_OK;
    if (!dst || !src) return SJK_ERR_PARAM;
    const size_t need = sjk_format_row_nbytes(f, n);
    if (need == 0) return SJK_ERR_PARAM; /* size overflow */
    if (dst_cap < need) return SJK_ERR_BUFFER;
    fi->encode(dst, src, n);
    return SJK_OK;
}

sjk_status sjk_format_decode_row(sjk_format f, float *dst, size_t n, const void *src, size_t src_nbytes)
{
    const sjk_format_info *fi = sjk_format_get(f);
    if (!fi || n % fi->block_values) return SJK_ERR_PARAM;
    if (n == 0) return SJK_OK;
    if (!dst || !src) return SJK_ERR_PARAM;
    const size_t need = sjk_format_row_nbytes(f, n);
    if (need == 0) return SJK_ERR_PARAM;
    if (src_nbytes < need) return SJK_ERR_BUFFER;
    fi->decode(dst, src, n);
    return SJK_OK;
}

/* Upstream llama.cpp's attention rotation (docs/BACKGROUND.md, "ggml block formats"): on by default
 * for quantized ggml cache types when the head size is a multiple of 64. K (and Q) use
 * the largest power of two >= 64 that divides the head size; V (and the attention
 * output) use 64. Not applied to f32/f16/bf16 or to the TurboQuant formats (which rotate
 * inside the format). */
size_t sjk_format_rotation_block(sjk_format f, size_t head_dim, int is_v)
{
    if (f != SJK_FMT_Q8_0 && f != SJK_FMT_Q5_1 && f != SJK_FMT_Q5_0 && f != SJK_FMT_Q4_1 &&
        f != SJK_FMT_Q4_0)
        return 0;
    if (head_dim == 0 || head_dim % 64) return 0;
    if (is_v) return 64;
    size_t b = 64;
    while (b * 2 <= 4096 && head_dim % (b * 2) == 0) b *= 2;
    return b;
}
