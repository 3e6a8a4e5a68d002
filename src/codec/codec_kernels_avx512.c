/* codec_kernels_avx512.c — the AVX-512 twins of the seal and decode kernels, 16 lanes
 * (src/codec/codec_kernels.c is the reference; results are bit-identical). Compiled with
 * the AVX-512 flags; reached through sjk_codec_kernels_get() when the CPU has
 * SJK_CPU_AVX512. The code is in codec_kernels_x86.h. */
#if defined(__x86_64__)
#define SJK_CK_W 16
#define SJK_CK_NAME "avx512"
#define SJK_CK_SFX(name) name##_avx512
#include "codec/codec_kernels_x86.h"
#else
typedef int sjk_codec_kernels_avx512_unused;
#endif
