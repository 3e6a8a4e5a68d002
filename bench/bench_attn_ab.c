/* bench_attn_ab.c — same-process A/B of attention kernel paths: decode time of one
 * query row per head over a filled one-layer cache, with the cache's kernel table (A)
 * against a variant of it (B), in alternating rounds, and both against f16 (A's table)
 * in the same rounds. The machines this runs on are shared, so only ratios measured in
 * one process and one round mean anything: each round times f16, A and B once each, in
 * a rotating order, and the reported ratios are medians of the per-round ratios.
 *
 *   make build/bench/bench_attn_ab
 *   build/bench/bench_attn_ab [--geometry gemma3|qwen|smollm2] [--ctx N] [--threads T] [--rounds N]
 *                             [--drop ENTRY]... CONFIG...
 *
 * B is A's table with each --drop ENTRY set to NULL (attend.c then takes the next path:
 * chunk_tq6_q16 -> chunk_tq6 -> decode + chunk_f32; chunk_qblk -> decode + chunk_f32;
 * chunk_rec_q16 -> chunk_rec; chunk_trellis_q8 -> chunk_trellis_q16 (the same int8-grid records); chunk_trellis_q16 -> chunk_rec; chunk_qblk_q16 -> chunk_qblk; unpack_rows -> unpack_row per row; qint_prep -> sjk_attn_qint_prep; chunk_rec_v16 -> chunk_rec_q16 / chunk_rec; trellis_mixed -> a record with a scalar tile decoded + chunk_f32; trellis_inplace -> trellis records decoded + chunk_f32), e.g. `--drop chunk_tq6_q16 sj:4/4` times the integer ring
 * reader against the fp32 one. Without --drop, B is the table `sjk_attn_kernels_table_ab`
 * when the binary is linked with one (another build of the kernels, symbols renamed with
 * objcopy; a weak reference, else absent) — how a rewrite of a kernel is checked against
 * the version before it.
 *
 * Times: process CPU time per call over at least 0.03 s of calls, divided by the thread
 * count (as `sjkvarn bench attn`; CPU time leaves the neighbours out). Rows: the same
 * synthetic post-RoPE keys and values as `sjkvarn bench attn` (channel offsets, a few
 * large, per-token swings), appended 1,024 positions at a time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/attn_kernels.h"
#include "cache/cache_internal.h"
#include "common/rng.h"
#include "sjkvarn.h"

extern const sjk_attn_kernels sjk_attn_kernels_table_ab __attribute__((weak));

#define MAX_ROUNDS 31

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds per decode call of cache c with kernel table k, over at least min_s. */
static double time_call(sjk_cache *c, const sjk_attn_kernels *k, const float *q, size_t D, int threads, double min_s)
{
    static float out[64 * 512];
    const sjk_attn_kernels *keep = c->kern;
    c->kern = k;
    const double t_end = now_s() + min_s, c0 = cpu_s();
    int calls = 0;
    while (calls < 2 || now_s() < t_end) {
        sjk_cache_attend(c, 0, 0, q, 1, 1.0f / sqrtf((float)D), out);
        calls++;
    }
    c->kern = keep;
    return (cpu_s() - c0) / calls / threads;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double t[MAX_ROUNDS];
    memcpy(t, v, sizeof(double) * (size_t)n);
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* A one-layer cache of cfg filled with n positions of the synthetic rows; NULL on failure. */
static sjk_cache *filled(const char *cfg, uint32_t hq, uint32_t hkv, uint32_t D, uint32_t n, int threads)
{
    sjk_cache_params p = sjk_cache_params_default();
    p.n_kv_heads = hkv;
    p.n_q_heads = hq;
    p.head_dim = D;
    p.max_pos = n;
    p.max_q_rows = 1;
    p.n_threads = (uint32_t)threads;
    char err[200];
    if (sjk_cache_config_parse(cfg, 1, &p.layer, err, sizeof err) != SJK_OK) {
        fprintf(stderr, "bench_attn_ab: %s\n", err);
        return NULL;
    }
    sjk_cache *c = NULL;
    if (sjk_cache_create(&p, &c) != SJK_OK) {
        fprintf(stderr, "bench_attn_ab: cannot create a cache for %s\n", cfg);
        return NULL;
    }
    sjk_rng r;
    sjk_rng_seed(&r, 1234);
    const size_t W = (size_t)hkv * D, chunk = 1024;
    float *kv = malloc(sizeof(float) * 2 * chunk * W), *off = malloc(sizeof(float) * W);
    if (!kv || !off) {
        free(kv), free(off);
        sjk_cache_free(c);
        return NULL;
    }
    for (size_t i = 0; i < W; i++) off[i] = (float)(0.5 * sjk_rng_normal(&r)) * (i % 23 == 1 ? 8.0f : 1.0f);
    for (uint32_t have = 0; have < n;) {
        const size_t m = n - have < chunk ? n - have : chunk;
        for (size_t t = 0; t < m; t++) {
            const double swing = 0.5 + sjk_rng_uniform(&r);
            for (size_t i = 0; i < W; i++) {
                kv[t * W + i] = off[i] + (float)(swing * sjk_rng_normal(&r));
                kv[(chunk + t) * W + i] = (float)(swing * sjk_rng_normal(&r));
            }
        }
        if (sjk_cache_append(c, 0, 0, kv, kv + chunk * W, m) != SJK_OK) {
            fprintf(stderr, "bench_attn_ab: %s: append failed at %u\n", cfg, have);
            free(kv), free(off);
            sjk_cache_free(c);
            return NULL;
        }
        have += (uint32_t)m;
    }
    free(kv), free(off);
    return c;
}

/* Sets the entry named `name` of k to NULL; 0 if there is no such optional entry. */
static int drop_entry(sjk_attn_kernels *k, const char *name)
{
    if (!strcmp(name, "chunk_tq6")) k->chunk_tq6 = NULL;
    else if (!strcmp(name, "chunk_tq6_q16")) k->chunk_tq6_q16 = NULL;
    else if (!strcmp(name, "chunk_qblk")) k->chunk_qblk = NULL;
    else if (!strcmp(name, "chunk_rec_q16")) k->chunk_rec_q16 = NULL;
    else if (!strcmp(name, "chunk_trellis_q16")) k->chunk_trellis_q16 = NULL;
    else if (!strcmp(name, "chunk_trellis_q8")) k->chunk_trellis_q8 = NULL;
    else if (!strcmp(name, "chunk_qblk_q16")) k->chunk_qblk_q16 = NULL;
    else if (!strcmp(name, "chunk_f32_many")) k->chunk_f32_many = NULL;
    else if (!strcmp(name, "trellis_inplace")) k->trellis_inplace = 0;
    else if (!strcmp(name, "unpack_rows")) k->unpack_rows = NULL;
    else if (!strcmp(name, "qint_prep")) k->qint_prep = NULL;
    else if (!strcmp(name, "chunk_rec_v16")) k->chunk_rec_v16 = NULL;
    else if (!strcmp(name, "trellis_mixed")) k->trellis_mixed = 0;
    else return 0;
    return 1;
}

int main(int argc, char **argv)
{
    uint32_t hq = 4, hkv = 1, D = 256, ctx = 4096;
    int threads = 1, rounds = 9, n_drop = 0, n_cfg = 0;
    const char *cfgs[16];
    sjk_attn_kernels b = *sjk_attn_kernels_get();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--geometry") && i + 1 < argc) {
            const char *g = argv[++i];
            if (!strcmp(g, "gemma3")) hq = 4, hkv = 1, D = 256;
            else if (!strcmp(g, "qwen")) hq = 12, hkv = 2, D = 128;
            else if (!strcmp(g, "smollm2")) hq = 9, hkv = 3, D = 64;
            else { fprintf(stderr, "bench_attn_ab: --geometry %s: gemma3, qwen or smollm2\n", g); return 2; }
        } else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) ctx = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--drop") && i + 1 < argc) {
            if (!drop_entry(&b, argv[++i])) { fprintf(stderr, "bench_attn_ab: --drop %s: no such entry\n", argv[i]); return 2; }
            n_drop++;
        } else if (argv[i][0] != '-' && n_cfg < 16) cfgs[n_cfg++] = argv[i];
        else {
            fprintf(stderr, "usage: bench_attn_ab [--geometry gemma3|qwen|smollm2] [--ctx N] [--threads T] [--rounds N] "
                            "[--drop ENTRY]... CONFIG...\n");
            return 2;
        }
    }
    if (ctx < 256 || ctx > 131072 || threads < 1 || threads > 2 || rounds < 1 || rounds > MAX_ROUNDS || !n_cfg) {
        fprintf(stderr, "bench_attn_ab: need 256 <= ctx <= 131072, 1 or 2 threads, 1..%d rounds, a configuration\n", MAX_ROUNDS);
        return 2;
    }
    const sjk_attn_kernels *ka = sjk_attn_kernels_get();
    const sjk_attn_kernels *kb = n_drop ? &b : &sjk_attn_kernels_table_ab;
    if (!n_drop && !&sjk_attn_kernels_table_ab) {
        fprintf(stderr, "bench_attn_ab: no B: give --drop ENTRY, or link a table sjk_attn_kernels_table_ab\n");
        return 2;
    }
    sjk_rng r;
    sjk_rng_seed(&r, 77);
    float *q = malloc(sizeof(float) * hq * D);
    sjk_cache *base = filled("f16", hq, hkv, D, ctx, threads);
    if (!q || !base) return 1;
    for (size_t i = 0; i < (size_t)hq * D; i++) q[i] = (float)sjk_rng_normal(&r);
    printf("# bench_attn_ab: %uq/%ukv D=%u, context %u, %d thread(s), %d rounds; A = %s, B = %s%s\n", hq, hkv, D, ctx,
           threads, rounds, ka->name, n_drop ? "A with entries dropped" : "the linked table ", n_drop ? "" : kb->name);
    printf("%-24s %10s %10s %8s %8s %8s\n", "config", "A us", "B us", "A/B", "f16/A", "f16/B");
    for (int ci = 0; ci < n_cfg; ci++) {
        sjk_cache *c = filled(cfgs[ci], hq, hkv, D, ctx, threads);
        if (!c) continue;
        double ta[MAX_ROUNDS], tb[MAX_ROUNDS], ab[MAX_ROUNDS], fa[MAX_ROUNDS], fb[MAX_ROUNDS];
        time_call(c, ka, q, D, threads, 0.01); /* warm */
        time_call(c, kb, q, D, threads, 0.01);
        for (int rd = 0; rd < rounds; rd++) {
            double tf = 0;
            for (int k = 0; k < 3; k++) {
                const int which = (k + rd) % 3;
                if (which == 0) tf = time_call(base, ka, q, D, threads, 0.03);
                else if (which == 1) ta[rd] = time_call(c, ka, q, D, threads, 0.03);
                else tb[rd] = time_call(c, kb, q, D, threads, 0.03);
            }
            ab[rd] = tb[rd] / ta[rd];
            fa[rd] = tf / ta[rd];
            fb[rd] = tf / tb[rd];
        }
        printf("%-24s %10.1f %10.1f %7.3fx %7.3fx %7.3fx\n", cfgs[ci], median(ta, rounds) * 1e6, median(tb, rounds) * 1e6,
               median(ab, rounds), median(fa, rounds), median(fb, rounds));
        fflush(stdout);
        sjk_cache_free(c);
    }
    sjk_cache_free(base);
    free(q);
    return 0;
}
