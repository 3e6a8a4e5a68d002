/* record_body.h — the interface a record body plugs into the seal of record.c: the tile
 * a body quantizes and the quantizer's signature. The scalar body (record.c) and the
 * trellis bodies (trellis_record.c) implement it; record.c picks one per record. */
#ifndef SJK_RECORD_BODY_H
#define SJK_RECORD_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "codec/codec_kernels.h"
#include "sjkvarn.h"

/* The step of the seal that a body replaces. A tile quantizer gets one sanitized tile and
 * its balancing, writes the payload rows (row i at payload + i * row_nbytes, n_cols codes
 * of `bits` bits each) and each row's affine map balanced_row ~ code_value * step + lo.
 * The record layer then stores the absorbed fields (s_row * step, s_row * lo, s_col), the
 * same for every body. The scalar body (sjk_record_quantize_scalar) is RTN with the payload
 * order of docs/FORMAT.md; the trellis body (src/codec/trellis*.c) plugs in its Viterbi
 * search, packing and refit here. */
typedef struct sjk_tile_view {
    const float *M;          /* [n_rows][n_cols] row-major, sanitized (finite, |x| <= 65504) */
    size_t n_rows, n_cols;   /* K: D x G (rows = channels); V: G x D (rows = tokens) */
    const float *inv_row;    /* [n_rows] balanced B[i][j] = (M[i][j] * inv_col[j]) * inv_row[i] */
    const float *inv_col;    /* [n_cols] */
    unsigned bits;           /* 2..8 (a trellis body sees 2..4 only) */
    int is_v;                /* 0: the K tile, 1: the V tile */
    const sjk_codec_kernels *kern; /* the kernel path in use */
    uint8_t *codes;          /* scratch: max(D, G) bytes */
    float *brow;             /* scratch: max(D, G) floats */
} sjk_tile_view;

typedef sjk_status (*sjk_tile_quantizer)(const sjk_tile_view *tile, uint8_t *payload,
                                         size_t row_nbytes, float *step, float *lo, void *ctx);

#endif
