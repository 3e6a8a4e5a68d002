/* synth.h — seeded synthetic K/V groups for tests and benchmarks (never used by the
 * codec's data path). Header-only; state lives in the caller's sjk_rng.
 *
 * Two kinds of data, each one 128-token group [G][D] of K and of V, in the model's basis
 * (callers rotate with sjk_hadamard as the cache does):
 *  - SJK_SYNTH_GAUSSIAN: i.i.d. N(0, amp^2).
 *  - SJK_SYNTH_OUTLIER: what real K/V caches look like to a per-channel / per-token
 *    quantizer. x[t][d] = amp * m[t] * (c[d] * z + mu[d]) with z ~ N(0,1), where
 *      m[t]  per-token magnitude: lognormal(0, 0.6), and 1 token in 16 swung x4;
 *      c[d]  per-channel spread: 1, except D/32 outlier channels x12 (K) or x6 (V);
 *      mu[d] per-channel offset: N(0, 0.5) * c[d] for K (keys carry biased channels), 0 for V.
 *    The channel structure is fixed per seed (one "head"); tokens vary per group.
 */
#ifndef SJK_SYNTH_H
#define SJK_SYNTH_H

#include <math.h>
#include <stddef.h>

#include "common/rng.h"

typedef enum sjk_synth_kind { SJK_SYNTH_GAUSSIAN = 0, SJK_SYNTH_OUTLIER } sjk_synth_kind;

/* Fills x[G][D] (G = 128). head_seed fixes the channel structure, r draws the rest. */
static inline void sjk_synth_group(float *x, size_t G, size_t D, sjk_synth_kind kind, int is_v,
                                   double amp, uint64_t head_seed, sjk_rng *r)
{
    if (kind == SJK_SYNTH_GAUSSIAN) {
        for (size_t i = 0; i < G * D; i++) x[i] = (float)(amp * sjk_rng_normal(r));
        return;
    }
    sjk_rng h;
    sjk_rng_seed(&h, head_seed * 2 + (uint64_t)is_v);
    double c[512], mu[512];
    for (size_t d = 0; d < D && d < 512; d++) {
        c[d] = 1.0;
        mu[d] = is_v ? 0.0 : 0.5 * sjk_rng_normal(&h);
    }
    for (size_t n = 0; n < D / 32; n++) {
        size_t d = (size_t)(sjk_rng_u64(&h) % D);
        c[d] = is_v ? 6.0 : 12.0;
        if (!is_v) mu[d] = 0.5 * sjk_rng_normal(&h) * c[d];
    }
    for (size_t t = 0; t < G; t++) {
        double m = exp(0.6 * sjk_rng_normal(r));
        if (sjk_rng_u64(r) % 16 == 0) m *= 4.0;
        for (size_t d = 0; d < D; d++)
            x[t * D + d] = (float)(amp * m * (c[d] * sjk_rng_normal(r) + mu[d]));
    }
}

/* Signal-to-noise ratio in dB of y against the reference x (n values). */
static inline double sjk_snr_db(const float *x, const float *y, size_t n)
{
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)y[i];
        s += (double)x[i] * x[i];
        e += d * d;
    }
    if (e == 0) return 200.0;
    return 10.0 * log10(s / e);
}

#endif
