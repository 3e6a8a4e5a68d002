/* quants_avx2.c — AVX2/FMA/F16C kernels (compiled with -mavx2 -mfma -mf16c); reached
 * through sjkh_qtraits_get() when the CPU has AVX2. The code is in quants_x86.h. */
#define SJKH_SFX(name) name##_avx2
#define SJKH_VNNI 0
#include "quants_x86.h"
