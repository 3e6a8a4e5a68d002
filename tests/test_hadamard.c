/* test_hadamard.c — the rotation is orthonormal, its own inverse, and matches the
 * definition H[i][j] = (-1)^popcount(i & j) / sqrt(n). */
#include "codec/hadamard.h"
#include "common/rng.h"
#include "harness.h"
#include "sjkvarn.h"

TEST(test_hadamard_matches_definition)
{
    for (size_t n = 2; n <= 512; n *= 2) {
        float x[512], y[512];
        sjk_rng r;
        sjk_rng_seed(&r, n);
        for (size_t i = 0; i < n; i++) x[i] = (float)sjk_rng_normal(&r);
        memcpy(y, x, n * sizeof *x);
        CHECK(sjk_hadamard(y, n, n) == SJK_OK);
        double maxerr = 0;
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (size_t j = 0; j < n; j++) s += (__builtin_popcountll(i & j) & 1 ? -1.0 : 1.0) * x[j];
            s /= sqrt((double)n);
            maxerr = fmax(maxerr, fabs(s - y[i]));
        }
        CHECKF(maxerr < 1e-5, "n=%zu maxerr=%g", n, maxerr);
    }
}

TEST(test_hadamard_self_inverse_and_norm)
{
    float x[1024], y[1024];
    sjk_rng r;
    sjk_rng_seed(&r, 7);
    for (int i = 0; i < 1024; i++) x[i] = (float)sjk_rng_normal(&r);
    memcpy(y, x, sizeof x);
    double n0 = 0, n1 = 0;
    for (int i = 0; i < 1024; i++) n0 += (double)x[i] * x[i];
    CHECK(sjk_hadamard(y, 1024, 256) == SJK_OK);
    for (int i = 0; i < 1024; i++) n1 += (double)y[i] * y[i];
    CHECK_NEAR(n1 / n0, 1.0, 1e-5);
    CHECK(sjk_hadamard(y, 1024, 256) == SJK_OK);
    for (int i = 0; i < 1024; i++) CHECK_NEAR(y[i], x[i], 1e-5);
}

TEST(test_hadamard_rejects_bad_block)
{
    float x[96] = {0};
    CHECK(sjk_hadamard(x, 96, 64) == SJK_ERR_PARAM);  /* does not divide */
    CHECK(sjk_hadamard(x, 96, 48) == SJK_ERR_PARAM);  /* not a power of two */
    CHECK(sjk_hadamard(NULL, 64, 64) == SJK_ERR_PARAM);
    CHECK(sjk_hadamard(x, 64, 1) == SJK_ERR_PARAM);
}

/* The dispatched transform (AVX2 where available) performs the same additions in the
 * same order as the scalar reference, so it must be bit-identical. */
TEST(test_hadamard_simd_matches_reference_bits)
{
    for (size_t n = 2; n <= 512; n *= 2) {
        float x[512], y[512];
        sjk_rng r;
        sjk_rng_seed(&r, 100 + n);
        for (size_t i = 0; i < n; i++) x[i] = (float)(sjk_rng_normal(&r) * 3.0);
        memcpy(y, x, n * sizeof *x);
        sjk_hadamard_block_ref(x, n);
        sjk_hadamard_block(y, n);
        CHECKF(memcmp(x, y, n * sizeof *x) == 0, "n=%zu", n);
    }
}

int main(void)
{
    RUN(test_hadamard_matches_definition);
    RUN(test_hadamard_self_inverse_and_norm);
    RUN(test_hadamard_rejects_bad_block);
    RUN(test_hadamard_simd_matches_reference_bits);
    return test_summary();
}
