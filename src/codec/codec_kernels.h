/* codec_kernels.h — the dispatch of the seal and record-decode kernels: the fastest table
 * the CPU allows, a specific path for tests, and the scalar log and exp of the balancing.
 * The table's entries and the determinism contract are in codec_kernels_table.h, the
 * leaf that the SIMD twins (codec_kernels_x86.h) implement. */
#ifndef SJK_CODEC_KERNELS_H
#define SJK_CODEC_KERNELS_H

#include "codec/codec_kernels_table.h"

/* The scalar definitions of the log and exp the balancing uses (max error ~2 ulp; x must
 * be a positive normal number, y in [-87, 88]). */
float sjk_fast_logf(float x);
float sjk_fast_expf(float y);

/* The fastest path the CPU allows (after SJK_CPU_DISABLE); chosen once, thread-safe. */
const sjk_codec_kernels *sjk_codec_kernels_get(void);
/* A specific path, or NULL where this build or CPU lacks it (tests compare paths). */
const sjk_codec_kernels *sjk_codec_kernels_ref(void);
const sjk_codec_kernels *sjk_codec_kernels_avx2(void);
const sjk_codec_kernels *sjk_codec_kernels_avx512(void);

#endif
