/* test_trellis.c — the trellis body: the search is exact (brute force on short
 * sequences), every dispatch path gives the same codes, packing/decoding round-trips,
 * the committed codebooks reach the Gaussian SNR targets, and the trainer is
 * reproducible from its seed. */
#include <math.h>
#include <stdlib.h>

#include "codec/codec_kernels.h"
#include "codec/record.h"
#include "codec/trellis.h"
#include "codec/trellis_record.h"
#include "common/synth.h"
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
    /* What the hardware has, whatever SJK_CPU_DISABLE says: the kernels are compared
     * directly, so one run covers every path this CPU can execute. */
    __builtin_cpu_init();
    int has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int has512 = has2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    struct { const char *name; sjk_trellis_block_fn fn; int ok; } paths[] = {
        {"avx2", sjk_trellis_block_avx2, has2},
        {"avx512", sjk_trellis_block_avx512, has512},
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
    if (!ran) SKIP_HW("no AVX2/AVX-512 on this CPU: only the reference ran");
}

/* Packing and the table-lookup decoder agree with the windows the search used; in
 * tail-biting mode the first window wraps to the last 6 bits of the same lane. */
TEST(test_trellis_pack_decode_roundtrip)
{
    for (unsigned k = 2; k <= 4; k++) {
        const size_t T = 128, nseq = 32;
        const float *cb = sjk_trellis_codebook(k);
        uint8_t codes[128 * 32], packed[128 * 32 * 4 / 8 + 1];
        uint16_t win[128];
        float dec[128];
        sjk_rng r;
        sjk_rng_seed(&r, k);
        for (size_t i = 0; i < T * nseq; i++) codes[i] = (uint8_t)(sjk_rng_u64(&r) & ((1u << k) - 1));
        packed[T * nseq * k / 8] = 0xA5; /* guard: exactly T*k bits per sequence */
        sjk_trellis_pack(packed, codes, T, nseq, nseq, k);
        CHECK(packed[T * nseq * k / 8] == 0xA5);
        for (int start = 0; start < 2; start++) {
            int ok = 1;
            for (size_t q = 0; q < nseq; q++) {
                const uint8_t *g = packed + q / 16 * T * 2 * k;
                sjk_trellis_windows(win, g, (unsigned)(q % 16), T, k, (sjk_trellis_start)start);
                sjk_trellis_decode_seq(dec, 1, cb, k, (sjk_trellis_start)start, g, (unsigned)(q % 16), T);
                unsigned s = 0;
                if (start == SJK_TRELLIS_TAILBITE)
                    for (size_t t = 0; t < T; t++) s = (((unsigned)codes[t * nseq + q] << 6) | s) >> k;
                for (size_t t = 0; t < T; t++) {
                    unsigned w = ((unsigned)codes[t * nseq + q] << 6) | s;
                    if (win[t] != w || dec[t] != cb[w]) ok = 0;
                    s = w >> k;
                }
            }
            CHECKF(ok, "k=%u start=%d", k, start);
        }
    }
}

/* The pair tables the attention readers use: along every decoded sequence, entry
 * w(t) | s(t+1) << (6 + k) holds exactly C[w(t)] and C[w(t+1)] (bit for bit), for each
 * known table (the committed and the real-data K and V codebooks); other k or another
 * table: none. */
TEST(test_trellis_pair_table_matches_windows)
{
    CHECK(sjk_trellis_pair_table(1) == NULL && sjk_trellis_pair_table(5) == NULL);
    float own[256];
    memcpy(own, sjk_trellis_codebook(2), sizeof own);
    CHECK(sjk_trellis_pair_table_of(own, 2) == NULL && sjk_trellis_codebook_set(own, 2) == -1);
    CHECK(sjk_trellis_codebook_set(sjk_trellis_codebook(3), 3) == 0 &&
          sjk_trellis_codebook_set(sjk_trellis_codebook_real(3, 0), 3) == 1 &&
          sjk_trellis_codebook_set(sjk_trellis_codebook_real(3, 1), 3) == 2 &&
          sjk_trellis_codebook_set(sjk_trellis_codebook(3), 4) == -1);
    for (unsigned kk = 2; kk <= 3 * SJK_TRELLIS_CB_SETS + 1; kk++) {
        const unsigned k = 2 + kk % 3, set = (kk - 2) / 3;
        const float *cb = sjk_trellis_codebook_of_set(set, k);
        const uint64_t *P = sjk_trellis_pair_table_of(cb, k);
        CHECK(set != 0 || P == sjk_trellis_pair_table(k));
        CHECK(P != NULL);
        if (!P) continue;
        uint8_t packed[128 * 16 * 4 / 8];
        uint16_t win[128];
        sjk_rng r;
        sjk_rng_seed(&r, 40 + k);
        for (size_t i = 0; i < sizeof packed; i++) packed[i] = (uint8_t)sjk_rng_u64(&r);
        int ok = 1;
        for (unsigned lane = 0; lane < 16; lane++) {
            sjk_trellis_windows(win, packed, lane, 128, k, SJK_TRELLIS_TAILBITE);
            for (size_t t = 0; t + 1 < 128; t++) {
                const uint64_t e = P[win[t] | (unsigned)(win[t + 1] >> 6) << (6 + k)];
                ok &= !memcmp(&e, cb + win[t], 4) && !memcmp((const uint8_t *)&e + 4, cb + win[t + 1], 4);
            }
        }
        CHECKF(ok, "pair table k=%u table set %u", k, set);
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
    /* the SIMD decoder (where there is one) is bit-exact against the reference, with and
     * without column scales */
    float *o2 = xalloc(n * sizeof(float)), *col = xalloc(512 * sizeof(float));
    CHECK(sjk_trellis_tile_decode_ref(tt, o2, payload, sc, ze, NULL) == SJK_OK);
    CHECK(!memcmp(out, o2, n * sizeof(float)));
    for (size_t i = 0; i < 512; i++) col[i] = 0.5f + (float)i / 256.0f;
    float *o3 = xalloc(n * sizeof(float));
    CHECK(sjk_trellis_tile_decode(tt, o3, payload, sc, ze, col) == SJK_OK);
    CHECK(sjk_trellis_tile_decode_ref(tt, o2, payload, sc, ze, col) == SJK_OK);
    CHECK(!memcmp(o3, o2, n * sizeof(float)));
    /* each SIMD decoder this CPU can run, directly */
    __builtin_cpu_init();
    int has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int has512 = has2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    sjk_trellis_decode_token_fn fns[2] = {has2 ? sjk_trellis_decode_token_avx2 : NULL,
                                          has512 ? sjk_trellis_decode_token_avx512 : NULL};
    if (tt->axis == SJK_TRELLIS_AXIS_CHANNEL) { /* the channel-axis decoder: AVX-512 only */
        fns[0] = NULL;
        fns[1] = has512 ? sjk_trellis_decode_channel_avx512 : NULL;
    }
    {
        for (int f = 0; f < 2; f++) {
            if (!fns[f]) continue;
            for (int withcol = 0; withcol < 2; withcol++) {
                CHECK(sjk_trellis_tile_decode_ref(tt, o2, payload, sc, ze, withcol ? col : NULL) == SJK_OK);
                memset(o3, 0, n * sizeof(float));
                fns[f](o3, tt->D, tt->G, sjk_trellis_codebook(tt->bits), tt->bits, payload, sc, ze,
                       withcol ? col : NULL, tt->rows == SJK_TRELLIS_ROWS_CHANNELS);
                CHECKF(!memcmp(o3, o2, n * sizeof(float)), "decoder %s k=%u rows=%d axis=%d col=%d differs",
                       f ? "avx512" : "avx2", tt->bits, tt->rows, tt->axis, withcol);
            }
        }
    }
    free(o2); free(o3); free(col);
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
                sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)k, (uint8_t)rows, (uint8_t)axis, SJK_TRELLIS_REFIT_LSQ, 0};
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
    const size_t D = 256, G = 128, n = D * G, tiles = test_light() ? 3 : 8; /* 3: SJK_TEST_LIGHT */
    float *y = xalloc(n * sizeof(float)), *out = xalloc(n * sizeof(float));
    for (unsigned k = 2; k <= 4; k++) {
        sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)k, SJK_TRELLIS_ROWS_CHANNELS,
                               SJK_TRELLIS_AXIS_TOKEN, SJK_TRELLIS_REFIT_LSQ, 0};
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
    sjk_trellis_train_params p = {2, 42, 4, 32768, 128, SJK_TRELLIS_DATA_GAUSSIAN, NULL, 0, NULL, 0};
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

/* What capture-tiles and train-codebook --data tiles: rest on. The observer sees each
 * tile once, as the encode gets it; the normalised values it would train on are the
 * search's; training on given values starting from a table never raises the MSE and is
 * reproducible; and coding with a given table that is the committed one gives the bytes
 * of the committed path. */
typedef struct obs_ctx {
    int calls;
    float first[4];
    unsigned rows;
} obs_ctx;
static void obs(void *ctx, const sjk_trellis_tile *tt, const sjk_trellis_input *in)
{
    obs_ctx *o = ctx;
    o->calls++;
    o->rows = tt->rows;
    for (int i = 0; i < 4; i++) o->first[i] = in->x[(size_t)i * in->sd];
}

TEST(test_trellis_observer_normalize_and_given_data)
{
    const size_t D = 64, G = 128, n = D * G;
    float *y = xalloc(n * sizeof(float)), *u = xalloc(n * sizeof(float)), *mean = xalloc(2 * G * sizeof(float));
    fill_normal(y, n, 77);
    for (size_t i = 0; i < n; i++) y[i] = y[i] * y[i] * y[i]; /* heavy tails: not the Gaussian of the tables */
    sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, 3, SJK_TRELLIS_ROWS_TOKENS, SJK_TRELLIS_AXIS_TOKEN,
                           SJK_TRELLIS_REFIT_LSQ, 0};
    size_t sn = sjk_trellis_tile_scratch_nbytes(&tt), pn = sjk_trellis_tile_payload_nbytes(&tt);
    void *scratch = xalloc(sn);
    uint8_t *p1 = xalloc(pn), *p2 = xalloc(pn);
    float a1[2 * 128], a2[2 * 128];
    obs_ctx o = {0, {0}, 9};
    sjk_trellis_set_observer(obs, &o);
    CHECK(sjk_trellis_tile_encode(&tt, p1, a1, a1 + G, y, scratch, sn) == SJK_OK);
    sjk_trellis_set_observer(NULL, NULL);
    CHECK(o.calls == 1 && o.rows == SJK_TRELLIS_ROWS_TOKENS && !memcmp(o.first, y, sizeof o.first));
    CHECK(sjk_trellis_tile_encode(&tt, p2, a2, a2 + G, y, scratch, sn) == SJK_OK && o.calls == 1);
    /* the committed table given explicitly: the same bytes and maps */
    sjk_trellis_input in = {y, D, 1, NULL, 0};
    CHECK(sjk_trellis_tile_encode_cb(sjk_trellis_codebook(3), &tt, p2, a2, a2 + G, &in, scratch, sn) == SJK_OK);
    CHECK(!memcmp(p1, p2, pn) && !memcmp(a1, a2, sizeof a1));
    CHECK(sjk_trellis_tile_encode_cb(NULL, &tt, p2, a2, a2 + G, &in, scratch, sn) == SJK_ERR_PARAM);
    /* normalised values: each row (a token here) has mean 0 and variance 1 */
    CHECK(sjk_trellis_tile_normalize(&tt, &in, u, mean, mean + G) == SJK_OK);
    for (size_t t = 0; t < G; t += 37) {
        double s = 0, s2 = 0;
        for (size_t d = 0; d < D; d++) s += u[t * D + d], s2 += (double)u[t * D + d] * u[t * D + d];
        CHECKF(fabs(s / D) < 1e-5 && fabs(s2 / D - 1) < 1e-4, "token %zu: mean %g var %g", t, s / D, s2 / D);
    }
    /* training on those values from the committed table: reproducible, MSE not raised */
    float c1[512], c2[512];
    double m1[8] = {0}, m2[8] = {0};
    sjk_trellis_train_params p = {3, 1, 3, 0, 128, SJK_TRELLIS_DATA_GIVEN, u, D, sjk_trellis_codebook(3), 0};
    CHECK(sjk_trellis_train(&p, c1, collect, m1) == SJK_OK);
    CHECK(sjk_trellis_train(&p, c2, collect, m2) == SJK_OK);
    CHECK(!memcmp(c1, c2, sizeof c1) && !memcmp(m1, m2, sizeof m1));
    CHECKF(m1[3] < m1[0], "mse %.6f -> %.6f", m1[0], m1[3]);
    CHECK(memcmp(c1, sjk_trellis_codebook(3), sizeof c1) != 0);
    /* the tile coded with the trained table decodes closer to the tile it was trained on */
    float *out = xalloc(n * sizeof(float));
    double e[2] = {0, 0};
    for (int w = 0; w < 2; w++) {
        const float *cb = w ? c1 : sjk_trellis_codebook(3);
        CHECK(sjk_trellis_tile_encode_cb(cb, &tt, p2, a2, a2 + G, &in, scratch, sn) == SJK_OK);
        CHECK(sjk_trellis_tile_decode_cb(cb, &tt, out, p2, a2, a2 + G, NULL) == SJK_OK);
        for (size_t i = 0; i < n; i++) e[w] += ((double)y[i] - out[i]) * ((double)y[i] - out[i]);
    }
    CHECKF(e[1] < e[0], "trained %.4g >= committed %.4g", e[1], e[0]);
    p.n_seq = 10; /* not whole blocks of 16 sequences */
    CHECK(sjk_trellis_train(&p, c1, NULL, NULL) == SJK_ERR_PARAM);
    p.n_seq = D;
    p.u = NULL;
    CHECK(sjk_trellis_train(&p, c1, NULL, NULL) == SJK_ERR_PARAM);
    free(y); free(u); free(mean); free(scratch); free(p1); free(p2); free(out);
}

/* The K rows' peak guard (trellis.c, peak_guard): with the tile's peak_guard flag, a
 * 4-bit K row (one channel's tokens) whose largest deviation passes 3 standard deviations
 * is normalised so that deviation lands at 0.8 * max|C|; other rows, V rows, 2- and 3-bit
 * tiles and tiles without the flag keep the standard deviation. Then the outlier token of
 * each row is coded with under half the error of the plain map (measured: 0.26 against
 * 1.13 standard deviations on this tile). */
TEST(test_trellis_peak_guard)
{
    const size_t D = 64, G = 128, n = D * G;
    float *y = xalloc(n * sizeof(float)), *out = xalloc(n * sizeof(float)), *u = xalloc(n * sizeof(float));
    float *mean = xalloc(2 * G * sizeof(float));
    fill_normal(y, n, 91);
    /* rows (channels) d < 32: token (7 d) mod G set to mean + 5.5 sd; rows >= 32 clipped at 2 */
    double sd[64], mu[64];
    for (size_t d = 0; d < D; d++) {
        if (d >= 32)
            for (size_t t = 0; t < G; t++) y[t * D + d] = fmaxf(-2.0f, fminf(2.0f, y[t * D + d]));
        double s = 0, s2 = 0;
        for (size_t t = 0; t < G; t++) s += y[t * D + d];
        mu[d] = s / G;
        if (d < 32) { /* place the outlier so that it sits at 5.5 sd of the row it makes */
            size_t to = (7 * d) % G;
            y[to * D + d] = (float)mu[d];
            s = 0;
            for (size_t t = 0; t < G; t++) s += y[t * D + d];
            mu[d] = s / G;
            for (size_t t = 0; t < G; t++) s2 += (y[t * D + d] - mu[d]) * (y[t * D + d] - mu[d]);
            y[to * D + d] = (float)(mu[d] + 5.5 * sqrt(s2 / G));
            s = s2 = 0;
            for (size_t t = 0; t < G; t++) s += y[t * D + d];
            mu[d] = s / G;
        }
        s2 = 0;
        for (size_t t = 0; t < G; t++) s2 += (y[t * D + d] - mu[d]) * (y[t * D + d] - mu[d]);
        sd[d] = sqrt(s2 / G);
    }
    for (unsigned k = 2; k <= 4; k++) {
        sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)k, SJK_TRELLIS_ROWS_CHANNELS, SJK_TRELLIS_AXIS_TOKEN,
                               SJK_TRELLIS_REFIT_LSQ, 1};
        sjk_trellis_input in = {y, D, 1, NULL, 0};
        /* without the flag: every row's plain map */
        tt.peak_guard = 0;
        CHECK(sjk_trellis_tile_normalize(&tt, &in, u, mean, mean + D) == SJK_OK);
        for (size_t d = 0; d < D; d++)
            CHECKF(fabs(mean[D + d] * sd[d] - 1) < 1e-5, "k=%u row %zu unguarded: istd %g", k, d, mean[D + d]);
        tt.peak_guard = 1;
        CHECK(sjk_trellis_tile_normalize(&tt, &in, u, mean, mean + D) == SJK_OK);
        const float *cb = sjk_trellis_codebook(k);
        double cmax = 0;
        for (size_t w = 0; w < ((size_t)64 << k); w++) cmax = fmax(cmax, fabs((double)cb[w]));
        const double g = k == 4 ? 0.8 : 0;
        for (size_t d = 0; d < D; d++) {
            double dev = 0;
            for (size_t t = 0; t < G; t++) dev = fmax(dev, fabs(y[t * D + d] - mu[d]));
            /* rows with the outlier: the peak lands at g * cmax (k >= 3); the others: 1 / sd */
            double want = d < 32 && g > 0 ? g * cmax / dev : 1.0 / sd[d];
            CHECKF(fabs(mean[D + d] * 1.0 / want - 1) < 1e-5, "k=%u row %zu: istd %g, want %g", k, d, mean[D + d], want);
        }
        /* the same tile as V (rows = tokens): no guard, each token's plain map */
        sjk_trellis_tile tv = tt;
        tv.rows = SJK_TRELLIS_ROWS_TOKENS;
        CHECK(sjk_trellis_tile_normalize(&tv, &in, u, mean, mean + G) == SJK_OK);
        for (size_t t = 0; t < G; t += 17) {
            double s = 0, s2 = 0;
            for (size_t d = 0; d < D; d++) s += y[t * D + d];
            for (size_t d = 0; d < D; d++) s2 += (y[t * D + d] - s / D) * (y[t * D + d] - s / D);
            CHECKF(fabs(mean[G + t] * sqrt(s2 / D) - 1) < 1e-5, "k=%u V token %zu", k, t);
        }
        if (k != 4) continue;
        /* coded: the outliers' errors against the plain map's (the search on the rows
         * normalised by their standard deviation, then the same least-squares refit) */
        (void)tile_snr(&tt, y, out, 0, NULL);
        float *plain = xalloc(n * sizeof(float));
        uint8_t *codes = xalloc(n), *pay = xalloc(n);
        void *scr = xalloc(sjk_trellis_scratch_nbytes(G));
        for (size_t t = 0; t < G; t++)
            for (size_t d = 0; d < D; d++) u[t * D + d] = (float)((y[t * D + d] - mu[d]) / sd[d]);
        sjk_trellis_encode(cb, k, SJK_TRELLIS_TAILBITE, codes, u, G, D, D, scr);
        sjk_trellis_pack(pay, codes, G, D, D, k);
        for (size_t d = 0; d < D; d++)
            sjk_trellis_decode_seq(plain + d, D, cb, k, SJK_TRELLIS_TAILBITE, pay + (d / 16) * (16 * G * k / 8),
                                   (unsigned)(d % 16), G);
        double worst = 0, worst_plain = 0, e = 0, e_plain = 0;
        for (size_t d = 0; d < D; d++) {
            double mc = 0, sxc = 0, scc = 0;
            for (size_t t = 0; t < G; t++) mc += plain[t * D + d];
            mc /= G;
            for (size_t t = 0; t < G; t++) {
                sxc += (y[t * D + d] - mu[d]) * (plain[t * D + d] - mc);
                scc += (plain[t * D + d] - mc) * (plain[t * D + d] - mc);
            }
            for (size_t t = 0; t < G; t++) {
                double r = mu[d] + sxc / scc * (plain[t * D + d] - mc);
                e_plain += (y[t * D + d] - r) * (y[t * D + d] - r);
                e += ((double)y[t * D + d] - out[t * D + d]) * ((double)y[t * D + d] - out[t * D + d]);
                if (d < 32 && t == (7 * d) % G) {
                    worst = fmax(worst, fabs(y[t * D + d] - out[t * D + d]) / sd[d]);
                    worst_plain = fmax(worst_plain, fabs(y[t * D + d] - r) / sd[d]);
                }
            }
        }
        printf("     k=%u: worst outlier error %.3f sd (plain map %.3f), tile SNR %+.2f dB against it\n", k, worst,
               worst_plain, 10 * log10(e_plain / e));
        CHECKF(worst < 0.5 * worst_plain, "k=%u: outlier error %.3f sd, plain %.3f", k, worst, worst_plain);
        free(plain); free(codes); free(pay); free(scr);
    }
    free(y); free(out); free(u); free(mean);
}

TEST(test_trellis_rejects_bad_params)
{
    sjk_trellis_train_params p = {5, 1, 1, 32768, 128, SJK_TRELLIS_DATA_GAUSSIAN, NULL, 0, NULL, 0};
    float cb[1024];
    CHECK(sjk_trellis_train(&p, cb, NULL, NULL) == SJK_ERR_PARAM);
    p.bits = 3;
    p.samples = 10;
    CHECK(sjk_trellis_train(&p, cb, NULL, NULL) == SJK_ERR_PARAM);
    sjk_trellis_tile tt = {100, 128, 3, 0, 0, 0, 0};
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
    for (unsigned k = 2; k <= 4; k++) { /* the committed tables are finite */
        const float *tab = sjk_trellis_codebook(k);
        int finite = tab != NULL;
        for (size_t w = 0; tab && w < SJK_TRELLIS_CB_SIZE(k); w++) finite &= isfinite(tab[w]) != 0;
        CHECKF(finite, "codebook k=%u", k);
    }
    free(scratch);
}

/* Records with a trellis body: every (bK, bV), same size as scalar, round trip, decode
 * equals the reference decoder bit for bit, the bytes do not depend on the kernel path,
 * and on the outlier generator the trellis beats the scalar body at the same bytes. */
TEST(test_trellis_record_roundtrip_all_bits)
{
    const size_t D = 128, G = SJK_GROUP, n = D * G;
    float *k = xalloc(n * sizeof(float)), *v = xalloc(n * sizeof(float));
    float *dk = xalloc(n * sizeof(float)), *dv = xalloc(n * sizeof(float));
    float *rk = xalloc(n * sizeof(float)), *rv = xalloc(n * sizeof(float));
    sjk_rng r;
    sjk_rng_seed(&r, 21);
    sjk_synth_group(k, G, D, SJK_SYNTH_OUTLIER, 0, 1.0, 5, &r);
    sjk_synth_group(v, G, D, SJK_SYNTH_OUTLIER, 1, 1.0, 5, &r);
    CHECK(sjk_hadamard(k, n, D) == SJK_OK && sjk_hadamard(v, n, D) == SJK_OK);
    const sjk_codec_kernels *paths[] = {sjk_codec_kernels_ref(), sjk_codec_kernels_avx2(),
                                        sjk_codec_kernels_avx512()};
    for (unsigned bk = 2; bk <= 4; bk++)
        for (unsigned bv = 2; bv <= 4; bv++) {
            /* SJK_TEST_LIGHT (valgrind): every bit width for K and for V, in 5 of the 9 pairs */
            if (test_light() && bk != bv && !(bk == 3 && bv == 2) && !(bk == 2 && bv == 4)) continue;
            double snr[3];
            for (int body = 0; body < 3; body++) {
                sjk_record_params p = sjk_record_params_default();
                p.head_dim = (uint32_t)D;
                p.bits_k = (uint8_t)bk;
                p.bits_v = (uint8_t)bv;
                p.body = (uint8_t)body;
                size_t rn = sjk_record_nbytes(&p), sn = sjk_record_scratch_nbytes(&p);
                CHECK(rn == SJK_RECORD_NBYTES(D, bk, bv));
                uint8_t *rec = xalloc(rn), *rec2 = xalloc(rn);
                void *scratch = xalloc(sn);
                CHECK(sjk_record_encode(&p, rec, rn, k, v, scratch, sn) == SJK_OK);
                CHECK(sjk_record_decode(&p, dk, dv, rec, rn) == SJK_OK);
                snr[body] = 0.5 * (sjk_snr_db(k, dk, n) + sjk_snr_db(v, dv, n));
                if (body != SJK_BODY_SCALAR) {
                    CHECK(sjk_record_decode_ref(&p, rk, rv, rec, rn) == SJK_OK);
                    CHECK(!memcmp(rk, dk, n * sizeof(float)) && !memcmp(rv, dv, n * sizeof(float)));
                    CHECK(sjk_record_encode(&p, rec2, rn, k, v, scratch, sn) == SJK_OK);
                    CHECK(!memcmp(rec, rec2, rn));
                    for (int q = 0; q < 3; q++) {
                        if (!paths[q]) continue;
                        memset(rec2, 0, rn);
                        CHECK(sjk_record_encode_on(&p, rec2, rn, k, v, scratch, sn, paths[q]) == SJK_OK);
                        CHECKF(!memcmp(rec, rec2, rn), "%u/%u: kernel path %s changes the bytes", bk, bv,
                               paths[q]->name);
                    }
                    /* a small scratch or a short record is refused, an Inf scale is corrupt */
                    CHECK(sjk_record_encode(&p, rec2, rn, k, v, scratch, sn - 1) == SJK_ERR_BUFFER);
                    CHECK(sjk_record_decode(&p, dk, dv, rec, rn - 1) == SJK_ERR_BUFFER);
                    memcpy(rec2, rec, rn);
                    sjk_record_layout L;
                    sjk_record_layout_init(&L, (uint32_t)D, bk, bv);
                    sjk_wr_u16le(rec2 + L.off_vscale, 0x7C00);
                    CHECK(sjk_record_decode(&p, dk, dv, rec2, rn) == SJK_ERR_CORRUPT);
                }
                free(rec); free(rec2); free(scratch);
            }
            printf("     outlier %u/%u: scalar %.2f dB, trellis %.2f dB (%+.2f), channel-axis trellis %.2f dB\n",
                   bk, bv, snr[0], snr[1], snr[1] - snr[0], snr[2]);
            CHECKF(snr[2] > snr[0], "%u/%u: channel-axis trellis %.2f vs scalar %.2f", bk, bv, snr[2], snr[0]);
            if (bk < 4 && bv < 4)
                CHECKF(snr[1] >= snr[0] + 1.5, "%u/%u: trellis %.2f vs scalar %.2f", bk, bv, snr[1], snr[0]);
        }
    free(k); free(v); free(dk); free(dv); free(rk); free(rv);
}

/* Every head dim, both trellis axes: round trip through sjk_record_encode/decode with the
 * size of a scalar record and a sane SNR on Gaussian rows. */
TEST(test_trellis_record_every_head_dim)
{
    static const uint32_t dims[] = {64, 256, 512};
    for (size_t di = 0; di < 3; di++) {
        const size_t D = dims[di], n = D * SJK_GROUP;
        float *k = xalloc(n * sizeof(float)), *v = xalloc(n * sizeof(float));
        float *dk = xalloc(n * sizeof(float)), *dv = xalloc(n * sizeof(float));
        fill_normal(k, n, 1000 + D);
        fill_normal(v, n, 2000 + D);
        for (int body = 1; body < 3; body++) {
            sjk_record_params p = sjk_record_params_default();
            p.head_dim = (uint32_t)D;
            p.bits_k = 3;
            p.bits_v = 2;
            p.body = (uint8_t)body;
            size_t rn = sjk_record_nbytes(&p), sn = sjk_record_scratch_nbytes(&p);
            CHECK(rn == SJK_RECORD_NBYTES(D, 3, 2));
            uint8_t *rec = xalloc(rn);
            void *scratch = xalloc(sn);
            CHECK(sjk_record_encode(&p, rec, rn, k, v, scratch, sn) == SJK_OK);
            CHECK(sjk_record_decode(&p, dk, dv, rec, rn) == SJK_OK);
            double sk = sjk_snr_db(k, dk, n), sv = sjk_snr_db(v, dv, n);
            CHECKF(sk > 16.5 && sv > 10.5, "D=%zu body=%d: K %.2f dB, V %.2f dB", D, body, sk, sv);
            free(rec); free(scratch);
        }
        free(k); free(v); free(dk); free(dv);
    }
}

/* The bytes are part of the format: a fixed tile (inputs from integer arithmetic only, no
 * libm) must code to the same payload and scales, and decode to the same floats, on every
 * build and path. A change here is a format change (new codebooks, a new search): update
 * the pinned hashes only together with docs/FORMAT.md. (The tiles here are the plain map's;
 * test_trellis_peak_guard covers the guard the record layer asks for.) */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

TEST(test_trellis_format_pinned)
{
    const size_t D = 64, G = 128, n = D * G;
    float *y = xalloc(n * sizeof(float)), *out = xalloc(n * sizeof(float));
    uint8_t *payload = xalloc(n);
    float sc[128], ze[128];
    sjk_rng r;
    sjk_rng_seed(&r, 77);
    for (size_t i = 0; i < n; i++) { /* Irwin–Hall: sum of 12 uniforms, exact in double */
        double x = 0;
        for (int j = 0; j < 12; j++) x += sjk_rng_uniform(&r);
        y[i] = (float)(x - 6.0);
    }
    static const uint64_t pinned[3][2] = { /* [k - 2][rows]: FNV-1a of payload, scales, zeros, decode */
        {0xf119400d6bf4fa26ull, 0x7d73f0e8157a902full},
        {0x8720b1e1a352b1d3ull, 0x301dc56957ec0c07ull},
        {0x48d43ce52ad4efb0ull, 0x9aa75f605553f186ull},
    };
    for (unsigned k = 2; k <= 4; k++) {
        for (int rows = 0; rows < 2; rows++) {
            sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)k, (uint8_t)rows, SJK_TRELLIS_AXIS_TOKEN,
                                   SJK_TRELLIS_REFIT_LSQ, 0};
            size_t sn = sjk_trellis_tile_scratch_nbytes(&tt), nr = rows ? G : D;
            void *scratch = xalloc(sn);
            CHECK(sjk_trellis_tile_encode(&tt, payload, sc, ze, y, scratch, sn) == SJK_OK);
            CHECK(sjk_trellis_tile_decode(&tt, out, payload, sc, ze, NULL) == SJK_OK);
            uint64_t h = 0xCBF29CE484222325ull;
            h = fnv1a(h, payload, sjk_trellis_tile_payload_nbytes(&tt));
            h = fnv1a(h, sc, nr * sizeof(float));
            h = fnv1a(h, ze, nr * sizeof(float));
            h = fnv1a(h, out, n * sizeof(float));
            CHECKF(h == pinned[k - 2][rows], "k=%u rows=%d: hash 0x%016llx", k, rows, (unsigned long long)h);
            free(scratch);
        }
    }
    free(y); free(out); free(payload);
}

/* The 128-entry tables (SJK_BODY_TRELLIS_S128, record format 5; src/codec/trellis.h):
 * 1. every entry of the expanded table is exactly A_k[index(w)] * step, A_k on the int8
 *    grid with 127 reached; every state keeps 2^k distinct levels; the table is known as
 *    set 6 (codebook_set / _of_set / _i8 / pair table) and is the body's table;
 * 2. on i.i.d. Gaussian data through the tile layer they reach their SNR targets (measured
 *    11.28 / 17.10 / 22.88 dB at 2 / 3 / 4 bits, the committed tables 11.28 / 17.14 / 23.05,
 *    the plain map; with the K rows' peak guard 11.28 / 17.02 / 22.77),
 *    and the payload, scales and decode of a fixed tile are pinned (a change is a format
 *    change: bump SJK_RECORD_FORMAT_VERSION and docs/FORMAT.md). */
TEST(test_trellis_s128_tables)
{
    for (unsigned k = 2; k <= 4; k++) {
        float step = 0, st8 = 0;
        const int8_t *a = sjk_trellis_s128_table(k, &step);
        const float *cb = sjk_trellis_codebook_s128(k);
        CHECK(a && cb && step > 0);
        if (!a || !cb) return;
        int top = 0, exact = 1, distinct = 1;
        for (unsigned e = 0; e < SJK_TRELLIS_S128_ENTRIES; e++) top |= a[e] == 127 || a[e] == -127;
        for (unsigned w = 0; w < (64u << k); w++) exact &= cb[w] == (float)a[sjk_trellis_s128_index(k, w)] * step;
        for (unsigned st = 0; st < 64; st++)
            for (unsigned c1 = 0; c1 < (1u << k); c1++)
                for (unsigned c2 = c1 + 1; c2 < (1u << k); c2++)
                    distinct &= cb[(c1 << 6) | st] != cb[(c2 << 6) | st];
        CHECKF(top && exact && distinct, "k=%u: top %d exact %d distinct %d", k, top, exact, distinct);
        CHECK(sjk_trellis_codebook_set(cb, k) == SJK_TRELLIS_CB_SET_S128);
        CHECK(sjk_trellis_codebook_of_set(SJK_TRELLIS_CB_SET_S128, k) == cb);
        CHECK(sjk_trellis_codebook_for(SJK_BODY_TRELLIS_S128, k, 0) == cb &&
              sjk_trellis_codebook_for(SJK_BODY_TRELLIS_S128, k, 1) == cb);
        const int8_t *c8 = sjk_trellis_codebook_i8(cb, k, &st8);
        CHECK(c8 && st8 == step);
        for (unsigned w = 0; c8 && w < (64u << k); w++) exact &= c8[w] == a[sjk_trellis_s128_index(k, w)];
        CHECK(exact && sjk_trellis_pair_table_of(cb, k) != NULL);
    }
    CHECK(sjk_trellis_s128_table(1, NULL) == NULL && sjk_trellis_s128_table(5, NULL) == NULL &&
          sjk_trellis_codebook_s128(5) == NULL);
    /* 2 */
    static const double target[5] = {0, 0, 11.1, 16.9, 22.6};
    static const uint64_t pinned[3] = {0x21449e19ebcdbd4dull, 0xdeb761a7628c1214ull, 0xb379b71d8cf5cbb6ull};
    const size_t D = 256, G = 128, n = D * G, tiles = test_light() ? 3 : 8;
    float *y = xalloc(n * sizeof(float)), *out = xalloc(n * sizeof(float)), sc[256], ze[256];
    uint8_t *payload = xalloc(n);
    for (unsigned k = 2; k <= 4; k++) {
        const float *cb = sjk_trellis_codebook_s128(k);
        sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)k, SJK_TRELLIS_ROWS_CHANNELS,
                               SJK_TRELLIS_AXIS_TOKEN, SJK_TRELLIS_REFIT_LSQ, 0};
        const size_t sn = sjk_trellis_tile_scratch_nbytes(&tt);
        void *scratch = xalloc(sn);
        double s = 0, e = 0;
        uint64_t h = 0xCBF29CE484222325ull;
        for (size_t i = 0; i < tiles; i++) {
            fill_normal(y, n, 0x5EED0000u + i);
            sjk_trellis_input in = {y, D, 1, NULL, 0};
            CHECK(sjk_trellis_tile_encode_cb(cb, &tt, payload, sc, ze, &in, scratch, sn) == SJK_OK);
            CHECK(sjk_trellis_tile_decode_cb(cb, &tt, out, payload, sc, ze, NULL) == SJK_OK);
            if (i == 0) {
                h = fnv1a(h, payload, sjk_trellis_tile_payload_nbytes(&tt));
                h = fnv1a(h, sc, D * sizeof(float));
                h = fnv1a(h, ze, D * sizeof(float));
                h = fnv1a(h, out, n * sizeof(float));
            }
            for (size_t j = 0; j < n; j++) {
                s += (double)y[j] * y[j];
                e += ((double)y[j] - out[j]) * ((double)y[j] - out[j]);
            }
        }
        const double snr = 10 * log10(s / e);
        printf("     gaussian k=%u, 128-entry table: %.3f dB (target %.1f)\n", k, snr, target[k]);
        CHECKF(snr >= target[k], "k=%u snr %.3f < %.1f", k, snr, target[k]);
        CHECKF(h == pinned[k - 2], "k=%u: hash 0x%016llx", k, (unsigned long long)h);
        free(scratch);
    }
    free(y); free(out); free(payload);
}

/* Training the 128-entry tables (tie = SJK_TRELLIS_TIE_S128): the trained table is tied
 * (windows of one entry hold one value), reproducible, the MSE goes down; a tie with a
 * starting table is refused. */
TEST(test_trellis_trainer_tied_s128)
{
    sjk_trellis_train_params p = {4, 42, 4, 32768, 128, SJK_TRELLIS_DATA_GAUSSIAN, NULL, 0, NULL, SJK_TRELLIS_TIE_S128};
    static float a[1024], b[1024];
    double ma[8] = {0}, mb[8] = {0};
    CHECK(sjk_trellis_train(&p, a, collect, ma) == SJK_OK);
    CHECK(sjk_trellis_train(&p, b, collect, mb) == SJK_OK);
    CHECK(!memcmp(a, b, sizeof a) && !memcmp(ma, mb, sizeof ma));
    CHECKF(ma[4] < ma[0], "mse %.6f -> %.6f", ma[0], ma[4]);
    float first[SJK_TRELLIS_S128_ENTRIES];
    int seen[SJK_TRELLIS_S128_ENTRIES] = {0}, tied = 1;
    for (unsigned w = 0; w < 1024; w++) {
        const unsigned e = sjk_trellis_s128_index(4, w);
        if (!seen[e]) first[e] = a[w], seen[e] = 1;
        tied &= a[w] == first[e];
    }
    CHECK(tied);
    p.init = sjk_trellis_codebook(4);
    CHECK(sjk_trellis_train(&p, b, NULL, NULL) == SJK_ERR_PARAM);
    p.init = NULL;
    p.tie = 2;
    CHECK(sjk_trellis_train(&p, b, NULL, NULL) == SJK_ERR_PARAM);
}

int main(void)
{
    RUN(test_trellis_viterbi_equals_brute_force);
    RUN(test_trellis_simd_codes_equal_reference);
    RUN(test_trellis_pack_decode_roundtrip);
    RUN(test_trellis_pair_table_matches_windows);
    RUN(test_trellis_tile_roundtrip_and_determinism);
    RUN(test_trellis_gaussian_snr_targets);
    RUN(test_trellis_trainer_reproducible);
    RUN(test_trellis_observer_normalize_and_given_data);
    RUN(test_trellis_peak_guard);
    RUN(test_trellis_rejects_bad_params);
    RUN(test_trellis_record_roundtrip_all_bits);
    RUN(test_trellis_record_every_head_dim);
    RUN(test_trellis_format_pinned);
    RUN(test_trellis_s128_tables);
    RUN(test_trellis_trainer_tied_s128);
    return test_summary();
}
