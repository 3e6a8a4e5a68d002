/* trellis_record.h — the trellis record body (SJK_BODY_TRELLIS), plugged into the seal of
 * record.c through its tile-quantizer hook (record_body.h); record.c calls it, never the
 * reverse. Payload order: trellis_record.c and
 * docs/FORMAT.md. */
#ifndef SJK_TRELLIS_RECORD_H
#define SJK_TRELLIS_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "codec/record_body.h"
#include "sjkvarn.h"

/* Scratch bytes the trellis quantizer needs, on top of record.c's own. */
size_t sjk_trellis_record_scratch_nbytes(const sjk_record_params *p);

/* The ctx of sjk_trellis_quantize_tile: scratch of at least
 * sjk_trellis_record_scratch_nbytes() bytes. */
typedef struct sjk_trellis_scratch {
    void *scratch;
    size_t nbytes;
    uint8_t body;  /* sjk_body: the axis (SJK_BODY_TRELLIS_CHANNEL: channel) and codebooks */
} sjk_trellis_scratch;

/* The trellis body as an sjk_tile_quantizer: codes a whole balanced tile (sequences along
 * the token axis), writes its payload and returns each row's map in balanced-row units
 * (step, lo). Never allocates; deterministic on every dispatch path. */
sjk_status sjk_trellis_quantize_tile(const sjk_tile_view *tile, uint8_t *payload,
                                     size_t row_nbytes, float *step, float *lo, void *ctx);

/* Decodes the trellis tiles of a record (validates like sjk_record_decode); a tile above
 * 4 bits is scalar and left as it was (record.c decodes it). */
sjk_status sjk_trellis_record_decode(const sjk_record_params *p, float *k, float *v,
                                     const void *src, size_t src_nbytes);

#endif
