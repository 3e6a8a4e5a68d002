/* quants_avx512.c — the quants_x86.h kernels with AVX512-VNNI dot products (vpdpbusd on
 * 256-bit registers, AVX512VL); compiled with the AVX-512 flags and reached through
 * sjkh_qtraits_get() when the CPU has SJK_CPU_AVX512. */
#define SJKH_SFX(name) name##_avx512
#define SJKH_VNNI 1
#include "quants_x86.h"

