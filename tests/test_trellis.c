/* test_trellis.c — the trellis body: the search is exact (brute force on short
 * sequences), every dispatch path gives the same codes, packing/decoding round-trips,
 * the committed codebooks reach the Gaussian SNR targets, and the trainer is
 * reproducible from its seed. */
#include <stdlib.h>

#include "codec/trellis.h"
#include "common/cpu.h"
#include "common/fp16.h"
#include "common/rng.h"
#include "harness.h"
#include "sjkvarn.h"

enum { NL = SJK_TRELLIS_LANES };

static void *xalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

static void fill_normal(float *x, size_t n, uint64_t seed)
{
    sjk_rng r;
    sjk_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)sjk_rng_normal(&r);
}

/* Brute force: the least squared error over all code sequences of one lane, either with
 * start state 0 (fixed) or restricted to rings whose wrap state is `ring_state`. */
static double brute_force(const float *cb, unsigned k, const float *u, size_t T, size_t stride,
                          int fixed, unsigned ring_state)
{
    const size_t nseq = (size_t)1 << (k * T);
    double best = INFINITY;
    uint8_t codes[16];
    for (size_t c = 0; c < nseq; c++) {
        for (size_t t = 0; t < T; t++) codes[t] = (uint8_t)((c >> (k * t)) & ((1u << k) - 1));
        unsigned s = 0;
        if (!fixed) {
            for (size_t t = 0; t < T; t++) s = (((unsigned)codes[t] << 6) | s) >> k;
            if (s != ring_state) continue;
        }
        double e = 0;
        for (size_t t = 0; t < T; t++) {
            unsigned w = ((unsigned)codes[t] << 6) | s;
            double d = (double)u[t * stride] - cb[w];
            e += d * d;
            s = w >> k;
        }
        if (e < best) best = e;
    }
    return best;
}

TEST(test_trellis_viterbi_equals_brute_force)
{
    static const unsigned ks[] = {2, 3, 4};
    static const size_t Ts[] = {6, 4, 4};
    for (int i = 0; i < 3; i++) {
        unsigned k = ks[i];
        size_t T = Ts[i], ncb = SJK_TRELLIS_CB_SIZE(k);
        float *cb = xalloc(ncb * sizeof(float)), *u = xalloc(T * NL * sizeof(float));
        uint8_t *codes = xalloc(T * NL);
        void *scratch = xalloc(sjk_trellis_scratch_nbytes(T));
        fill_normal(cb, ncb, 100 + k); /* an arbitrary table, not the trained one */
        fill_normal(u, T * NL, 200 + k);
        for (int start = 0; start < 2; start++) {
            sjk_trellis_encode(cb, k, (sjk_trellis_start)start, codes, u, T, NL, NL, scratch);
            for (unsigned l = 0; l < NL; l++) {
                double got = sjk_trellis_seq_sse(cb, k, (sjk_trellis_start)start, codes + l, u + l, T, NL);
                unsigned ring = 0;
                for (size_t t = 0; t < T; t++) ring = (((unsigned)codes[t * NL + l] << 6) | ring) >> k;
                double want = brute_force(cb, k, u + l, T, NL, start == SJK_TRELLIS_FIXED, ring);
                CHECKF(fabs(got - want) <= 1e-5 * (1 + want), "k=%u start=%d lane=%u got %.9g want %.9g",
                       k, start, l, got, want);
            }
        }
        free(cb); free(u); free(codes); free(scratch);
    }
}

/* Every available kernel gives the reference's codes, bit for bit. */
TEST(test_trellis_simd_codes_equal_reference)
{
    const size_t T = 128, nseq = 64;
    float *u = xalloc(T * nseq * sizeof(float));
    uint8_t *c_ref = xalloc(T * nseq), *c_simd = xalloc(T * nseq);
    float *hist = xalloc(sjk_trellis_scratch_nbytes(T));
    uint8_t st_ref[(128 + 1) * NL], st_simd[(128 + 1) * NL], s0[NL];
    fill_normal(u, T * nseq, 7);
    for (size_t i = 0; i < T * nseq; i += 97) u[i] *= 6.0f; /* some outliers */
    unsigned f = sjk_cpu_features();
    struct { const char *name; sjk_trellis_block_fn fn; int ok; } paths[] = {
        {"avx2", sjk_trellis_block_avx2, (f & SJK_CPU_AVX2) != 0},
        {"avx512", sjk_trellis_block_avx512, (f & SJK_CPU_AVX512) != 0},
    };
    int ran = 0;
    for (unsigned k = 2; k <= 4; k++) {
        const float *cb = sjk_trellis_codebook(k);
        for (int p = 0; p < 2; p++) {
            if (!paths[p].ok) continue;
            ran++;
            for (int mode = 0; mode < 3; mode++) { /* free, fixed start, start+end pinned */
                for (unsigned l = 0; l < NL; l++) s0[l] = (uint8_t)((l * 37 + k) & 63);
                const uint8_t *init = mode == 0 ? NULL : s0, *end = mode == 2 ? s0 : NULL;
                sjk_trellis_block_ref(cb, k, c_ref, u, T, nseq, init, end, hist, st_ref);
                sjk_trellis_block_fn fn = paths[p].fn;
                fn(cb, k, c_simd, u, T, nseq, init, end, hist, st_simd);
                int same = 1;
                for (size_t t = 0; t < T; t++)
                    if (memcmp(c_ref + t * nseq, c_simd + t * nseq, NL)) same = 0;
                CHECKF(same, "%s k=%u mode=%d codes differ", paths[p].name, k, mode);
                CHECKF(!memcmp(st_ref, st_simd, sizeof st_ref), "%s k=%u mode=%d states differ",
                       paths[p].name, k, mode);
            }
        }
        /* The whole driver too (tail-biting, all 4 blocks). */
        sjk_trellis_encode_ref(cb, k, SJK_TRELLIS_TAILBITE, c_ref, u, T, nseq, nseq, hist);
        sjk_trellis_encode(cb, k, SJK_TRELLIS_TAILBITE, c_simd, u, T, nseq, nseq, hist);
        CHECKF(!memcmp(c_ref, c_simd, T * nseq), "driver k=%u (%s) differs", k, sjk_trellis_path());
    }
    free(u); free(c_ref); free(c_simd); free(hist);
    if (!ran) SKIP("no AVX2/AVX-512 on this CPU: only the reference ran");
}

/* Packing and the table-lookup decoder agree with the windows the search used; in
 * tail-biting mode the first window wraps to the last 6 bits. */
TEST(test_trellis_pack_decode_roundtrip)
{
    for (unsigned k = 2; k <= 4; k++) {
        const size_t T = 128;
        const float *cb = sjk_trellis_codebook(k);
        uint8_t codes[128], packed[64];
        uint16_t win[128];
        float dec[128];
        sjk_rng r;
        sjk_rng_seed(&r, k);
        for (size_t t = 0; t < T; t++) codes[t] = (uint8_t)(sjk_rng_u64(&r) & ((1u << k) - 1));
        for (int start = 0; start < 2; start++) {
            sjk_trellis_pack_seq(packed, codes, T, 1, k);
            sjk_trellis_windows(win, packed, T, k, (sjk_trellis_start)start);
            sjk_trellis_decode_seq(dec, 1, cb, k, (sjk_trellis_start)start, packed, T);
            unsigned s = 0;
            if (start == SJK_TRELLIS_TAILBITE)
                for (size_t t = 0; t < T; t++) s = (((unsigned)codes[t] << 6) | s) >> k;
            int ok = 1;
            for (size_t t = 0; t < T; t++) {
                unsigned w = ((unsigned)codes[t] << 6) | s;
                if (win[t] != w || dec[t] != cb[w] || (win[t] >> 6) != codes[t]) ok = 0;
                s = w >> k;
            }
            CHECKF(ok, "k=%u start=%d", k, start);
            /* The payload is exactly T*k bits: byte-aligned, nothing else. */
            CHECK(T * k % 8 == 0);
        }
    }
}

static double tile_snr(const sjk_trellis_tile *tt, const float *y, float *out, int ref,
                       uint8_t *payload_out)
{
    size_t n = (size_t)tt->D * tt->G, nrows = tt->rows == SJK_TRELLIS_ROWS_CHANNELS ? tt->D : tt->G;
    uint8_t *payload = xalloc(sjk_trellis_tile_payload_nbytes(tt));
    float *sc = xalloc(nrows * sizeof(float)), *ze = xalloc(nrows * sizeof(float));
    size_t sn = sjk_trellis_tile_scratch_nbytes(tt);
    void *scratch = xalloc(sn);
    sjk_status st = ref ? sjk_trellis_tile_encode_ref(tt, payload, sc, ze, y, scratch, sn)
                        : sjk_trellis_tile_encode(tt, payload, sc, ze, y, scratch, sn);
    CHECK(st == SJK_OK);
    for (size_t r = 0; r < nrows; r++) CHECK(sjk_round_fp16(sc[r]) == sc[r] && sjk_round_fp16(ze[r]) == ze[r]);
    CHECK(sjk_trellis_tile_decode(tt, out, payload, sc, ze, NULL) == SJK_OK);
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)y[i] * y[i];
        e += ((double)y[i] - out[i]) * ((double)y[i] - out[i]);
    }
    if (payload_out) memcpy(payload_out, payload, sjk_trellis_tile_payload_nbytes(tt));
    free(payload); free(sc); free(ze); free(scratch);
    return 10 * log10(s / e);
}

/* Tiles in every orientation: round trip, determinism, reference == dispatched bytes. */
TEST(test_trellis_tile_roundtrip_and_determinism)
{
    const size_t D = 64, G = 128, n = D * G;
    float *y = xalloc(n * sizeof(float)), *out = xalloc(n * sizeof(float));
    uint8_t *p1 = xalloc(n), *p2 = xalloc(n), *p3 = xalloc(n);
    fill_normal(y, n, 11);
    for (size_t i = 0; i < n; i++) y[i] = y[i] * 0.5f + 3.0f; /* offset and scale */
    for (unsigned k = 2; k <= 4; k++)
        for (int rows = 0; rows < 2; rows++)
            for (int axis = 0; axis < 2; axis++) {
                sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)k, (uint8_t)rows, (uint8_t)axis, SJK_TRELLIS_REFIT_LSQ};
                double snr1 = tile_snr(&tt, y, out, 0, p1);
                double snr2 = tile_snr(&tt, y, out, 0, p2);
                double snr3 = tile_snr(&tt, y, out, 1, p3);
                size_t pn = sjk_trellis_tile_payload_nbytes(&tt);
                CHECK(pn == D * G * k / 8);
                CHECKF(!memcmp(p1, p2, pn) && snr1 == snr2, "k=%u rows=%d axis=%d not deterministic", k, rows, axis);
                CHECKF(!memcmp(p1, p3, pn) && snr1 == snr3, "k=%u rows=%d axis=%d ref differs", k, rows, axis);
                /* Signal here includes the offset 3, so this SNR is generous; it only
                 * catches a broken round trip. */
                CHECKF(snr1 > 14.5 + 5.5 * k, "k=%u rows=%d axis=%d snr %.2f", k, rows, axis, snr1);
            }
    free(y); free(out); free(p1); free(p2); free(p3);
}

/* The committed codebooks reach the targets on i.i.d. Gaussian data, through the tile
 * layer (row normalisation, tail-biting search, least-squares refit, fp16 scales). */
TEST(test_trellis_gaussian_snr_targets)
{
    static const double target[5] = {0, 0, 10.9, 16.7, 22.4};
    const size_t D = 256, G = 128, n = D * G, tiles = 8;
    float *y = xalloc(n * sizeof(float)), *out = xalloc(n * sizeof(float));
    for (unsigned k = 2; k <= 4; k++) {
        sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)k, SJK_TRELLIS_ROWS_CHANNELS,
                               SJK_TRELLIS_AXIS_TOKEN, SJK_TRELLIS_REFIT_LSQ};
        double s = 0, e = 0;
        for (size_t i = 0; i < tiles; i++) {
            fill_normal(y, n, 0x5EED0000u + i); /* not the training seed's stream */
            (void)tile_snr(&tt, y, out, 0, NULL);
            for (size_t j = 0; j < n; j++) {
                s += (double)y[j] * y[j];
                e += ((double)y[j] - out[j]) * ((double)y[j] - out[j]);
            }
        }
        double snr = 10 * log10(s / e);
        printf("     gaussian k=%u: %.3f dB (target %.1f)\n", k, snr, target[k]);
        CHECKF(snr >= target[k], "k=%u snr %.3f < %.1f", k, snr, target[k]);
    }
    free(y); free(out);
}

static void collect(void *ctx, unsigned iter, double mse)
{
    double *m = ctx;
    if (iter < 8) m[iter] = mse;
}

/* A small training run, twice: identical tables and identical MSE curves; the MSE goes
 * down. */
TEST(test_trellis_trainer_reproducible)
{
    sjk_trellis_train_params p = {2, 42, 4, 32768, 128, SJK_TRELLIS_DATA_GAUSSIAN};
    float a[256], b[256];
    double ma[8] = {0}, mb[8] = {0};
    CHECK(sjk_trellis_train(&p, a, collect, ma) == SJK_OK);
    CHECK(sjk_trellis_train(&p, b, collect, mb) == SJK_OK);
    CHECK(!memcmp(a, b, sizeof a));
    CHECK(!memcmp(ma, mb, sizeof ma));
    CHECKF(ma[4] < ma[0], "mse %.6f -> %.6f", ma[0], ma[4]);
    p.seed = 43;
    CHECK(sjk_trellis_train(&p, b, NULL, NULL) == SJK_OK);
    CHECK(memcmp(a, b, sizeof a) != 0);
}

TEST(test_trellis_rejects_bad_params)
{
    sjk_trellis_train_params p = {5, 1, 1, 32768, 128, SJK_TRELLIS_DATA_GAUSSIAN};
    float cb[1024];
    CHECK(sjk_trellis_train(&p, cb, NULL, NULL) == SJK_ERR_PARAM);
    p.bits = 3;
    p.samples = 10;
    CHECK(sjk_trellis_train(&p, cb, NULL, NULL) == SJK_ERR_PARAM);
    sjk_trellis_tile tt = {100, 128, 3, 0, 0, 0};
    CHECK(sjk_trellis_tile_payload_nbytes(&tt) == 0);
    CHECK(sjk_trellis_tile_scratch_nbytes(&tt) == 0);
    tt.D = 64;
    tt.bits = 5;
    CHECK(sjk_trellis_tile_payload_nbytes(&tt) == 0);
    tt.bits = 3;
    float y[64 * 128] = {0}, sc[128], ze[128];
    uint8_t payload[64 * 128 * 3 / 8];
    size_t sn = sjk_trellis_tile_scratch_nbytes(&tt);
    void *scratch = xalloc(sn);
    CHECK(sjk_trellis_tile_encode(&tt, payload, sc, ze, y, scratch, sn - 1) == SJK_ERR_BUFFER);
    /* A constant tile codes to its constant exactly (scale 0). */
    CHECK(sjk_trellis_tile_encode(&tt, payload, sc, ze, y, scratch, sn) == SJK_OK);
    float out[64 * 128];
    CHECK(sjk_trellis_tile_decode(&tt, out, payload, sc, ze, NULL) == SJK_OK);
    int zero = 1;
    for (size_t i = 0; i < 64 * 128; i++) zero &= out[i] == 0.0f;
    CHECK(zero);
    CHECK(sjk_trellis_codebook(1) == NULL && sjk_trellis_codebook(5) == NULL);
    free(scratch);
}

int main(void)
{
    RUN(test_trellis_viterbi_equals_brute_force);
    RUN(test_trellis_simd_codes_equal_reference);
    RUN(test_trellis_pack_decode_roundtrip);
    RUN(test_trellis_tile_roundtrip_and_determinism);
    RUN(test_trellis_gaussian_snr_targets);
    RUN(test_trellis_trainer_reproducible);
    RUN(test_trellis_rejects_bad_params);
    return test_summary();
}
