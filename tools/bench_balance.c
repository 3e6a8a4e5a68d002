/* bench_balance.c — `sjkvarn bench balance`: the measurement behind the sj balancing rule
 * (docs/BALANCING.md). For each data kind and overall magnitude it runs candidate rules
 * (clamp x keep-best/keep-final x passes) on K and V tiles of synthetic groups and prints
 * the mean tile imbalance after balancing and the SNR of the scalar body (RTN per row of
 * the balanced tile, dequantized in fp32) at 4 and 2 bits. */
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

int sjk_bench_balance(int argc, char **argv)
{
    size_t n_groups = 16, D = 256;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) n_groups = 4;
        else if (!strcmp(argv[i], "--groups") && i + 1 < argc) n_groups = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dim") && i + 1 < argc) D = (size_t)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: sjkvarn bench balance [--quick] [--groups N] [--dim D]\n");
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
            for (size_t c = 0; c < n_cand; c++) {
                double imb[2] = {0, 0}, err[3] = {0, 0, 0}, sig[3] = {0, 0, 0}, passes = 0, secs = 0;
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
                        sjk_balance_info info;
                        double best = 1e30;
                        for (int rep = 0; rep < 3; rep++) { /* timed without the info sweeps */
                            double t0 = cpu_s();
                            sjk_balance_run(tile, R, C, &cands[c].rule, kern, sr, sc, ir, ic, scr, NULL);
                            double dt = cpu_s() - t0;
                            best = dt < best ? dt : best;
                        }
                        secs += best;
                        sjk_balance_run(tile, R, C, &cands[c].rule, kern, sr, sc, ir, ic, scr, &info);
                        imb[is_v] += info.imbalance;
                        passes += cands[c].rule.keep_best ? cands[c].rule.n_iter : info.best_pass;
                        for (unsigned b = 2; b <= 4; b++)
                            body_error(kern, tile, R, C, ir, ic, b, &err[b - 2], &sig[b - 2]);
                    }
                }
                printf("%-8s %6g  %-24s %10.3f %10.3f %9.2f %9.2f %9.2f %7.2f %7.3f\n",
                       kind ? "outlier" : "gaussian", amps[a], cands[c].name, imb[0] / n_groups,
                       imb[1] / n_groups, 10 * log10(sig[2] / err[2]), 10 * log10(sig[1] / err[1]),
                       10 * log10(sig[0] / err[0]), passes / (2.0 * (double)n_groups),
                       1e3 * secs / (double)n_groups);
            }
        }
    }
    free(x);
    free(tile);
    free(scr);
    return 0;
}
