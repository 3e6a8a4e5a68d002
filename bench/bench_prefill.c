/* bench_prefill.c — in-process A/B of the host's prefill: one chunk of 512 tokens
 * through the whole model in three sessions, alternated round by round (the order
 * rotating) so that a machine whose load drifts slows all alike:
 *   act_quant 1 with the integer block dots at every chunk size (the path before prefill
 *   chunks took the f32 panel kernel; forced through the session's exact_min_tok),
 *   act_quant 1 as it is now (the default), and act_quant 0.
 * Prints each variant's median time and its speed against the first as a ratio of
 * medians and as the median of the per-round ratios. BENCH_EXACT_MIN_TOK=N overrides the
 * second session's threshold (to find the crossover with short chunks). With --layers it
 * also lists the weight type of every matrix of layer 0 and the output.
 *
 *   make benches && ./build/bench/bench_prefill MODEL.gguf [threads=1] [rounds=7] [tokens=512] [--layers]
 *
 * Tokens: a fixed pseudo-random sequence (ids 1000 .. 10999), the same for all three. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "sjkhost.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v0, int n)
{
    double v[1000];
    memcpy(v, v0, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double run_once(sjkh_session *s, const int32_t *tok, size_t n, float *logits)
{
    char err[256];
    sjkh_session_reset(s);
    double t0 = now_s();
    if (sjkh_session_feed(s, tok, n, logits, 0, err, sizeof err)) {
        fprintf(stderr, "feed: %s\n", err);
        exit(1);
    }
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [threads] [rounds] [tokens] [--layers]\n", argv[0]);
        return 2;
    }
    uint32_t threads = argc > 2 ? (uint32_t)atoi(argv[2]) : 1;
    int pairs = argc > 3 ? atoi(argv[3]) : 7;
    size_t n = argc > 4 ? (size_t)atoi(argv[4]) : 512;
    int layers = argc > 5 && !strcmp(argv[5], "--layers");
    if (pairs < 1 || pairs > 1000 || n < 1 || n > 4096) return 2;
    char err[256];
    sjkh_model *m;
    if (sjkh_model_load(argv[1], &m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (layers) {
        const sjkh_layer_w *L = &m->layers[0];
        const sjkh_tensor *t[] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down, m->output};
        const char *nm[] = {"wq", "wk", "wv", "wo", "gate", "up", "down", "output"};
        for (int i = 0; i < 8; i++)
            printf("layer0 %-6s type %2u  %lld x %lld\n", nm[i], t[i]->type, (long long)t[i]->ne[0],
                   (long long)t[i]->ne[1]);
    }
    /* [0] act_quant 1 as before: quantized activations at every chunk size
     * [1] act_quant 1 now: the exact matmul for chunks of >= exact_min_tok tokens
     * [2] act_quant 0 */
    const char *name[3] = {"act_quant 1, quantized prefill", "act_quant 1 (default)", "act_quant 0"};
    sjkh_session *s[3];
    for (int v = 0; v < 3; v++) {
        sjkh_session_params p = sjkh_session_params_default();
        p.n_ctx = n > 512 ? (uint32_t)n : 512; /* n_batch 512 >= the exact threshold: the */
        p.n_batch = 512;                       /* row buffers exist for any threshold      */
        p.n_threads = threads;
        p.act_quant = v < 2;
        if (sjkh_session_create(m, &p, &s[v], err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    }
    s[0]->exact_min_tok = UINT32_MAX;
    if (getenv("BENCH_EXACT_MIN_TOK")) s[1]->exact_min_tok = (uint32_t)atoi(getenv("BENCH_EXACT_MIN_TOK"));
    int32_t *tok = malloc(n * sizeof *tok);
    float *logits = malloc(m->info.n_vocab * sizeof *logits);
    uint32_t r = 12345;
    for (size_t i = 0; i < n; i++) {
        r = r * 1103515245u + 12345u;
        tok[i] = 1000 + (int32_t)((r >> 8) % 10000);
    }
    for (int v = 0; v < 3; v++) run_once(s[v], tok, n, logits); /* warm (page in the weights) */
    double *t[3], *rt[3];
    for (int v = 0; v < 3; v++) {
        t[v] = malloc((size_t)pairs * sizeof *t[v]);
        rt[v] = malloc((size_t)pairs * sizeof *rt[v]);
    }
    for (int i = 0; i < pairs; i++) { /* rotate the order every round */
        for (int k = 0; k < 3; k++) {
            int v = (i + k) % 3;
            t[v][i] = run_once(s[v], tok, n, logits);
        }
        for (int v = 0; v < 3; v++) rt[v][i] = t[0][i] / t[v][i];
    }
    printf("%s threads %u tokens %zu rounds %d exact_min_tok %u\n", argv[1], threads, n, pairs, s[1]->exact_min_tok);
    double m0 = 0;
    for (int v = 0; v < 3; v++) {
        double mt = median(t[v], pairs), mr = median(rt[v], pairs);
        if (v == 0) m0 = mt;
        printf("  %-32s median %7.3f s %6.0f tok/s  speed vs quantized prefill %.2fx (medians), %.2fx (median "
               "of per-round ratios)\n",
               name[v], mt, (double)n / mt, m0 / mt, mr);
    }
    for (int v = 0; v < 3; v++) {
        sjkh_session_free(s[v]);
        free(t[v]);
        free(rt[v]);
    }
    sjkh_model_free(m);
    free(tok);
    free(logits);
    return 0;
}
