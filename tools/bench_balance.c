/* bench_balance.c — `sjkvarn bench balance`: the measurement behind the sj balancing rule
 * (docs/BALANCING.md). For each data kind and overall magnitude it runs candidate rules
 * (clamp x keep-best/keep-final x passes) on K and V tiles of synthetic groups and prints
 * the mean tile imbalance after balancing and the SNR of the scalar body (RTN per row of
 * the balanced tile, dequantized in fp32) at 4, 3 and 2 bits. With --tiles it runs the
 * same rules on a model's real tiles instead: the rotated, unbalanced K and V tiles that
 * `sjkvarn capture-tiles --stage rotated` captured (tools/tile_file.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec/balance.h"
#include "codec/codec_kernels.h"
#include "codec/record.h"
#include "common/synth.h"
#include "sjkvarn.h"
#include "tile_file.h"

int sjk_bench_balance(int argc, char **argv);

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct cand {
    const char *name;
    sjk_balance_rule rule;
} cand;

/* Quantizes tile M [R][C] with the balancing (inverse scales) and returns the squared
 * error and signal energy (fp32 dequantization, no fp16 storage). */
static void body_error(const sjk_codec_kernels *kern, const float *M, size_t R, size_t C,
                       const float *ir, const float *ic, unsigned bits, double *err, double *sig)
{
    uint8_t codes[512];
    for (size_t i = 0; i < R; i++) {
        float lo, step;
        kern->rtn_row(M + i * C, C, ir[i], ic, (1u << bits) - 1, codes, &lo, &step);
        for (size_t j = 0; j < C; j++) {
            double y = ((double)codes[j] * step + lo) / ((double)ir[i] * ic[j]);
            double d = y - M[i * C + j];
            *err += d * d;
            *sig += (double)M[i * C + j] * M[i * C + j];
        }
    }
}

/* Accumulates one rule's figures over tiles. */
typedef struct cell {
    double imb[2], err[3], sig[3], passes, secs;
    size_t n[2];
} cell;

/* Balances tile M [R][C] (rows = channels for a K tile, is_v = 0) by one rule and adds
 * its imbalance, the scalar body's error at 2, 3 and 4 bits, the passes and the best of
 * three CPU times to c. scr: sjk_balance_scratch_floats(R, C); the scale arrays R and C
 * floats. */
static void run_tile(cell *c, const float *M, size_t R, size_t C, int is_v, const sjk_balance_rule *rule,
                     const sjk_codec_kernels *kern, float *sr, float *sc, float *ir, float *ic, float *scr)
{
    sjk_balance_info info;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) { /* timed without the info sweeps */
        double t0 = cpu_s();
        sjk_balance_run(M, R, C, rule, kern, sr, sc, ir, ic, scr, NULL);
        double dt = cpu_s() - t0;
        best = dt < best ? dt : best;
    }
    c->secs += best;
    sjk_balance_run(M, R, C, rule, kern, sr, sc, ir, ic, scr, &info);
    c->imb[is_v] += info.imbalance;
    c->n[is_v]++;
    c->passes += rule->keep_best ? rule->n_iter : info.best_pass;
    for (unsigned b = 2; b <= 4; b++) body_error(kern, M, R, C, ir, ic, b, &c->err[b - 2], &c->sig[b - 2]);
}

static void print_cell(const char *data, const char *amp, const char *rule, const cell *c)
{
    size_t n = c->n[0] + c->n[1];
    printf("%-8s %6s  %-24s %10.3f %10.3f %9.2f %9.2f %9.2f %7.2f %7.3f\n", data, amp, rule,
           c->n[0] ? c->imb[0] / (double)c->n[0] : 0.0, c->n[1] ? c->imb[1] / (double)c->n[1] : 0.0,
           10 * log10(c->sig[2] / c->err[2]), 10 * log10(c->sig[1] / c->err[1]), 10 * log10(c->sig[0] / c->err[0]),
           c->passes / (double)n, 2e3 * c->secs / (double)n);
}

/* --tiles: the rules on each file's rotated tiles, at most max_tiles of each kind (evenly
 * spaced through the file's canonical order), one block of rows per file. */
static int bench_tiles(const char *paths, size_t max_tiles, const cand *cands, size_t n_cand,
                       const sjk_codec_kernels *kern)
{
    const char *P = "sjkvarn bench balance";
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", paths) >= (int)sizeof buf) {
        fprintf(stderr, "%s: --tiles list too long\n", P);
        return 2;
    }
    for (char *save = NULL, *path = strtok_r(buf, ",", &save); path; path = strtok_r(NULL, ",", &save)) {
        sjk_tile_set s = {0};
        if (!sjk_tile_set_load(P, path, -1, SJK_TILE_ROTATED, &s)) return 1;
        const size_t D = s.D, G = s.G, m = D * G;
        if (D > 512 || G > 512 || D % 16 || G % 16) { /* the record's shapes; body_error's rows */
            fprintf(stderr, "%s: %s: tiles of %zu tokens x %zu channels: at most 512 of each, multiples of 16\n", P,
                    path, G, D);
            sjk_tile_set_free(&s);
            return 1;
        }
        size_t nk = 0;
        while (nk < s.n && s.rows[nk] == 0) nk++; /* the canonical order: K tiles first */
        const size_t nkind[2] = {nk, s.n - nk}, first[2] = {0, nk};
        size_t take[2];
        for (int v = 0; v < 2; v++) take[v] = max_tiles && nkind[v] > max_tiles ? max_tiles : nkind[v];
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        float *tile = malloc(m * sizeof *tile), *scr = malloc(sjk_balance_scratch_floats(D, G) * 2 * sizeof *scr);
        float *sr = malloc(4 * 512 * sizeof *sr);
        if (!tile || !scr || !sr || !take[0] || !take[1]) {
            fprintf(stderr, "%s: %s: %s\n", P, path, tile && scr && sr ? "no K or no V tiles" : "out of memory");
            free(tile), free(scr), free(sr), sjk_tile_set_free(&s);
            return 1;
        }
        if (path == buf) {
            printf("# sjkvarn bench balance --tiles: real K and V tiles as the balancing gets them\n");
            printf("# imbalance = max/min col std + max/min row std of the balanced tile (2 = perfect), mean\n");
            printf("# snrB = the scalar body (RTN per row of the balanced tile) at B bits over K and V\n");
            printf("# passes = mean passes run per tile; ms/rec = balancing time of a K and a V tile, CPU, best of 3\n");
            printf("%-8s %6s  %-24s %10s %10s %9s %9s %9s %7s %7s\n", "data", "amp", "rule", "imb K", "imb V",
                   "snr4 dB", "snr3 dB", "snr2 dB", "passes", "ms/rec");
        }
        printf("# %s: %zu K and %zu V tiles of %zu tokens x %zu channels, rotated, before balancing; "
               "%zu and %zu of them used\n", base, nkind[0], nkind[1], G, D, take[0], take[1]);
        for (size_t ci = 0; ci < n_cand; ci++) {
            cell c = {0};
            for (int is_v = 0; is_v < 2; is_v++)
                for (size_t i = 0; i < take[is_v]; i++) {
                    const float *y = s.y + (first[is_v] + i * nkind[is_v] / take[is_v]) * m; /* token-major */
                    size_t R = is_v ? G : D, C = is_v ? D : G;
                    for (size_t t = 0; t < G; t++)
                        for (size_t d = 0; d < D; d++) tile[is_v ? t * D + d : d * G + t] = y[t * D + d];
                    run_tile(&c, tile, R, C, is_v, &cands[ci].rule, kern, sr, sr + 512, sr + 2 * 512, sr + 3 * 512,
                             scr);
                }
            print_cell(base, "-", cands[ci].name, &c);
        }
        free(tile), free(scr), free(sr);
        sjk_tile_set_free(&s);
    }
    return 0;
}

int sjk_bench_balance(int argc, char **argv)
{
    size_t n_groups = 16, D = 256, max_tiles = 0;
    const char *tiles = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) n_groups = 4, max_tiles = 8;
        else if (!strcmp(argv[i], "--groups") && i + 1 < argc) n_groups = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dim") && i + 1 < argc) D = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tiles") && i + 1 < argc) tiles = argv[++i];
        else if (!strcmp(argv[i], "--max-tiles") && i + 1 < argc && atoi(argv[i + 1]) > 0)
            max_tiles = (size_t)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: sjkvarn bench balance [--quick] [--groups N] [--dim D]\n"
                            "       sjkvarn bench balance --tiles FILE[,FILE...] [--max-tiles N] [--quick]\n"
                            "  --tiles: the rules on real tiles, each file from `sjkvarn capture-tiles --stage rotated`\n"
                            "  --max-tiles N: at most N K and N V tiles of each file (evenly spaced; --quick: 8)\n");
            return !strcmp(argv[i], "--help") ? 0 : 2;
        }
    }
    if (D != 64 && D != 128 && D != 256 && D != 512) {
        fprintf(stderr, "sjkvarn bench balance: --dim must be 64, 128, 256 or 512\n");
        return 2;
    }
    const size_t G = SJK_GROUP;
    const sjk_balance_rule ref = sjk_balance_rule_of(SJK_BALANCE_REFERENCE);
    sjk_balance_rule ref16b = ref, ref16f = ref, wide16b, wide16f, wide8f;
    ref16b.n_iter = 16;
    ref16f.n_iter = 16, ref16f.keep_best = 0;
    wide16f = sjk_balance_rule_of(SJK_BALANCE_SJ);
    wide16f.split = 0;
    wide16f.tol = 0;
    sjk_balance_rule sj = sjk_balance_rule_of(SJK_BALANCE_SJ);
    wide16b = wide16f, wide16b.keep_best = 1;
    wide8f = wide16f, wide8f.n_iter = 8;
    sjk_balance_rule off = sjk_balance_rule_of(SJK_BALANCE_OFF);
    const cand cands[] = {
        {"off", off},
        {"ref 8 best [-0.3,10]", ref},
        {"ref 16 best [-0.3,10]", ref16b},
        {"ref 16 final [-0.3,10]", ref16f},
        {"wide 16 best [-30,30]", wide16b},
        {"wide 16 final [-30,30]", wide16f},
        {"wide 8 final [-30,30]", wide8f},
        {"sj (wide 16 final, tol)", sj},
    };
    const size_t n_cand = sizeof cands / sizeof cands[0];
    const double amps[] = {0.01, 0.1, 1.0, 10.0};
    const sjk_codec_kernels *kern = sjk_codec_kernels_get();
    if (tiles) return bench_tiles(tiles, max_tiles, cands, n_cand, kern);

    float *x = malloc(G * D * sizeof *x), *tile = malloc(G * D * sizeof *tile);
    float *scr = malloc(sjk_balance_scratch_floats(G, D) * 2 * sizeof *scr);
    float sr[512], sc[512], ir[512], ic[512];
    if (!x || !tile || !scr) return 1;

    printf("# sjkvarn bench balance: D=%zu, %zu groups per cell, K and V tiles of each group\n", D, n_groups);
    printf("# imbalance = max/min col std + max/min row std of the balanced tile (2 = perfect), mean over tiles\n");
    printf("# passes = mean passes run per tile (keep-best rules run all of them)\n");
    printf("# ms/rec = balancing time of one record (its K and V tiles), CPU time, best of 3\n");
    printf("%-8s %6s  %-24s %10s %10s %9s %9s %9s %7s %7s\n", "data", "amp", "rule", "imb K", "imb V",
           "snr4 dB", "snr3 dB", "snr2 dB", "passes", "ms/rec");
    for (int kind = 0; kind < 2; kind++) {
        for (size_t a = 0; a < sizeof amps / sizeof amps[0]; a++) {
            for (size_t c_i = 0; c_i < n_cand; c_i++) {
                cell c = {0};
                sjk_rng r;
                sjk_rng_seed(&r, 1234);
                for (size_t g = 0; g < n_groups; g++) {
                    for (int is_v = 0; is_v < 2; is_v++) {
                        sjk_synth_group(x, G, D, (sjk_synth_kind)kind, is_v, amps[a], 77, &r);
                        sjk_hadamard(x, G * D, D);
                        size_t R = is_v ? G : D, C = is_v ? D : G;
                        for (size_t t = 0; t < G; t++)
                            for (size_t d = 0; d < D; d++)
                                tile[is_v ? t * D + d : d * G + t] = x[t * D + d];
                        run_tile(&c, tile, R, C, is_v, &cands[c_i].rule, kern, sr, sc, ir, ic, scr);
                    }
                }
                char amp[16];
                snprintf(amp, sizeof amp, "%g", amps[a]);
                print_cell(kind ? "outlier" : "gaussian", amp, cands[c_i].name, &c);
            }
        }
    }
    free(x);
    free(tile);
    free(scr);
    return 0;
}
