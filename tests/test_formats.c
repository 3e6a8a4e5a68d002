/* test_formats.c — the value formats: table, sizes and names; checked entry points; round
 * trip bounds and Gaussian SNR bands; the TurboQuant rotation, norm correction and byte
 * layouts; non-finite input; SIMD kernels against their scalar references; determinism. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/format.h"
#include "codec/format_kernels.h"
#include "common/fp16.h"
#include "common/rng.h"
#include "common/util.h"
#include "harness.h"
#include "sjkvarn.h"

static const sjk_format QUANTIZED[] = {
    SJK_FMT_Q8_0, SJK_FMT_Q5_1, SJK_FMT_Q5_0, SJK_FMT_Q4_1, SJK_FMT_Q4_0, SJK_FMT_TQ6_0,
    SJK_FMT_TQ5_0, SJK_FMT_TURBO4, SJK_FMT_TURBO3, SJK_FMT_TQ6_0_STAGE,
};
#define N_QUANTIZED (sizeof QUANTIZED / sizeof QUANTIZED[0])

static void fill_gauss(float *x, size_t n, uint64_t seed, double scale)
{
    sjk_rng r;
    sjk_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)(sjk_rng_normal(&r) * scale);
}

static double snr_db(const float *x, const float *y, size_t n)
{
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)x[i] * x[i];
        e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    }
    return 10.0 * log10(s / e);
}

/* Encodes and decodes a row with the checked entry points; returns a malloc'd decode. */
static float *round_trip(sjk_format f, const float *x, size_t n)
{
    size_t nb = sjk_format_row_nbytes(f, n);
    uint8_t *buf = malloc(nb);
    float *y = malloc(n * sizeof *y);
    if (!buf || !y) abort();
    CHECK(sjk_format_encode_row(f, buf, nb, x, n) == SJK_OK);
    CHECK(sjk_format_decode_row(f, y, n, buf, nb) == SJK_OK);
    free(buf);
    return y;
}

TEST(test_format_table_sizes_and_names)
{
    static const struct { const char *name; unsigned bv, bb; double bpv; } want[SJK_FMT_COUNT] = {
        { "f32", 1, 4, 32 },       { "f16", 1, 2, 16 },        { "bf16", 1, 2, 16 },
        { "q8_0", 32, 34, 8.5 },   { "q5_1", 32, 24, 6.0 },    { "q5_0", 32, 22, 5.5 },
        { "q4_1", 32, 20, 5.0 },   { "q4_0", 32, 18, 4.5 },    { "tq6_0", 128, 98, 6.125 },
        { "tq5_0", 128, 82, 5.125 }, { "turbo4", 128, 66, 4.125 }, { "turbo3", 128, 50, 3.125 },
        { "tq6_0_stage", 128, 98, 6.125 },
    };
    for (int i = 0; i < SJK_FMT_COUNT; i++) {
        const sjk_format_info *fi = sjk_format_get((sjk_format)i);
        CHECK(fi != NULL);
        if (!fi) continue;
        CHECKF(strcmp(fi->name, want[i].name) == 0, "%d: %s", i, fi->name);
        CHECK(fi->block_values == want[i].bv && fi->block_nbytes == want[i].bb);
        CHECK(fi->bits_per_value == want[i].bpv);
        CHECK(fi->encode != NULL && fi->decode != NULL);
        sjk_format f;
        CHECK(sjk_format_from_name(want[i].name, &f) == SJK_OK && f == (sjk_format)i);
        CHECK(sjk_format_row_nbytes((sjk_format)i, 256) == 256 / want[i].bv * want[i].bb);
        if (want[i].bv > 1) CHECK(sjk_format_row_nbytes((sjk_format)i, want[i].bv + 1) == 0);
    }
    /* D = 256 rows, the sizes a cache plans with */
    CHECK(sjk_format_row_nbytes(SJK_FMT_Q8_0, 256) == 272);
    CHECK(sjk_format_row_nbytes(SJK_FMT_Q4_0, 256) == 144);
    CHECK(sjk_format_row_nbytes(SJK_FMT_TQ6_0_STAGE, 256) == 196);
    CHECK(sjk_format_row_nbytes(SJK_FMT_TURBO3, 256) == 100);
    CHECK(sjk_format_get(SJK_FMT_COUNT) == NULL);
    CHECK(sjk_format_get((sjk_format)-1) == NULL);
    CHECK(sjk_format_row_nbytes(SJK_FMT_COUNT, 32) == 0);
    CHECK(sjk_format_row_nbytes(SJK_FMT_F32, SIZE_MAX) == 0); /* overflow */
    sjk_format f = SJK_FMT_F32;
    CHECK(sjk_format_from_name("q9_0", &f) == SJK_ERR_PARAM);
    CHECK(sjk_format_from_name("Q8_0", &f) == SJK_ERR_PARAM);
    CHECK(sjk_format_from_name(NULL, &f) == SJK_ERR_PARAM);
    CHECK(sjk_format_from_name("q8_0", NULL) == SJK_ERR_PARAM);
}

TEST(test_format_rejects_bad_params_and_short_buffers)
{
    float x[256] = {0}, y[256];
    uint8_t buf[1024];
    for (int i = 0; i < SJK_FMT_COUNT; i++) {
        const sjk_format f = (sjk_format)i;
        const sjk_format_info *fi = sjk_format_get(f);
        const size_t n = 256, nb = sjk_format_row_nbytes(f, n);
        CHECK(sjk_format_encode_row(f, buf, nb, x, n) == SJK_OK);
        CHECK(sjk_format_encode_row(f, buf, nb - 1, x, n) == SJK_ERR_BUFFER);
        CHECK(sjk_format_decode_row(f, y, n, buf, nb) == SJK_OK);
        CHECK(sjk_format_decode_row(f, y, n, buf, nb - 1) == SJK_ERR_BUFFER);
        if (fi->block_values > 1) {
            CHECK(sjk_format_encode_row(f, buf, sizeof buf, x, n - 1) == SJK_ERR_PARAM);
            CHECK(sjk_format_decode_row(f, y, n - 1, buf, sizeof buf) == SJK_ERR_PARAM);
        }
        CHECK(sjk_format_encode_row(f, NULL, nb, x, n) == SJK_ERR_PARAM);
        CHECK(sjk_format_encode_row(f, buf, nb, NULL, n) == SJK_ERR_PARAM);
        CHECK(sjk_format_decode_row(f, NULL, n, buf, nb) == SJK_ERR_PARAM);
        CHECK(sjk_format_decode_row(f, y, n, NULL, nb) == SJK_ERR_PARAM);
        CHECK(sjk_format_encode_row(f, NULL, 0, NULL, 0) == SJK_OK); /* empty row */
    }
    CHECK(sjk_format_encode_row(SJK_FMT_COUNT, buf, sizeof buf, x, 32) == SJK_ERR_PARAM);
    CHECK(sjk_format_decode_row((sjk_format)99, y, 32, buf, sizeof buf) == SJK_ERR_PARAM);
    /* a short destination is never written */
    memset(buf, 0xA5, sizeof buf);
    CHECK(sjk_format_encode_row(SJK_FMT_Q8_0, buf, 33, x, 32) == SJK_ERR_BUFFER);
    CHECK(buf[0] == 0xA5 && buf[32] == 0xA5);
}

/* Per-element bounds for the ggml formats: half a step (one step where llama.cpp clips
 * the opposite extreme of q4_0/q5_0) plus the fp16 rounding of the stored scale/min. */
TEST(test_ggml_round_trip_error_bounds)
{
    enum { N = 32 * 512 };
    static float x[N];
    fill_gauss(x, N, 11, 1.0);
    for (size_t i = 0; i < N; i += 97) x[i] *= 20.0f; /* outliers */
    static const struct { sjk_format f; double levels; int sym; } q[] = {
        { SJK_FMT_Q8_0, 127, 2 }, { SJK_FMT_Q5_1, 31, 0 }, { SJK_FMT_Q5_0, 16, 1 },
        { SJK_FMT_Q4_1, 15, 0 }, { SJK_FMT_Q4_0, 8, 1 },
    };
    for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
        float *y = round_trip(q[k].f, x, N);
        int bad = 0;
        for (size_t b = 0; b < N; b += 32) {
            float mn = FLT_MAX, mx = -FLT_MAX, amax = 0;
            for (int j = 0; j < 32; j++) {
                mn = fminf(mn, x[b + j]); mx = fmaxf(mx, x[b + j]); amax = fmaxf(amax, fabsf(x[b + j]));
            }
            double step = q[k].sym ? amax / q[k].levels : (mx - mn) / q[k].levels;
            double tol = (q[k].sym == 1 ? 1.0 : 0.5) * step * (1 + 1e-5) + 2.0 * amax * 0x1p-11;
            for (int j = 0; j < 32; j++) bad += fabs((double)x[b + j] - y[b + j]) > tol;
        }
        CHECKF(bad == 0, "%s: %d values outside the bound", sjk_format_get(q[k].f)->name, bad);
        free(y);
    }
    /* f32 exact, f16 / bf16 relative rounding */
    float *y = round_trip(SJK_FMT_F32, x, N);
    CHECK(memcmp(x, y, sizeof x) == 0);
    free(y);
    y = round_trip(SJK_FMT_F16, x, N);
    for (size_t i = 0; i < N; i++) CHECK(fabsf(y[i] - x[i]) <= fabsf(x[i]) * 0x1p-11f + 0x1p-25f);
    free(y);
    y = round_trip(SJK_FMT_BF16, x, N);
    for (size_t i = 0; i < N; i++) CHECK(fabsf(y[i] - x[i]) <= fabsf(x[i]) * 0x1p-8f);
    free(y);
    /* constant rows decode to the constant (within fp16 rounding of m or d) */
    float c[32];
    for (int j = 0; j < 32; j++) c[j] = 0.7314f;
    for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
        y = round_trip(q[k].f, c, 32);
        for (int j = 0; j < 32; j++) CHECK_NEAR(y[j], 0.7314, 0.7314 * 0x1p-10);
        free(y);
    }
}

/* SNR on i.i.d. N(0,1), docs/BACKGROUND.md, "ggml block formats" and "TurboQuant formats". */
TEST(test_format_gaussian_snr_bands)
{
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x);
    if (!x) abort();
    fill_gauss(x, N, 2026, 1.0);
    static const struct { sjk_format f; double db; } want[] = {
        { SJK_FMT_Q8_0, 45.4 }, { SJK_FMT_Q5_1, 28.5 }, { SJK_FMT_Q5_0, 27.4 },
        { SJK_FMT_Q4_1, 22.1 }, { SJK_FMT_Q4_0, 21.3 }, { SJK_FMT_TQ6_0, 32.1 },
        { SJK_FMT_TQ5_0, 26.2 }, { SJK_FMT_TURBO4, 20.4 }, { SJK_FMT_TURBO3, 14.7 },
        { SJK_FMT_TQ6_0_STAGE, 32.1 }, /* i.i.d. Gaussian input is already "rotated" */
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        float *y = round_trip(want[k].f, x, N);
        const double db = snr_db(x, y, N);
        printf("     snr %-12s %6.2f dB (expected %.1f)\n", sjk_format_get(want[k].f)->name, db, want[k].db);
        CHECKF(fabs(db - want[k].db) <= 0.3, "%s: %.2f dB, expected %.1f", sjk_format_get(want[k].f)->name,
               db, want[k].db);
        free(y);
    }
    free(x);
}

TEST(test_rht_sign_masks_have_60_and_70_negatives)
{
    int n1 = 0, n2 = 0;
    for (int w = 0; w < 4; w++) {
        n1 += __builtin_popcount(sjk_rht_signs1[w]);
        n2 += __builtin_popcount(sjk_rht_signs2[w]);
    }
    CHECK(n1 == 60);
    CHECK(n2 == 70);
}

TEST(test_rht_matches_definition_and_inverts)
{
    float x[128], y[128];
    fill_gauss(x, 128, 5, 1.0);
    memcpy(y, x, sizeof x);
    sjk_rht128_forward(y);
    double maxerr = 0;
    for (int i = 0; i < 128; i++) {
        double s = 0;
        for (int j = 0; j < 128; j++) {
            const double d1 = (sjk_rht_signs1[j >> 5] >> (j & 31)) & 1 ? -1.0 : 1.0;
            s += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) * d1 * x[j];
        }
        const double d2 = (sjk_rht_signs2[i >> 5] >> (i & 31)) & 1 ? -1.0 : 1.0;
        maxerr = fmax(maxerr, fabs(d2 * s / sqrt(128.0) - y[i]));
    }
    CHECKF(maxerr < 1e-5, "forward RHT off by %g", maxerr);
    sjk_rht128_inverse(y);
    for (int i = 0; i < 128; i++) CHECK_NEAR(y[i], x[i], 1e-5);
}

/* Independent reading of the byte layouts of docs/FORMAT.md (docs/BACKGROUND.md, "TurboQuant formats"). */
static unsigned spec_code(sjk_format f, const uint8_t *blk, int j)
{
    const uint8_t *qs = blk + 2;
    switch (f) {
    case SJK_FMT_TQ6_0:
    case SJK_FMT_TQ6_0_STAGE:
        return ((qs[j / 2] >> (4 * (j % 2))) & 15) | (((blk[66 + j / 4] >> (2 * (j % 4))) & 3) << 4);
    case SJK_FMT_TQ5_0: {
        const unsigned m = (qs[j / 2] >> (4 * (j % 2))) & 15, neg = (blk[66 + j / 8] >> (j % 8)) & 1;
        return neg ? 15 - m : 16 + m;
    }
    case SJK_FMT_TURBO4: return (qs[j / 2] >> (4 * (j % 2))) & 15;
    case SJK_FMT_TURBO3: return ((qs[j / 4] >> (2 * (j % 4))) & 3) | (((blk[34 + j / 8] >> (j % 8)) & 1) << 2);
    default: return 0;
    }
}

TEST(test_turbo_codes_layout_and_norm_correction)
{
    static const struct { sjk_format f; int levels; const float *c, *m; } t[] = {
        { SJK_FMT_TQ6_0, 64, sjk_tq6_centroids, sjk_tq6_midpoints },
        { SJK_FMT_TQ5_0, 32, sjk_tq5_centroids, sjk_tq5_midpoints },
        { SJK_FMT_TURBO4, 16, sjk_turbo4_centroids, sjk_turbo4_midpoints },
        { SJK_FMT_TURBO3, 8, sjk_turbo3_centroids, sjk_turbo3_midpoints },
        { SJK_FMT_TQ6_0_STAGE, 64, sjk_tq6_centroids, sjk_tq6_midpoints },
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        /* tables: ascending, symmetric, midpoints between neighbours */
        for (int i = 0; i < t[k].levels; i++) CHECK(t[k].c[i] == -t[k].c[t[k].levels - 1 - i]);
        for (int i = 0; i + 1 < t[k].levels; i++) CHECK(t[k].c[i] < t[k].m[i] && t[k].m[i] < t[k].c[i + 1]);
        for (int trial = 0; trial < 50; trial++) {
            float x[128], u[128], y[128];
            uint8_t blk[98];
            fill_gauss(x, 128, 100 + (uint64_t)trial, trial % 3 ? 1.0 : 30.0);
            if (trial == 7) for (int i = 0; i < 128; i++) x[i] = (float)(i % 5) - 2.0f;
            CHECK(sjk_format_encode_row(t[k].f, blk, sizeof blk, x, 128) == SJK_OK);
            /* reference: normalise, rotate, linear ladder scan */
            float acc = 0;
            for (int i = 0; i < 128; i++) acc += x[i] * x[i];
            const float n = sqrtf(acc);
            const float inv = 1.0f / n;
            for (int i = 0; i < 128; i++) u[i] = x[i] * inv;
            if (t[k].f != SJK_FMT_TQ6_0_STAGE) sjk_rht128_forward(u);
            int wrong = 0;
            double rho2 = 0;
            for (int j = 0; j < 128; j++) {
                unsigned code = 0;
                while (code + 1 < (unsigned)t[k].levels && t[k].m[code] <= u[j]) code++;
                wrong += spec_code(t[k].f, blk, j) != code;
                rho2 += (double)t[k].c[code] * t[k].c[code];
            }
            CHECKF(wrong == 0, "%s trial %d: %d codes differ", sjk_format_get(t[k].f)->name, trial, wrong);
            CHECK_NEAR(sjk_fp16_to_f32(sjk_rd_u16le(blk)), sjk_round_fp16((float)(n / sqrt(rho2))), 1e-6 * n);
            /* norm correction: ||decode|| = ||x|| up to the fp16 norm */
            CHECK(sjk_format_decode_row(t[k].f, y, 128, blk, sizeof blk) == SJK_OK);
            double ny = 0;
            for (int i = 0; i < 128; i++) ny += (double)y[i] * y[i];
            CHECK_NEAR(sqrt(ny) / n, 1.0, 6e-4);
            /* rotated-domain decode + inverse RHT = decode */
            float r[128];
            sjk_turbo_decode_rotated(t[k].f, r, blk, 128);
            if (t[k].f != SJK_FMT_TQ6_0_STAGE) sjk_rht128_inverse(r);
            for (int i = 0; i < 128; i++) CHECK(r[i] == y[i]);
        }
    }
}

TEST(test_tq5_sign_magnitude_mapping)
{
    /* staging-style check without rotation: craft a tq6 block, then compare tq5's
     * encoding of the same rotated input to the spec's sign/magnitude rule. */
    float r[128], x[128];
    for (int j = 0; j < 128; j++) r[j] = sjk_tq5_centroids[j % 32]; /* every code 4 times */
    memcpy(x, r, sizeof r);
    sjk_rht128_inverse(x); /* so the format's forward RHT gives back r (up to rounding) */
    float acc = 0;
    for (int j = 0; j < 128; j++) acc += r[j] * r[j];
    uint8_t blk[82];
    CHECK(sjk_format_encode_row(SJK_FMT_TQ5_0, blk, sizeof blk, x, 128) == SJK_OK);
    /* r has norm sqrt(acc); normalised values move, so compare against the ladder of r/|r| */
    const float n = sqrtf(acc);
    int wrong = 0, neg_seen = 0, pos_seen = 0;
    for (int j = 0; j < 128; j++) {
        unsigned code = 0;
        while (code < 31 && sjk_tq5_midpoints[code] <= r[j] / n) code++;
        const unsigned m = (blk[2 + j / 2] >> (4 * (j % 2))) & 15, neg = (blk[66 + j / 8] >> (j % 8)) & 1;
        wrong += neg != (code < 16);
        wrong += m != (code < 16 ? 15 - code : code - 16);
        neg_seen += neg;
        pos_seen += !neg;
    }
    CHECK(wrong <= 2); /* values within rounding of a midpoint may go either way */
    CHECK(neg_seen == 64 && pos_seen == 64);
}

TEST(test_nonfinite_inputs_are_defined)
{
    float x[128], y[128];
    uint8_t buf[512];
    for (size_t k = 0; k < N_QUANTIZED; k++) {
        const sjk_format f = QUANTIZED[k];
        fill_gauss(x, 128, 9, 1.0);
        x[3] = NAN;
        x[40] = INFINITY;
        x[77] = -INFINITY;
        x[100] = 3e38f;
        CHECK(sjk_format_encode_row(f, buf, sizeof buf, x, 128) == SJK_OK);
        CHECK(sjk_format_decode_row(f, y, 128, buf, sizeof buf) == SJK_OK);
        int nonfinite = 0;
        for (int i = 0; i < 128; i++) nonfinite += !isfinite(y[i]);
        CHECKF(nonfinite == 0, "%s: %d non-finite outputs", sjk_format_get(f)->name, nonfinite);
        if (f < SJK_FMT_TQ6_0) { /* ggml formats: +Inf -> +limit, -Inf -> -limit, NaN -> ~0 */
            CHECK(y[40] > 6e4f && y[77] < -6e4f);
            CHECK(fabsf(y[3]) <= fabsf(y[40]) / 7.0f);
        }
        /* deterministic: the same non-finite input gives the same bytes */
        uint8_t again[512];
        CHECK(sjk_format_encode_row(f, again, sizeof again, x, 128) == SJK_OK);
        CHECK(memcmp(buf, again, sjk_format_row_nbytes(f, 128)) == 0);
    }
    /* a finite block beyond q8_0's fp16 scale range is clamped, not stored as Inf */
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) * 1e6f;
    CHECK(sjk_format_encode_row(SJK_FMT_Q8_0, buf, sizeof buf, x, 32) == SJK_OK);
    CHECK(sjk_rd_u16le(buf) == 0x7BFF); /* d = 65504 */
    /* IEEE storage formats keep NaN and Inf */
    x[0] = NAN; x[1] = INFINITY; x[2] = -INFINITY; x[3] = 1e5f;
    CHECK(sjk_format_encode_row(SJK_FMT_F16, buf, sizeof buf, x, 4) == SJK_OK);
    CHECK(sjk_format_decode_row(SJK_FMT_F16, y, 4, buf, sizeof buf) == SJK_OK);
    CHECK(isnan(y[0]) && y[1] == INFINITY && y[2] == -INFINITY && y[3] == INFINITY);
    CHECK(sjk_format_encode_row(SJK_FMT_BF16, buf, sizeof buf, x, 4) == SJK_OK);
    CHECK(sjk_format_decode_row(SJK_FMT_BF16, y, 4, buf, sizeof buf) == SJK_OK);
    CHECK(isnan(y[0]) && y[1] == INFINITY && y[2] == -INFINITY && isfinite(y[3]));
}

TEST(test_zero_and_denormal_blocks_decode_to_zero)
{
    float x[128], y[128];
    uint8_t buf[512];
    for (int pass = 0; pass < 3; pass++) {
        for (int i = 0; i < 128; i++) x[i] = pass == 0 ? 0.0f : (float)((i % 7) - 3) * (pass == 1 ? 1e-40f : 1e-44f);
        for (size_t k = 0; k < N_QUANTIZED; k++) {
            const sjk_format f = QUANTIZED[k];
            CHECK(sjk_format_encode_row(f, buf, sizeof buf, x, 128) == SJK_OK);
            CHECK(sjk_format_decode_row(f, y, 128, buf, sizeof buf) == SJK_OK);
            for (int i = 0; i < 128; i++) CHECKF(fabsf(y[i]) <= 1e-30f, "%s pass %d", sjk_format_get(f)->name, pass);
        }
    }
}

/* Decoding reads only table entries its code bits can name: any bytes decode without
 * reading out of bounds (run under ASan by make asan), and finite scales give finite
 * values. */
TEST(test_decode_accepts_any_bytes)
{
    uint8_t buf[98 * 4];
    float y[512];
    sjk_rng r;
    sjk_rng_seed(&r, 4242);
    for (int trial = 0; trial < 200; trial++) {
        for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)sjk_rng_u64(&r);
        for (int f = 0; f < SJK_FMT_COUNT; f++) {
            const sjk_format_info *fi = sjk_format_get((sjk_format)f);
            const size_t n = fi->block_values == 1 ? 64 : 4 * fi->block_values;
            CHECK(sjk_format_decode_row((sjk_format)f, y, n, buf, sizeof buf) == SJK_OK);
        }
    }
    /* a q8_0 block with the largest finite scale decodes to finite values */
    memset(buf, 0x80, 34);
    sjk_wr_u16le(buf, 0x7BFF);
    CHECK(sjk_format_decode_row(SJK_FMT_Q8_0, y, 32, buf, 34) == SJK_OK);
    for (int i = 0; i < 32; i++) CHECK(isfinite(y[i]) && y[i] == -128.0f * 65504.0f);
}

/* llama.cpp's C reference on signed zeros (where the gguf Python quantizers differ). */
TEST(test_signed_zero_follows_c_reference)
{
    float x[32] = {0};
    uint8_t b[34];
    x[0] = -0.0f;
    CHECK(sjk_format_encode_row(SJK_FMT_Q4_0, b, sizeof b, x, 32) == SJK_OK);
    CHECK(sjk_rd_u16le(b) == 0x8000); /* max stays +0 -> d = 0 / -8 = -0 */
    CHECK(sjk_format_encode_row(SJK_FMT_Q4_1, b, sizeof b, x, 32) == SJK_OK);
    CHECK(sjk_rd_u16le(b + 2) == 0x8000); /* the first zero (-0) is the minimum */
}

TEST(test_rotation_block_follows_llama_cpp)
{
    CHECK(sjk_format_rotation_block(SJK_FMT_Q8_0, 128, 0) == 128);
    CHECK(sjk_format_rotation_block(SJK_FMT_Q8_0, 256, 0) == 256);
    CHECK(sjk_format_rotation_block(SJK_FMT_Q4_0, 512, 0) == 512);
    CHECK(sjk_format_rotation_block(SJK_FMT_Q4_0, 192, 0) == 64);
    CHECK(sjk_format_rotation_block(SJK_FMT_Q5_1, 64, 0) == 64);
    CHECK(sjk_format_rotation_block(SJK_FMT_Q8_0, 256, 1) == 64);
    CHECK(sjk_format_rotation_block(SJK_FMT_Q8_0, 80, 0) == 0);
    CHECK(sjk_format_rotation_block(SJK_FMT_F16, 256, 0) == 0);
    CHECK(sjk_format_rotation_block(SJK_FMT_TQ6_0, 256, 0) == 0);
    /* rotated q4_0 is more accurate than plain q4_0 on rows with outlier channels */
    float x[256], r[256], y[256];
    fill_gauss(x, 256, 3, 1.0);
    x[17] = 40.0f; x[200] = -25.0f;
    memcpy(r, x, sizeof x);
    const size_t blk = sjk_format_rotation_block(SJK_FMT_Q4_0, 256, 0);
    CHECK(sjk_hadamard(r, 256, blk) == SJK_OK);
    float *plain = round_trip(SJK_FMT_Q4_0, x, 256), *rot = round_trip(SJK_FMT_Q4_0, r, 256);
    memcpy(y, rot, sizeof y);
    CHECK(sjk_hadamard(y, 256, blk) == SJK_OK);
    CHECK(snr_db(x, y, 256) > snr_db(x, plain, 256) + 3.0);
    free(plain);
    free(rot);
}

static void check_encode_f16(const sjk_fmt_kernels *k);

/* The rotation kernel must match the reference bit for bit, both directions, on Gaussian
 * blocks, blocks with signed zeros and denormals, and huge values. */
static void check_rht(const sjk_fmt_kernels *k)
{
    sjk_rng r;
    sjk_rng_seed(&r, 17);
    for (int trial = 0; trial < 60; trial++) {
        float a[128], b[128];
        for (int i = 0; i < 128; i++) {
            const int kind = (trial + i) % 9;
            a[i] = kind == 0 ? ((i & 1) ? -0.0f : 0.0f)
                 : kind == 1 ? (float)(sjk_rng_normal(&r) * 1e-41)
                 : kind == 2 ? (float)(sjk_rng_normal(&r) * 1e30)
                             : (float)sjk_rng_normal(&r);
        }
        memcpy(b, a, sizeof a);
        const int fwd = trial & 1;
        sjk_fmt_kernels_ref()->rht128(a, fwd ? sjk_rht_signs1 : sjk_rht_signs2, fwd ? sjk_rht_signs2 : sjk_rht_signs1);
        k->rht128(b, fwd ? sjk_rht_signs1 : sjk_rht_signs2, fwd ? sjk_rht_signs2 : sjk_rht_signs1);
        CHECKF(memcmp(a, b, sizeof a) == 0, "%s rht128 trial %d", k->name, trial);
    }
}

/* q8_0 / q4_0 encoders on a SIMD path must give the reference's bytes: Gaussian blocks,
 * exact ties (k/2 grids with amax 127 or 8), first-max pairs, all-zero blocks with -0,
 * denormal blocks (1/d overflows), and blocks that need the non-finite treatment. */
static void check_encode_q(const sjk_fmt_kernels *k)
{
    enum { NB = 4096, N = NB * 32 };
    float *x = malloc(N * sizeof *x);
    uint8_t *a = malloc(NB * 34), *b = malloc(NB * 34);
    if (!x || !a || !b) abort();
    sjk_rng r;
    sjk_rng_seed(&r, 99);
    for (int blk = 0; blk < NB; blk++) {
        float *v = x + 32 * blk;
        const int kind = blk % 8;
        for (int j = 0; j < 32; j++) {
            switch (kind) {
            case 0: v[j] = (float)sjk_rng_normal(&r); break;
            case 1: v[j] = (float)((int)(sjk_rng_u64(&r) % 255) - 127) * 0.5f; v[0] = 127.0f; break;
            case 2: v[j] = (float)((int)(sjk_rng_u64(&r) % 33) - 16) * 0.5f; v[3] = -8.0f; break;
            case 3: v[j] = (float)(sjk_rng_normal(&r) * 1e-40); break;
            case 4: v[j] = j % 5 ? 0.0f : -0.0f; break;
            case 5: v[j] = (float)sjk_rng_normal(&r); v[7] = 3.0f; v[19] = -3.0f; break;
            case 6: v[j] = (float)(sjk_rng_normal(&r) * 1e5); if (j == 9) v[j] = (blk & 8) ? NAN : INFINITY; break;
            default: v[j] = (float)(sjk_rng_normal(&r) * 3e6); break;
            }
        }
    }
    const sjk_fmt_kernels *ref = sjk_fmt_kernels_ref();
    ref->encode_q8_0(a, x, N);
    k->encode_q8_0(b, x, N);
    CHECKF(memcmp(a, b, (size_t)NB * 34) == 0, "%s encode_q8_0 differs from the reference", k->name);
    ref->encode_q4_0(a, x, N);
    k->encode_q4_0(b, x, N);
    CHECKF(memcmp(a, b, (size_t)NB * 18) == 0, "%s encode_q4_0 differs from the reference", k->name);
    free(x); free(a); free(b);
}

/* The ladder must give the reference's codes on every path: random values, every
 * midpoint exactly and one ulp either side, signed zeros, values beyond the table. */
static void check_tq_codes(const sjk_fmt_kernels *k)
{
    static const struct { const float *mid; unsigned bits; } t[] = {
        { sjk_tq6_midpoints, 6 }, { sjk_tq5_midpoints, 5 }, { sjk_turbo4_midpoints, 4 }, { sjk_turbo3_midpoints, 3 },
    };
    sjk_rng r;
    sjk_rng_seed(&r, 31);
    for (size_t m = 0; m < sizeof t / sizeof t[0]; m++) {
        const unsigned nmid = (1u << t[m].bits) - 1;
        for (int trial = 0; trial < 40; trial++) {
            float u[128];
            uint8_t a[128], b[128];
            for (int i = 0; i < 128; i++) {
                const unsigned pick = (unsigned)(sjk_rng_u64(&r) % (nmid + 4));
                if (pick < nmid) {
                    const float v = t[m].mid[pick];
                    const int e = (int)(sjk_rng_u64(&r) % 3) - 1;
                    u[i] = e == 0 ? v : nextafterf(v, e > 0 ? 1.0f : -1.0f);
                } else if (pick == nmid) {
                    u[i] = (i & 1) ? -0.0f : 0.0f;
                } else if (pick == nmid + 1) {
                    u[i] = (i & 1) ? -1.0f : 1.0f;
                } else {
                    u[i] = (float)(sjk_rng_normal(&r) * 0.1);
                }
            }
            sjk_fmt_kernels_ref()->tq_codes128(a, u, t[m].mid, t[m].bits);
            k->tq_codes128(b, u, t[m].mid, t[m].bits);
            CHECKF(memcmp(a, b, sizeof a) == 0, "%s tq_codes128 bits %u", k->name, t[m].bits);
            for (int i = 0; i < 128; i++) CHECK(a[i] <= nmid);
        }
    }
}

/* Checks one kernel table against the references. */
/* tq6_0_stage blocks built byte by byte: every code 0..63 at every one of the 128
 * positions (in 64 blocks, code (j + 5 b) % 64 at element j of block b: the symmetric-table
 * lookup's halves, signs and lane layout) and norms of every fp16 class (zero, -0,
 * negative, subnormal, the largest, inf, NaN). The decode must give the reference's bytes;
 * dot and axpy its values (finite norms; a non-finite norm a non-finite dot). */
static void check_tq6_all_codes(const sjk_fmt_kernels *k)
{
    enum { NB = 64, N = NB * 128 };
    static const uint16_t norms[] = { 0x3C00, 0x0000, 0x8000, 0xBC00, 0x0001, 0x03FF, 0x7BFF, 0x3555, 0x7C00, 0xFC00, 0x7E00 };
    enum { NNORM = sizeof norms / sizeof norms[0] };
    static uint8_t blk[NB * SJK_TQ6_0_NBYTES];
    static float a[N], b[N], q[N], ya[N], yb[N];
    const sjk_fmt_kernels *ref = sjk_fmt_kernels_ref();
    fill_gauss(q, N, 606, 1.0);
    for (size_t nn = 0; nn < NNORM; nn++) {
        memset(blk, 0, sizeof blk);
        for (size_t bi = 0; bi < NB; bi++) {
            uint8_t *x = blk + bi * SJK_TQ6_0_NBYTES;
            const uint16_t h = norms[(nn + bi) % NNORM];
            x[0] = (uint8_t)(h & 0xFF);
            x[1] = (uint8_t)(h >> 8);
            for (size_t j = 0; j < 128; j++) {
                const unsigned c = (unsigned)((j + 5 * bi) % 64);
                x[2 + j / 2] |= (uint8_t)((c & 15u) << (4 * (j & 1)));
                x[66 + j / 4] |= (uint8_t)((c >> 4) << (2 * (j & 3)));
            }
        }
        ref->decode_tq6_0_stage(a, blk, N);
        k->decode_tq6_0_stage(b, blk, N);
        CHECKF(memcmp(a, b, sizeof a) == 0, "%s tq6 all-codes decode, norms from %zu", k->name, nn);
        /* dot and axpy per block (one non-finite norm would make the whole sum NaN) */
        for (size_t bi = 0; bi < NB; bi++) {
            const uint8_t *x = blk + bi * SJK_TQ6_0_NBYTES;
            const float *ab = a + bi * 128, *qb = q + bi * 128;
            const float pr = ref->dot_tq6_0_stage(qb, x, 128), pk = k->dot_tq6_0_stage(qb, x, 128);
            if (!isfinite(pr)) {
                /* an inf norm: +inf and -inf lane partials may meet in the SIMD sum (NaN) */
                CHECKF(!isfinite(pk), "%s tq6 dot of a non-finite block, block %zu", k->name, bi);
                continue;
            }
            double mag = 0;
            for (size_t j = 0; j < 128; j++) mag += fabs((double)qb[j] * ab[j]);
            CHECK_NEAR(pk, pr, 1e-5 * mag + 1e-30);
            for (size_t j = 0; j < 128; j++) ya[j] = yb[j] = qb[j];
            ref->axpy_tq6_0_stage(ya, -0.61f, x, 128);
            k->axpy_tq6_0_stage(yb, -0.61f, x, 128);
            for (size_t j = 0; j < 128; j++) CHECK_NEAR(yb[j], ya[j], 1e-6 * (fabs(qb[j]) + fabs(0.61 * ab[j])) + 1e-30);
        }
    }
}

static void check_kernels(const sjk_fmt_kernels *k)
{
    check_tq6_all_codes(k);
    const sjk_fmt_kernels *ref = sjk_fmt_kernels_ref();
    check_encode_f16(k);
    check_encode_q(k);
    check_rht(k);
    check_tq_codes(k);
    enum { N = 1024 };
    static float x[N], q[N], a[N], b[N], ya[N], yb[N];
    static uint8_t enc[N * 2];
    fill_gauss(x, N, 77, 2.0);
    fill_gauss(q, N, 78, 1.0);
    static const sjk_format fmts[] = { SJK_FMT_F16, SJK_FMT_Q8_0, SJK_FMT_Q4_0, SJK_FMT_TQ6_0_STAGE };
    for (size_t i = 0; i < 4; i++) {
        const sjk_format f = fmts[i];
        for (size_t n = sjk_format_get(f)->block_values; n <= N; n = n * 2 + sjk_format_get(f)->block_values) {
            const size_t nn = n - n % 128 ? n - n % 128 : n; /* multiples of 128 and small rows */
            CHECK(sjk_format_encode_row(f, enc, sizeof enc, x, nn) == SJK_OK);
            void (*dr)(float *, const void *, size_t), (*dk)(float *, const void *, size_t);
            float (*pr)(const float *, const void *, size_t), (*pk)(const float *, const void *, size_t);
            void (*xr)(float *, float, const void *, size_t), (*xk)(float *, float, const void *, size_t);
            switch (f) {
            case SJK_FMT_F16: dr = ref->decode_f16; dk = k->decode_f16; pr = ref->dot_f16; pk = k->dot_f16;
                xr = ref->axpy_f16; xk = k->axpy_f16; break;
            case SJK_FMT_Q8_0: dr = ref->decode_q8_0; dk = k->decode_q8_0; pr = ref->dot_q8_0; pk = k->dot_q8_0;
                xr = ref->axpy_q8_0; xk = k->axpy_q8_0; break;
            case SJK_FMT_Q4_0: dr = ref->decode_q4_0; dk = k->decode_q4_0; pr = ref->dot_q4_0; pk = k->dot_q4_0;
                xr = ref->axpy_q4_0; xk = k->axpy_q4_0; break;
            default: dr = ref->decode_tq6_0_stage; dk = k->decode_tq6_0_stage; pr = ref->dot_tq6_0_stage;
                pk = k->dot_tq6_0_stage; xr = ref->axpy_tq6_0_stage; xk = k->axpy_tq6_0_stage; break;
            }
            if (f == SJK_FMT_TQ6_0_STAGE && nn % 128) continue;
            dr(a, enc, nn);
            dk(b, enc, nn);
            CHECKF(memcmp(a, b, nn * sizeof *a) == 0, "%s decode n=%zu", sjk_format_get(f)->name, nn);
            double mag = 0;
            for (size_t j = 0; j < nn; j++) mag += fabs((double)q[j] * a[j]);
            CHECK_NEAR(pk(q, enc, nn), pr(q, enc, nn), 1e-5 * mag + 1e-30);
            for (size_t j = 0; j < nn; j++) ya[j] = yb[j] = q[j];
            xr(ya, 0.37f, enc, nn);
            xk(yb, 0.37f, enc, nn);
            for (size_t j = 0; j < nn; j++) CHECK_NEAR(yb[j], ya[j], 1e-6 * (fabs(q[j]) + fabs(0.37 * a[j])) + 1e-30);
        }
    }
}

/* fp32 -> fp16 on a SIMD path must give the reference's bytes for every input class:
 * all 2^19 sign/exponent/top-mantissa combinations, each with the low 13 bits that decide
 * rounding set to below/at/above the halfway point, plus zero and NaN payloads. */
static void check_encode_f16(const sjk_fmt_kernels *k)
{
    enum { N = (1 << 19) * 8 };
    static const uint32_t low[8] = { 0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x0800, 0x17A5 };
    float *x = malloc(N * sizeof *x);
    uint8_t *a = malloc(N * 2), *b = malloc(N * 2);
    if (!x || !a || !b) abort();
    for (uint32_t hi = 0; hi < (1u << 19); hi++)
        for (int l = 0; l < 8; l++) {
            const uint32_t u = (hi << 13) | low[l];
            memcpy(&x[hi * 8 + (uint32_t)l], &u, 4);
        }
    sjk_fmt_kernels_ref()->encode_f16(a, x, N);
    k->encode_f16(b, x, N - 3); /* odd length: the scalar tail too */
    k->encode_f16(b + 2 * (N - 3), x + N - 3, 3);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < N; i++)
        if (a[2 * i] != b[2 * i] || a[2 * i + 1] != b[2 * i + 1]) { if (!bad) first = i; bad++; }
    CHECKF(bad == 0, "%s encode_f16: %zu differ, first input bits %08x", k->name, bad,
           (unsigned)(sjk_f32_bits(x[first])));
    free(x); free(a); free(b);
}

/* Every path this CPU can run, in one process (the dispatched one, and each instruction
 * set layered on the references the way the dispatcher does it). */
TEST(test_kernels_match_reference)
{
    const unsigned feat = sjk_cpu_features();
    printf("     dispatched kernels: %s\n", sjk_fmt_kernels_get()->name);
    check_kernels(sjk_fmt_kernels_get());
    sjk_fmt_kernels k = *sjk_fmt_kernels_ref();
    if (feat & SJK_CPU_AVX2) {
        sjk_fmt_kernels_init_avx2(&k);
        check_kernels(&k);
    }
    if (feat & SJK_CPU_AVX512) {
        sjk_fmt_kernels_init_avx512(&k);
        check_kernels(&k);
    }
}

/* Encoding uses only scalar code: the bytes are pinned here, so every compiler, every
 * dispatch path (SJK_CPU_DISABLE) and every run must give this hash. Inputs come from
 * integer arithmetic only, so no libm difference can move them. */
TEST(test_encoding_is_deterministic_and_pinned)
{
    enum { N = 2048 };
    static float x[N];
    static uint8_t buf[N * 4];
    sjk_rng r;
    sjk_rng_seed(&r, 42);
    for (size_t i = 0; i < N; i++) {
        const uint64_t u = sjk_rng_u64(&r);
        const float a = (float)(u >> 40) * 0x1p-24f - 0.5f, b = (float)((u >> 16) & 0xFFFFFF) * 0x1p-24f - 0.5f;
        x[i] = (a + b) * (i % 61 == 0 ? 40.0f : 3.0f);
    }
    uint64_t h = 0xCBF29CE484222325ull;
    for (int f = 0; f < SJK_FMT_COUNT; f++) {
        const size_t nb = sjk_format_row_nbytes((sjk_format)f, N);
        CHECK(sjk_format_encode_row((sjk_format)f, buf, sizeof buf, x, N) == SJK_OK);
        for (size_t i = 0; i < nb; i++) { h ^= buf[i]; h *= 0x100000001B3ull; }
        static uint8_t again[N * 4];
        CHECK(sjk_format_encode_row((sjk_format)f, again, sizeof again, x, N) == SJK_OK);
        CHECK(memcmp(buf, again, nb) == 0);
    }
    printf("     encoding hash %016llx\n", (unsigned long long)h);
    CHECKF(h == 0xf534e8d5cde8f27aull, "encoding hash %016llx changed", (unsigned long long)h);
}

int main(void)
{
    RUN(test_format_table_sizes_and_names);
    RUN(test_format_rejects_bad_params_and_short_buffers);
    RUN(test_ggml_round_trip_error_bounds);
    RUN(test_format_gaussian_snr_bands);
    RUN(test_rht_sign_masks_have_60_and_70_negatives);
    RUN(test_rht_matches_definition_and_inverts);
    RUN(test_turbo_codes_layout_and_norm_correction);
    RUN(test_tq5_sign_magnitude_mapping);
    RUN(test_nonfinite_inputs_are_defined);
    RUN(test_zero_and_denormal_blocks_decode_to_zero);
    RUN(test_decode_accepts_any_bytes);
    RUN(test_signed_zero_follows_c_reference);
    RUN(test_rotation_block_follows_llama_cpp);
    RUN(test_kernels_match_reference);
    RUN(test_encoding_is_deterministic_and_pinned);
    return test_summary();
}
