/* format_turbo_blocks.c — packing of the TurboQuant-family blocks and their decode into
 * the rotated domain (format_turbo_blocks.h; byte layouts in format_turbo.c). */
#include "codec/format.h"
#include "codec/format_turbo_blocks.h"
#include "common/fp16.h"
#include "common/util.h"

#define TQ SJK_TQ_BLOCK

static void pack_tq6(uint8_t *blk, const uint8_t *c)
{
    uint8_t *qs = blk + 2, *qh = blk + 66;
    for (int k = 0; k < TQ / 2; k++) qs[k] = (uint8_t)((c[2 * k] & 0x0Fu) | ((c[2 * k + 1] & 0x0Fu) << 4));
    for (int k = 0; k < TQ / 4; k++)
        qh[k] = (uint8_t)((c[4 * k] >> 4) | ((c[4 * k + 1] >> 4) << 2) | ((c[4 * k + 2] >> 4) << 4) | ((c[4 * k + 3] >> 4) << 6));
}
static void unpack_tq6(uint8_t *c, const uint8_t *blk)
{
    const uint8_t *qs = blk + 2, *qh = blk + 66;
    for (int j = 0; j < TQ; j++)
        c[j] = (uint8_t)(((qs[j / 2] >> (4 * (j & 1))) & 0x0Fu) | (((qh[j / 4] >> (2 * (j & 3))) & 3u) << 4));
}

/* tq5_0 stores sign and magnitude: code >= 16 -> (0, code - 16), else (1, 15 - code). */
static inline unsigned tq5_mag(unsigned c) { return c < 16 ? 15u - c : c - 16u; }

static void pack_tq5(uint8_t *blk, const uint8_t *c)
{
    uint8_t *qs = blk + 2, *qh = blk + 66;
    for (int k = 0; k < TQ / 2; k++) qs[k] = (uint8_t)(tq5_mag(c[2 * k]) | (tq5_mag(c[2 * k + 1]) << 4));
    for (int k = 0; k < TQ / 8; k++) {
        unsigned b = 0;
        for (int i = 0; i < 8; i++) b |= (unsigned)(c[8 * k + i] < 16) << i;
        qh[k] = (uint8_t)b;
    }
}
static void unpack_tq5(uint8_t *c, const uint8_t *blk)
{
    const uint8_t *qs = blk + 2, *qh = blk + 66;
    for (int j = 0; j < TQ; j++) {
        const unsigned m = (qs[j / 2] >> (4 * (j & 1))) & 0x0Fu;
        const unsigned neg = (qh[j / 8] >> (j & 7)) & 1u;
        c[j] = (uint8_t)(neg ? 15u - m : 16u + m);
    }
}

static void pack_turbo4(uint8_t *blk, const uint8_t *c)
{
    uint8_t *qs = blk + 2;
    for (int k = 0; k < TQ / 2; k++) qs[k] = (uint8_t)(c[2 * k] | (c[2 * k + 1] << 4));
}
static void unpack_turbo4(uint8_t *c, const uint8_t *blk)
{
    const uint8_t *qs = blk + 2;
    for (int j = 0; j < TQ; j++) c[j] = (uint8_t)((qs[j / 2] >> (4 * (j & 1))) & 0x0Fu);
}

static void pack_turbo3(uint8_t *blk, const uint8_t *c)
{
    uint8_t *qs = blk + 2, *sg = blk + 34;
    for (int k = 0; k < TQ / 4; k++)
        qs[k] = (uint8_t)((c[4 * k] & 3u) | ((c[4 * k + 1] & 3u) << 2) | ((c[4 * k + 2] & 3u) << 4) | ((c[4 * k + 3] & 3u) << 6));
    for (int k = 0; k < TQ / 8; k++) {
        unsigned b = 0;
        for (int i = 0; i < 8; i++) b |= (unsigned)(c[8 * k + i] >> 2) << i;
        sg[k] = (uint8_t)b;
    }
}
static void unpack_turbo3(uint8_t *c, const uint8_t *blk)
{
    const uint8_t *qs = blk + 2, *sg = blk + 34;
    for (int j = 0; j < TQ; j++)
        c[j] = (uint8_t)(((qs[j / 4] >> (2 * (j & 3))) & 3u) | (((sg[j / 8] >> (j & 7)) & 1u) << 2));
}

const sjk_tq_type sjk_tq_tq6 = { 6, sjk_tq6_centroids, sjk_tq6_midpoints, SJK_TQ6_0_NBYTES, pack_tq6, unpack_tq6 };
const sjk_tq_type sjk_tq_tq5 = { 5, sjk_tq5_centroids, sjk_tq5_midpoints, SJK_TQ5_0_NBYTES, pack_tq5, unpack_tq5 };
const sjk_tq_type sjk_tq_turbo4 = { 4, sjk_turbo4_centroids, sjk_turbo4_midpoints, SJK_TURBO4_NBYTES, pack_turbo4, unpack_turbo4 };
const sjk_tq_type sjk_tq_turbo3 = { 3, sjk_turbo3_centroids, sjk_turbo3_midpoints, SJK_TURBO3_NBYTES, pack_turbo3, unpack_turbo3 };

void sjk_tq_decode_rotated(const sjk_tq_type *t, float *dst, const void *src, size_t n)
{
    const uint8_t *x = src;
    uint8_t codes[TQ];
    for (size_t b = 0; b < n / TQ; b++, x += t->nbytes, dst += TQ) {
        const float norm = sjk_fp16_to_f32(sjk_rd_u16le(x));
        t->unpack(codes, x);
        for (int i = 0; i < TQ; i++) dst[i] = t->centroids[codes[i]] * norm;
    }
}

/* The scalar reference of the dispatched tq6_0_stage decode (format_kernels.h). */
void sjk_decode_tq6_0_stage_ref(float *dst, const void *src, size_t n) { sjk_tq_decode_rotated(&sjk_tq_tq6, dst, src, n); }
