/* bench_attn.c — `sjkvarn bench attn`: attention time over a filled cache, per
 * configuration, context and thread count, against f16 and memcpy measured in the same run.
 *
 * For each geometry (Gemma 3: 4 query heads / 1 KV head, D = 256; Qwen2.5-1.5B: 12 / 2,
 * D = 128; SmolLM2: 9 / 3, D = 64) one single-layer cache per configuration is filled with the same synthetic post-RoPE
 * rows (channel offsets and outliers, per-token swings) in increasing steps up to each
 * context, so the regions (sink, sealed body, ring with its natural tail) are what a run
 * of that length leaves. At each context and thread count the configurations are timed
 * in ROUNDS rounds, each configuration once per round in a rotating order, so a machine
 * whose speed drifts (these are shared) slows all of them alike:
 *   - decode: one query row per head, at least ROUND_S of repeated calls per round, as
 *     process CPU time per call divided by the threads (see time_attend: CPU time
 *     excludes the other processes); us_per_token is the median over the rounds, per
 *     call, i.e. per generated token and layer; wall_us_per_token (JSON) is the
 *     shortest wall time of one call;
 *   - speedup_vs_f16: the median over the rounds of f16's time in that round over this
 *     configuration's;
 *   - bytes/s: the cache's occupied K/V bytes (sjk_cache_memory_report) read per call,
 *     divided by the time; bandwidth_fraction relates it to a memcpy of a 256 MiB buffer
 *     on as many threads, measured at the start of the run (bytes copied per CPU second
 *     over the threads, as the calls are timed);
 *   - the peer (when bench/ggml/attn_peer.c is built: `make ggml-peer`): ggml's CPU flash
 *     attention (ggml_flash_attn_ext) over f16, q8_0 and q4_0 caches of the same
 *     geometry, context and thread count, timed by that program on request as one more
 *     configuration of each round (rows ggml:f16, ggml:q8_0, ggml:q4_0); vs_ggml is the
 *     median over the rounds of ggml's time for the same cache type over ours;
 *   - prefill (contexts <= 32K): 128 query rows, causal, one call in each of the first
 *     ROUNDS_PREFILL rounds, as tokens per second (median) and the median ratio to f16.
 * Caches are warm (the loop re-reads the same layer); at 128K every configuration
 * exceeds the caches of this machine, at 4K most fit.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attention/attn_kernels.h"
#include "bench_stats.h"
#include "common/rng.h"
#include "sjkvarn.h"

int sjk_bench_attn(int argc, char **argv);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_s(void);

typedef struct copy_job { char *dst; const char *src; size_t n; } copy_job;

static void *copy_run(void *arg)
{
    copy_job *j = arg;
    memcpy(j->dst, j->src, j->n);
    return NULL;
}

/* Bytes copied per second by `threads` threads each copying its share of 256 MiB, the
 * time taken as process CPU time over the threads (as time_attend does); best of 3. */
static double memcpy_bandwidth(int threads)
{
    const size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) { free(a); free(b); return 0; }
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 1e30;
    for (int i = 0; i < 3; i++) {
        char *dst = i % 2 ? a : b;
        const char *src = i % 2 ? b : a;
        pthread_t th[2];
        copy_job cj[2];
        const size_t part = n / (size_t)threads;
        double t0 = cpu_s();
        for (int k = 0; k < threads; k++) {
            cj[k] = (copy_job){dst + (size_t)k * part, src + (size_t)k * part, part};
            if (k > 0 && pthread_create(&th[k], NULL, copy_run, &cj[k]) != 0) cj[k].n = 0, copy_run(&cj[k]);
        }
        copy_run(&cj[0]);
        for (int k = 1; k < threads; k++)
            if (cj[k].n) pthread_join(th[k], NULL);
        double t = (cpu_s() - t0) / threads;
        if (t < best) best = t;
    }
    volatile char sink = a[n / 2] + b[n / 3];
    (void)sink;
    free(a);
    free(b);
    return (double)n / best;
}

/* ---- the ggml peer (bench/ggml/attn_peer.c), a child process over two pipes ---------- */
typedef struct peer { FILE *to, *from; pid_t pid; } peer;

/* The peer program: --peer PATH, else $SJK_GGML_PEER, else bench/ggml_attn_peer beside
 * this executable (where `make ggml-peer` puts it). NULL when there is none. */
static const char *peer_path(const char *opt, char *buf, size_t cap)
{
    if (opt) return access(opt, X_OK) == 0 ? opt : NULL;
    const char *env = getenv("SJK_GGML_PEER");
    if (env && *env) return access(env, X_OK) == 0 ? env : NULL;
    ssize_t k = readlink("/proc/self/exe", buf, cap - 1);
    if (k <= 0) return NULL;
    buf[k] = 0;
    char *slash = strrchr(buf, '/');
    if (!slash || (size_t)(slash - buf) + 24 >= cap) return NULL;
    strcpy(slash + 1, "bench/ggml_attn_peer");
    return access(buf, X_OK) == 0 ? buf : NULL;
}

static int peer_start(peer *p, const char *path)
{
    int in[2], out[2];
    if (pipe(in) != 0) return -1;
    if (pipe(out) != 0) { close(in[0]); close(in[1]); return -1; }
    p->pid = fork();
    if (p->pid < 0) return -1;
    if (p->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]); close(in[1]); close(out[0]); close(out[1]);
        execl(path, path, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    p->to = fdopen(in[1], "w");
    p->from = fdopen(out[0], "r");
    if (!p->to || !p->from) return -1;
    setvbuf(p->to, NULL, _IOLBF, 0);
    return 0;
}

static void peer_stop(peer *p)
{
    if (!p->to) return;
    fprintf(p->to, "quit\n");
    fclose(p->to);
    fclose(p->from);
    waitpid(p->pid, NULL, 0);
    memset(p, 0, sizeof *p);
}

/* One command; the reply line in buf. 0 on a reply that is not "error ...". */
static int peer_ask(peer *p, char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->to, fmt, ap);
    va_end(ap);
    fflush(p->to);
    if (!fgets(buf, (int)cap, p->from)) return -1;
    return strncmp(buf, "error", 5) ? 0 : -1;
}

typedef struct geom { const char *name; uint32_t hq, hkv, D; } geom;
typedef struct result { double us, wall_us, bytes, prefill_tps, speedup, prefill_speedup, vs_ggml; } result;

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Time of one attend call (seconds): process CPU time per call over at least min_s of
 * calls (at least one), divided by the thread count. On one thread that is exactly the
 * caller's compute; on several, the wall time the call would take on an otherwise idle
 * machine if the split were perfect (the merge is on the caller, so it is counted). The
 * machines this runs on are shared by several builds; wall time there measures the
 * neighbours, and CPU time does not. *wall receives the shortest wall time of one call. */
static double time_attend(sjk_cache *c, const float *q, size_t rows, uint32_t D, int threads, double min_s,
                          double *wall)
{
    static float out[128 * 16 * 512];
    const float scale = 1.0f / sqrtf((float)D);
    double best = 1e30, cpu0 = cpu_s(), t_end = now_s() + min_s;
    int calls = 0;
    while (calls < 1 || now_s() < t_end) {
        double t0 = now_s();
        sjk_cache_attend(c, 0, 0, q, rows, scale, out);
        double t = now_s() - t0;
        if (t < best) best = t;
        calls++;
    }
    double cpu = (cpu_s() - cpu0) / calls;
    if (wall) *wall = best;
    return cpu / threads;
}

int sjk_bench_attn(int argc, char **argv)
{
    int json = 0, quick = 0, no_peer = 0;
    const char *only_kv = NULL, *only_geom = NULL, *peer_opt = NULL;
    int show_rounds = 0;
    long one_ctx = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) {
            char *end;
            one_ctx = strtol(argv[++i], &end, 10);
            if (*end || one_ctx < 128 || one_ctx > 131072) {
                fprintf(stderr, "bench attn: --ctx %s: expected a context of 128..131072 positions\n", argv[i]);
                return 2;
            }
        }
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc) only_kv = argv[++i];
        else if (!strcmp(argv[i], "--geometry") && i + 1 < argc) only_geom = argv[++i];
        else if (!strcmp(argv[i], "--rounds")) show_rounds = 1;
        else if (!strcmp(argv[i], "--peer") && i + 1 < argc) peer_opt = argv[++i];
        else if (!strcmp(argv[i], "--no-peer")) no_peer = 1;
        else {
            fprintf(stderr, "usage: sjkvarn bench attn [--json] [--quick] [--ctx N] [--kv NAME] [--geometry gemma3|qwen|smollm2] [--rounds]\n"
                            "                          [--peer PATH | --no-peer]\n"
                            "  decode and prefill attention per configuration, context and thread count\n"
                            "  --quick: contexts 4K and 16K only\n"
                            "  --ctx N: that one context only (128..131072; a smoke test uses a small one)\n"
                            "  --kv NAME: only f16 (the baseline) and NAME: one of the configurations below, or any\n"
                            "    KV configuration string (README, \"KV configuration strings\")\n"
                            "  --geometry: only that geometry\n"
                            "  --rounds: print every round's decode time to stderr\n"
                            "  --peer PATH: ggml's flash attention driver (default: $SJK_GGML_PEER, else\n"
                            "    bench/ggml_attn_peer beside this executable, built by `make ggml-peer`)\n"
                            "  configurations: f16 q8_0 q4_0 q8_0/q4_0 sj:4/4 sj:3/3t sj:3/2t\n"
                            "    sj:4/4ts:tail=1024:stage=q8_0 sj:3/3ts sj:3/2ts (peer: ggml:f16 ggml:q8_0 ggml:q4_0)\n");
            return !strcmp(argv[i], "--help") ? 0 : 2;
        }
    }
    static const geom geoms[] = {{"gemma3 4q/1kv D=256", 4, 1, 256},
                                 {"qwen 12q/2kv D=128", 12, 2, 128},
                                 {"smollm2 9q/3kv D=64", 9, 3, 64}};
    /* ours, then the peer's; --kv with a configuration string that is not one of ours
     * (e.g. "sj:6/4:tail_min=256:tail_max=512:stage=q8_0") takes the second slot */
    const char *cfgs[] = {"f16", "q8_0", "q4_0", "q8_0/q4_0", "sj:4/4", "sj:3/3t", "sj:3/2t",
                          "sj:4/4ts:tail=1024:stage=q8_0", "sj:3/3ts", "sj:3/2ts",
                          "ggml:f16", "ggml:q8_0", "ggml:q4_0"};
    enum { NOURS = 10, NCFG = 13, NCTX = 4, NTH = 2, ROUNDS = 7, ROUNDS_PREFILL = 3 };
    _Static_assert(ROUNDS <= SJK_BENCH_MEDIAN_MAX && ROUNDS_PREFILL <= ROUNDS, "sjk_bench_median sorts at most 64 values");
    const double ROUND_S = 0.04; /* decode calls per configuration and round: at least this long */
    uint32_t ctxs[NCTX] = {4096, 16384, 32768, 131072};
    int n_ctx = quick ? 2 : NCTX;
    if (one_ctx) ctxs[0] = (uint32_t)one_ctx, n_ctx = 1;
    if (only_kv) {
        int found = 0;
        for (int ci = 0; ci < NOURS; ci++) found |= !strcmp(cfgs[ci], only_kv);
        if (!found) {
            sjk_layer_config lc;
            char err[200];
            if (sjk_cache_config_parse(only_kv, 1, &lc, err, sizeof err) != SJK_OK) {
                fprintf(stderr, "bench attn: --kv %s: %s\n", only_kv, err);
                return 2;
            }
            cfgs[1] = only_kv;
        }
    }
    /* the name column is as wide as the longest configuration */
    int wname = 9;
    for (int ci = 0; ci < NCFG; ci++)
        if ((int)strlen(cfgs[ci]) > wname) wname = (int)strlen(cfgs[ci]);
    if (only_geom && strcmp(only_geom, "gemma3") && strcmp(only_geom, "qwen") && strcmp(only_geom, "smollm2")) {
        fprintf(stderr, "bench attn: --geometry %s is not gemma3, qwen or smollm2\n", only_geom);
        return 2;
    }
    char pbuf[4096];
    const char *ppath = no_peer ? NULL : peer_path(peer_opt, pbuf, sizeof pbuf);
    if (peer_opt && !ppath) {
        fprintf(stderr, "bench attn: --peer %s: not an executable\n", peer_opt);
        return 2;
    }
    double bw[NTH + 1] = {0};
    for (int th = 1; th <= NTH; th++) bw[th] = memcpy_bandwidth(th);
    const char *kernels = sjk_attn_kernels_get()->name;
    if (json) printf("[\n");
    else {
        printf("# sjkvarn bench attn: memcpy %.2f GB/s (one thread), %.2f GB/s (two), kernels %s\n"
               "# us/token = process CPU time per call / threads (see tools/bench_attn.c)\n", bw[1] / 1e9, bw[2] / 1e9, kernels);
        if (ppath) printf("# peer: ggml_flash_attn_ext (%s)\n", ppath);
        else printf("# peer: none (%s); `make ggml-peer` builds it where the llama.cpp oracle venv is\n",
                    no_peer ? "--no-peer" : "no ggml_attn_peer found");
    }
    int first = 1;
    for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
        const geom *g = &geoms[gi];
        if (only_geom && strncmp(g->name, only_geom, strlen(only_geom))) continue;
        static result res[NCFG][NCTX][NTH];
        memset(res, 0, sizeof res);
        /* One cache per configuration, all filled with the same rows */
        sjk_cache *caches[NOURS] = {0};
        int live[NCFG] = {0};
        for (int ci = 0; ci < NOURS; ci++) {
            if (only_kv && ci && strcmp(cfgs[ci], only_kv)) continue;
            sjk_cache_params p = sjk_cache_params_default();
            p.n_kv_heads = g->hkv;
            p.n_q_heads = g->hq;
            p.head_dim = g->D;
            p.max_pos = ctxs[n_ctx - 1];
            p.max_q_rows = 128;
            p.n_threads = NTH;
            char err[200];
            if (sjk_cache_config_parse(cfgs[ci], 1, &p.layer, err, sizeof err) != SJK_OK) {
                fprintf(stderr, "%s\n", err);
                for (int k = 0; k < NOURS; k++) sjk_cache_free(caches[k]);
                return 1;
            }
            sjk_status st = sjk_cache_create(&p, &caches[ci]);
            if (st != SJK_OK) fprintf(stderr, "bench attn: %s: %s\n", cfgs[ci], sjk_status_str(st));
            live[ci] = caches[ci] != NULL;
        }
        if (!caches[0]) {
            fprintf(stderr, "bench attn: no f16 baseline for %s\n", g->name);
            for (int k = 0; k < NOURS; k++) sjk_cache_free(caches[k]);
            return 1;
        }
        /* The peer: its own caches of the same geometry, filled at the largest context. */
        peer pr = {0};
        if (ppath) {
            char line[256];
            if (peer_start(&pr, ppath) != 0 ||
                peer_ask(&pr, line, sizeof line, "init %u %u %u %u\n", g->hq, g->hkv, g->D, ctxs[n_ctx - 1]) != 0) {
                fprintf(stderr, "bench attn: peer %s did not start; no ggml rows for %s\n", ppath, g->name);
                peer_stop(&pr);
            } else {
                for (int ci = NOURS; ci < NCFG; ci++) live[ci] = !only_kv || ci == NOURS || !strcmp(cfgs[ci] + 5, only_kv);
            }
        }
        sjk_rng r;
        sjk_rng_seed(&r, 1234);
        const size_t W = (size_t)g->hkv * g->D, chunk = 1024;
        float *kv = malloc(sizeof(float) * 2 * chunk * W);
        float *q = malloc(sizeof(float) * 128 * g->hq * g->D);
        float *off = malloc(sizeof(float) * W);
        if (!kv || !q || !off) {
            fprintf(stderr, "bench attn: out of memory\n");
            free(kv); free(q); free(off);
            for (int k = 0; k < NOURS; k++) sjk_cache_free(caches[k]);
            peer_stop(&pr);
            return 1;
        }
        for (size_t i = 0; i < W; i++) off[i] = (float)(0.5 * sjk_rng_normal(&r)) * (i % 23 == 1 ? 8.0f : 1.0f);
        for (size_t i = 0; i < 128 * (size_t)g->hq * g->D; i++) q[i] = (float)sjk_rng_normal(&r);
        uint32_t have = 0;
        for (int xi = 0; xi < n_ctx; xi++) {
            while (have < ctxs[xi]) {
                size_t n = ctxs[xi] - have < chunk ? ctxs[xi] - have : chunk;
                for (size_t t = 0; t < n; t++) {
                    double swing = 0.5 + sjk_rng_uniform(&r);
                    for (size_t i = 0; i < W; i++) {
                        kv[t * W + i] = off[i] + (float)(swing * sjk_rng_normal(&r));
                        kv[(chunk + t) * W + i] = (float)(swing * sjk_rng_normal(&r));
                    }
                }
                for (int ci = 0; ci < NOURS; ci++) {
                    if (!caches[ci] || sjk_cache_append(caches[ci], 0, 0, kv, kv + chunk * W, n) == SJK_OK) continue;
                    fprintf(stderr, "bench attn: %s: append failed at %u; dropped\n", cfgs[ci], have);
                    sjk_cache_free(caches[ci]);
                    caches[ci] = NULL;
                    live[ci] = 0;
                }
                have += (uint32_t)n;
            }
            if (!caches[0]) break;
            /* Rounds: every configuration once per round, the order rotating, so a
             * machine whose speed drifts slows all alike; the ratio to f16 is the median
             * of the per-round ratios. */
            for (int th = 0; th < NTH; th++) {
                double dec[NCFG][ROUNDS], wall[NCFG][ROUNDS], pre[NCFG][ROUNDS];
                const int do_pre = ctxs[xi] <= 32768;
                for (int ci = 0; ci < NOURS; ci++)
                    if (caches[ci]) {
                        sjk_cache_set_threads(caches[ci], (uint32_t)th + 1);
                        time_attend(caches[ci], q, 1, g->D, th + 1, 0, NULL); /* warm */
                    }
                for (int rd = 0; rd < ROUNDS; rd++)
                    for (int k = 0; k < NCFG; k++) {
                        const int ci = (k + rd) % NCFG;
                        if (!live[ci]) continue;
                        if (ci >= NOURS) {
                            char line[256];
                            double cpu = 0, w = 0;
                            if (peer_ask(&pr, line, sizeof line, "time %s %u %d %.3f\n", cfgs[ci] + 5, ctxs[xi], th + 1,
                                         ROUND_S) != 0 || sscanf(line, "%lf %lf", &cpu, &w) != 2 || !(cpu > 0)) {
                                fprintf(stderr, "bench attn: peer %s failed at %u; dropped\n", cfgs[ci], ctxs[xi]);
                                live[ci] = 0;
                                continue;
                            }
                            dec[ci][rd] = cpu;
                            wall[ci][rd] = w;
                            continue;
                        }
                        dec[ci][rd] = time_attend(caches[ci], q, 1, g->D, th + 1, ROUND_S, &wall[ci][rd]);
                        if (do_pre && rd < ROUNDS_PREFILL) pre[ci][rd] = time_attend(caches[ci], q, 128, g->D, th + 1, 0, NULL);
                    }
                sjk_cache_memory m;
                for (int ci = 0; ci < NCFG; ci++) {
                    if (!live[ci]) continue;
                    result *R = &res[ci][xi][th];
                    double ratio[ROUNDS], wmin = 1e30;
                    for (int rd = 0; rd < ROUNDS; rd++) {
                        ratio[rd] = dec[0][rd] / dec[ci][rd];
                        if (wall[ci][rd] < wmin) wmin = wall[ci][rd];
                    }
                    if (show_rounds) {
                        fprintf(stderr, "# rounds %s %s %u %d thr, us:", g->name, cfgs[ci], ctxs[xi], th + 1);
                        for (int rd = 0; rd < ROUNDS; rd++) fprintf(stderr, " %.0f", dec[ci][rd] * 1e6);
                        fprintf(stderr, "\n");
                    }
                    R->us = sjk_bench_median(dec[ci], ROUNDS) * 1e6;
                    R->wall_us = wmin * 1e6;
                    R->speedup = sjk_bench_median(ratio, ROUNDS);
                    if (ci < 3 && live[NOURS + ci]) {
                        for (int rd = 0; rd < ROUNDS; rd++) ratio[rd] = dec[NOURS + ci][rd] / dec[ci][rd];
                        R->vs_ggml = sjk_bench_median(ratio, ROUNDS);
                    }
                    if (ci >= NOURS) {
                        /* ggml's rows: fp16, or blocks of 32 values with an fp16 scale */
                        const double per_value = ci == NOURS ? 2.0 : ci == NOURS + 1 ? 34.0 / 32 : 18.0 / 32;
                        R->bytes = 2.0 * per_value * (double)ctxs[xi] * (double)W;
                        continue;
                    }
                    sjk_cache_memory_report(caches[ci], &m);
                    R->bytes = (double)m.occupied_nbytes;
                    if (do_pre) {
                        for (int rd = 0; rd < ROUNDS_PREFILL; rd++) ratio[rd] = pre[0][rd] / pre[ci][rd];
                        R->prefill_tps = 128.0 / sjk_bench_median(pre[ci], ROUNDS_PREFILL);
                        R->prefill_speedup = sjk_bench_median(ratio, ROUNDS_PREFILL);
                    }
                }
            }
        }
        free(kv); free(q); free(off);
        for (int k = 0; k < NOURS; k++) sjk_cache_free(caches[k]);
        peer_stop(&pr);
        for (int ci = 0; ci < NCFG; ci++)
            for (int xi = 0; xi < n_ctx; xi++)
                for (int th = 0; th < NTH; th++) {
                    const result *R = &res[ci][xi][th];
                    if (R->us <= 0) continue;
                    double bps = R->bytes / (R->us * 1e-6), frac = bw[th + 1] > 0 ? bps / bw[th + 1] : 0;
                    double sp = R->speedup, pf = R->prefill_speedup;
                    if (json) {
                        printf("%s  {\"geometry\": \"%s\", \"config\": \"%s\", \"context\": %u, \"threads\": %d, "
                               "\"us_per_token\": %.2f, \"wall_us_per_token\": %.2f, \"speedup_vs_f16\": %.3f, \"bytes_per_s\": %.4g, "
                               "\"memcpy_bytes_per_s\": %.4g, \"bandwidth_fraction\": %.3f, \"prefill_tokens_per_s\": %.1f, "
                               "\"prefill_speedup_vs_f16\": %.3f, \"speedup_vs_ggml\": %.3f}",
                               first ? "" : ",\n", g->name, cfgs[ci], ctxs[xi], th + 1, R->us, R->wall_us, sp, bps,
                               bw[th + 1], frac, R->prefill_tps, pf, R->vs_ggml);
                        first = 0;
                    } else {
                        if (ci == 0 && xi == 0 && th == 0)
                            printf("\n## %s\n%-*s %7s %3s %12s %8s %10s %8s %14s %8s %8s\n", g->name, wname, "config", "context",
                                   "thr", "us/token", "vs f16", "GB/s", "of memcpy", "prefill tok/s", "vs f16", "vs ggml");
                        char pfs[32] = "-", pfr[32] = "-", vg[32] = "-";
                        if (R->prefill_tps > 0) {
                            snprintf(pfs, sizeof pfs, "%.0f", R->prefill_tps);
                            snprintf(pfr, sizeof pfr, "%.2fx", pf);
                        }
                        if (R->vs_ggml > 0) snprintf(vg, sizeof vg, "%.2fx", R->vs_ggml);
                        printf("%-*s %7u %3d %12.1f %7.2fx %10.2f %8.2f %14s %8s %8s\n", wname, cfgs[ci], ctxs[xi], th + 1,
                               R->us, sp, bps / 1e9, frac, pfs, pfr, vg);
                    }
                }
    }
    if (json) printf("\n]\n");
    return 0;
}
