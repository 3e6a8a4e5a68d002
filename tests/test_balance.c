/* test_balance.c — balancing: the reference mode is the KVarN algorithm (checked against a
 * literal double-precision transcription of docs/BACKGROUND.md, "KVarN balancing"), the sj mode converges where the
 * reference's clamp stalls, degenerate tiles stay finite, and every SIMD path gives the
 * same bits as the scalar reference. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "codec/balance.h"
#include "codec/codec_kernels.h"
#include "common/rng.h"
#include "common/util.h"
#include "harness.h"
#include "sjkvarn.h"

#define MAXN 512

static float g_M[MAXN * MAXN];
static float g_scr[12 * MAXN];

static const sjk_codec_kernels *paths[3];
static size_t n_paths;

static void init_paths(void)
{
    n_paths = 0;
    paths[n_paths++] = sjk_codec_kernels_ref();
    if (sjk_codec_kernels_avx2()) paths[n_paths++] = sjk_codec_kernels_avx2();
    if (sjk_codec_kernels_avx512()) paths[n_paths++] = sjk_codec_kernels_avx512();
}

/* A tile with row magnitudes exp(N(0, rsd)) and column magnitudes exp(N(0, csd)), times amp. */
static void structured_tile(float *M, size_t R, size_t C, double rsd, double csd, double amp, uint64_t seed)
{
    sjk_rng r;
    sjk_rng_seed(&r, seed);
    double rm[MAXN], cm[MAXN];
    for (size_t i = 0; i < R; i++) rm[i] = exp(rsd * sjk_rng_normal(&r));
    for (size_t j = 0; j < C; j++) cm[j] = exp(csd * sjk_rng_normal(&r));
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++) M[i * C + j] = (float)(amp * rm[i] * cm[j] * (sjk_rng_normal(&r) + 0.3));
}

/* ---- a literal transcription of KVarN balancing (docs/BACKGROUND.md), in double ---- */

static double std_d(const double *x, size_t n, size_t stride)
{
    double m = 0, s = 0;
    for (size_t i = 0; i < n; i++) m += x[i * stride];
    m /= (double)n;
    for (size_t i = 0; i < n; i++) s += (x[i * stride] - m) * (x[i * stride] - m);
    return sqrt(s / (double)(n - 1));
}

static double imb_d(const double *cur, size_t R, size_t C)
{
    double cmax = 0, cmin = 1e300, rmax = 0, rmin = 1e300;
    for (size_t j = 0; j < C; j++) {
        double s = std_d(cur + j, R, C);
        cmax = fmax(cmax, s), cmin = fmin(cmin, s);
    }
    for (size_t i = 0; i < R; i++) {
        double s = std_d(cur + i * C, C, 1);
        rmax = fmax(rmax, s), rmin = fmin(rmin, s);
    }
    return cmax / fmax(cmin, 1e-8) + rmax / fmax(rmin, 1e-8);
}

static double g_cur[MAXN * MAXN];

/* Returns the kept pass; hist[it] = imbalance after pass it (hist[0]: the raw tile). */
static unsigned literal_reference(const float *M, size_t R, size_t C, unsigned n_iter, double *s_row,
                                  double *s_col, double *hist)
{
    double a_r[MAXN] = {0}, a_c[MAXN] = {0};
    for (size_t i = 0; i < R * C; i++) g_cur[i] = M[i];
    double best = imb_d(g_cur, R, C);
    unsigned best_pass = 0;
    hist[0] = best;
    for (size_t i = 0; i < R; i++) s_row[i] = 1;
    for (size_t j = 0; j < C; j++) s_col[j] = 1;
    for (unsigned it = 1; it <= n_iter; it++) {
        for (size_t j = 0; j < C; j++) {
            double s = fmin(fmax(std_d(g_cur + j, R, C), 1e-3), 1e3);
            a_c[j] = fmin(fmax(a_c[j] + log(s), -0.3), 10.0);
        }
        for (size_t i = 0; i < R; i++)
            for (size_t j = 0; j < C; j++) g_cur[i * C + j] = M[i * C + j] / (exp(a_c[j]) * exp(a_r[i]));
        for (size_t i = 0; i < R; i++) {
            double s = fmin(fmax(std_d(g_cur + i * C, C, 1), 1e-3), 1e3);
            a_r[i] = fmin(fmax(a_r[i] + log(s), -0.3), 10.0);
        }
        for (size_t i = 0; i < R; i++)
            for (size_t j = 0; j < C; j++) g_cur[i * C + j] = M[i * C + j] / (exp(a_c[j]) * exp(a_r[i]));
        double imb = imb_d(g_cur, R, C);
        hist[it] = imb;
        if (imb <= best) {
            best = imb;
            best_pass = it;
            for (size_t i = 0; i < R; i++) s_row[i] = exp(a_r[i]);
            for (size_t j = 0; j < C; j++) s_col[j] = exp(a_c[j]);
        }
    }
    return best_pass;
}

TEST(test_reference_matches_literal_algorithm)
{
    static const struct { size_t R, C; double rsd, csd, amp; } cases[] = {
        {64, 128, 1.0, 0.5, 1.0},  /* converging */
        {128, 64, 0.7, 0.9, 3.0},
        {64, 64, 0.8, 0.8, 0.05},  /* small magnitude: the lower clamp pins scales */
        {32, 128, 0.3, 1.2, 0.3},
    };
    sjk_balance_rule rule = sjk_balance_rule_of(SJK_BALANCE_REFERENCE);
    CHECK(rule.n_iter == 8 && rule.keep_best == 1);
    for (size_t c = 0; c < SJK_ARRAY_LEN(cases); c++) {
        const size_t R = cases[c].R, C = cases[c].C;
        structured_tile(g_M, R, C, cases[c].rsd, cases[c].csd, cases[c].amp, 100 + c);
        double er[MAXN], ec[MAXN], hist[9];
        unsigned lit_pass = literal_reference(g_M, R, C, 8, er, ec, hist);
        float sr[MAXN], sc[MAXN], ir[MAXN], ic[MAXN];
        sjk_balance_info info;
        sjk_balance_run(g_M, R, C, &rule, NULL, sr, sc, ir, ic, g_scr, &info);
        /* The kept pass is the literal one, or one whose imbalance ties it to within fp32
         * rounding (a stalled tile repeats the same pinned scaling pass after pass). */
        CHECKF(info.best_pass == lit_pass || fabs(hist[info.best_pass] / hist[lit_pass] - 1) < 1e-6,
               "case %zu: best pass %u (imb %.9g), literal %u (imb %.9g)", c, info.best_pass,
               hist[info.best_pass], lit_pass, hist[lit_pass]);
        double maxrel = 0;
        for (size_t i = 0; i < R; i++) maxrel = fmax(maxrel, fabs(sr[i] / er[i] - 1));
        for (size_t j = 0; j < C; j++) maxrel = fmax(maxrel, fabs(sc[j] / ec[j] - 1));
        CHECKF(maxrel < 1e-4, "case %zu: scales differ from the literal algorithm by %g", c, maxrel);
    }
}

TEST(test_reference_all_equal_std_small_tile_comes_out_unscaled)
{
    /* The lower clamp (docs/BACKGROUND.md, "KVarN balancing"): an i.i.d. tile whose stds are all equal and small pins every scale at
     * the lower clamp: the scaling is uniform, so the balance is unchanged. ("Small": below
     * e^-0.6 ~ 0.55 with margin for sampling noise, so the tile, once divided by both pinned
     * scales, still has stds below 1 and the next pass pins again.) */
    const size_t R = 128, C = 256;
    sjk_rng r;
    sjk_rng_seed(&r, 5);
    for (size_t i = 0; i < R * C; i++) g_M[i] = (float)(0.3 * sjk_rng_normal(&r));
    sjk_balance_rule rule = sjk_balance_rule_of(SJK_BALANCE_REFERENCE);
    float sr[MAXN], sc[MAXN], ir[MAXN], ic[MAXN];
    sjk_balance_info info;
    sjk_balance_run(g_M, R, C, &rule, NULL, sr, sc, ir, ic, g_scr, &info);
    for (size_t i = 1; i < R; i++) CHECK(sr[i] == sr[0]);
    for (size_t j = 1; j < C; j++) CHECK(sc[j] == sc[0]);
    CHECK(sr[0] == 1.0f || fabsf(sr[0] - expf(-0.3f)) < 1e-6f);
    CHECK_NEAR(info.imbalance / info.imbalance_initial, 1.0, 1e-5);
}

TEST(test_reference_stalls_on_small_tiles_where_sj_converges)
{
    const size_t R = 128, C = 128;
    structured_tile(g_M, R, C, 0.8, 0.8, 0.01, 9);
    float sr[MAXN], sc[MAXN], ir[MAXN], ic[MAXN];
    sjk_balance_info ref, sj;
    sjk_balance_rule rr = sjk_balance_rule_of(SJK_BALANCE_REFERENCE), rs = sjk_balance_rule_of(SJK_BALANCE_SJ);
    sjk_balance_run(g_M, R, C, &rr, NULL, sr, sc, ir, ic, g_scr, &ref);
    sjk_balance_run(g_M, R, C, &rs, NULL, sr, sc, ir, ic, g_scr, &sj);
    CHECKF(ref.imbalance > 5.0, "reference imbalance %g", ref.imbalance);
    CHECKF(sj.imbalance < 2.05, "sj imbalance %g", sj.imbalance);
    /* the same tile at magnitude 100 (every row and column std well above e^-0.3): the
     * reference balances it too (8 passes take it from ~124 to ~4.6) */
    structured_tile(g_M, R, C, 0.8, 0.8, 100.0, 9);
    sjk_balance_run(g_M, R, C, &rr, NULL, sr, sc, ir, ic, g_scr, &ref);
    CHECKF(ref.imbalance < 0.05 * ref.imbalance_initial, "reference imbalance at magnitude 100: %g (initial %g)", ref.imbalance,
           ref.imbalance_initial);
}

TEST(test_sj_split_keeps_products_and_equalises_geomeans)
{
    const size_t R = 64, C = 128;
    structured_tile(g_M, R, C, 1.0, 1.0, 1e-3, 11);
    float sr[MAXN], sc[MAXN], ir[MAXN], ic[MAXN];
    sjk_balance_rule rs = sjk_balance_rule_of(SJK_BALANCE_SJ);
    sjk_balance_run(g_M, R, C, &rs, NULL, sr, sc, ir, ic, g_scr, NULL);
    double lr = 0, lc = 0;
    for (size_t i = 0; i < R; i++) lr += log(sr[i]);
    for (size_t j = 0; j < C; j++) lc += log(sc[j]);
    CHECK_NEAR(lr / R, lc / C, 1e-3);
    /* tile magnitude 1e-3 -> each factor about sqrt(1e-3), far from fp16 underflow */
    CHECKF(fabs(lr / R - 0.5 * log(1e-3)) < 1.0, "mean log row scale %g", lr / R);
}

TEST(test_sj_early_stop_matches_sixteen_passes)
{
    /* sj stops once a pass changes only a common factor; the balanced tile (the products
     * s_row * s_col) must match the one after all 16 passes */
    const size_t R = 256, C = 128;
    structured_tile(g_M, R, C, 1.0, 0.8, 0.5, 13);
    sjk_balance_rule fast = sjk_balance_rule_of(SJK_BALANCE_SJ), full = fast;
    full.tol = 0;
    float sr0[MAXN], sc0[MAXN], ir0[MAXN], ic0[MAXN], sr[MAXN], sc[MAXN], ir[MAXN], ic[MAXN];
    sjk_balance_info i0, i1;
    sjk_balance_run(g_M, R, C, &full, NULL, sr0, sc0, ir0, ic0, g_scr, &i0);
    sjk_balance_run(g_M, R, C, &fast, NULL, sr, sc, ir, ic, g_scr, &i1);
    CHECK(i0.best_pass == 16);
    CHECKF(i1.best_pass < 16, "early stop after %u passes", i1.best_pass);
    double worst = 0;
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j += 7) worst = fmax(worst, fabs((double)sr[i] * sc[j] / ((double)sr0[i] * sc0[j]) - 1));
    CHECKF(worst < 5e-3, "products differ by %g", worst);
    CHECK(i1.imbalance < 2.01);
}

TEST(test_balance_off_is_identity)
{
    structured_tile(g_M, 64, 64, 1, 1, 1, 3);
    float sr[MAXN], sc[MAXN], ir[MAXN], ic[MAXN];
    sjk_balance_rule off = sjk_balance_rule_of(SJK_BALANCE_OFF);
    sjk_balance_run(g_M, 64, 64, &off, NULL, sr, sc, ir, ic, g_scr, NULL);
    for (size_t i = 0; i < 64; i++) CHECK(sr[i] == 1.0f && sc[i] == 1.0f && ir[i] == 1.0f && ic[i] == 1.0f);
}

TEST(test_balance_degenerate_tiles_stay_finite)
{
    const size_t R = 64, C = 128;
    for (int kind = 0; kind < 4; kind++) {
        structured_tile(g_M, R, C, 1, 1, 1, 21);
        if (kind == 0) memset(g_M, 0, R * C * sizeof *g_M);                        /* zero tile */
        if (kind == 1) for (size_t i = 0; i < R * C; i++) g_M[i] = 3.25f;          /* constant */
        if (kind == 2) memset(g_M + 5 * C, 0, C * sizeof *g_M);                    /* zero row */
        if (kind == 3) for (size_t i = 0; i < R; i++) g_M[i * C + 7] = -1.5f;      /* constant col */
        for (int m = 0; m < 3; m++) {
            sjk_balance_rule rule = sjk_balance_rule_of((sjk_balance_mode)m);
            float sr[MAXN], sc[MAXN], ir[MAXN], ic[MAXN];
            sjk_balance_run(g_M, R, C, &rule, NULL, sr, sc, ir, ic, g_scr, NULL);
            int ok = 1;
            for (size_t i = 0; i < R; i++) ok &= isfinite(sr[i]) && sr[i] > 0 && isfinite(ir[i]) && ir[i] > 0;
            for (size_t j = 0; j < C; j++) ok &= isfinite(sc[j]) && sc[j] > 0 && isfinite(ic[j]) && ic[j] > 0;
            CHECKF(ok, "kind %d mode %d: non-finite or non-positive scale", kind, m);
        }
    }
}

TEST(test_sweeps_same_bits_on_every_path)
{
    static const size_t dims[][2] = {{16, 16}, {64, 128}, {128, 256}, {256, 128}, {128, 512}, {512, 128}};
    sjk_rng r;
    sjk_rng_seed(&r, 42);
    for (size_t c = 0; c < SJK_ARRAY_LEN(dims); c++) {
        const size_t R = dims[c][0], C = dims[c][1];
        float rs[MAXN], cs[MAXN];
        for (size_t i = 0; i < R * C; i++) g_M[i] = (float)(sjk_rng_normal(&r) * 3 + 1);
        for (size_t i = 0; i < R; i++) rs[i] = (float)exp(sjk_rng_normal(&r));
        for (size_t j = 0; j < C; j++) cs[j] = (float)exp(sjk_rng_normal(&r));
        float s0[MAXN], q0[MAXN], s1[MAXN], q1[MAXN];
        paths[0]->col_sweep(g_M, R, C, rs, s0, q0);
        for (size_t p = 1; p < n_paths; p++) {
            paths[p]->col_sweep(g_M, R, C, rs, s1, q1);
            CHECKF(!memcmp(s0, s1, C * 4) && !memcmp(q0, q1, C * 4), "col_sweep %s %zux%zu", paths[p]->name, R, C);
        }
        paths[0]->row_sweep(g_M, R, C, cs, s0, q0);
        for (size_t p = 1; p < n_paths; p++) {
            paths[p]->row_sweep(g_M, R, C, cs, s1, q1);
            CHECKF(!memcmp(s0, s1, R * 4) && !memcmp(q0, q1, R * 4), "row_sweep %s %zux%zu", paths[p]->name, R, C);
        }
    }
}

TEST(test_rtn_row_same_bits_on_every_path)
{
    sjk_rng r;
    sjk_rng_seed(&r, 43);
    float m[MAXN], ic[MAXN], b0[MAXN], b1[MAXN];
    uint8_t c0[MAXN], c1[MAXN];
    for (size_t n = 64; n <= 512; n *= 2)
        for (unsigned bits = 2; bits <= 4; bits++)
            for (int kind = 0; kind < 4; kind++) {
                const unsigned qmax = (1u << bits) - 1;
                for (size_t j = 0; j < n; j++) {
                    m[j] = (float)sjk_rng_normal(&r);
                    ic[j] = (float)exp(0.3 * sjk_rng_normal(&r));
                    if (kind == 1) m[j] = (float)(j % (qmax + 1)) * 0.5f + ((j % 3) ? 0.25f : 0.0f), ic[j] = 1; /* ties */
                    if (kind == 2) m[j] = 2.0f, ic[j] = 1;                     /* constant row */
                    if (kind == 3) m[j] = (j & 1) ? -0.0f : 0.0f, ic[j] = 1;   /* signed zeros */
                }
                float lo0, st0, lo1, st1;
                paths[0]->rtn_row(m, n, 0.75f, ic, qmax, c0, &lo0, &st0);
                paths[0]->scale_row(m, n, 0.75f, ic, b0);
                for (size_t p = 1; p < n_paths; p++) {
                    paths[p]->rtn_row(m, n, 0.75f, ic, qmax, c1, &lo1, &st1);
                    paths[p]->scale_row(m, n, 0.75f, ic, b1);
                    CHECKF(!memcmp(c0, c1, n) && !memcmp(&lo0, &lo1, 4) && !memcmp(&st0, &st1, 4) &&
                               !memcmp(b0, b1, n * 4),
                           "%s n=%zu bits=%u kind=%d", paths[p]->name, n, bits, kind);
                }
                /* the reference itself: codes reproduce the row within half a step */
                for (size_t j = 0; j < n; j++) {
                    CHECK(c0[j] <= qmax);
                    CHECK(fabsf(c0[j] * st0 + lo0 - b0[j]) <= 0.5f * st0 * 1.0001f + 1e-6f);
                }
            }
}

TEST(test_load_tiles_sanitize_and_transpose_on_every_path)
{
    static float k[128 * MAXN], v[128 * MAXN], kt0[128 * MAXN], vt0[128 * MAXN], kt[128 * MAXN], vt[128 * MAXN];
    const float specials[] = {NAN, INFINITY, -INFINITY, 1e-41f, -1e-41f, -0.0f, 7e4f, -7e4f, 65504.0f, 1.5f};
    sjk_rng r;
    sjk_rng_seed(&r, 44);
    for (size_t D = 64; D <= 512; D *= 2) {
        for (size_t i = 0; i < 128 * D; i++) {
            k[i] = (float)sjk_rng_normal(&r), v[i] = (float)sjk_rng_normal(&r);
            if (i % 13 == 0) k[i] = specials[(i / 13) % 10], v[i] = specials[(i / 13 + 3) % 10];
        }
        paths[0]->load_tiles(kt0, vt0, k, v, D);
        int ok = 1;
        for (size_t t = 0; t < 128; t++)
            for (size_t d = 0; d < D; d++) {
                float x = k[t * D + d], y = kt0[d * 128 + t];
                float want = (isfinite(x) && fabsf(x) >= 1.17549435e-38f) ? fminf(fmaxf(x, -65504.0f), 65504.0f) : 0.0f;
                ok &= !memcmp(&y, &want, 4);
            }
        CHECKF(ok, "reference load_tiles D=%zu", D);
        for (size_t p = 1; p < n_paths; p++) {
            paths[p]->load_tiles(kt, vt, k, v, D);
            CHECKF(!memcmp(kt, kt0, 128 * D * 4) && !memcmp(vt, vt0, 128 * D * 4), "%s D=%zu", paths[p]->name, D);
        }
    }
}

TEST(test_balance_same_scales_on_every_path)
{
    const size_t R = 256, C = 128;
    structured_tile(g_M, R, C, 1.0, 0.7, 0.2, 77);
    for (int m = 0; m < 2; m++) {
        sjk_balance_rule rule = sjk_balance_rule_of((sjk_balance_mode)m);
        float sr0[MAXN], sc0[MAXN], ir0[MAXN], ic0[MAXN], sr[MAXN], sc[MAXN], ir[MAXN], ic[MAXN];
        sjk_balance_run(g_M, R, C, &rule, paths[0], sr0, sc0, ir0, ic0, g_scr, NULL);
        for (size_t p = 1; p < n_paths; p++) {
            sjk_balance_run(g_M, R, C, &rule, paths[p], sr, sc, ir, ic, g_scr, NULL);
            CHECKF(!memcmp(sr0, sr, R * 4) && !memcmp(sc0, sc, C * 4) && !memcmp(ir0, ir, R * 4) &&
                       !memcmp(ic0, ic, C * 4),
                   "mode %d path %s", m, paths[p]->name);
        }
    }
}

int main(void)
{
    init_paths();
    printf("kernel paths:");
    for (size_t p = 0; p < n_paths; p++) printf(" %s", paths[p]->name);
    printf(" (dispatched: %s)\n", sjk_codec_kernels_get()->name);
    RUN(test_reference_matches_literal_algorithm);
    RUN(test_reference_all_equal_std_small_tile_comes_out_unscaled);
    RUN(test_reference_stalls_on_small_tiles_where_sj_converges);
    RUN(test_sj_split_keeps_products_and_equalises_geomeans);
    RUN(test_sj_early_stop_matches_sixteen_passes);
    RUN(test_balance_off_is_identity);
    RUN(test_balance_degenerate_tiles_stay_finite);
    RUN(test_sweeps_same_bits_on_every_path);
    RUN(test_rtn_row_same_bits_on_every_path);
    RUN(test_load_tiles_sanitize_and_transpose_on_every_path);
    RUN(test_balance_same_scales_on_every_path);
    return test_summary();
}
