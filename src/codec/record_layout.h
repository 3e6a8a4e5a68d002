/* record_layout.h — the in-memory layout of a sealed record (record format v2,
 * docs/FORMAT.md), with offsets and inline accessors so the seal, the codec kernels and
 * attention kernels can read and write records in place. A leaf: it includes nothing of
 * the codec.
 *
 * One record = one (layer, KV head, 128-token group); D = head_dim, G = 128:
 *
 *   offset 0
 *   +--------------------------------+  K payload: D rows (one per channel) of G codes,
 *   | K payload   D * G*bK/8 bytes   |  each row G*bK/8 bytes (a row = 128 tokens)
 *   +--------------------------------+
 *   | V payload   G * D*bV/8 bytes   |  G rows (one per token) of D codes
 *   +--------------------------------+
 *   | Kscale[D]  fp16                |  per channel: s_row_K[d] * step_d
 *   | Kzero[D]   fp16                |  per channel: s_row_K[d] * lo_d
 *   | Ktok[G]    fp16                |  per token:   s_col_K[t]
 *   | Vch[D]     fp16                |  per channel: s_col_V[d]
 *   | Vscale[G]  fp16                |  per token:   s_row_V[t] * step_t
 *   | Vzero[G]   fp16                |  per token:   s_row_V[t] * lo_t
 *   +--------------------------------+  end = sjk_record_nbytes()
 *
 *   K[t,d] = (qK[d][t] * Kscale[d] + Kzero[d]) * Ktok[t]
 *   V[t,d] = (qV[t][d] * Vscale[t] + Vzero[t]) * Vch[d]
 *
 * Payload rows of the scalar body (the trellis body has its own payload, same size and
 * fields: trellis_record.c). A row of n codes of b bits takes n*b/8 bytes (FORMAT.md §3):
 *
 *   b = 4: units of 32 codes in 16 bytes. Byte k of unit u: low nibble = code 32u + k,
 *          high nibble = code 32u + 16 + k.
 *   b = 2: units of 64 codes in 16 bytes. Byte k of unit u, bits 2s..2s+1 (s = 0..3) =
 *          code 64u + 16s + k.
 *   b = 3: a 2-bit field of the low two bits of every code (n/4 bytes, as b = 2), then a
 *          1-bit field of the third bit (n/8 bytes): code i's bit is bit i%8 of byte i/8.
 *   b = 8: one byte per code, code i = byte i (record format v2).
 *   b = 5, 6, 7 (record format v2): the low nibble of every code as a b = 4 row (n/2
 *          bytes), then the high b - 4 bits of every code as a row of b - 4 bits in the
 *          order above (b = 5: the 1-bit field; 6: as b = 2; 7: as b = 3).
 *
 * So 16 consecutive codes (one SIMD vector of 32-bit lanes) come from 16 consecutive bytes
 * with one shift and one mask (plus, for b = 3, 16 consecutive bits; for b = 5..7 the
 * same again in the high field).
 */
#ifndef SJK_RECORD_LAYOUT_H
#define SJK_RECORD_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/fp16.h"
#include "common/util.h"
#include "sjkvarn.h"

/* Version 2 adds scalar bodies of 5..8 bits and changes nothing else: a record of v1
 * widths (2..4 bits) has the same bytes in both. Version 3 adds the body
 * SJK_BODY_TRELLIS_REAL (the token-axis trellis read with other codebooks) and changes
 * nothing else. A cache file says the lowest version its layers need: 1 when every
 * layer's widths are v1's (old readers keep reading it), 3 when a layer has the
 * real-data trellis body, else 2 (cache_file.c). Version 4 adds the bodies
 * SJK_BODY_TRELLIS_I8 and SJK_BODY_TRELLIS_REAL_I8 (the token-axis trellis with its
 * codebooks on an int8 grid, read by byte lookups and int8 dot products) and changes
 * nothing else; a file needs it when a layer has one of them. Version 5 adds the body
 * SJK_BODY_TRELLIS_S128 (the token-axis trellis on tables built from 128 int8 entries,
 * src/codec/trellis.h) and changes nothing else. */
#define SJK_RECORD_FORMAT_VERSION 5
#define SJK_RECORD_FORMAT_V1_MAX_BITS 4
/* The widest body of any record, and of a trellis body (wider tiles are scalar). */
#define SJK_RECORD_MAX_BITS 8
#define SJK_TRELLIS_MAX_BITS 4

/* Byte offsets of every field of a record, from (D, bK, bV). All fields are little-endian;
 * fp16 arrays start at even offsets. */
typedef struct sjk_record_layout {
    uint32_t head_dim, bits_k, bits_v;
    size_t k_row_nbytes;  /* one K payload row: G * bK / 8 */
    size_t v_row_nbytes;  /* one V payload row: D * bV / 8 */
    size_t off_k, off_v, off_kscale, off_kzero, off_ktok, off_vch, off_vscale, off_vzero;
    size_t nbytes;
} sjk_record_layout;

static inline size_t sjk_payload_row_nbytes(size_t n, unsigned bits) { return n * bits / 8; }

/* Fills *L for valid (D, bK, bV) (see sjk_record_params_validate). */
static inline void sjk_record_layout_init(sjk_record_layout *L, uint32_t D, unsigned bk, unsigned bv)
{
    const size_t G = SJK_GROUP;
    L->head_dim = D;
    L->bits_k = bk;
    L->bits_v = bv;
    L->k_row_nbytes = sjk_payload_row_nbytes(G, bk);
    L->v_row_nbytes = sjk_payload_row_nbytes(D, bv);
    L->off_k = 0;
    L->off_v = L->off_k + (size_t)D * L->k_row_nbytes;
    L->off_kscale = L->off_v + G * L->v_row_nbytes;
    L->off_kzero = L->off_kscale + 2 * (size_t)D;
    L->off_ktok = L->off_kzero + 2 * (size_t)D;
    L->off_vch = L->off_ktok + 2 * G;
    L->off_vscale = L->off_vch + 2 * (size_t)D;
    L->off_vzero = L->off_vscale + 2 * G;
    L->nbytes = L->off_vzero + 2 * G;
}

#define SJK_RECORD_NBYTES(D, bk, bv) \
    ((size_t)(D) * SJK_GROUP * ((bk) + (bv)) / 8 + 2 * (3 * (size_t)(D) + 3 * SJK_GROUP))
_Static_assert(SJK_RECORD_NBYTES(256, 4, 4) == 35072, "record 4/4 at D=256");
_Static_assert(SJK_RECORD_NBYTES(256, 3, 3) == 26880, "record 3/3 at D=256");
_Static_assert(SJK_RECORD_NBYTES(256, 3, 2) == 22784, "record 3/2 at D=256");
_Static_assert(SJK_RECORD_NBYTES(256, 2, 2) == 18688, "record 2/2 at D=256");
_Static_assert(SJK_RECORD_NBYTES(256, 8, 4) == 51456, "record 8/4 at D=256");

/* Code i of a payload row of n codes of `bits` bits: the simple reference accessor. */
static inline unsigned sjk_payload_get(const uint8_t *row, size_t n, unsigned bits, size_t i)
{
    switch (bits) {
    case 4: return (row[(i / 32) * 16 + i % 16] >> (4 * ((i % 32) / 16))) & 15u;
    case 2: return (row[(i / 64) * 16 + i % 16] >> (2 * ((i % 64) / 16))) & 3u;
    case 3: {
        unsigned lo = (row[(i / 64) * 16 + i % 16] >> (2 * ((i % 64) / 16))) & 3u;
        unsigned hi = (row[n / 4 + i / 8] >> (i % 8)) & 1u;
        return lo | (hi << 2);
    }
    case 1: return (row[i / 8] >> (i % 8)) & 1u; /* the high field of b = 5 */
    case 5: case 6: case 7:
        return sjk_payload_get(row, n, 4, i) | (sjk_payload_get(row + n / 2, n, bits - 4, i) << 4);
    case 8: return row[i];
    default: return 0;
    }
}

/* Native 64-bit load as little-endian (a no-op on little-endian hosts). */
static inline uint64_t sjk_le64(uint64_t w)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap64(w);
#else
    return w;
#endif
}

/* Packs n codes (each < 2^bits) into one payload row of n*bits/8 bytes. */
static inline void sjk_payload_pack_bits1(uint8_t *dst, size_t n, const uint8_t *codes, unsigned shift)
{
    /* bit `shift` of 8 code bytes -> one byte, code s at bit s: the multiply moves bit 0 of
     * byte s to bit 56 + s without carries (8s + 7k are distinct for s, k < 8) */
    for (size_t m = 0; m < n / 8; m++) {
        uint64_t w;
        memcpy(&w, codes + 8 * m, 8);
        w = sjk_le64(w);
        dst[m] = (uint8_t)((((w >> shift) & 0x0101010101010101ull) * 0x0102040810204080ull) >> 56);
    }
}

static inline void sjk_payload_pack_row(uint8_t *row, size_t n, unsigned bits, const uint8_t *codes)
{
    if (bits == 8) {
        memcpy(row, codes, n);
        return;
    }
    if (bits >= 5 && bits <= 7) {
        /* the low nibbles as a 4-bit row, then the high bits as a (bits - 4)-bit row */
        for (size_t u = 0; u < n; u += 32)
            for (size_t k = 0; k < 16; k++)
                row[u / 2 + k] = (uint8_t)((codes[u + k] & 15u) | ((codes[u + 16 + k] & 15u) << 4));
        uint8_t *hi = row + n / 2;
        if (bits == 5) {
            sjk_payload_pack_bits1(hi, n, codes, 4);
            return;
        }
        for (size_t u = 0; u < n; u += 64)
            for (size_t k = 0; k < 16; k++)
                hi[u / 4 + k] = (uint8_t)(((codes[u + k] >> 4) & 3u) | (((codes[u + 16 + k] >> 4) & 3u) << 2) |
                                          (((codes[u + 32 + k] >> 4) & 3u) << 4) |
                                          (((codes[u + 48 + k] >> 4) & 3u) << 6));
        if (bits == 7) sjk_payload_pack_bits1(hi + n / 4, n, codes, 6);
        return;
    }
    if (bits == 4) {
        for (size_t u = 0; u < n; u += 32)
            for (size_t k = 0; k < 16; k++)
                row[u / 2 + k] = (uint8_t)(codes[u + k] | (codes[u + 16 + k] << 4));
        return;
    }
    /* b = 2, and the low two bits of b = 3 */
    for (size_t u = 0; u < n; u += 64)
        for (size_t k = 0; k < 16; k++)
            row[u / 4 + k] = (uint8_t)((codes[u + k] & 3u) | ((codes[u + 16 + k] & 3u) << 2) |
                                       ((codes[u + 32 + k] & 3u) << 4) | ((codes[u + 48 + k] & 3u) << 6));
    if (bits == 3) sjk_payload_pack_bits1(row + n / 4, n, codes, 2);
}

/* fp16 for a stored scale: saturates to +-65504 (never Inf), NaN becomes 0. */
static inline uint16_t sjk_record_f16(float x)
{
    if (x != x) return 0;
    uint16_t h = sjk_f32_to_fp16(x);
    if ((h & 0x7FFFu) == 0x7C00u) h = (uint16_t)((h & 0x8000u) | 0x7BFFu);
    return h;
}

/* fp16 field j of the array at byte offset off of record rec, as fp32. */
static inline float sjk_record_f16_at(const uint8_t *rec, size_t off, size_t j)
{
    return sjk_fp16_to_f32(sjk_rd_u16le(rec + off + 2 * j));
}

#endif
