/* util.h — small internal helpers: overflow-checked size arithmetic, min/max, alignment. */
#ifndef SJK_UTIL_H
#define SJK_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define SJK_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SJK_MAX(a, b) ((a) > (b) ? (a) : (b))
#define SJK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* *out = a * b; returns 0 on overflow (then *out is unspecified), 1 on success. */
static inline int sjk_mul_ok(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
/* *out = a + b; returns 0 on overflow. */
static inline int sjk_add_ok(size_t a, size_t b, size_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
/* Round n up to a multiple of align (a power of two); returns 0 on overflow. */
static inline int sjk_align_up_ok(size_t n, size_t align, size_t *out)
{
    size_t t;
    if (!sjk_add_ok(n, align - 1, &t)) return 0;
    *out = t & ~(align - 1);
    return 1;
}
static inline int sjk_is_pow2(size_t n) { return n && !(n & (n - 1)); }

static inline uint16_t sjk_rd_u16le(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline void sjk_wr_u16le(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline uint32_t sjk_rd_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline void sjk_wr_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

#endif
