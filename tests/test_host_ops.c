/* test_host_ops.c — the host's vector kernels (host/kernels/ops.h) against their scalar
 * references, for every instruction set this CPU offers (after SJK_CPU_DISABLE), so one
 * machine checks the AVX2 and AVX-512 twins alike.
 *
 * Tolerances (all against a double-precision sum of the same products):
 *   dot_f16_multi, mm_f32_tile, mm_f32_panel   |got - exact| <= 1e-5 * sum |a_i b_i|
 *     (f32 accumulation over <= a few thousand terms, in a different order or with FMA)
 *   axpy_f16_multi                             |got - exact| <= 1e-6 * (|y| + |w v|)
 *     (one FMA or one multiply-add per element)
 *   mm_f32_pack, round_f16                     bit-identical
 *   wsum_f16_multi    bit-identical to n_t calls of the same ISA's axpy_f16_multi
 *   scores_f16_multi  bit-identical to n_t calls of the same ISA's dot_f16_multi
 *   scores_q8_0_multi / wsum_q8_0_multi: 1e-5 * sum |k q| / 1e-5 * (|o| + sum |w v|)
 *     against the rows the library's q8_0 decoder gives (exact dequantization, f32 sums)
 *   gelu_mul   |got - libm form| <= 1e-7 |x| + 1e-6 |libm form|, and for the SIMD
 *     versions |got - exact| <= (2e-6 + 1.2e-7 |2a|) |exact| + 1e-30 (exact: the tanh
 *     form in double, rewritten as x / (1 + e^(-2a)) so that it does not cancel; the
 *     |2a| term is the float rounding of the exponent, a = sqrt(2/pi)(x + 0.044715 x^3)).
 *     The libm form itself is only within ~6e-8 |x| for negative x, where 1 + tanh
 *     cancels in float.
 *   gelu_table_mul (ggml's f16-table GELU)     bit-identical to the reference
 *   silu_mul   |got - libm form| <= 2e-7 |x u| + 1e-6 |libm form|
 * and no kernel writes outside the rows and tokens it was given. */
#include <stdint.h>

#include "harness.h"
#include "hcommon.h"
#include "kernels/ops.h"
#include "sjkvarn.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void) /* uniform in [-1, 1] */
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) % 2000001) / 1000000.0f - 1.0f;
}

/* ---- the implementations this CPU can run -------------------------------------------- */

typedef struct impl {
    const char *name;
    void (*dot_multi)(const uint16_t *k, const float *q, size_t q_stride, size_t nq, size_t n, float *out);
    void (*axpy_multi)(const float *w, const uint16_t *v, float *o, size_t o_stride, size_t nq, size_t n);
    void (*scores)(const uint16_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride, size_t nq, size_t n,
                   float *out);
    void (*wsum)(const float *w, size_t w_stride, const uint16_t *v, size_t v_stride, size_t n_t, float *o,
                 size_t o_stride, size_t nq, size_t n);
    void (*round)(const float *src, float *dst, size_t n);
    void (*tile)(const float *w, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys);
    void (*pack)(const float *w, size_t nr, size_t n, float *wp);
    void (*panel)(const float *wp, size_t nr, const float *x, size_t nt, size_t n, float *y, size_t ys);
    void (*gelu_mul)(float *h, const float *u, size_t n);
} impl;

static size_t impls(impl *out)
{
    size_t k = 0;
    out[k++] = (impl){"ref", sjkh_dot_f16_multi_ref, sjkh_axpy_f16_multi_ref, sjkh_scores_f16_multi_ref,
                      sjkh_wsum_f16_multi_ref,
                      sjkh_round_f16_ref, sjkh_mm_f32_tile_ref,
                      sjkh_mm_f32_pack_ref, sjkh_mm_f32_panel_ref, sjkh_gelu_mul_ref};
#if defined(__x86_64__)
    unsigned f = sjk_cpu_features();
    if (f & SJK_CPU_AVX2)
        out[k++] = (impl){"avx2", sjkh_dot_f16_multi_avx2, sjkh_axpy_f16_multi_avx2, sjkh_scores_f16_multi_avx2,
                          sjkh_wsum_f16_multi_avx2,
                          sjkh_round_f16_avx2, sjkh_mm_f32_tile_avx2,
                          sjkh_mm_f32_pack_avx2, sjkh_mm_f32_panel_avx2, sjkh_gelu_mul_avx2};
    if (f & SJK_CPU_AVX512)
        out[k++] = (impl){"avx512", sjkh_dot_f16_multi_avx512, sjkh_axpy_f16_multi_avx512,
                          sjkh_scores_f16_multi_avx512, sjkh_wsum_f16_multi_avx512,
                          sjkh_round_f16_avx512, sjkh_mm_f32_tile_avx512,
                          sjkh_mm_f32_pack_avx512, sjkh_mm_f32_panel_avx512, sjkh_gelu_mul_avx512};
#endif
    const sjkh_ops *d = sjkh_ops_get(); /* whatever the dispatch picked, once more */
    out[k++] = (impl){"dispatched", d->dot_f16_multi, d->axpy_f16_multi, d->scores_f16_multi,
                      d->wsum_f16_multi, d->round_f16,
                      d->mm_f32_tile, d->mm_f32_pack,
                      d->mm_f32_panel, d->gelu_mul};
    return k;
}

/* ---- attention rows ------------------------------------------------------------------ */

TEST(test_dot_f16_multi_matches_reference)
{
    impl im[4];
    size_t ni = impls(im);
    const size_t lens[] = {7, 8, 16, 24, 64, 72, 256};
    enum { NQ = 17, MAXN = 256, STRIDE = MAXN + 3 };
    uint16_t k[MAXN];
    float *q = malloc(NQ * STRIDE * sizeof *q);
    for (size_t ii = 0; ii < ni; ii++)
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            size_t n = lens[li];
            for (size_t i = 0; i < n; i++) k[i] = sjkh_f32_to_f16(frand() * 2.0f);
            for (size_t i = 0; i < NQ * STRIDE; i++) q[i] = frand();
            for (size_t nq = 1; nq <= NQ; nq++) {
                float out[NQ + 1];
                for (size_t h = 0; h <= NQ; h++) out[h] = -777.0f;
                im[ii].dot_multi(k, q, STRIDE, nq, n, out);
                for (size_t h = 0; h < nq; h++) {
                    double exact = 0, mag = 0;
                    for (size_t i = 0; i < n; i++) {
                        double p = (double)sjkh_f16_to_f32(k[i]) * q[h * STRIDE + i];
                        exact += p, mag += fabs(p);
                    }
                    CHECKF(fabs(out[h] - exact) <= 1e-5 * mag, "%s n %zu nq %zu h %zu: %g vs %g", im[ii].name, n, nq,
                           h, out[h], exact);
                }
                CHECKF(out[nq] == -777.0f, "%s n %zu nq %zu: wrote past nq", im[ii].name, n, nq);
            }
        }
    free(q);
    printf("  %zu implementations checked\n", ni);
}

TEST(test_axpy_f16_multi_matches_reference)
{
    impl im[4];
    size_t ni = impls(im);
    const size_t lens[] = {7, 8, 16, 24, 64, 72, 256};
    enum { NQ = 17, MAXN = 256, STRIDE = MAXN + 5 };
    uint16_t v[MAXN];
    float w[NQ], *o = malloc(NQ * STRIDE * sizeof *o), *o0 = malloc(NQ * STRIDE * sizeof *o0);
    for (size_t ii = 0; ii < ni; ii++)
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            size_t n = lens[li];
            for (size_t i = 0; i < n; i++) v[i] = sjkh_f32_to_f16(frand() * 2.0f);
            for (size_t nq = 1; nq <= NQ; nq++) {
                for (size_t h = 0; h < NQ; h++) w[h] = frand();
                for (size_t i = 0; i < NQ * STRIDE; i++) o[i] = o0[i] = frand();
                im[ii].axpy_multi(w, v, o, STRIDE, nq, n);
                for (size_t h = 0; h < NQ; h++)
                    for (size_t i = 0; i < STRIDE; i++) {
                        size_t e = h * STRIDE + i;
                        if (h >= nq || i >= n) {
                            CHECKF(o[e] == o0[e], "%s n %zu nq %zu: wrote outside at %zu", im[ii].name, n, nq, e);
                            continue;
                        }
                        double p = (double)w[h] * sjkh_f16_to_f32(v[i]), exact = o0[e] + p;
                        CHECKF(fabs(o[e] - exact) <= 1e-6 * (fabs(o0[e]) + fabs(p)), "%s n %zu nq %zu: %g vs %g",
                               im[ii].name, n, nq, o[e], exact);
                    }
            }
        }
    free(o), free(o0);
    printf("  %zu implementations checked\n", ni);
}

TEST(test_wsum_f16_multi_equals_repeated_axpy)
{
    impl im[4];
    size_t ni = impls(im);
    const size_t lens[] = {8, 16, 48, 64, 80, 256};
    enum { NQ = 6, MAXN = 256, NT = 37, VS = MAXN + 16, WS = NQ + 1, OS = MAXN + 3 };
    uint16_t *v = malloc(NT * VS * sizeof *v);
    float *w = malloc(NT * WS * sizeof *w), *o = malloc(NQ * OS * sizeof *o), *oa = malloc(NQ * OS * sizeof *oa);
    for (size_t i = 0; i < NT * VS; i++) v[i] = sjkh_f32_to_f16(frand() * 2.0f);
    for (size_t i = 0; i < NT * WS; i++) w[i] = frand();
    for (size_t ii = 0; ii < ni; ii++)
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
            for (size_t nq = 1; nq <= NQ; nq++)
                for (size_t nt = 0; nt <= NT; nt += 6) {
                    size_t n = lens[li];
                    for (size_t i = 0; i < NQ * OS; i++) o[i] = oa[i] = frand();
                    im[ii].wsum(w, WS, v, VS, nt, o, OS, nq, n);
                    for (size_t t = 0; t < nt; t++) im[ii].axpy_multi(w + t * WS, v + t * VS, oa, OS, nq, n);
                    CHECKF(!memcmp(o, oa, NQ * OS * sizeof *o), "%s n %zu nq %zu n_t %zu: differs from axpy_f16_multi",
                           im[ii].name, n, nq, nt);
                }
    free(v), free(w), free(o), free(oa);
    printf("  %zu implementations checked\n", ni);
}

TEST(test_scores_f16_multi_equals_repeated_dot)
{
    impl im[4];
    size_t ni = impls(im);
    const size_t lens[] = {8, 16, 24, 64, 256};
    enum { NQ = 6, MAXN = 256, NT = 13, KS = MAXN + 16, QS = MAXN + 3 };
    uint16_t *k = malloc(NT * KS * sizeof *k);
    float *q = malloc(NQ * QS * sizeof *q), out[NT * NQ + 1], ref[NT * NQ];
    for (size_t i = 0; i < NT * KS; i++) k[i] = sjkh_f32_to_f16(frand() * 2.0f);
    for (size_t i = 0; i < NQ * QS; i++) q[i] = frand();
    for (size_t ii = 0; ii < ni; ii++)
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
            for (size_t nq = 1; nq <= NQ; nq++)
                for (size_t nt = 0; nt <= NT; nt++) {
                    size_t n = lens[li];
                    out[nt * nq] = -777.0f;
                    im[ii].scores(k, KS, nt, q, QS, nq, n, out);
                    for (size_t t = 0; t < nt; t++) im[ii].dot_multi(k + t * KS, q, QS, nq, n, ref + t * nq);
                    CHECKF(!memcmp(out, ref, nt * nq * sizeof *out),
                           "%s n %zu nq %zu n_t %zu: differs from dot_f16_multi", im[ii].name, n, nq, nt);
                    CHECKF(out[nt * nq] == -777.0f, "%s n %zu nq %zu n_t %zu: wrote past the end", im[ii].name, n, nq,
                           nt);
                }
    free(k), free(q);
    printf("  %zu implementations checked\n", ni);
}

TEST(test_round_f16_matches_reference)
{
    impl im[4];
    size_t ni = impls(im);
    enum { N = 4099 };
    float *src = malloc(N * sizeof *src), *ref = malloc(N * sizeof *ref), *got = malloc(N * sizeof *got);
    for (size_t i = 0; i < N; i++) src[i] = frand() * powf(2.0f, (float)(i % 48) - 30.0f); /* subnormal .. overflow */
    src[0] = INFINITY, src[1] = -INFINITY, src[2] = 65520.0f, src[3] = 65519.0f, src[4] = -0.0f, src[5] = 5.96e-8f;
    sjkh_round_f16_ref(src, ref, N);
    for (size_t ii = 0; ii < ni; ii++) {
        for (size_t n = N - 3; n <= N; n++) {
            for (size_t i = 0; i < N; i++) got[i] = -777.0f;
            im[ii].round(src, got, n);
            CHECKF(!memcmp(got, ref, n * sizeof *got), "%s n %zu: differs from the reference", im[ii].name, n);
            CHECKF(n == N || got[n] == -777.0f, "%s n %zu: wrote past n", im[ii].name, n);
        }
        memcpy(got, src, N * sizeof *got); /* in place */
        im[ii].round(got, got, N);
        CHECKF(!memcmp(got, ref, N * sizeof *got), "%s: in place differs", im[ii].name);
    }
    free(src), free(ref), free(got);
}

/* ---- exact-activation matmul --------------------------------------------------------- */

/* y [nt][ys] checked against the double sums of w [nr][n] times x [nt][n]; cells with
 * r >= nr (up to ys) or t >= nt (up to nt_cap) must still hold the -777 fill */
static void check_mm(const char *what, const float *w, size_t nr, const float *x, size_t nt, size_t nt_cap, size_t n,
                     const float *y, size_t ys)
{
    for (size_t t = 0; t < nt_cap; t++)
        for (size_t r = 0; r < ys; r++) {
            float got = y[t * ys + r];
            if (t >= nt || r >= nr) {
                CHECKF(got == -777.0f, "%s n %zu nr %zu nt %zu: wrote outside at t %zu r %zu", what, n, nr, nt, t, r);
                continue;
            }
            double exact = 0, mag = 0;
            for (size_t i = 0; i < n; i++) {
                double p = (double)w[r * n + i] * x[t * n + i];
                exact += p, mag += fabs(p);
            }
            CHECKF(fabs(got - exact) <= 1e-5 * mag, "%s n %zu nr %zu nt %zu t %zu r %zu: %g vs %g", what, n, nr, nt, t,
                   r, got, exact);
        }
}

TEST(test_mm_f32_pack_and_panel_match_reference)
{
    impl im[4];
    size_t ni = impls(im), checked = 0;
    const size_t lens[] = {1, 15, 16, 17, 255, 256, 257, 640, 700};
    const size_t nrs[] = {1, 5, 15, 16, 17, 31, 32};
    const size_t nts[] = {1, 2, 5, 8, 11, 12, 13, 24, 25, 40};
    enum { P = SJKH_MM_PANEL, MAXT = 40, YS = P + 3 };
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        size_t n = lens[li];
        float *w = malloc(P * n * sizeof *w), *x = malloc(MAXT * n * sizeof *x);
        float *wp = malloc(n * P * sizeof *wp), *wpr = malloc(n * P * sizeof *wpr);
        float *y = malloc((MAXT + 1) * YS * sizeof *y);
        for (size_t i = 0; i < P * n; i++) w[i] = frand();
        for (size_t i = 0; i < MAXT * n; i++) x[i] = frand() * 3.0f;
        for (size_t ri = 0; ri < sizeof nrs / sizeof *nrs; ri++) {
            size_t nr = nrs[ri];
            sjkh_mm_f32_pack_ref(w, nr, n, wpr);
            for (size_t ii = 0; ii < ni; ii++) {
                if (!im[ii].pack) continue;
                for (size_t i = 0; i < n * P; i++) wp[i] = -777.0f;
                im[ii].pack(w, nr, n, wp);
                CHECKF(!memcmp(wp, wpr, n * P * sizeof *wp), "%s pack n %zu nr %zu differs from the reference",
                       im[ii].name, n, nr);
                for (size_t ti = 0; ti < sizeof nts / sizeof *nts; ti++) {
                    size_t nt = nts[ti];
                    for (size_t i = 0; i < (MAXT + 1) * YS; i++) y[i] = -777.0f;
                    im[ii].panel(wpr, nr, x, nt, n, y, YS);
                    check_mm(im[ii].name, w, nr, x, nt, SJKH_MIN(nt + 1, (size_t)MAXT + 1), n, y, YS);
                    checked++;
                }
            }
        }
        free(w), free(x), free(wp), free(wpr), free(y);
    }
    printf("  %zu (implementation, shape) pairs checked\n", checked);
}

TEST(test_mm_f32_tile_all_isas_match_reference)
{
    impl im[4];
    size_t ni = impls(im);
    const size_t lens[] = {1, 7, 8, 15, 16, 17, 31, 64, 200, 640, 2048};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        size_t n = lens[li];
        float *w = malloc(4 * n * sizeof *w), *x = malloc(5 * n * sizeof *x);
        for (size_t i = 0; i < 4 * n; i++) w[i] = frand();
        for (size_t i = 0; i < 5 * n; i++) x[i] = frand() * 3.0f;
        for (size_t ii = 0; ii < ni; ii++)
            for (size_t nr = 1; nr <= 4; nr++)
                for (size_t nt = 1; nt <= 5; nt++) {
                    float y[6 * 6];
                    for (int i = 0; i < 36; i++) y[i] = -777.0f;
                    im[ii].tile(w, nr, x, nt, n, y, 6);
                    check_mm(im[ii].name, w, nr, x, nt, 6, n, y, 6);
                }
        free(w), free(x);
    }
}

/* ---- GELU ------------------------------------------------------------------------------ */

static double gelu_arg2(double x) { return 2.0 * 0.79788456080286535587989211986876 * (x + 0.044715 * x * x * x); }
/* the tanh form in double, written as x / (1 + e^(-2a)) so that it does not cancel */
static double gelu_exact(double x) { return x / (1.0 + exp(-gelu_arg2(x))); }

TEST(test_gelu_mul_matches_libm_form)
{
    impl im[4];
    size_t ni = impls(im);
    enum { N = 200003 }; /* odd: a masked tail */
    float *x = malloc(N * sizeof *x), *u = malloc(N * sizeof *u), *h = malloc(N * sizeof *h);
    for (size_t i = 0; i < N; i++) {
        if (i < 100000) x[i] = -25.0f + 50.0f * (float)i / 100000.0f; /* a dense sweep */
        else x[i] = frand() * 4.0f;                                  /* typical activations */
        u[i] = i % 3 ? frand() : 1.0f;
    }
    const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e4f, -1e4f, 3e38f, -3e38f, 88.0f, -88.0f};
    memcpy(x + 100000, special, sizeof special);
    for (size_t ii = 0; ii < ni; ii++) {
        if (!im[ii].gelu_mul) continue;
        memcpy(h, x, N * sizeof *h);
        im[ii].gelu_mul(h, u, N);
        double worst_ref = 0, worst_exact = 0;
        for (size_t i = 0; i < N; i++) {
            double ref = (double)sjkh_gelu_ref(x[i]) * u[i], ex = gelu_exact(x[i]) * u[i];
            double dr = fabs(h[i] - ref), de = fabs(h[i] - ex);
            double tr = 1e-7 * fabs(x[i] * u[i]) + 1e-6 * fabs(ref);
            double te = (2e-6 + 1.2e-7 * fabs(gelu_arg2(x[i]))) * fabs(ex) + 1e-30;
            CHECKF(dr <= tr, "%s x %.9g u %g: %.9g vs libm form %.9g", im[ii].name, x[i], u[i], h[i], ref);
            if (im[ii].gelu_mul != sjkh_gelu_mul_ref) /* the libm form loses this for x < 0 */
                CHECKF(de <= te, "%s x %.9g u %g: %.9g vs exact %.9g", im[ii].name, x[i], u[i], h[i], ex);
            if (tr > 0) worst_ref = fmax(worst_ref, dr / tr);
            if (im[ii].gelu_mul != sjkh_gelu_mul_ref) worst_exact = fmax(worst_exact, de / te);
        }
        printf("  %s: worst error / tolerance %.3f (libm form), %.3f (exact)\n", im[ii].name, worst_ref, worst_exact);
    }
    float nan_in = NAN, one = 1.0f;
    for (size_t ii = 0; ii < ni; ii++)
        if (im[ii].gelu_mul) {
            float hv = nan_in;
            im[ii].gelu_mul(&hv, &one, 1);
            CHECKF(isnan(hv), "%s: gelu(NaN) = %g", im[ii].name, hv);
        }
    free(x), free(u), free(h);
}

/* silu_mul: every ISA's version within 2e-7 |x u| + 1e-6 |silu(x) u| of the libm form,
 * over a dense sweep of [-25, 25], typical activations, and the ends of the range; NaN
 * stays NaN. */
TEST(test_silu_mul_matches_libm_form)
{
    enum { N = 100003 };
    float *x = malloc(N * sizeof *x), *u = malloc(N * sizeof *u), *h = malloc(N * sizeof *h);
    for (size_t i = 0; i < N; i++) {
        x[i] = i < 60000 ? -25.0f + 50.0f * (float)i / 60000.0f : frand() * 4.0f;
        u[i] = i % 3 ? frand() : 1.0f;
    }
    const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 100.0f, -100.0f, 1e4f, -1e4f};
    memcpy(x + 60000, special, sizeof special);
    void (*fns[4])(float *, const float *, size_t) = {sjkh_silu_mul_ref, NULL, sjkh_ops_get()->silu_mul, NULL};
    static const char *const names[4] = {"ref", "avx512", "dispatched", "avx2"};
#if defined(__x86_64__)
    if (sjk_cpu_features() & SJK_CPU_AVX512) fns[1] = sjkh_silu_mul_avx512;
    if (sjk_cpu_features() & SJK_CPU_AVX2) fns[3] = sjkh_silu_mul_avx2;
#endif
    for (int k = 0; k < 4; k++) {
        if (!fns[k]) continue;
        memcpy(h, x, N * sizeof *h);
        fns[k](h, u, N);
        double worst = 0;
        for (size_t i = 0; i < N; i++) {
            double ref = (double)(x[i] / (1.0f + expf(-x[i])) * u[i]);
            double tol = 2e-7 * fabs((double)x[i] * u[i]) + 1e-6 * fabs(ref), d = fabs(h[i] - ref);
            CHECKF(d <= tol, "silu_mul %d: x %.9g u %g: %.9g vs libm form %.9g", k, x[i], u[i], h[i], ref);
            if (tol > 0) worst = fmax(worst, d / tol);
        }
        printf("  silu_mul %s: worst error / tolerance %.3f\n", names[k], worst);
        float hv = NAN, one = 1.0f;
        fns[k](&hv, &one, 1);
        CHECKF(isnan(hv), "silu_mul %d: silu(NaN) = %g", k, hv);
    }
    free(x), free(u), free(h);
}

/* SJK_CPU_DISABLE=avx512 must land on the AVX2 kernels, =all on the references */
TEST(test_dispatch_follows_cpu_features)
{
    const sjkh_ops *d = sjkh_ops_get();
    unsigned f = sjk_cpu_features();
#if defined(__x86_64__)
    if (f & SJK_CPU_AVX512) {
        CHECK(d->mm_f32_panel == sjkh_mm_f32_panel_avx512 && d->mm_f32_tile == sjkh_mm_f32_tile_avx512);
        CHECK(d->wsum_f16_multi == sjkh_wsum_f16_multi_avx512 && d->gelu_mul == sjkh_gelu_mul_avx512);
        CHECK(d->scores_q8_0_multi == sjkh_scores_q8_0_multi_avx512 && d->wsum_q8_0_multi == sjkh_wsum_q8_0_multi_avx512);
        CHECK(d->gelu_table_mul == sjkh_gelu_table_mul_avx512 && d->silu_mul == sjkh_silu_mul_avx512);
        printf("  AVX-512 kernels in use\n");
        return;
    }
    if (f & SJK_CPU_AVX2) {
        CHECK(d->mm_f32_panel == sjkh_mm_f32_panel_avx2 && d->mm_f32_tile == sjkh_mm_f32_tile_avx2);
        CHECK(d->wsum_f16_multi == sjkh_wsum_f16_multi_avx2 && d->gelu_mul == sjkh_gelu_mul_avx2);
        CHECK(d->silu_mul == sjkh_silu_mul_avx2 && d->gelu_table_mul == sjkh_gelu_table_mul_avx2);
        CHECK(d->scores_q8_0_multi == sjkh_scores_q8_0_multi_avx2 && d->wsum_q8_0_multi == sjkh_wsum_q8_0_multi_avx2);
        printf("  AVX2 kernels in use\n");
        return;
    }
#endif
    CHECK(d->mm_f32_panel == NULL && d->mm_f32_tile == sjkh_mm_f32_tile_ref && d->gelu_mul == sjkh_gelu_mul_ref);
    CHECK(d->scores_q8_0_multi == sjkh_scores_q8_0_multi_ref && d->wsum_q8_0_multi == sjkh_wsum_q8_0_multi_ref);
    printf("  scalar references in use (features %#x)\n", f);
}

/* ggml's table GELU (act_quant 1, Gemma 3): the AVX-512 version must give the reference's
 * bits: f16 rounding ties (1 + 2^-11 and its odd neighbour), f16 subnormals and values that
 * round to zero, both cut-offs (+-10) and their neighbours, past them, signed zeros, and
 * random values, at lengths with and without a 16-lane tail; nothing past n is written. */
TEST(test_gelu_table_mul_bit_identical)
{
    enum { N = 1031 };
    static float x[N + 1], u[N], a[N + 1], b[N + 1];
    const float special[] = {0.0f, -0.0f, 1.0f + 0x1p-11f, 1.0f + 0x1p-10f + 0x1p-11f, -1.0f - 0x1p-11f, 3e-8f,
                             -3e-8f, 6e-8f, 1e-6f, -1e-6f, 2.9e-8f, 10.0f, -10.0f, 9.999999f, -9.999999f,
                             10.000001f, -10.000001f, 9.9921875f, -9.9921875f, 50.0f, -50.0f, 65504.0f, -1e30f,
                             0.5f + 0x1p-12f, -0.25f - 0x1p-13f, 7.99609375f, -2.0009765625f};
    for (size_t i = 0; i < N; i++) {
        x[i] = i < SJKH_ARRAY_LEN(special) ? special[i] : frand() * (i % 3 ? 4.0f : 12.0f);
        u[i] = frand() * 2.0f;
    }
    const size_t lens[] = {0, 5, 16, 33, N};
    for (size_t li = 0; li < SJKH_ARRAY_LEN(lens); li++) {
        size_t n = lens[li];
        memcpy(a, x, sizeof x);
        a[n] = b[n] = 12345.0f;
        memcpy(b, a, n * sizeof *a);
        sjkh_gelu_table_mul_ref(a, u, n);
        const sjkh_ops *d = sjkh_ops_get();
        d->gelu_table_mul(b, u, n);
        CHECKF(memcmp(a, b, n * sizeof *a) == 0, "dispatched gelu_table_mul differs from the reference (n %zu)", n);
        CHECK(b[n] == 12345.0f);
#if defined(__x86_64__)
        const struct { const char *name; unsigned need; void (*fn)(float *, const float *, size_t); } simd[] = {
            {"avx2", SJK_CPU_AVX2, sjkh_gelu_table_mul_avx2}, {"avx512", SJK_CPU_AVX512, sjkh_gelu_table_mul_avx512}};
        for (size_t k = 0; k < SJKH_ARRAY_LEN(simd); k++) {
            if (!(sjk_cpu_features() & simd[k].need)) continue;
            memcpy(b, x, n * sizeof *x);
            simd[k].fn(b, u, n);
            for (size_t i = 0; i < n; i++)
                CHECKF(memcmp(&a[i], &b[i], sizeof *a) == 0, "%s gelu_table_mul: x %a: %a vs reference %a",
                       simd[k].name, x[i], b[i], a[i]);
            CHECK(b[n] == 12345.0f);
        }
#endif
    }
    /* the reference is ggml's rule: 0 at and below -10, x at and above 10, else the table */
    float h[3] = {-10.0f, 10.0f, 1.0f}, one[3] = {1.0f, 1.0f, 1.0f};
    sjkh_gelu_table_mul_ref(h, one, 3);
    CHECK(h[0] == 0.0f && h[1] == 10.0f);
    CHECK(h[2] == sjkh_f16_to_f32(sjkh_f32_to_f16(sjkh_gelu_ref(1.0f))));
}

/* The q8_0 window kernels (ops_q8*.c) of every ISA against double sums of the decoded
 * rows (the library's q8_0 decoder): scores within 1e-5 * sum |k q|, weighted sums within
 * 1e-5 * (|o| + sum |w v|), for row strides with padding bytes, 1..16 query heads and
 * 1..9 rows, and nothing written past n_t * nq scores or outside the n columns of o. */
TEST(test_q8_0_window_kernels_match_reference)
{
    typedef void (*scores_fn)(const uint8_t *, size_t, size_t, const float *, size_t, size_t, size_t, float *);
    typedef void (*wsum_fn)(const float *, size_t, const uint8_t *, size_t, size_t, float *, size_t, size_t, size_t);
    struct {
        const char *name;
        scores_fn sc;
        wsum_fn ws;
    } im[4];
    size_t ni = 0;
    im[ni].name = "ref", im[ni].sc = sjkh_scores_q8_0_multi_ref, im[ni++].ws = sjkh_wsum_q8_0_multi_ref;
#if defined(__x86_64__)
    unsigned f = sjk_cpu_features();
    if (f & SJK_CPU_AVX2)
        im[ni].name = "avx2", im[ni].sc = sjkh_scores_q8_0_multi_avx2, im[ni++].ws = sjkh_wsum_q8_0_multi_avx2;
    if (f & SJK_CPU_AVX512)
        im[ni].name = "avx512", im[ni].sc = sjkh_scores_q8_0_multi_avx512, im[ni++].ws = sjkh_wsum_q8_0_multi_avx512;
#endif
    im[ni].name = "dispatched", im[ni].sc = sjkh_ops_get()->scores_q8_0_multi, im[ni++].ws = sjkh_ops_get()->wsum_q8_0_multi;
    const sjk_format_info *q8 = sjk_format_get(SJK_FMT_Q8_0);
    enum { MAXN = 256, MAXT = 9, NQ = 16, KS = MAXN / 32 * 34 + 7, OS = MAXN + 5 };
    uint8_t *k = malloc(MAXT * KS);
    float *kd = malloc(MAXT * MAXN * sizeof *kd), *x = malloc(MAXN * sizeof *x);
    float *q = malloc(NQ * OS * sizeof *q), *w = malloc(MAXT * NQ * sizeof *w);
    float *o = malloc(NQ * OS * sizeof *o), *o0 = malloc(NQ * OS * sizeof *o0);
    const size_t lens[] = {32, 64, 256}, nts[] = {1, 2, 5, 9};
    for (size_t ii = 0; ii < ni; ii++)
        for (size_t li = 0; li < 3; li++)
            for (size_t ti = 0; ti < 4; ti++) {
                size_t n = lens[li], n_t = nts[ti];
                for (size_t t = 0; t < n_t; t++) {
                    float sc = t % 3 == 2 ? 40.0f : 1.0f; /* a row with a large scale */
                    for (size_t i = 0; i < n; i++) x[i] = frand() * sc;
                    memset(k + t * KS, 0xA5, KS);
                    q8->encode(k + t * KS, x, n);
                    q8->decode(kd + t * MAXN, k + t * KS, n);
                }
                for (size_t i = 0; i < NQ * OS; i++) q[i] = frand(), o0[i] = frand();
                for (size_t i = 0; i < MAXT * NQ; i++) w[i] = frand() * 0.5f + 0.5f;
                for (size_t nq = 1; nq <= NQ; nq++) {
                    float out[MAXT * NQ + 1];
                    for (size_t e = 0; e <= MAXT * NQ; e++) out[e] = -777.0f;
                    im[ii].sc(k, KS, n_t, q, OS, nq, n, out);
                    for (size_t t = 0; t < n_t; t++)
                        for (size_t h = 0; h < nq; h++) {
                            double exact = 0, mag = 0;
                            for (size_t i = 0; i < n; i++) {
                                double p = (double)kd[t * MAXN + i] * q[h * OS + i];
                                exact += p, mag += fabs(p);
                            }
                            CHECKF(fabs(out[t * nq + h] - exact) <= 1e-5 * mag, "%s scores n %zu n_t %zu nq %zu: %g vs %g",
                                   im[ii].name, n, n_t, nq, out[t * nq + h], exact);
                        }
                    CHECKF(out[n_t * nq] == -777.0f, "%s scores n %zu n_t %zu nq %zu: wrote past", im[ii].name, n, n_t, nq);
                    memcpy(o, o0, NQ * OS * sizeof *o);
                    im[ii].ws(w, nq, k, KS, n_t, o, OS, nq, n);
                    for (size_t h = 0; h < NQ; h++)
                        for (size_t d = 0; d < OS; d++) {
                            if (h >= nq || d >= n) {
                                CHECKF(o[h * OS + d] == o0[h * OS + d], "%s wsum n %zu nq %zu: wrote outside", im[ii].name,
                                       n, nq);
                                continue;
                            }
                            double exact = o0[h * OS + d], mag = fabs(exact);
                            for (size_t t = 0; t < n_t; t++) {
                                double p = (double)w[t * nq + h] * kd[t * MAXN + d];
                                exact += p, mag += fabs(p);
                            }
                            CHECKF(fabs(o[h * OS + d] - exact) <= 1e-5 * mag, "%s wsum n %zu n_t %zu nq %zu: %g vs %g",
                                   im[ii].name, n, n_t, nq, o[h * OS + d], exact);
                        }
                }
            }
    free(k), free(kd), free(x), free(q), free(w), free(o), free(o0);
    printf("  %zu implementations checked\n", ni);
}

int main(void)
{
    RUN(test_q8_0_window_kernels_match_reference);
    RUN(test_dispatch_follows_cpu_features);
    RUN(test_dot_f16_multi_matches_reference);
    RUN(test_axpy_f16_multi_matches_reference);
    RUN(test_wsum_f16_multi_equals_repeated_axpy);
    RUN(test_scores_f16_multi_equals_repeated_dot);
    RUN(test_round_f16_matches_reference);
    RUN(test_mm_f32_pack_and_panel_match_reference);
    RUN(test_mm_f32_tile_all_isas_match_reference);
    RUN(test_gelu_mul_matches_libm_form);
    RUN(test_silu_mul_matches_libm_form);
    RUN(test_gelu_table_mul_bit_identical);
    return test_summary();
}
