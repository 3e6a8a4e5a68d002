/* store_ttft.c — the prefix store on loopback: time to first token of long prompts with
 * no store (recompute), a cold store, a warm store filled by this process and a warm
 * store filled by another process, and the bytes the store keeps per prompt token, for
 * several cache configurations. It starts its own redis-server on a free loopback port
 * (tests/support/redis_proc.c) and stops it.
 *
 *   make benches && ./build/bench/store_ttft [-m MODEL.gguf] [-n N[,N...]] [-t THREADS]
 *        [--kv f16,sj:4/4:tail=256,sj:3/2t:tail=256] [-f TEXT] [--csv FILE] [--max-s S] [--quick]
 *
 * Defaults: Gemma 3 270M from the model cache (its context allows 32K), prompts of 16K
 * and 32K tokens (32K: the context less 64) of docs/FORMAT.md (real text, repeated as
 * needed), threads = online CPUs, f16, sj:4/4 and sj:3/2t with a tail of 256 (the
 * default sj tail keeps the newest 4096 positions in the ring, which are never
 * published). --quick: SmolLM2-135M, one 512-token prompt, f16 and sj:4/4:tail=128, 2
 * threads (seconds; to try it). --max-s: stop (exit 3) before a configuration that would
 * start after S seconds.
 *
 * Per prompt size and configuration, in one process against one Redis:
 *   recompute   a fresh session fed the prompt as `run` feeds it (no store)
 *   cold        FLUSHALL, then through the store: the canonical prefill, nothing found
 *   warm local  a fresh session in this process, through the store the cold run filled
 *   warm other  another process (this binary, --reader, given the prompt's ids in a file)
 *               that loads the model, opens the store and prefills the prompt through it
 *               once: what a second server sees
 * TTFT = until the prompt's logits are ready (publishing happens after the first token
 * and is reported apart; the other process's model load and fingerprint are not
 * counted, a server does them at boot). Bytes per token: of a stored growing block (a
 * sealed record for a compressed cache) and of the fp16 sink block, value bytes / 128;
 * every published byte (window blocks included) per stored position; and Redis's own
 * used_memory growth per stored position (its per-key overhead included). Times depend
 * on the machine and what else runs on it; the ratios recompute / warm are the numbers
 * to read. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "prefix_store.h"
#include "sjkhost.h"
#include "../tests/support/redis_proc.h"

#define MAX_SIZES 8

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long long redis_int_cmd(int port, const char *cmd, const char *field)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    long long v = -1;
    redisReply *r = c && !c->err ? redisCommand(c, cmd) : NULL;
    if (r && field && r->type == REDIS_REPLY_STRING) {
        const char *p = strstr(r->str, field);
        if (p) v = atoll(p + strlen(field));
    } else if (r) {
        v = 0;
    }
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return v;
}

/* The prompt: the text tokenized and repeated until it has n tokens. 0 on failure. */
static int build_prompt(sjkh_tokenizer *tok, const char *path, uint32_t n, int32_t **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "store_ttft: cannot read %s\n", path);
        return 0;
    }
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    size_t tn = buf ? fread(buf, 1, cap - 1, f) : 0;
    fclose(f);
    size_t per = tn * 6 + 8;
    int32_t *ids = buf ? malloc(((size_t)n + per) * sizeof *ids) : NULL;
    if (!ids || tn == 0) {
        free(buf);
        free(ids);
        return 0;
    }
    size_t n_ids = 0;
    while (n_ids < n) {
        size_t got = 0;
        if (sjkh_tokenizer_encode(tok, buf, tn, n_ids ? 0 : SJKH_TOKENIZE_ADD_SPECIAL, ids + n_ids, per, &got) ||
            got == 0) {
            free(buf);
            free(ids);
            return 0;
        }
        n_ids += got;
    }
    free(buf);
    *out = ids;
    return 1;
}

/* One prefill of ids[0..n) into a fresh session: through st, or fed plainly (st NULL).
 * *ttft excludes the publish. 0 on failure (said). */
static int prefill_once(sjkh_model *m, const sjkh_session_params *sp, sjks_store *st, const int32_t *ids, uint32_t n,
                        float *logits, double *ttft, sjks_prefill_report *rep)
{
    char err[512] = "";
    sjkh_session *s = NULL;
    memset(rep, 0, sizeof *rep);
    if (sjkh_session_create(m, sp, &s, err, sizeof err)) {
        fprintf(stderr, "store_ttft: %s: %s\n", sp->kv, err);
        return 0;
    }
    double t0 = now();
    sjk_status r = st ? sjks_store_prefill(st, s, ids, n, logits, rep, err, sizeof err)
                      : sjkh_session_feed(s, ids, n, logits, 0, err, sizeof err);
    *ttft = now() - t0 - rep->publish_s;
    sjkh_session_free(s);
    if (r) fprintf(stderr, "store_ttft: %s: %s\n", sp->kv, err);
    return r == SJK_OK;
}

typedef struct opts {
    const char *model, *kvs, *text, *csv, *reader_url;
    uint32_t sizes[MAX_SIZES], n_sizes, threads;
    double max_s;
} opts;

/* The prompt size a model's context allows: n, or its training context less 64. */
static uint32_t fit_size(const sjkh_model_info *in, uint32_t n)
{
    uint32_t ctx_max = in->n_ctx_train ? in->n_ctx_train : n + 64;
    return n + 64 > ctx_max ? (ctx_max > 65 ? ctx_max - 64 : 1) : n;
}

static sjkh_session_params params(const opts *o, const char *kv, uint32_t n)
{
    sjkh_session_params sp = sjkh_session_params_default();
    sp.n_ctx = n + 64;
    sp.n_threads = o->threads;
    sp.kv = kv;
    return sp;
}

/* The prompt's ids for the reader process (so both tokenize nothing twice and see the
 * same tokens whatever happens to the text file meanwhile). */
static int ids_write(const char *path, const int32_t *ids, uint32_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(ids, sizeof *ids, n, f) == n;
    int closed = fclose(f) == 0;
    return ok && closed;
}

static int32_t *ids_read(const char *path, uint32_t n)
{
    FILE *f = fopen(path, "rb");
    int32_t *ids = f ? malloc((size_t)n * sizeof *ids) : NULL;
    if (ids && fread(ids, sizeof *ids, n, f) != n) {
        free(ids);
        ids = NULL;
    }
    if (f) fclose(f);
    return ids;
}

/* --reader: the other process. One prefill through the store; prints its TTFT. */
static int reader(const opts *o, sjkh_model *m)
{
    uint32_t n = o->sizes[0];
    sjkh_session_params sp = params(o, o->kvs, n);
    int32_t *ids = ids_read(o->text, n);
    char err[512] = "";
    sjks_store *st = NULL;
    float *logits = malloc(sjkh_model_get_info(m)->n_vocab * sizeof *logits);
    if (!logits || !ids) {
        fprintf(stderr, "store_ttft --reader: cannot read %u ids from %s\n", n, o->text);
        free(logits);
        free(ids);
        return 1;
    }
    if (sjks_store_open(o->reader_url, m, &sp, 3600, &st, err, sizeof err)) {
        fprintf(stderr, "store_ttft --reader: %s\n", err);
        return 1;
    }
    sjks_store_set_log(st, stderr);
    double t = 0;
    sjks_prefill_report rep;
    int ok = prefill_once(m, &sp, st, ids, n, logits, &t, &rep);
    if (ok) printf("reader ttft %.6f cached %u\n", t, rep.cached_tokens);
    sjks_store_close(st);
    free(ids);
    free(logits);
    return ok ? 0 : 1;
}

/* Runs this binary as the reader of url; its TTFT and positions from the store. */
static int other_process(const char *self, const opts *o, const char *url, const int32_t *ids, uint32_t n,
                         const char *kv, double *t, uint32_t *cached)
{
    char cmd[8192], path[64];
    snprintf(path, sizeof path, "/tmp/sjk_store_ttft_ids_%d.bin", (int)getpid());
    if (!ids_write(path, ids, n)) return 0;
    snprintf(cmd, sizeof cmd, "'%s' --reader '%s' -m '%s' -n %u -t %u --kv '%s' -f '%s'", self, url, o->model, n,
             o->threads, kv, path);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    char line[256];
    int ok = 0;
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "reader ttft %lf cached %u", t, cached) == 2) ok = 1;
    ok = pclose(p) == 0 && ok;
    unlink(path);
    return ok;
}

static int parse_sizes(const char *v, opts *o)
{
    o->n_sizes = 0;
    for (const char *p = v; *p && o->n_sizes < MAX_SIZES;) {
        char *e;
        unsigned long x = strtoul(p, &e, 10);
        if (e == p || x < 2 || x > (1u << 24)) return 0;
        o->sizes[o->n_sizes++] = (uint32_t)x;
        p = *e == ',' ? e + 1 : e;
        if (*e && *e != ',') return 0;
    }
    return o->n_sizes > 0;
}

int main(int argc, char **argv)
{
    opts o = {NULL, "f16,sj:4/4:tail=256,sj:3/2t:tail=256", "docs/FORMAT.md", NULL, NULL, {16384, 32768}, 2, 0, 0};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = ncpu > 0 && ncpu < 256 ? (uint32_t)ncpu : 2;
    int quick = 0;
    for (int i = 1; i < argc; i++) quick |= !strcmp(argv[i], "--quick");
    if (quick) { /* the quick size; the flags below still win */
        o.sizes[0] = 512, o.n_sizes = 1;
        o.kvs = "f16,sj:4/4:tail=128";
        o.threads = 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) continue;
        if (!v) { fprintf(stderr, "store_ttft: %s needs a value (or unknown flag)\n", a); return 2; }
        i++;
        if (!strcmp(a, "-m")) o.model = v;
        else if (!strcmp(a, "-n")) { if (!parse_sizes(v, &o)) { fprintf(stderr, "store_ttft: bad -n %s\n", v); return 2; } }
        else if (!strcmp(a, "-t")) o.threads = (uint32_t)atoi(v);
        else if (!strcmp(a, "--kv")) o.kvs = v;
        else if (!strcmp(a, "-f")) o.text = v;
        else if (!strcmp(a, "--csv")) o.csv = v;
        else if (!strcmp(a, "--max-s")) o.max_s = atof(v);
        else if (!strcmp(a, "--reader")) o.reader_url = v;
        else { fprintf(stderr, "store_ttft: unknown flag %s\n", a); return 2; }
    }
    if (o.threads < 1 || o.threads > 256) { fprintf(stderr, "store_ttft: -t must be 1..256\n"); return 2; }
    char mpath[4096];
    if (!o.model) {
        const char *home = getenv("HOME");
        snprintf(mpath, sizeof mpath, "%s/.cache/sjkvarn/models/%s", home ? home : ".",
                 quick ? "SmolLM2-135M-Instruct.Q4_1.gguf" : "gemma-3-270m-q4_k_m.gguf");
        o.model = mpath;
    }
    char err[512];
    sjkh_model *m = NULL;
    sjkh_tokenizer *tok = NULL;
    if (sjkh_model_load(o.model, &m, err, sizeof err) ||
        sjkh_tokenizer_from_gguf(sjkh_model_gguf(m), &tok, err, sizeof err)) {
        fprintf(stderr, "store_ttft: %s\n", err);
        return 1;
    }
    if (o.reader_url) { /* -f is the file of ids, -n their count */
        int rc = reader(&o, m);
        sjkh_tokenizer_free(tok);
        sjkh_model_free(m);
        return rc;
    }
    if (!redis_available()) { fprintf(stderr, "store_ttft: redis-server is not installed\n"); return 1; }
    redis_proc rp;
    if (!redis_proc_start(&rp, NULL)) { fprintf(stderr, "store_ttft: redis-server did not start\n"); return 1; }
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout_ms=5000", rp.port);
    const sjkh_model_info *in = sjkh_model_get_info(m);
    float *logits = malloc(in->n_vocab * sizeof *logits);
    FILE *csv = o.csv ? fopen(o.csv, "w") : NULL;
    if (o.csv && !csv) { fprintf(stderr, "store_ttft: cannot write %s\n", o.csv); return 1; }
    if (csv)
        fprintf(csv, "model,tokens,threads,kv,recompute_s,cold_s,warm_local_s,warm_other_s,warm_local_x,warm_other_x,"
                     "cached_tokens,publish_s,body_bytes_per_token,sink_bytes_per_token,stored_bytes_per_token,"
                     "redis_bytes_per_token\n");
    const char *base = strrchr(o.model, '/');
    base = base ? base + 1 : o.model;
    printf("model %s, %u threads, redis on loopback (TTFT in seconds; x = recompute / warm)\n", base, o.threads);
    printf("%6s %-20s %9s %9s %9s %9s %6s %6s %6s %8s %8s %8s %8s %8s\n", "tokens", "kv", "recompute", "cold",
           "warm", "warm-oth", "x", "x-oth", "stored", "publish", "body/tok", "sink/tok", "all/tok", "redis/tok");
    fflush(stdout);
    double t_start = now();
    int rc = 0;
    for (uint32_t zi = 0; zi < o.n_sizes && rc == 0; zi++) {
        int32_t *ids = NULL;
        uint32_t n = fit_size(in, o.sizes[zi]);
        if (!build_prompt(tok, o.text, n, &ids)) { rc = 1; break; }
        char list[512];
        snprintf(list, sizeof list, "%s", o.kvs);
        char *save = NULL;
        for (char *kv = strtok_r(list, ",", &save); kv && rc == 0; kv = strtok_r(NULL, ",", &save)) {
            if (o.max_s > 0 && now() - t_start > o.max_s) {
                printf("stopped: --max-s %.0f reached before %u tokens, %s\n", o.max_s, n, kv);
                rc = 3;
                break;
            }
            sjkh_session_params sp = params(&o, kv, n);
            sjks_store *st = NULL;
            if (sjks_store_open(url, m, &sp, 3600, &st, err, sizeof err)) {
                fprintf(stderr, "store_ttft: %s\n", err);
                rc = 1;
                break;
            }
            sjks_store_set_log(st, NULL);
            double t[4] = {0, 0, 0, 0};
            sjks_prefill_report rep[3];
            redis_int_cmd(rp.port, "FLUSHALL", NULL);
            long long mem0 = redis_int_cmd(rp.port, "INFO memory", "used_memory:"), mem1 = 0;
            int ok = prefill_once(m, &sp, NULL, ids, n, logits, &t[0], &rep[0]) &&
                     prefill_once(m, &sp, st, ids, n, logits, &t[1], &rep[1]);
            mem1 = redis_int_cmd(rp.port, "INFO memory", "used_memory:");
            ok = ok && prefill_once(m, &sp, st, ids, n, logits, &t[2], &rep[2]);
            uint32_t other_cached = 0;
            if (ok && !other_process(argv[0], &o, url, ids, n, kv, &t[3], &other_cached)) {
                fprintf(stderr, "store_ttft: the reader process failed (%s, %u tokens)\n", kv, n);
                ok = 0;
            }
            if (ok && other_cached != rep[2].cached_tokens) {
                fprintf(stderr, "store_ttft: the reader took %u positions from the store, this process %u\n",
                        other_cached, rep[2].cached_tokens);
                ok = 0;
            }
            if (!ok) {
                sjks_store_close(st);
                rc = 1;
                break;
            }
            /* the value bytes of the sink block (0) and of the last stored block (a body block) */
            double blk_tok[2] = {0, 0};
            sjkh_session *s = NULL;
            uint32_t nb = rep[2].cached_tokens / SJKH_BLOCK_TOKENS;
            if (nb && sjkh_session_create(m, &sp, &s, err, sizeof err) == SJK_OK) {
                for (int k = 0; k < 2; k++) {
                    size_t n_pc = 0, pn = 0;
                    uint32_t b = k ? nb - 1 : 0;
                    if (sjkh_session_block_pieces(s, SJKH_BLOCK_GROWING, b, NULL, 0, &n_pc) == SJK_OK &&
                        sjkh_session_block_nbytes(s, SJKH_BLOCK_GROWING, b, &pn) == SJK_OK)
                        blk_tok[k] = (double)sjks_value_nbytes(n_pc, pn) / SJKH_BLOCK_TOKENS;
                }
                sjkh_session_free(s);
            }
            sjks_store_stats ss;
            sjks_store_get_stats(st, &ss);
            double pos = rep[2].cached_tokens ? (double)rep[2].cached_tokens : 1;
            double all_tok = (double)ss.published_bytes / pos, redis_tok = (double)(mem1 - mem0) / pos;
            double x = t[2] > 0 ? t[0] / t[2] : 0, xo = t[3] > 0 ? t[0] / t[3] : 0;
            printf("%6u %-20s %9.2f %9.2f %9.2f %9.2f %6.1f %6.1f %6u %8.2f %8.0f %8.0f %8.0f %8.0f\n", n, kv, t[0],
                   t[1], t[2], t[3], x, xo, rep[2].cached_tokens, rep[1].publish_s, blk_tok[1], blk_tok[0], all_tok,
                   redis_tok);
            fflush(stdout);
            if (csv)
                fprintf(csv, "%s,%u,%u,%s,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,%u,%.3f,%.0f,%.0f,%.0f,%.0f\n", base, n,
                        o.threads, kv, t[0], t[1], t[2], t[3], x, xo, rep[2].cached_tokens, rep[1].publish_s,
                        blk_tok[1], blk_tok[0], all_tok, redis_tok);
            sjks_store_close(st);
        }
        free(ids);
    }
    if (csv) fclose(csv);
    redis_proc_stop(&rp);
    free(logits);
    sjkh_tokenizer_free(tok);
    sjkh_model_free(m);
    return rc;
}
