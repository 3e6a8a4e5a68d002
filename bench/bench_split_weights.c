/* bench_split_weights.c — the decode cost of one 128-key chunk in each region of a
 * cache, the numbers behind split_weights() in src/attention/attend.c (which cuts
 * position splits across threads by estimated cost).
 *
 * For each configuration, three caches of one layer on one thread, timed round by round
 * (best call of each, rounds alternating so a drifting machine slows all alike):
 *   S  the sink alone (128 positions);
 *   A  the sink and a ring of 63 chunks (8,192 positions: below the seal trigger);
 *   B  A after an idle seal: 31 chunks sealed into records, 32 left in the ring.
 * ring = (A − S) / 63 and body = (B − S − 32 ring) / 31, in microseconds per chunk.
 * For an uncompressed configuration (f16) "ring" is the cost of an fp16 chunk.
 *
 *   make benches && ./build/bench/bench_split_weights [D=256] [q_heads=4] [kv_heads=1] [CONFIG ...]
 *
 * Default configurations: f16 sj:4/4 sj:3/3 sj:3/3t sj:3/2t sj:4/4:stage=q8_0. Keys and
 * values are Gaussian rows with per-channel offsets (a few large), as in bench attn. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sjkvarn.h"
#include "bench_util.h"

#define ROUNDS 30
#define RING_CHUNKS 63

static uint64_t g_rng = 88172645463325252ull; /* bench_uniform / bench_normal state */

/* A one-layer cache of `cfg` holding n positions; NULL (after a message) on failure. */
static sjk_cache *filled_cache(const char *cfg, uint32_t D, uint32_t hq, uint32_t hkv, uint32_t n)
{
    sjk_cache_params p = sjk_cache_params_default();
    p.n_kv_heads = hkv;
    p.n_q_heads = hq;
    p.head_dim = D;
    p.max_pos = n + 256;
    p.max_q_rows = 1;
    p.n_threads = 1;
    char err[256];
    if (sjk_cache_config_parse(cfg, 1, &p.layer, err, sizeof err) != SJK_OK) {
        fprintf(stderr, "bench_split_weights: %s\n", err);
        return NULL;
    }
    sjk_cache *c = NULL;
    if (sjk_cache_create(&p, &c) != SJK_OK) {
        fprintf(stderr, "bench_split_weights: cannot create a cache for %s\n", cfg);
        return NULL;
    }
    const size_t W = (size_t)hkv * D;
    float *k = malloc(sizeof(float) * W * n), *v = malloc(sizeof(float) * W * n), *off = malloc(sizeof(float) * W);
    if (!k || !v || !off) {
        fprintf(stderr, "bench_split_weights: out of memory\n");
        free(k), free(v), free(off);
        sjk_cache_free(c);
        return NULL;
    }
    for (size_t i = 0; i < W; i++) off[i] = (float)(0.5 * bench_normal(&g_rng) * (i % 23 == 1 ? 8 : 1));
    for (size_t t = 0; t < n; t++) {
        const double sw = 0.5 + bench_uniform(&g_rng);
        for (size_t i = 0; i < W; i++) {
            k[t * W + i] = off[i] + (float)(sw * bench_normal(&g_rng));
            v[t * W + i] = (float)(sw * bench_normal(&g_rng));
        }
    }
    const sjk_status st = sjk_cache_append(c, 0, 0, k, v, n);
    free(k), free(v), free(off);
    if (st != SJK_OK) {
        fprintf(stderr, "bench_split_weights: append failed: %s\n", sjk_status_str(st));
        sjk_cache_free(c);
        return NULL;
    }
    return c;
}

static int measure(const char *cfg, uint32_t D, uint32_t hq, uint32_t hkv)
{
    const uint32_t sink = 128, n = sink + RING_CHUNKS * 128;
    sjk_cache *cs[3] = {filled_cache(cfg, D, hq, hkv, sink), filled_cache(cfg, D, hq, hkv, n),
                        filled_cache(cfg, D, hq, hkv, n)};
    int ok = cs[0] && cs[1] && cs[2];
    if (ok) ok = sjk_cache_seal_idle(cs[2], 0) == SJK_OK;
    uint32_t len[3] = {0}, b[3] = {0};
    for (int i = 0; ok && i < 3; i++) ok = sjk_cache_length(cs[i], 0, 0, &len[i], &b[i]) == SJK_OK;
    float *q = malloc(sizeof(float) * hq * D), *out = malloc(sizeof(float) * hq * D);
    ok = ok && q && out;
    double best[3] = {1e9, 1e9, 1e9};
    if (ok) {
        for (size_t i = 0; i < (size_t)hq * D; i++) q[i] = (float)bench_normal(&g_rng);
        for (int rd = 0; rd < ROUNDS; rd++)
            for (int i = 0; i < 3; i++) {
                const double w0 = bench_now_s();
                for (int calls = 0; calls < 3 || bench_now_s() - w0 < 0.02; calls++) {
                    const double t0 = bench_now_s();
                    sjk_cache_attend(cs[i], 0, 0, q, 1, 1.0f / sqrtf((float)D), out);
                    const double t = bench_now_s() - t0;
                    if (t < best[i]) best[i] = t;
                }
            }
        const int uniform_cfg = b[1] == 0; /* no sink/body/ring regions */
        const double ring_a = uniform_cfg ? (double)(len[1] - len[0]) / 128 : (double)(len[1] - b[1]) / 128;
        const double ring_b = (double)(len[2] - b[2]) / 128, body_b = (double)(b[2] - b[1]) / 128;
        const double ring = (best[1] - best[0]) / ring_a;
        printf("%-20s D %3u %u/%u  sink alone %7.1f us  ring %5.2f us/chunk", cfg, D, hq, hkv, best[0] * 1e6,
               ring * 1e6);
        if (!uniform_cfg && body_b > 0) {
            const double body = (best[2] - best[0] - ring_b * ring) / body_b;
            printf("  body %5.2f us/chunk  body/ring %.2f", body * 1e6, body / ring);
        }
        printf("\n");
    }
    free(q), free(out);
    for (int i = 0; i < 3; i++) sjk_cache_free(cs[i]);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    const uint32_t D = argc > 1 ? (uint32_t)atoi(argv[1]) : 256;
    const uint32_t hq = argc > 2 ? (uint32_t)atoi(argv[2]) : 4, hkv = argc > 3 ? (uint32_t)atoi(argv[3]) : 1;
    static const char *dflt[] = {"f16", "sj:4/4", "sj:3/3", "sj:3/3t", "sj:3/2t", "sj:4/4:stage=q8_0"};
    const char **cfgs = argc > 4 ? (const char **)(argv + 4) : dflt;
    const int n = argc > 4 ? argc - 4 : (int)(sizeof dflt / sizeof dflt[0]);
    if (D == 0 || hq == 0 || hkv == 0 || hq % hkv) {
        fprintf(stderr, "usage: bench_split_weights [D=256] [q_heads=4] [kv_heads=1] [CONFIG ...]\n");
        return 2;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) rc |= measure(cfgs[i], D, hq, hkv);
    return rc;
}
