/* hcommon.h — small helpers private to libsjkhost: checked size arithmetic, little-endian
 * reads, fp16/bf16 conversions, error-message formatting. The host depends on libsjkvarn's
 * public header only, so it keeps its own copies of these few lines. */
#ifndef SJKH_HCOMMON_H
#define SJKH_HCOMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SJKH_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SJKH_MAX(a, b) ((a) > (b) ? (a) : (b))
#define SJKH_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* *out = a op b; 0 on overflow, 1 on success. */
static inline int sjkh_mul_ok(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int sjkh_add_ok(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline int sjkh_mul64_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int sjkh_add64_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline int sjkh_is_pow2(uint64_t n) { return n && !(n & (n - 1)); }

static inline uint16_t sjkh_rd_u16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t sjkh_rd_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t sjkh_rd_u64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline float sjkh_rd_f32(const void *p) { float v; memcpy(&v, p, 4); return v; }
/* Little-endian on every host (the session file's fields). */
static inline uint16_t sjkh_rd_u16le(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t sjkh_rd_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline void sjkh_wr_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t sjkh_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float sjkh_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* IEEE binary16 -> f32, exact. */
static inline float sjkh_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, u;
    if (exp == 0) {
        if (man == 0) return sjkh_bits_f32(sign);
        float f = (float)man * 5.9604644775390625e-8f; /* man * 2^-24 */
        u = sign | sjkh_f32_bits(f);
    } else if (exp == 31) {
        u = sign | 0x7F800000u | (man << 13) | (man ? 0x400000u : 0);
    } else {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    return sjkh_bits_f32(u);
}

/* f32 -> binary16, round to nearest even, overflow to Inf, NaN stays NaN. */
static inline uint16_t sjkh_f32_to_f16(float f)
{
    uint32_t x = sjkh_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u)
        return (uint16_t)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u | ((ax >> 13) & 0x3FFu) : 0));
    if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);
    if (ax < 0x38800000u) {
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7FFFFFu) | 0x800000u, shift = 126u - e;
        uint32_t half = 1u << (shift - 1), rest = m & ((1u << shift) - 1), r = m >> shift;
        if (rest > half || (rest == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ax - 0x38000000u, lower = r & 0x1FFFu;
    r >>= 13;
    if (lower > 0x1000u || (lower == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}

static inline float sjkh_bf16_to_f32(uint16_t b) { return sjkh_bits_f32((uint32_t)b << 16); }
static inline uint16_t sjkh_f32_to_bf16(float f)
{
    uint32_t u = sjkh_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7FFFu + ((u >> 16) & 1u))) >> 16);
}

/* Writes a formatted message into err (if non-NULL) and returns st. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static inline int sjkh_fail(int st, char *err, size_t cap, const char *fmt, ...)
{
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return st;
}

#endif
