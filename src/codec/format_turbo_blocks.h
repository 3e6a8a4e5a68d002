/* format_turbo_blocks.h — the block layouts of the TurboQuant family (format_turbo.c has
 * the pipeline and the byte layouts): per type its codebook, block size and the packing
 * of 128 codes, and the decode into the rotated domain (codebook value times the norm, no
 * inverse rotation). Scalar and dispatch-free: the dispatched kernels' references
 * (format_kernels.c) and the encoders above them (format_turbo.c) both build on it. */
#ifndef SJK_FORMAT_TURBO_BLOCKS_H
#define SJK_FORMAT_TURBO_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

typedef struct sjk_tq_type {
    int bits;               /* code bits: 6, 5, 4, 3 */
    const float *centroids; /* [1 << bits], ascending */
    const float *midpoints; /* [(1 << bits) - 1] */
    size_t nbytes;          /* block bytes */
    void (*pack)(uint8_t *blk, const uint8_t *codes);
    void (*unpack)(uint8_t *codes, const uint8_t *blk);
} sjk_tq_type;

extern const sjk_tq_type sjk_tq_tq6, sjk_tq_tq5, sjk_tq_turbo4, sjk_tq_turbo3;

/* dst[0..n) = codebook value of each code times its block's norm (n a multiple of 128). */
void sjk_tq_decode_rotated(const sjk_tq_type *t, float *dst, const void *src, size_t n);

#endif
