/* hadamard_avx2.c — the Walsh–Hadamard block transform with AVX2 (8 floats per vector).
 *
 * Stages h = 1, 2, 4 mix values inside one 8-float vector: the partner of lane j is
 * lane j ^ h, so out = partner + s·x with s = +1 where bit h of j is clear and -1 where
 * it is set. Stages h >= 8 are plain vector butterflies between two vectors. The sums
 * are exactly the reference's (same pairs, same order), so results are bit-identical
 * to sjk_hadamard_block_ref. */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

void sjk_hadamard_block_avx2(float *x, size_t n);

void sjk_hadamard_block_avx2(float *x, size_t n)
{
    const __m256 s1 = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
    const __m256 s2 = _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1);
    const __m256 s4 = _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1);
    for (size_t i = 0; i < n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        v = _mm256_add_ps(_mm256_permute_ps(v, 0xB1), _mm256_mul_ps(v, s1));
        v = _mm256_add_ps(_mm256_permute_ps(v, 0x4E), _mm256_mul_ps(v, s2));
        v = _mm256_add_ps(_mm256_permute2f128_ps(v, v, 1), _mm256_mul_ps(v, s4));
        _mm256_storeu_ps(x + i, v);
    }
    for (size_t h = 8; h < n; h <<= 1) {
        for (size_t i = 0; i < n; i += 2 * h) {
            for (size_t j = i; j < i + h; j += 8) {
                __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + h);
                _mm256_storeu_ps(x + j, _mm256_add_ps(a, b));
                _mm256_storeu_ps(x + j + h, _mm256_sub_ps(a, b));
            }
        }
    }
    const __m256 s = _mm256_set1_ps((float)(1.0 / sqrt((double)n)));
    for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), s));
}
