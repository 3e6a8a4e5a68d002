/* trellis_avx2.c — the AVX2 trellis kernels, one sequence per lane, two ymm per block of
 * 16 sequences. The code is in trellis_x86.h (shared with trellis_avx512.c).
 * Bit-identical to the scalar reference (trellis.c). */
#define SJK_TR_W 8
#define SJK_TR_SFX(name) name##_avx2
#include "codec/trellis_x86.h"
