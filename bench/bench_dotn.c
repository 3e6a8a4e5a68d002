/* bench_dotn.c — in-process A/B of the decode matmul kernels on a real model's weights.
 *
 *   build/bench/bench_dotn [MODEL] [ROUNDS] [ROWS]   (defaults: Gemma 3 270M Q4_K_M, 7, 2)
 *
 * For the output head and the first layer's matrices, B = 1, 2, 4, 8 activation rows
 * (random, quantized to the weight's dot type) are multiplied with every weight row, one
 * thread, in a rotating order per round:
 *   rows   the per-row kernels: vec_dot4 for each group of four tokens, vec_dot for the
 *          rest (the decode path before vec_dotn)
 *   dotn   vec_dotn on pairs of weight rows x 8 tokens (forward.c mm_task; the third
 *          argument sets another number of rows per call), the activations prepared
 *          (sjkh_dotn_prepare) inside the timed matmul
 * Both read the weights with the same software prefetch as mm_task. The outputs are
 * compared (vec_dotn is bit-identical to vec_dot and vec_dot4) and the per-thread CPU
 * time of one whole matmul is reported: median over the rounds, and old/new as the
 * median of the per-round ratios. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/quants.h"
#include "model/model.h"
#include "bench_util.h"

enum { NB = 4, MAXROUNDS = 31, AHEAD = 4096 };
static size_t TILE = 2;

static void prefetch(const uint8_t *p, size_t n)
{
    const uintptr_t a = (uintptr_t)p + AHEAD;
    for (size_t o = 0; o < n; o += 64) __builtin_prefetch((const void *)(a + o), 0, 3);
}

static void mm_rows(const sjkh_qtraits *qt, const sjkh_tensor *W, const uint8_t *xa, size_t xs, size_t nt, float *y)
{
    size_t n_in = (size_t)W->ne[0], n_out = (size_t)W->ne[1];
    for (size_t r = 0; r < n_out; r++) {
        const uint8_t *w = (const uint8_t *)W->data + r * W->row_nbytes;
        prefetch(w, W->row_nbytes);
        size_t t = 0;
        if (qt->vec_dot4)
            for (; t + 4 <= nt; t += 4) {
                float o[4];
                qt->vec_dot4(n_in, w, xa + t * xs, xs, o);
                for (int u = 0; u < 4; u++) y[(t + u) * n_out + r] = o[u];
            }
        for (; t < nt; t++) y[t * n_out + r] = qt->vec_dot(n_in, w, xa + t * xs);
    }
}

static void mm_dotn(const sjkh_qtraits *qt, const sjkh_tensor *W, const uint8_t *xq, size_t xqs, uint8_t *xa, size_t nt,
                    float *y)
{
    size_t n_in = (size_t)W->ne[0], n_out = (size_t)W->ne[1], xs = sjkh_dotn_row_nbytes(qt->dot_type, n_in);
    for (size_t t = 0; t < nt; t++) sjkh_dotn_prepare(qt->dot_type, xq + t * xqs, xa + t * xs, n_in);
    for (size_t rt = 0; rt < n_out; rt += TILE) {
        size_t nr = n_out - rt < TILE ? n_out - rt : TILE;
        const uint8_t *w = (const uint8_t *)W->data + rt * W->row_nbytes;
        prefetch(w, nr * W->row_nbytes);
        for (size_t tt = 0; tt < nt; tt += SJKH_DOTN_MAX_TOK)
            qt->vec_dotn(n_in, w, W->row_nbytes, nr, xa + tt * xs, xs,
                         nt - tt < SJKH_DOTN_MAX_TOK ? nt - tt : SJKH_DOTN_MAX_TOK, y + tt * n_out + rt, n_out);
    }
}

int main(int argc, char **argv)
{
    char def[4096];
    const char *home = getenv("HOME");
    snprintf(def, sizeof def, "%s/.cache/sjkvarn/models/gemma-3-270m-q4_k_m.gguf", home ? home : ".");
    const char *path = argc > 1 && *argv[1] ? argv[1] : def;
    int rounds = argc > 2 ? atoi(argv[2]) : 7;
    if (argc > 3) TILE = (size_t)atoi(argv[3]);
    if (rounds < 1 || rounds > MAXROUNDS) {
        fprintf(stderr, "usage: bench_dotn [MODEL] [ROUNDS 1..31]\n");
        return 2;
    }
    char err[512];
    sjkh_model *m = NULL;
    if (sjkh_model_load(path, &m, err, sizeof err)) {
        fprintf(stderr, "bench_dotn: %s\n", err);
        return 1;
    }
    const sjkh_layer_w *L = &m->layers[0];
    const sjkh_tensor *ts[] = {m->output, L->wq, L->wk, L->wo, L->w_gate, L->w_down};
    const char *names[] = {"output", "attn_q", "attn_k", "attn_out", "ffn_gate", "ffn_down"};
    const int bs[NB] = {1, 2, 4, 8};
    int rc = 0;
    printf("matmul of one decode step, one thread, %d rounds (median CPU ms)\n", rounds);
    printf("%-9s %-5s %6s %5s %3s %9s %9s %8s\n", "tensor", "type", "rows", "in", "B", "rows ms", "dotn ms", "old/new");
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        const sjkh_tensor *W = ts[k];
        const sjkh_qtraits *qt = W ? sjkh_qtraits_get(W->type) : NULL;
        if (!qt || !qt->vec_dotn || !qt->quantize) {
            printf("%-9s (no many-rows kernel for this type on this CPU)\n", names[k]);
            continue;
        }
        size_t n_in = (size_t)W->ne[0], n_out = (size_t)W->ne[1], xs = sjkh_dot_row_nbytes(qt->dot_type, n_in);
        float *x = malloc(8 * n_in * sizeof *x), *y0 = malloc(8 * n_out * sizeof *y0), *y1 = malloc(8 * n_out * sizeof *y1);
        uint8_t *xa = malloc(8 * xs), *xp = malloc(8 * sjkh_dotn_row_nbytes(qt->dot_type, n_in));
        if (!x || !y0 || !y1 || !xa || !xp) {
            rc = 1;
        } else {
            uint32_t st = 12345u + (uint32_t)k;
            for (size_t i = 0; i < 8 * n_in; i++) {
                st = st * 1664525u + 1013904223u;
                x[i] = ((float)(st >> 8) / 16777216.0f - 0.5f) * 4.0f;
            }
            for (int t = 0; t < 8; t++) qt->quantize(x + t * n_in, xa + t * xs, n_in);
            double tr[NB][MAXROUNDS], tn[NB][MAXROUNDS], ratio[NB][MAXROUNDS];
            for (int r = 0; r < rounds; r++)
                for (int b = 0; b < NB; b++) {
                    int bi = (b + r) % NB, order = (b + r) % 2;
                    size_t nt = (size_t)bs[bi];
                    for (int v = 0; v < 2; v++) {
                        double t0 = bench_cpu_s();
                        if ((v ^ order) == 0) {
                            mm_rows(qt, W, xa, xs, nt, y0);
                            tr[bi][r] = bench_cpu_s() - t0;
                        } else {
                            mm_dotn(qt, W, xa, xs, xp, nt, y1);
                            tn[bi][r] = bench_cpu_s() - t0;
                        }
                    }
                    ratio[bi][r] = tr[bi][r] / tn[bi][r];
                    if (memcmp(y0, y1, nt * n_out * sizeof *y0)) {
                        fprintf(stderr, "bench_dotn: %s B=%zu: dotn differs from the per-row kernels\n", names[k], nt);
                        rc = 1;
                    }
                }
            for (int b = 0; b < NB; b++)
                printf("%-9s %-5s %6zu %5zu %3d %9.3f %9.3f %8.2f\n", names[k], sjkh_type_get(W->type)->name, n_out,
                       n_in, bs[b], 1e3 * bench_median(tr[b], rounds), 1e3 * bench_median(tn[b], rounds),
                       bench_median(ratio[b], rounds));
        }
        free(x);
        free(y0);
        free(y1);
        free(xa);
        free(xp);
    }
    sjkh_model_free(m);
    return rc;
}
