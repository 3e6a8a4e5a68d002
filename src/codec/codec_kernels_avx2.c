/* codec_kernels_avx2.c — the AVX2 twins of the seal and decode kernels, 8 lanes
 * (src/codec/codec_kernels.c is the reference; results are bit-identical). Compiled with
 * the AVX2 flags only; reached through sjk_codec_kernels_get(). The code is in
 * codec_kernels_x86.h. */
#if defined(__x86_64__)
#define SJK_CK_W 8
#define SJK_CK_NAME "avx2"
#define SJK_CK_SFX(name) name##_avx2
#include "codec/codec_kernels_x86.h"
#else
typedef int sjk_codec_kernels_avx2_unused;
#endif
