/* bench_trellis.c — `sjkvarn bench trellis`: the measurements behind the trellis body's
 * design choices (docs/FORMAT.md, src/codec/trellis.c), rerunnable:
 *
 *   1. start state: tail-biting vs a fixed start, i.i.d. Gaussian rows of 128, SNR of the
 *      search alone (committed codebooks, rows normalised to mean 0 / variance 1);
 *   2. refit: least squares vs moment matching (mean and spread) vs none, through the tile
 *      layer (fp16 scales), on Gaussian and on the synthetic outlier generator (rotated),
 *      for K tiles (rows = channels) and V tiles (rows = tokens);
 *   3. speed on this core, D = 256: seal and decode of one record, scalar vs trellis
 *      (best of many runs; the search path is the dispatched one, see SJK_CPU_DISABLE).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec/trellis.h"
#include "common/rng.h"
#include "common/synth.h"
#include "sjkvarn.h"

int sjk_bench_trellis(int argc, char **argv);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: other jobs on a shared machine do not count */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "bench trellis: out of memory\n");
        exit(1);
    }
    return p;
}

static void start_state(size_t n_seq)
{
    const size_t T = 128;
    float *u = xalloc(T * n_seq * sizeof(float));
    uint8_t *codes = xalloc(T * n_seq);
    void *scratch = xalloc(sjk_trellis_scratch_nbytes(T));
    sjk_rng r;
    sjk_rng_seed(&r, 0xBE7C4);
    double *row = xalloc(T * sizeof(double));
    for (size_t s = 0; s < n_seq; s++) {
        double m = 0, v = 0;
        for (size_t t = 0; t < T; t++) m += row[t] = sjk_rng_normal(&r);
        m /= (double)T;
        for (size_t t = 0; t < T; t++) v += (row[t] - m) * (row[t] - m);
        for (size_t t = 0; t < T; t++) u[t * n_seq + s] = (float)((row[t] - m) / sqrt(v / (double)T));
    }
    printf("1. start state (Gaussian rows of 128, %zu rows, search SNR in dB; tail-biting with a\n"
           "   first pass of P values around the wrap point; records use P = 64)\n", n_seq);
    printf("   k   TB P=16   TB P=32   TB P=64  TB P=128   fixed start   TB64 - fixed\n");
    static const size_t Ps[] = {16, 32, 64, 128};
    for (unsigned k = 2; k <= 4; k++) {
        const float *cb = sjk_trellis_codebook(k);
        double snr[5];
        for (int i = 0; i < 5; i++) {
            sjk_trellis_start st = i < 4 ? SJK_TRELLIS_TAILBITE : SJK_TRELLIS_FIXED;
            if (i < 4) sjk_trellis_encode_tb_pass1(cb, k, codes, u, T, n_seq, n_seq, Ps[i], scratch);
            else sjk_trellis_encode(cb, k, st, codes, u, T, n_seq, n_seq, scratch);
            double e = 0;
            for (size_t s = 0; s < n_seq; s++) e += sjk_trellis_seq_sse(cb, k, st, codes + s, u + s, T, n_seq);
            snr[i] = -10 * log10(e / (double)(T * n_seq));
        }
        printf("   %u   %7.3f   %7.3f   %7.3f   %7.3f   %11.3f   %+12.3f\n", k, snr[0], snr[1], snr[2],
               snr[3], snr[4], snr[2] - snr[4]);
    }
    free(u); free(codes); free(scratch); free(row);
}

/* What the int8 grid of record format 4 costs the search: the same Gaussian sequences
 * coded against each float table (the committed C_k, the real-data K and V tables) and
 * against its grid (sjk_trellis_codebook_grid), tail-biting as records are. */
static void grid(size_t n_seq)
{
    const size_t T = 128;
    float *u = xalloc(T * n_seq * sizeof(float));
    uint8_t *codes = xalloc(T * n_seq);
    void *scratch = xalloc(sjk_trellis_scratch_nbytes(T));
    sjk_rng r;
    sjk_rng_seed(&r, 0x6121D);
    for (size_t i = 0; i < T * n_seq; i++) u[i] = (float)sjk_rng_normal(&r);
    double energy = 0;
    for (size_t i = 0; i < T * n_seq; i++) energy += (double)u[i] * u[i];
    printf("\n1b. the int8 grid of record format 4, and the 128-entry tables of format 5 (row \"128\":\n"
           "   float = C_k, grid = the ts table) (Gaussian rows of 128, %zu rows, search SNR in dB;\n"
           "   the rate-distortion bound is 6.02 k dB)\n", n_seq);
    printf("   k   table      float      grid   grid - float   bound - grid\n");
    static const char *sets[] = {"C_k", "real K", "real V", "128"};
    for (unsigned k = 2; k <= 4; k++)
        for (unsigned set = 0; set <= SJK_TRELLIS_CB_FLOAT_SETS; set++) {
            const int s128 = set == SJK_TRELLIS_CB_FLOAT_SETS; /* C_k against the 128-entry table */
            const float *cbs[2] = {sjk_trellis_codebook_of_set(s128 ? 0 : set, k), NULL};
            cbs[1] = s128 ? sjk_trellis_codebook_s128(k) : sjk_trellis_codebook_grid(cbs[0], k);
            double snr[2];
            for (int g = 0; g < 2; g++) {
                sjk_trellis_encode(cbs[g], k, SJK_TRELLIS_TAILBITE, codes, u, T, n_seq, n_seq, scratch);
                double e = 0;
                for (size_t s = 0; s < n_seq; s++)
                    e += sjk_trellis_seq_sse(cbs[g], k, SJK_TRELLIS_TAILBITE, codes + s, u + s, T, n_seq);
                snr[g] = 10 * log10(energy / e);
            }
            printf("   %u   %-7s %8.3f  %8.3f   %+12.4f   %12.3f\n", k, sets[set], snr[0], snr[1], snr[1] - snr[0],
                   6.0206 * k - snr[1]);
        }
    free(u); free(codes); free(scratch);
}

static void refit(size_t n_tiles)
{
    const size_t D = 256, G = SJK_GROUP, n = D * G;
    float *x = xalloc(n * sizeof(float)), *out = xalloc(n * sizeof(float));
    uint8_t *payload = xalloc(n);
    float sc[256], ze[256];
    static const char *names[] = {"lsq", "moment", "none"};
    printf("\n2. refit after coding (tile layer, D = 256, %zu tiles, SNR in dB)\n", n_tiles);
    printf("   data      tile  k      lsq   moment     none\n");
    for (int kind = 0; kind < 2; kind++)
        for (int is_v = 0; is_v < 2; is_v++)
            for (unsigned k = 2; k <= 4; k++) {
                double snr[3];
                for (int m = 0; m < 3; m++) {
                    sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)k,
                                           is_v ? SJK_TRELLIS_ROWS_TOKENS : SJK_TRELLIS_ROWS_CHANNELS,
                                           SJK_TRELLIS_AXIS_TOKEN, (uint8_t)m, 0};
                    size_t sn = sjk_trellis_tile_scratch_nbytes(&tt);
                    void *scratch = xalloc(sn);
                    sjk_rng r;
                    sjk_rng_seed(&r, 99);
                    double s = 0, e = 0;
                    for (size_t i = 0; i < n_tiles; i++) {
                        sjk_synth_group(x, G, D, kind ? SJK_SYNTH_OUTLIER : SJK_SYNTH_GAUSSIAN, is_v, 1.0,
                                        7, &r);
                        sjk_hadamard(x, n, D);
                        sjk_trellis_tile_encode(&tt, payload, sc, ze, x, scratch, sn);
                        sjk_trellis_tile_decode(&tt, out, payload, sc, ze, NULL);
                        for (size_t j = 0; j < n; j++) {
                            s += (double)x[j] * x[j];
                            e += ((double)x[j] - out[j]) * ((double)x[j] - out[j]);
                        }
                    }
                    snr[m] = 10 * log10(s / e);
                    free(scratch);
                }
                printf("   %-8s  %-4s  %u  %7.3f  %7.3f  %7.3f\n", kind ? "outlier" : "gaussian",
                       is_v ? "V" : "K", k, snr[0], snr[1], snr[2]);
            }
    (void)names;
    free(x); free(out); free(payload);
}

static void speed(int reps)
{
    const size_t D = 256, G = SJK_GROUP, n = D * G;
    float *k = xalloc(n * sizeof(float)), *v = xalloc(n * sizeof(float));
    float *dk = xalloc(n * sizeof(float)), *dv = xalloc(n * sizeof(float));
    sjk_rng r;
    sjk_rng_seed(&r, 5);
    sjk_synth_group(k, G, D, SJK_SYNTH_OUTLIER, 0, 1.0, 3, &r);
    sjk_synth_group(v, G, D, SJK_SYNTH_OUTLIER, 1, 1.0, 3, &r);
    sjk_hadamard(k, n, D);
    sjk_hadamard(v, n, D);
    /* The search alone: one tile's 256 token-axis sequences of 128. */
    {
        const size_t T = 128, ns = 256;
        float *u = xalloc(T * ns * sizeof(float));
        uint8_t *codes = xalloc(T * ns);
        void *scr = xalloc(sjk_trellis_scratch_nbytes(T));
        for (size_t i = 0; i < T * ns; i++) u[i] = (float)sjk_rng_normal(&r);
        printf("\n3a. search of 256 sequences x 128 values (path %s, best of %d), ms\n", sjk_trellis_path(), reps);
        for (unsigned kk = 2; kk <= 4; kk++) {
            double tb = 1e9, tf = 1e9;
            for (int i = 0; i < reps; i++) {
                double t0 = now_s();
                sjk_trellis_encode(sjk_trellis_codebook(kk), kk, SJK_TRELLIS_TAILBITE, codes, u, T, ns, ns, scr);
                double t1 = now_s();
                sjk_trellis_encode(sjk_trellis_codebook(kk), kk, SJK_TRELLIS_FIXED, codes, u, T, ns, ns, scr);
                double t2 = now_s();
                tb = t1 - t0 < tb ? t1 - t0 : tb;
                tf = t2 - t1 < tf ? t2 - t1 : tf;
            }
            printf("   k=%u  tail-biting %.3f   fixed start %.3f\n", kk, tb * 1e3, tf * 1e3);
        }
        free(u); free(codes); free(scr);
    }
    static const unsigned combos[][2] = {{4, 4}, {3, 3}, {3, 2}, {2, 2}};
    printf("\n3. one record, D = 256, outlier generator, one core (search path: %s; best of %d;\n"
           "   CPU time of this thread)\n", sjk_trellis_path(), reps);
    printf("   bits  body            SNR dB   seal ms   decode us   decode vs scalar\n");
    /* Seals and decodes of the three bodies are interleaved, so a busy machine slows all
     * three alike and the ratios stay meaningful; each figure is the best run. */
    static const char *names[] = {"scalar", "trellis", "trellis-chan"};
    for (size_t c = 0; c < 4; c++) {
        sjk_record_params p[3];
        uint8_t *rec[3];
        void *scratch[3];
        size_t rn[3], sn[3];
        double seal[3] = {1e9, 1e9, 1e9}, dec[3] = {1e9, 1e9, 1e9};
        for (int body = 0; body < 3; body++) {
            p[body] = sjk_record_params_default();
            p[body].bits_k = (uint8_t)combos[c][0];
            p[body].bits_v = (uint8_t)combos[c][1];
            p[body].body = (uint8_t)(body == 1 ? SJK_BODY_TRELLIS_I8 : body); /* `t`: the int8-grid tables */
            rn[body] = sjk_record_nbytes(&p[body]);
            sn[body] = sjk_record_scratch_nbytes(&p[body]);
            rec[body] = xalloc(rn[body]);
            scratch[body] = xalloc(sn[body]);
        }
        for (int i = 0; i < reps; i++)
            for (int body = 0; body < 3; body++) {
                double t0 = now_s();
                sjk_record_encode(&p[body], rec[body], rn[body], k, v, scratch[body], sn[body]);
                double dt = now_s() - t0;
                seal[body] = dt < seal[body] ? dt : seal[body];
            }
        for (int i = 0; i < reps * 4; i++)
            for (int body = 0; body < 3; body++) {
                double t0 = now_s();
                sjk_record_decode(&p[body], dk, dv, rec[body], rn[body]);
                double dt = now_s() - t0;
                dec[body] = dt < dec[body] ? dt : dec[body];
            }
        for (int body = 0; body < 3; body++) {
            sjk_record_decode(&p[body], dk, dv, rec[body], rn[body]);
            double snr = 0.5 * (sjk_snr_db(k, dk, n) + sjk_snr_db(v, dv, n));
            printf("   %u/%u%s  %-13s %8.2f  %8.3f   %9.2f   %8.2fx\n", combos[c][0], combos[c][1],
                   body ? "t" : " ", names[body], snr, seal[body] * 1e3, dec[body] * 1e6, dec[body] / dec[0]);
            free(rec[body]);
            free(scratch[body]);
        }
    }
    free(k); free(v); free(dk); free(dv);
}

int sjk_bench_trellis(int argc, char **argv)
{
    int quick = 0, only_speed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--speed")) only_speed = 1;
        else {
            fprintf(stderr, "usage: sjkvarn bench trellis [--quick] [--speed]\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (!only_speed) {
        start_state(quick ? 1024 : 8192);
        grid(quick ? 256 : 2048);
        refit(quick ? 2 : 16);
    }
    speed(quick ? 10 : 40);
    return 0;
}
