/* cpu.h — run-time CPU feature detection (see sjk_cpu_features in sjkvarn.h).
 *
 * SIMD copies of a routine live beside it, in <name>_avx2.c and <name>_avx512.c, compiled
 * for that instruction set only. A module picks one implementation per process through a
 * function-pointer table initialised once (pthread_once) from sjk_cpu_features(). */
#ifndef SJK_CPU_H
#define SJK_CPU_H
#include "sjkvarn.h"
#endif
