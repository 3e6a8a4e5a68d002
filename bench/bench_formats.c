/* bench_formats.c — kernel-level benchmark of the value formats: encode and decode
 * throughput of every format through the public API, and the cache kernels (decode, dot
 * with a query row, axpy) of format_kernels.h, dispatched versus the scalar reference in
 * the same run (the ratio is the number to read; absolute rates depend on the machine).
 *
 *   make benches && ./build/bench/bench_formats
 *
 * Data: N(0,1) rows of 256 values (one D = 256 head row), 4096 rows (1M values), seed 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "codec/format.h"
#include "codec/format_kernels.h"
#include "common/rng.h"
#include "sjkvarn.h"

enum { D = 256, ROWS = 4096, N = D * ROWS };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile float g_sink;

/* out = values per second of stmt run over every row (best of 5 runs). */
#define RATE(out, stmt)                                                               \
    do {                                                                              \
        double best = 1e30;                                                           \
        for (int rep = 0; rep < 5; rep++) {                                           \
            double t0 = now();                                                        \
            for (size_t r = 0; r < ROWS; r++) { stmt; }                               \
            double dt = now() - t0;                                                   \
            if (dt < best) best = dt;                                                 \
        }                                                                             \
        (out) = (double)N / best;                                                     \
    } while (0)

int main(void)
{
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *q = malloc(D * sizeof *q);
    uint8_t *enc = malloc((size_t)N * 4);
    if (!x || !y || !q || !enc) return 1;
    sjk_rng rng;
    sjk_rng_seed(&rng, 1);
    for (size_t i = 0; i < N; i++) x[i] = (float)sjk_rng_normal(&rng);
    for (size_t i = 0; i < D; i++) q[i] = (float)sjk_rng_normal(&rng);

    printf("%-12s %8s %14s %14s\n", "format", "bpv", "encode val/s", "decode val/s");
    for (int f = 0; f < SJK_FMT_COUNT; f++) {
        const sjk_format_info *fi = sjk_format_get((sjk_format)f);
        const size_t rb = sjk_format_row_nbytes((sjk_format)f, D);
        double e, d;
        RATE(e, fi->encode(enc + r * rb, x + r * D, D));
        RATE(d, fi->decode(y + r * D, enc + r * rb, D));
        printf("%-12s %8.3f %14.3e %14.3e\n", fi->name, fi->bits_per_value, e, d);
    }

    const sjk_fmt_kernels *k = sjk_fmt_kernels_get(), *ref = sjk_fmt_kernels_ref();
    printf("\nkernels: %s vs ref (values/s, ratio)\n", k->name);
    static const sjk_format kf[] = { SJK_FMT_F16, SJK_FMT_Q8_0, SJK_FMT_Q4_0, SJK_FMT_TQ6_0_STAGE };
    for (size_t i = 0; i < 4; i++) {
        const sjk_format f = kf[i];
        const size_t rb = sjk_format_row_nbytes(f, D);
        sjk_format_get(f)->encode(enc, x, N);
        const sjk_fmt_kernels *t[2] = { ref, k };
        double rd[2], rp[2], ra[2];
        for (int w = 0; w < 2; w++) {
            void (*dec)(float *, const void *, size_t) = f == SJK_FMT_F16 ? t[w]->decode_f16 : f == SJK_FMT_Q8_0 ? t[w]->decode_q8_0
                                                       : f == SJK_FMT_Q4_0 ? t[w]->decode_q4_0 : t[w]->decode_tq6_0_stage;
            float (*dot)(const float *, const void *, size_t) = f == SJK_FMT_F16 ? t[w]->dot_f16 : f == SJK_FMT_Q8_0 ? t[w]->dot_q8_0
                                                              : f == SJK_FMT_Q4_0 ? t[w]->dot_q4_0 : t[w]->dot_tq6_0_stage;
            void (*axpy)(float *, float, const void *, size_t) = f == SJK_FMT_F16 ? t[w]->axpy_f16 : f == SJK_FMT_Q8_0 ? t[w]->axpy_q8_0
                                                               : f == SJK_FMT_Q4_0 ? t[w]->axpy_q4_0 : t[w]->axpy_tq6_0_stage;
            float s = 0;
            RATE(rd[w], dec(y + r * D, enc + r * rb, D));
            RATE(rp[w], s += dot(q, enc + r * rb, D));
            RATE(ra[w], axpy(y, 1e-3f, enc + r * rb, D));
            g_sink = s;
        }
        printf("%-12s decode %10.3e (x%5.1f)  dot %10.3e (x%5.1f)  axpy %10.3e (x%5.1f)\n",
               sjk_format_get(f)->name, rd[1], rd[1] / rd[0], rp[1], rp[1] / rp[0], ra[1], ra[1] / ra[0]);
    }
    free(x); free(y); free(q); free(enc);
    return 0;
}
