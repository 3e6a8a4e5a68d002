/* store_ttft.c — the prefix store on loopback: time to first token of one long prompt
 * with a cold store, a warm store and no store (recompute), and the bytes the store
 * keeps per prompt token, for several cache configurations. It starts its own
 * redis-server on a free loopback port (tests/support/redis_proc.c) and stops it.
 *
 *   make benches && ./build/bench/store_ttft [-m MODEL.gguf] [-n TOKENS] [-t THREADS]
 *                                            [--kv f16,sj:4/4,sj:3/2t] [-f TEXT]
 *
 * Defaults: SmolLM2-135M from the model cache, 2048 prompt tokens of docs/FORMAT.md (real
 * text, repeated as needed), 2 threads, f16, sj:4/4 and sj:3/2t with a tail of 256 (so
 * that a prompt of this length has sealed records to share; the default tail keeps the
 * newest 4096 positions in the ring, which are never published). Every
 * configuration runs the three cases in one process against the same server; the ratio
 * warm / recompute is the number to read (absolute times depend on the machine and on
 * what else runs on it). TTFT = the prompt's logits ready (publishing happens after, and
 * is reported apart). Bytes per token: of a stored body block (a sealed record for a
 * compressed cache) and of the fp16 sink block, value bytes / 128; and Redis's own
 * used_memory growth per stored position (its per-key overhead included). */
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

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long long used_memory(int port)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    long long v = -1;
    redisReply *r = c && !c->err ? redisCommand(c, "INFO memory") : NULL;
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "used_memory:") : NULL;
    if (p) v = atoll(p + 12);
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return v;
}

static void flush(int port)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *r = c && !c->err ? redisCommand(c, "FLUSHALL") : NULL;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
}

int main(int argc, char **argv)
{
    const char *model = NULL, *kvs = "f16,sj:4/4:tail=256,sj:3/2t:tail=256", *text = "docs/FORMAT.md";
    uint32_t n_tok = 2048, threads = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m")) model = argv[i + 1];
        else if (!strcmp(argv[i], "-n")) n_tok = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) threads = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kv")) kvs = argv[i + 1];
        else if (!strcmp(argv[i], "-f")) text = argv[i + 1];
        else { fprintf(stderr, "store_ttft: unknown flag %s\n", argv[i]); return 2; }
    }
    char mpath[4096];
    if (!model) {
        const char *home = getenv("HOME");
        snprintf(mpath, sizeof mpath, "%s/.cache/sjkvarn/models/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : ".");
        model = mpath;
    }
    if (!redis_available()) { fprintf(stderr, "store_ttft: redis-server is not installed\n"); return 1; }
    char err[512];
    sjkh_model *m = NULL;
    sjkh_tokenizer *tok = NULL;
    if (sjkh_model_load(model, &m, err, sizeof err) ||
        sjkh_tokenizer_from_gguf(sjkh_model_gguf(m), &tok, err, sizeof err)) {
        fprintf(stderr, "store_ttft: %s\n", err);
        return 1;
    }
    /* the prompt: the text repeated until it has n_tok tokens */
    FILE *f = fopen(text, "rb");
    if (!f) { fprintf(stderr, "store_ttft: cannot read %s\n", text); return 1; }
    static char buf[1 << 20];
    size_t tn = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    int32_t *ids = malloc(((size_t)n_tok + tn * 6 + 8) * sizeof *ids);
    size_t n_ids = 0;
    while (n_ids < n_tok) {
        size_t got = 0;
        if (sjkh_tokenizer_encode(tok, buf, tn, n_ids ? 0 : SJKH_TOKENIZE_ADD_SPECIAL, ids + n_ids, tn * 6 + 8, &got))
            return 1;
        n_ids += got;
    }
    n_ids = n_tok;
    redis_proc rp;
    if (!redis_proc_start(&rp, NULL)) { fprintf(stderr, "store_ttft: redis-server did not start\n"); return 1; }
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout_ms=5000", rp.port);
    const sjkh_model_info *in = sjkh_model_get_info(m);
    float *logits = malloc(in->n_vocab * sizeof *logits);
    printf("model %s, prompt %u tokens, %u threads, redis on loopback\n", model, n_tok, threads);
    printf("%-18s %10s %10s %10s %8s %6s %9s %10s %10s %11s\n", "kv", "recompute", "cold", "warm", "warm/re",
           "stored", "publish", "body B/tok", "sink B/tok", "redis B/tok");
    char list[256];
    snprintf(list, sizeof list, "%s", kvs);
    for (char *kv = strtok(list, ","); kv; kv = strtok(NULL, ",")) {
        sjkh_session_params sp = sjkh_session_params_default();
        sp.n_ctx = n_tok + 64;
        sp.n_threads = threads;
        sp.kv = kv;
        sjks_store *st = NULL;
        if (sjks_store_open(url, m, &sp, 3600, &st, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        sjks_store_set_log(st, NULL);
        double t[3];
        sjks_prefill_report rep[3];
        flush(rp.port);
        long long mem0 = used_memory(rp.port), mem1 = 0;
        for (int c = 0; c < 3; c++) { /* 0 recompute, 1 cold store, 2 warm store */
            sjkh_session *s = NULL;
            if (sjkh_session_create(m, &sp, &s, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
            memset(&rep[c], 0, sizeof rep[c]);
            double t0 = now();
            sjk_status r = c == 0 ? sjkh_session_feed(s, ids, n_ids, logits, 0, err, sizeof err)
                                  : sjks_store_prefill(st, s, ids, n_ids, logits, &rep[c], err, sizeof err);
            t[c] = now() - t0 - rep[c].publish_s;
            if (r) { fprintf(stderr, "%s: %s\n", kv, err); return 1; }
            if (c == 1) mem1 = used_memory(rp.port);
            sjkh_session_free(s);
        }
        /* the value bytes of the sink block (0) and of the last stored block (a body block) */
        double blk_tok[2] = {0, 0};
        sjkh_session *s = NULL;
        uint32_t nb = rep[2].cached_tokens / 128;
        if (nb && sjkh_session_create(m, &sp, &s, err, sizeof err) == SJK_OK) {
            for (int k = 0; k < 2; k++) {
                size_t n_pc = 0, pn = 0;
                uint32_t b = k ? nb - 1 : 0;
                if (sjkh_session_block_pieces(s, SJKH_BLOCK_GROWING, b, NULL, 0, &n_pc) == SJK_OK &&
                    sjkh_session_block_nbytes(s, SJKH_BLOCK_GROWING, b, &pn) == SJK_OK)
                    blk_tok[k] = (double)sjks_value_nbytes(n_pc, pn) / 128.0;
            }
            sjkh_session_free(s);
        }
        double redis_tok = rep[2].cached_tokens ? (double)(mem1 - mem0) / rep[2].cached_tokens : 0;
        printf("%-18s %9.2fs %9.2fs %9.2fs %8.2f %6u %8.3fs %10.0f %10.0f %11.0f\n", kv, t[0], t[1], t[2],
               t[2] / t[0], rep[2].cached_tokens, rep[1].publish_s, blk_tok[1], blk_tok[0], redis_tok);
        fflush(stdout);
        sjks_store_close(st);
    }
    redis_proc_stop(&rp);
    free(logits);
    free(ids);
    sjkh_tokenizer_free(tok);
    sjkh_model_free(m);
    return 0;
}
