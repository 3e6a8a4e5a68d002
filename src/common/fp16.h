/* fp16.h — IEEE binary16 and bfloat16 conversions (portable, bit-exact).
 *
 * fp32 -> fp16 rounds to nearest, ties to even (the same as F16C's cvtps2ph with mode 0
 * and ggml's software routine); overflow goes to ±Inf, NaN stays NaN (quiet). fp16 ->
 * fp32 is exact. These are the scalar references for the F16C/AVX-512 bulk versions.
 */
#ifndef SJK_FP16_H
#define SJK_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t sjk_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float sjk_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float sjk_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: value = man * 2^-24 */
            float f = (float)man * 5.9604644775390625e-8f;
            u = sign | sjk_f32_bits(f);
        }
    } else if (exp == 31) {
        u = sign | 0x7F800000u | (man << 13) | (man ? 0x400000u : 0);
    } else {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    return sjk_bits_f32(u);
}

static inline uint16_t sjk_f32_to_fp16(float f)
{
    uint32_t x = sjk_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) { /* Inf or NaN */
        return (uint16_t)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u | ((ax >> 13) & 0x3FFu) : 0));
    }
    if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds to >= 65520 -> Inf */
    if (ax < 0x38800000u) { /* below 2^-14: subnormal or zero in fp16 */
        if (ax < 0x33000000u) return (uint16_t)sign; /* < 2^-25: rounds to 0 (ties even) */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t half = 1u << (shift - 1);
        uint32_t rest = m & ((1u << shift) - 1);
        uint32_t r = m >> shift;
        if (rest > half || (rest == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ax - 0x38000000u; /* rebias exponent 127 -> 15 */
    uint32_t lower = r & 0x1FFFu;
    r >>= 13;
    if (lower > 0x1000u || (lower == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}

/* bf16: round to nearest even on the dropped 16 bits; NaN -> (bits >> 16) | 0x40. */
static inline uint16_t sjk_f32_to_bf16(float f)
{
    uint32_t u = sjk_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static inline float sjk_bf16_to_f32(uint16_t h) { return sjk_bits_f32((uint32_t)h << 16); }

/* Round a float through fp16 and back. */
static inline float sjk_round_fp16(float f) { return sjk_fp16_to_f32(sjk_f32_to_fp16(f)); }

#endif
