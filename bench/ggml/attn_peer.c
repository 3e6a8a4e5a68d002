/* attn_peer.c — the peer of `sjkvarn bench attn`: ggml's own CPU flash attention
 * (ggml_flash_attn_ext) for f16, q8_0 and q4_0 caches, timed on request so that the
 * bench can put it into the same rounds as its own configurations.
 *
 * Built only against an installed ggml (the llama.cpp oracle venv of
 * tests/oracle/build-llama-cpp.sh: `make ggml-peer`); libsjkvarn never links ggml. The
 * bench starts this program and talks to it over a pipe, one command per line:
 *
 *   init HQ HKV D MAXCTX   allocate K and V for MAXCTX tokens in each of the three types,
 *                          filled with the same kind of rows as the bench's (channel
 *                          offsets with outliers, per-token swings; this file's own
 *                          generator), quantized by ggml_quantize_chunk; reply "ok"
 *   time TYPE CTX THR MIN  TYPE f16|q8_0|q4_0: one decode step (one query row per head,
 *                          the first CTX keys, no mask) repeated for at least MIN seconds
 *                          on a THR-thread ggml threadpool; reply "CPU WALL": process CPU
 *                          seconds per call divided by THR (as the bench measures its
 *                          own calls) and the shortest wall time of one call
 *   quit
 *
 * Layout as llama.cpp keeps its cache: one row per token holding every KV head, viewed
 * as [D, CTX, HKV] with the token stride of a whole row. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml.h"
#include "ggml-cpu.h"
#include "../bench_util.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

enum { NTYPE = 3 };
static const char *const type_names[NTYPE] = {"f16", "q8_0", "q4_0"};
static const enum ggml_type types[NTYPE] = {GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};

typedef struct peer {
    int hq, hkv, D, maxctx;
    void *k[NTYPE], *v[NTYPE]; /* [maxctx][hkv * D] in each type */
    float *q;                  /* [hq][D] */
    struct ggml_threadpool *tp[3]; /* for 1 and 2 threads (index = threads) */
} peer;

static int peer_init(peer *p, int hq, int hkv, int D, int maxctx)
{
    p->hq = hq;
    p->hkv = hkv;
    p->D = D;
    p->maxctx = maxctx;
    const size_t W = (size_t)hkv * D;
    const int chunk = 1024;
    float *off = malloc(sizeof(float) * W), *kf = malloc(sizeof(float) * W * chunk), *vf = malloc(sizeof(float) * W * chunk);
    p->q = malloc(sizeof(float) * (size_t)hq * D);
    if (!off || !kf || !vf || !p->q) return -1;
    for (size_t i = 0; i < W; i++) off[i] = (float)(0.5 * bench_normal(&rng_state)) * (i % 23 == 1 ? 8.0f : 1.0f);
    for (size_t i = 0; i < (size_t)hq * D; i++) p->q[i] = (float)bench_normal(&rng_state);
    for (int ti = 0; ti < NTYPE; ti++) {
        p->k[ti] = malloc(ggml_row_size(types[ti], (int64_t)W) * (size_t)maxctx);
        p->v[ti] = malloc(ggml_row_size(types[ti], (int64_t)W) * (size_t)maxctx);
        if (!p->k[ti] || !p->v[ti]) return -1;
    }
    for (int t0 = 0; t0 < maxctx; t0 += chunk) {
        const int n = maxctx - t0 < chunk ? maxctx - t0 : chunk;
        for (int t = 0; t < n; t++) {
            const double swing = 0.5 + bench_uniform(&rng_state);
            for (size_t i = 0; i < W; i++) {
                kf[(size_t)t * W + i] = off[i] + (float)(swing * bench_normal(&rng_state));
                vf[(size_t)t * W + i] = (float)(swing * bench_normal(&rng_state));
            }
        }
        for (int ti = 0; ti < NTYPE; ti++) {
            const size_t rs = ggml_row_size(types[ti], (int64_t)W);
            ggml_quantize_chunk(types[ti], kf, (char *)p->k[ti] + (size_t)t0 * rs, 0, n, (int64_t)W, NULL);
            ggml_quantize_chunk(types[ti], vf, (char *)p->v[ti] + (size_t)t0 * rs, 0, n, (int64_t)W, NULL);
        }
    }
    free(off);
    free(kf);
    free(vf);
    for (int th = 1; th <= 2; th++) {
        struct ggml_threadpool_params tpp = ggml_threadpool_params_default(th);
        /* Workers sleep between graphs instead of polling (llama.cpp's default polls):
         * the bench counts process CPU time, and a spinning worker on a shared machine
         * would be counted as attention time. */
        tpp.poll = 0;
        p->tp[th] = ggml_threadpool_new(&tpp);
        if (!p->tp[th]) return -1;
    }
    return 0;
}

/* One decode graph over the first ctx keys of type ti; returns the CPU and wall time. */
static int peer_time(peer *p, int ti, int ctx, int threads, double min_s, double *cpu, double *wall)
{
    if (ctx < 1 || ctx > p->maxctx || threads < 1 || threads > 2) return -1;
    const size_t mem = 16 * ggml_tensor_overhead() + ggml_graph_overhead() + (size_t)p->hq * p->D * sizeof(float) * 2 + (1 << 20);
    struct ggml_init_params ip = {mem, NULL, true};
    struct ggml_context *g = ggml_init(ip);
    if (!g) return -1;
    const size_t W = (size_t)p->hkv * p->D, rs = ggml_row_size(types[ti], (int64_t)W), hs = ggml_row_size(types[ti], p->D);
    struct ggml_tensor *kall = ggml_new_tensor_3d(g, types[ti], p->D, p->hkv, p->maxctx);
    struct ggml_tensor *vall = ggml_new_tensor_3d(g, types[ti], p->D, p->hkv, p->maxctx);
    kall->data = p->k[ti];
    vall->data = p->v[ti];
    struct ggml_tensor *k = ggml_view_3d(g, kall, p->D, ctx, p->hkv, rs, hs, 0);
    struct ggml_tensor *v = ggml_view_3d(g, vall, p->D, ctx, p->hkv, rs, hs, 0);
    struct ggml_tensor *q = ggml_new_tensor_3d(g, GGML_TYPE_F32, p->D, 1, p->hq);
    q->data = p->q;
    struct ggml_tensor *out = ggml_flash_attn_ext(g, q, k, v, NULL, 1.0f / sqrtf((float)p->D), 0.0f, 0.0f);
    const size_t out_bytes = ggml_nbytes(out);
    void *out_buf = malloc(out_bytes);
    struct ggml_cgraph *gf = ggml_new_graph(g);
    ggml_build_forward_expand(gf, out);
    out->data = out_buf;
    struct ggml_cplan plan = ggml_graph_plan(gf, threads, p->tp[threads]);
    void *work = plan.work_size ? malloc(plan.work_size) : NULL;
    plan.work_data = work;
    if (!out_buf || (plan.work_size && !work)) {
        free(out_buf);
        free(work);
        ggml_free(g);
        return -1;
    }
    ggml_graph_compute(gf, &plan); /* warm */
    double best = 1e30, c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID), t_end = bench_clock_s(CLOCK_MONOTONIC) + min_s;
    int calls = 0;
    while (calls < 1 || bench_clock_s(CLOCK_MONOTONIC) < t_end) {
        double t0 = bench_clock_s(CLOCK_MONOTONIC);
        ggml_graph_compute(gf, &plan);
        double t = bench_clock_s(CLOCK_MONOTONIC) - t0;
        if (t < best) best = t;
        calls++;
    }
    *cpu = (bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / calls / threads;
    *wall = best;
    free(work);
    free(out_buf);
    ggml_free(g);
    return 0;
}

int main(void)
{
    peer p;
    memset(&p, 0, sizeof p);
    ggml_cpu_init();
    char line[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        int a, b, c, d;
        char ty[16];
        double min_s;
        if (sscanf(line, "init %d %d %d %d", &a, &b, &c, &d) == 4) {
            printf(a > 0 && b > 0 && a % b == 0 && c > 0 && d > 0 && peer_init(&p, a, b, c, d) == 0 ? "ok\n" : "error init\n");
        } else if (sscanf(line, "time %15s %d %d %lf", ty, &a, &b, &min_s) == 4 && p.q) {
            int ti = -1;
            for (int i = 0; i < NTYPE; i++)
                if (!strcmp(ty, type_names[i])) ti = i;
            double cpu = 0, wall = 0;
            if (ti < 0 || peer_time(&p, ti, a, b, min_s, &cpu, &wall) != 0) printf("error time\n");
            else printf("%.9f %.9f\n", cpu, wall);
        } else if (!strncmp(line, "quit", 4)) {
            break;
        } else {
            printf("error unknown command\n");
        }
    }
    return 0;
}
