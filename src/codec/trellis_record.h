/* trellis_record.h — the trellis record body (SJK_BODY_TRELLIS), plugged into the seal of
 * record.c through its tile-quantizer hook. Payload order: trellis_record.c and
 * docs/FORMAT.md. */
#ifndef SJK_TRELLIS_RECORD_H
#define SJK_TRELLIS_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "codec/record.h"
#include "sjkvarn.h"

/* Scratch bytes the trellis quantizer needs, on top of record.c's own. */
size_t sjk_trellis_record_scratch_nbytes(const sjk_record_params *p);

/* The ctx of sjk_trellis_quantize_tile: scratch of at least
 * sjk_trellis_record_scratch_nbytes() bytes. */
typedef struct sjk_trellis_scratch {
    void *scratch;
    size_t nbytes;
    uint8_t axis;  /* sjk_trellis_axis: SJK_BODY_TRELLIS = token, _CHANNEL = channel */
} sjk_trellis_scratch;

/* sjk_record_encode for the trellis bodies: sjk_record_encode_body with the trellis
 * quantizer, its scratch taken from the end of `scratch` (sjk_record_scratch_nbytes(p)
 * bytes in all). kern: NULL = the dispatched balancing/kernel path. */
sjk_status sjk_trellis_record_encode(const sjk_record_params *p, void *dst, size_t dst_cap,
                                     const float *k, const float *v, void *scratch,
                                     size_t scratch_nbytes, const sjk_codec_kernels *kern);

/* The trellis body as an sjk_tile_quantizer: codes a whole balanced tile (sequences along
 * the token axis), writes its payload and returns each row's map in balanced-row units
 * (step, lo). Never allocates; deterministic on every dispatch path. */
sjk_status sjk_trellis_quantize_tile(const sjk_tile_view *tile, uint8_t *payload,
                                     size_t row_nbytes, float *step, float *lo, void *ctx);

/* Decodes a trellis record (validates like sjk_record_decode). */
sjk_status sjk_trellis_record_decode(const sjk_record_params *p, float *k, float *v,
                                     const void *src, size_t src_nbytes);

#endif
