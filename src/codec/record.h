/* record.h — sealing and reading records: the scalar body, encode with a chosen body and
 * kernel path, and the reference decoder. The layout is record_layout.h, the interface
 * of a body record_body.h. */
#ifndef SJK_RECORD_H
#define SJK_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "codec/codec_kernels.h"
#include "codec/record_body.h"
#include "codec/record_layout.h"
#include "sjkvarn.h"

/* The scalar body: per row, asymmetric RTN (lo = min, step = max((max-lo)/qmax, 1e-10),
 * code = clamp(rint((b-lo)/step), 0, qmax)), packed in the payload order. ctx unused. */
sjk_status sjk_record_quantize_scalar(const sjk_tile_view *tile, uint8_t *payload,
                                      size_t row_nbytes, float *step, float *lo, void *ctx);

/* Encode with a given tile quantizer (NULL = the scalar body) on a given kernel path (NULL
 * = the dispatched one; tests pass each path to prove the bytes do not depend on it).
 * p->body is not consulted: the quantizer decides the payload. */
sjk_status sjk_record_encode_body(const sjk_record_params *p, void *dst, size_t dst_cap,
                                  const float *k, const float *v, void *scratch,
                                  size_t scratch_nbytes, sjk_tile_quantizer quantize, void *ctx,
                                  const sjk_codec_kernels *kern);

/* sjk_record_encode on a given kernel path (NULL = the dispatched one), for any body: the
 * scalar body, or a trellis body with its scratch taken from the end of `scratch`
 * (sjk_record_scratch_nbytes(p) bytes in all). */
sjk_status sjk_record_encode_on(const sjk_record_params *p, void *dst, size_t dst_cap,
                                const float *k, const float *v, void *scratch,
                                size_t scratch_nbytes, const sjk_codec_kernels *kern);

/* The deliberately simple reference decoder of docs/FORMAT.md (one code at a time through
 * sjk_payload_get). The fast decoder is tested bit-exact against it. */
sjk_status sjk_record_decode_ref(const sjk_record_params *p, float *k, float *v,
                                 const void *src, size_t src_nbytes);

#endif
