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

/* The seal as the cache runs it, with its input inside the scratch: k [G][D] and v [G][D]
 * floats at the start of `scratch` (float-aligned, sjk_record_seal_scratch_nbytes(p)
 * bytes), where the caller gathers them. They are consumed: once the seal has loaded
 * them into its tiles, a trellis body's scratch reuses their memory. The record is the
 * same bytes as sjk_record_encode's of the same k and v. For the scalar body the
 * scratch is 2*G*D floats + record.c's own; for a trellis body the larger of those
 * floats and the body's scratch, + record.c's own. */
size_t sjk_record_seal_scratch_nbytes(const sjk_record_params *p);
sjk_status sjk_record_seal_in_scratch(const sjk_record_params *p, void *dst, size_t dst_cap,
                                      void *scratch, size_t scratch_nbytes);

/* The seal of one part of a record: K (its payload, row fields and token scales, from k
 * in the scratch), V (its payload, row fields and channel scales, from v), or both
 * (= sjk_record_seal_in_scratch). A part reads and writes nothing of the other's, so the
 * two parts can be sealed at once by two threads, each in its own scratch holding its
 * part's rows at their place, and the record is the same bytes (the cache does this
 * when a seal has fewer records than threads, cache.c). */
enum { SJK_RECORD_PART_K = 1, SJK_RECORD_PART_V = 2, SJK_RECORD_PARTS = 3 };
sjk_status sjk_record_seal_part(const sjk_record_params *p, void *dst, size_t dst_cap, void *scratch,
                                size_t scratch_nbytes, unsigned parts);

/* ---- measuring the balancing on real tiles (`sjkvarn capture-tiles --stage rotated`) */

/* Whether an observer is set (the cache then seals whole records, which it sees). */
int sjk_record_tile_observer_set(void);

/* An observer sees the two tiles of every record sealed (any body), as the balancing gets
 * them: kt [D][G] channel-major (rows = channels), vt [G][D] token-major, rotated and
 * sanitized. For capturing a model's tiles before balancing; the product never sets one.
 * As with sjk_trellis_set_observer: set it before any cache seals a record and clear it
 * (NULL) after the last; it is called from whatever threads seal, so it must be
 * thread-safe. */
typedef void (*sjk_record_tile_observer)(void *ctx, const float *kt, const float *vt, size_t D, size_t G);
void sjk_record_set_tile_observer(sjk_record_tile_observer fn, void *ctx);

/* The deliberately simple reference decoder of docs/FORMAT.md (one code at a time through
 * sjk_payload_get). The fast decoder is tested bit-exact against it. */
sjk_status sjk_record_decode_ref(const sjk_record_params *p, float *k, float *v,
                                 const void *src, size_t src_nbytes);

#endif
