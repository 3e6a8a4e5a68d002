/* rng.h — the library's deterministic PRNG (include/sjkvarn.h, "Deterministic random
 * numbers"; rng.c): splitmix64 seeding + xoshiro256** and a Box–Muller Gaussian. Used by
 * tests, benchmarks, the codebook trainer and libsjkeval; never by the codec's data path.
 * State lives in the caller's struct (no globals). */
#ifndef SJK_RNG_H
#define SJK_RNG_H

#include "sjkvarn.h"

#endif
