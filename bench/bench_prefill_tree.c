/* bench_prefill_tree.c — one session's prefill of a fixed 512-token chunk, timed in wall
 * and process CPU time, with a hash of the last position's logits: the A/B of two trees.
 *
 * bench_prefill.c compares three sessions of one binary; comparing trees needs one binary
 * per tree, run in alternation (A B A B ...). On a loaded machine the wall time of a
 * one-thread run is mostly the wait for a core, so this also prints the process CPU time
 * (meaningful for threads = 1: with more it adds up the workers, spinning included), and
 * the hash says whether the two trees compute the same logits (bit for bit). It uses only
 * the public sjkhost.h (no bench_util.h), so the same file builds against the headers and
 * libraries of an older tree (its own headers: the parameter struct may differ):
 *
 *   git worktree add /tmp/pf-SHA SHA && make -C /tmp/pf-SHA -j2 build/libsjkvarn.a build/libsjkhost.a
 *   cc -O2 -std=c11 -D_GNU_SOURCE -I/tmp/pf-SHA/include -I/tmp/pf-SHA/host/include \
 *       bench/bench_prefill_tree.c /tmp/pf-SHA/build/libsjkhost.a /tmp/pf-SHA/build/libsjkvarn.a \
 *       -lm -lpthread -o /tmp/pf-SHA/bpt
 *   /tmp/pf-SHA/bpt MODEL.gguf [threads=1] [rounds=3] [tokens=512] [act_quant=0]
 *
 * (make benches builds it for this tree as build/bench/bench_prefill_tree.) Tokens: the
 * pseudo-random sequence of bench_prefill.c (ids 1000 .. 10999). One untimed feed first
 * pages the weights in. Prints the median and minimum of the rounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sjkhost.h"

#define MAX_ROUNDS 1000

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [threads] [rounds] [tokens] [act_quant]\n", argv[0]);
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 1, rounds = argc > 3 ? atoi(argv[3]) : 3;
    int n = argc > 4 ? atoi(argv[4]) : 512, act_quant = argc > 5 ? atoi(argv[5]) : 0;
    if (threads < 1 || threads > 256 || rounds < 1 || rounds > MAX_ROUNDS || n < 1 || n > 4096 ||
        (act_quant != 0 && act_quant != 1)) {
        fprintf(stderr, "threads 1..256, rounds 1..%d, tokens 1..4096, act_quant 0 or 1\n", MAX_ROUNDS);
        return 2;
    }
    char err[256];
    sjkh_model *m;
    if (sjkh_model_load(argv[1], &m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    sjkh_session_params p = sjkh_session_params_default();
    p.n_ctx = n > 512 ? (uint32_t)n : 512;
    p.n_batch = 512;
    p.n_threads = (uint32_t)threads;
    p.act_quant = (uint32_t)act_quant;
    sjkh_session *s;
    if (sjkh_session_create(m, &p, &s, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        sjkh_model_free(m);
        return 1;
    }
    const sjkh_model_info *info = sjkh_model_get_info(m);
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    float *logits = malloc((size_t)info->n_vocab * sizeof *logits);
    double *wall = malloc((size_t)rounds * sizeof *wall), *cpu = malloc((size_t)rounds * sizeof *cpu);
    if (!tok || !logits || !wall || !cpu) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    uint32_t r = 12345;
    for (int i = 0; i < n; i++) {
        r = r * 1103515245u + 12345u;
        tok[i] = 1000 + (int32_t)((r >> 8) % 10000);
    }
    for (int i = -1; i < rounds; i++) { /* round -1: warm-up, not timed */
        sjkh_session_reset(s);
        double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (sjkh_session_feed(s, tok, (size_t)n, logits, 0, err, sizeof err)) {
            fprintf(stderr, "feed: %s\n", err);
            return 1;
        }
        if (i >= 0) {
            wall[i] = clock_s(CLOCK_MONOTONIC) - w0;
            cpu[i] = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        }
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the logits' bit patterns */
    for (uint32_t i = 0; i < info->n_vocab; i++) {
        uint32_t u;
        memcpy(&u, &logits[i], sizeof u);
        h = (h ^ u) * 1099511628211ull;
    }
    qsort(wall, (size_t)rounds, sizeof *wall, cmp_d);
    qsort(cpu, (size_t)rounds, sizeof *cpu, cmp_d);
    printf("threads %d tokens %d act_quant %d rounds %d  wall median %.3f min %.3f  cpu median %.3f min %.3f  "
           "logits %016llx\n",
           threads, n, act_quant, rounds, wall[rounds / 2], wall[0], cpu[rounds / 2], cpu[0], (unsigned long long)h);
    free(wall);
    free(cpu);
    free(tok);
    free(logits);
    sjkh_session_free(s);
    sjkh_model_free(m);
    return 0;
}
