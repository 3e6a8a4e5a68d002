/* bench_decode_batch.c — the cost of one batched decode step against one single-row step.
 *
 *   build/bench/bench_decode_batch [MODEL] [THREADS] [STEPS] [ROUNDS] [ONLY_B]
 *       (defaults: ~/.cache/sjkvarn/models/gemma-3-270m-q4_k_m.gguf 2 16 5; ONLY_B: time
 *       that one batch size alone, for a profiler)
 *
 * Eight sessions (f16 cache, n_ctx 2048) are fed a 32-token prompt each. Per round, for
 * B = 1, 2, 4, 8 in a rotating order, STEPS passes of sjkh_session_decode_batch decode
 * the first B sessions together (each then truncated back, so every round sees the same
 * positions). Reported per B: the median wall time of one step, its ratio to the B = 1
 * step, and the aggregate tokens/s (B / step time). This is the engine's decode step
 * without HTTP (bench/serve_load.py measures the server). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sjkhost.h"

enum { NS = 8, NB = 4, PROMPT = 32, MAXROUNDS = 31 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    char def[4096];
    const char *home = getenv("HOME");
    snprintf(def, sizeof def, "%s/.cache/sjkvarn/models/gemma-3-270m-q4_k_m.gguf", home ? home : ".");
    const char *path = argc > 1 && *argv[1] ? argv[1] : def;
    int threads = argc > 2 ? atoi(argv[2]) : 2, steps = argc > 3 ? atoi(argv[3]) : 16;
    int rounds = argc > 4 ? atoi(argv[4]) : 5, only = argc > 5 ? atoi(argv[5]) : 0;
    if (threads < 1 || threads > 64 || steps < 1 || steps > 1000 || rounds < 1 || rounds > MAXROUNDS) {
        fprintf(stderr, "usage: bench_decode_batch [MODEL] [THREADS 1..64] [STEPS 1..1000] [ROUNDS 1..31]\n");
        return 2;
    }
    char err[512];
    sjkh_model *m = NULL;
    if (sjkh_model_load(path, &m, err, sizeof err)) {
        fprintf(stderr, "bench_decode_batch: %s\n", err);
        return 1;
    }
    const size_t V = sjkh_model_get_info(m)->n_vocab;
    sjkh_session *ss[NS] = {0};
    float *logits = malloc(NS * V * sizeof(float));
    int rc = 1;
    if (!logits) goto done;
    for (int i = 0; i < NS; i++) {
        sjkh_session_params p = sjkh_session_params_default();
        p.n_ctx = 2048;
        p.n_batch = 32;
        p.n_threads = (uint32_t)threads;
        if (sjkh_session_create(m, &p, &ss[i], err, sizeof err)) {
            fprintf(stderr, "bench_decode_batch: %s\n", err);
            goto done;
        }
        int32_t ids[PROMPT];
        for (int t = 0; t < PROMPT; t++) ids[t] = (int32_t)((unsigned)(t * 7919 + 101 * i) % (V - 300)) + 200;
        if (sjkh_session_feed(ss[i], ids, PROMPT, NULL, 0, err, sizeof err)) {
            fprintf(stderr, "bench_decode_batch: %s\n", err);
            goto done;
        }
    }
    const int bs[NB] = {1, 2, 4, 8};
    double t[NB][MAXROUNDS];
    int32_t tok[NS];
    sjk_status st[NS];
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < NB; k++) {
            int bi = (k + r) % NB, B = bs[bi];
            if (only && B != only) {
                t[bi][r] = 0;
                continue;
            }
            for (int i = 0; i < NS; i++) tok[i] = 200 + i;
            double t0 = now_s();
            for (int s = 0; s < steps; s++)
                if (sjkh_session_decode_batch(ss, (size_t)B, tok, logits, st, err, sizeof err)) {
                    fprintf(stderr, "bench_decode_batch: %s\n", err);
                    goto done;
                }
            t[bi][r] = (now_s() - t0) / steps;
            for (int i = 0; i < B; i++) {
                uint32_t kept;
                if (sjkh_session_truncate(ss[i], PROMPT, &kept) || kept != PROMPT) {
                    fprintf(stderr, "bench_decode_batch: truncate failed\n");
                    goto done;
                }
            }
        }
    printf("decode step, %s, %d threads, %d steps x %d rounds (median)\n", path, threads, steps, rounds);
    printf("%4s %10s %10s %12s\n", "B", "step ms", "vs B=1", "tok/s");
    double base = 0;
    for (int k = 0; k < NB; k++) {
        qsort(t[k], (size_t)rounds, sizeof(double), cmp_d);
        double med = t[k][rounds / 2];
        if (!k) base = med;
        printf("%4d %10.2f %10.2f %12.1f\n", bs[k], 1e3 * med, med / base, bs[k] / med);
    }
    rc = 0;
done:
    for (int i = 0; i < NS; i++) sjkh_session_free(ss[i]);
    free(logits);
    sjkh_model_free(m);
    return rc;
}
