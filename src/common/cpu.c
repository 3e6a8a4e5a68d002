/* cpu.c — CPU feature detection with the SJK_CPU_DISABLE test override. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"

static unsigned g_features;           /* written once under g_once, then read-only */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void detect(void)
{
    unsigned f = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) f |= SJK_CPU_AVX2;
    if ((f & SJK_CPU_AVX2) && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") &&
        __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vbmi"))
        f |= SJK_CPU_AVX512;
#endif
    const char *dis = getenv("SJK_CPU_DISABLE");
    if (dis) {
        if (strstr(dis, "all")) f = 0;
        if (strstr(dis, "avx512")) f &= ~(unsigned)SJK_CPU_AVX512;
        if (strstr(dis, "avx2")) f &= ~(unsigned)(SJK_CPU_AVX2 | SJK_CPU_AVX512);
    }
    g_features = f;
}

unsigned sjk_cpu_features(void)
{
    pthread_once(&g_once, detect);
    return g_features;
}
