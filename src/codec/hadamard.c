/* hadamard.c — fast orthonormal Walsh–Hadamard transform (Sylvester order, 1/sqrt(n)).
 *
 * The butterfly for h = 1, 2, 4, ...: pairs (j, j+h) inside each 2h-block become
 * (a+b, a-b). After log2(n) stages every output is the signed sum of all inputs with
 * sign (-1)^popcount(i & j); the final scale 1/sqrt(n) makes it orthonormal, so the
 * same call is its own inverse.
 */
#include <math.h>

#include "codec/hadamard.h"
#include "common/cpu.h"
#include "common/util.h"
#include "sjkvarn.h"

void sjk_hadamard_block_ref(float *x, size_t n)
{
    for (size_t h = 1; h < n; h <<= 1) {
        for (size_t i = 0; i < n; i += 2 * h) {
            for (size_t j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
        }
    }
    const float s = (float)(1.0 / sqrt((double)n));
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

void sjk_hadamard_block_avx2(float *x, size_t n);

/* The seal benchmark showed the rotation as the largest part of a 4/4 seal, so blocks of
 * 8 or more values go through the AVX2 version (bit-identical to the reference). */
void sjk_hadamard_block(float *x, size_t n)
{
#if defined(__x86_64__)
    if (n >= 8 && (sjk_cpu_features() & SJK_CPU_AVX2)) {
        sjk_hadamard_block_avx2(x, n);
        return;
    }
#endif
    sjk_hadamard_block_ref(x, n);
}

sjk_status sjk_hadamard(float *x, size_t n, size_t block)
{
    if (!x || block < 2 || block > 4096 || !sjk_is_pow2(block) || n % block) return SJK_ERR_PARAM;
    for (size_t i = 0; i < n; i += block) sjk_hadamard_block(x + i, block);
    return SJK_OK;
}
