/* rng.c — splitmix64 seeding, xoshiro256** and a Box–Muller Gaussian (rng.h). The
 * sequences are part of what the tests pin (synthetic data, codebooks): do not change
 * them. */
#include <math.h>

#include "common/rng.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void sjk_rng_seed(sjk_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

uint64_t sjk_rng_u64(sjk_rng *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5, res = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return res;
}

double sjk_rng_uniform(sjk_rng *r) { return (double)(sjk_rng_u64(r) >> 11) * 0x1.0p-53; }

double sjk_rng_normal(sjk_rng *r)
{
    double u1 = sjk_rng_uniform(r), u2 = sjk_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
