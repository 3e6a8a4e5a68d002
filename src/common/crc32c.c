/* crc32c.c — CRC-32C, software (slicing-by-8 tables) and SSE4.2.
 *
 * The tables are built once (pthread_once) and immutable afterwards. The hardware path
 * is a function compiled for SSE4.2 by a target attribute and chosen once at run time,
 * so the file needs no special compiler flags. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"

#define POLY 0x82F63B78u

static uint32_t g_tab[8][256];
static int g_hw;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_once(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        g_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) g_tab[t][i] = (g_tab[t - 1][i] >> 8) ^ g_tab[0][g_tab[t - 1][i] & 0xFF];
#if defined(__x86_64__) || defined(__i386__)
    const char *dis = getenv("SJK_CPU_DISABLE");
    g_hw = __builtin_cpu_supports("sse4.2") && !(dis && strstr(dis, "all"));
#else
    g_hw = 0;
#endif
}

uint32_t sjk_crc32c_sw(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&g_once, init_once);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        c = g_tab[7][lo & 0xFF] ^ g_tab[6][(lo >> 8) & 0xFF] ^ g_tab[5][(lo >> 16) & 0xFF] ^
            g_tab[4][lo >> 24] ^ g_tab[3][p[4]] ^ g_tab[2][p[5]] ^ g_tab[1][p[6]] ^ g_tab[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ g_tab[0][(c ^ *p++) & 0xFF];
    return ~c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) { c = __builtin_ia32_crc32qi((uint32_t)c, *p++); n--; }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    while (n--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

int sjk_crc32c_hw_available(void)
{
    pthread_once(&g_once, init_once);
    return g_hw;
}

uint32_t sjk_crc32c_hw(uint32_t crc, const void *data, size_t n)
{
#if defined(__x86_64__)
    pthread_once(&g_once, init_once);
    if (__builtin_cpu_supports("sse4.2")) return crc_sse42(crc, data, n);
#endif
    return sjk_crc32c_sw(crc, data, n);
}

uint32_t sjk_crc32c(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&g_once, init_once);
#if defined(__x86_64__)
    if (g_hw) return crc_sse42(crc, data, n);
#endif
    return sjk_crc32c_sw(crc, data, n);
}
