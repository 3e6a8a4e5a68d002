/* test_store_run.c — `sjkvarn run --prefix-store` end to end: two processes against one
 * real redis-server on loopback. The second run imports the blocks the first published,
 * prefills only the rest and prints the same greedy text. Then every fault the store can
 * have: an evicted block, a corrupted one, a truncated one, one written for another
 * fingerprint, a store that refuses writes (OOM), one that hangs and one that is down.
 * Each is a miss or a skipped publish, never a failed run, and the text never changes.
 * The same two runs on Gemma 3 (sliding-window layers) and through a three-node Redis
 * Cluster. SKIPs without redis-server or the models (fails under SJK_REQUIRE_ALL=1). */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "common/crc32c.h"
#include "common/util.h"
#include "harness.h"
#include "support/models.h"
#include "support/redis_proc.h"

static char g_cli[PATH_MAX + 16], g_prompt[64];

typedef struct run_out {
    int rc;
    char text[8192];
    long cached, total, prefilled, published;
    int store_logged; /* stderr has "sjkvarn store:" lines (faults) */
    double store_s;   /* lookup + fetch + publish, as the CLI reports them */
    double wall_s;
} run_out;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs the CLI with the prompt file, greedy, through the store at url. */
static void run_cli(const char *model, const char *kv, const char *url, run_out *o)
{
    memset(o, 0, sizeof *o);
    o->cached = o->prefilled = o->published = -1;
    char cmd[PATH_MAX + 8192], out_path[] = "/tmp/sjk_store_out_XXXXXX", err_path[] = "/tmp/sjk_store_err_XXXXXX";
    int fo = mkstemp(out_path), fe = mkstemp(err_path);
    if (fo < 0 || fe < 0) { o->rc = -1; return; }
    close(fo);
    close(fe);
    snprintf(cmd, sizeof cmd,
             "'%s' run -m '%s' -f '%s' -n 12 --temp 0 --kv '%s' -c 2048 -b 96 -t 2 --prefix-store '%s' >'%s' 2>'%s'",
             g_cli, model, g_prompt, kv, url, out_path, err_path);
    double t0 = now_s();
    int rc = system(cmd);
    o->wall_s = now_s() - t0;
    o->rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    FILE *f = fopen(out_path, "rb");
    if (f) {
        size_t n = fread(o->text, 1, sizeof o->text - 1, f);
        o->text[n] = 0;
        fclose(f);
    }
    f = fopen(err_path, "r");
    char line[2048];
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "prefix store: ");
        double lk = 0, fi = 0, pu = 0;
        if (p && sscanf(p,
                        "prefix store: %ld of %ld prompt tokens from the store, %ld prefilled, %ld blocks published "
                        "(lookup %lf ms, fetch+import %lf ms, publish %lf ms)",
                        &o->cached, &o->total, &o->prefilled, &o->published, &lk, &fi, &pu) == 7)
            o->store_s = (lk + fi + pu) / 1e3;
        if (strstr(line, "sjkvarn store:")) o->store_logged = 1;
        if (o->rc) fputs(line, stderr);
    }
    if (f) fclose(f);
    unlink(out_path);
    unlink(err_path);
}

/* The store's key of (part 'g' or 'w', block), found by reading each value's header. */
static int find_key(redisContext *c, int part, uint32_t block, char *key, size_t cap)
{
    redisReply *r = redisCommand(c, "KEYS sjkv1:*");
    int found = 0;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements && !found; i++) {
        redisReply *h = redisCommand(c, "GETRANGE %s 12 19", r->element[i]->str);
        if (h && h->type == REDIS_REPLY_STRING && h->len == 8 && sjk_rd_u32le((uint8_t *)h->str) == (uint32_t)part &&
            sjk_rd_u32le((uint8_t *)h->str + 4) == block) {
            snprintf(key, cap, "%s", r->element[i]->str);
            found = 1;
        }
        if (h) freeReplyObject(h);
    }
    if (r) freeReplyObject(r);
    return found;
}

static long long n_keys(redisContext *c)
{
    redisReply *r = redisCommand(c, "DBSIZE");
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    return n;
}

static void cmdv(redisContext *c, const char *fmt, const char *a, size_t an, const char *b, size_t bn)
{
    redisReply *r = redisCommand(c, fmt, a, an, b, bn);
    if (r) freeReplyObject(r);
}

/* Rewrites the value of key: truncate to half (how = 0), flip a payload byte (1), or give
 * it another fingerprint with a correct CRC (2). */
static int damage(redisContext *c, const char *key, int how)
{
    redisReply *r = redisCommand(c, "GET %s", key);
    if (!r || r->type != REDIS_REPLY_STRING || r->len < 800) {
        if (r) freeReplyObject(r);
        return 0;
    }
    size_t n = r->len;
    uint8_t *v = malloc(n);
    memcpy(v, r->str, n);
    freeReplyObject(r);
    if (how == 0) n /= 2;
    if (how == 1) v[n - 100] ^= 0x01;
    if (how == 2) {
        v[40] ^= 0xFF;
        sjk_wr_u32le(v + n - 4, sjk_crc32c(0, v, n - 4));
    }
    cmdv(c, "SET %b %b", key, strlen(key), (const char *)v, n);
    free(v);
    return 1;
}

static void pause_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

TEST(test_two_processes_share_prefix_and_survive_faults)
{
    const char *model = test_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!redis_available()) SKIP("redis-server is not installed (apt-get install redis-server)");
    if (access(model, R_OK)) SKIP("SmolLM2-135M-Instruct.Q4_1.gguf not in the model cache (scripts/fetch-model smollm2-135m)");
    redis_proc rp;
    CHECK(redis_proc_start(&rp, NULL));
    if (!rp.pid) return;
    redisContext *c = redisConnect("127.0.0.1", rp.port);
    CHECK(c && !c->err);
    if (!c || c->err) goto out;
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout_ms=400", rp.port);
    const char *kv = "sj:4/4:tail=128";
    run_out a, b;
    run_cli(model, kv, url, &a);
    CHECKF(a.rc == 0 && a.cached == 0 && a.published >= 3, "cold run: rc %d, cached %ld, published %ld", a.rc,
           a.cached, a.published);
    long long keys = n_keys(c);
    CHECKF(keys == a.published, "%lld keys for %ld published blocks", keys, a.published);
    run_cli(model, kv, url, &b);
    long cut_tokens = a.published * 128;
    CHECKF(b.rc == 0 && b.cached == cut_tokens && b.prefilled == a.total - cut_tokens && b.published == 0,
           "warm run: cached %ld (want %ld), prefilled %ld", b.cached, cut_tokens, b.prefilled);
    CHECKF(!strcmp(a.text, b.text), "warm run's text differs from the cold run's");
    fprintf(stderr, "  cold run %.1f s, warm run %.1f s (%ld of %ld prompt tokens from the store)\n", a.wall_s,
            b.wall_s, b.cached, b.total);
    /* faults: each one a miss from some block on, and the same text (light: the corrupted
     * and the foreign block only, each the same code path as its sibling) */
    static const char *const what[] = {"evicted block 1", "corrupted block 2", "truncated block 1",
                                       "block 0 with another fingerprint"};
    static const int blk[] = {1, 2, 1, 0}, how[] = {-1, 1, 0, 2};
    for (int f = 0; f < 4; f++) {
        if (test_light() && (f == 0 || f == 2)) continue;
        char key[128];
        CHECK(find_key(c, 0, (uint32_t)blk[f], key, sizeof key));
        if (how[f] < 0) cmdv(c, "DEL %b%b", key, strlen(key), "", 0);
        else CHECK(damage(c, key, how[f]));
        run_out r;
        run_cli(model, kv, url, &r);
        CHECKF(r.rc == 0 && r.cached == blk[f] * 128L, "%s: rc %d, cached %ld (want %d)", what[f], r.rc, r.cached,
               blk[f] * 128);
        CHECKF(!strcmp(r.text, a.text), "%s: the text changed", what[f]);
        CHECKF(how[f] < 0 || r.store_logged, "%s: not logged", what[f]);
        /* the missing or damaged block was published again: the next run hits all (run
         * once, after the corrupted block, whose bad value was replaced; for the others a
         * key count is back to the full set) */
        if (f != 1) {
            CHECKF(n_keys(c) == keys, "after %s: %lld keys, want %lld", what[f], n_keys(c), keys);
            continue;
        }
        run_cli(model, kv, url, &r);
        CHECKF(r.rc == 0 && r.cached == cut_tokens && !strcmp(r.text, a.text), "after %s: cached %ld", what[f],
               r.cached);
    }

    /* another configuration shares nothing (its own fingerprint and keys) */
    run_out o;
    run_cli(model, "sj:3/2t:tail=128", url, &o);
    CHECKF(o.rc == 0 && o.cached == 0, "another kv: cached %ld", o.cached);

    /* full: writes refused with OOM; the run goes on without publishing */
    redisReply *rr = redisCommand(c, "FLUSHALL");
    if (rr) freeReplyObject(rr);
    rr = redisCommand(c, "CONFIG SET maxmemory 1");
    if (rr) freeReplyObject(rr);
    rr = redisCommand(c, "CONFIG SET maxmemory-policy noeviction");
    if (rr) freeReplyObject(rr);
    run_cli(model, kv, url, &o);
    CHECKF(o.rc == 0 && o.cached == 0 && o.published == 0 && o.store_logged && !strcmp(o.text, a.text),
           "OOM store: rc %d published %ld", o.rc, o.published);
    rr = redisCommand(c, "CONFIG SET maxmemory 0");
    if (rr) freeReplyObject(rr);

    /* hung (SIGSTOP): bounded timeouts, same text */
    kill(rp.pid, SIGSTOP);
    run_cli(model, kv, url, &o);
    kill(rp.pid, SIGCONT);
    CHECKF(o.rc == 0 && o.cached == 0 && o.store_logged && !strcmp(o.text, a.text), "hung store: rc %d", o.rc);
    /* bounded: two timeouts of 0.4 s (lookup, publish) and nothing else waits on it */
    CHECKF(o.store_s < 2.0, "hung store: %.2f s in the store", o.store_s);

    /* down */
    redisFree(c);
    c = NULL;
    redis_proc_stop(&rp);
    pause_s(0.2);
    run_cli(model, kv, url, &o);
    CHECKF(o.rc == 0 && o.cached == 0 && o.store_logged && !strcmp(o.text, a.text), "store down: rc %d", o.rc);
    CHECKF(o.store_s < 1.0, "store down: %.2f s in the store", o.store_s);
out:
    if (c) redisFree(c);
    redis_proc_stop(&rp);
}

TEST(test_gemma3_windows_through_the_store)
{
    const char *model = test_model_path("gemma-3-270m-q4_k_m.gguf");
    if (!redis_available()) SKIP("redis-server is not installed (apt-get install redis-server)");
    if (access(model, R_OK)) SKIP("gemma-3-270m-q4_k_m.gguf not in the model cache (scripts/fetch-model gemma3-270m)");
    redis_proc rp;
    CHECK(redis_proc_start(&rp, NULL));
    if (!rp.pid) return;
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", rp.port);
    run_out a, b;
    run_cli(model, "sj:4/4:tail=128", url, &a);
    run_cli(model, "sj:4/4:tail=128", url, &b);
    CHECKF(a.rc == 0 && b.rc == 0 && a.cached == 0 && b.cached >= 512 && b.prefilled == b.total - b.cached,
           "gemma: cached %ld then %ld", a.cached, b.cached);
    CHECKF(!strcmp(a.text, b.text), "gemma: the warm run's text differs");
    redis_proc_stop(&rp);
}

TEST(test_cluster_two_processes)
{
    const char *model = test_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!redis_available()) SKIP("redis-server is not installed (apt-get install redis-server)");
    if (access(model, R_OK)) SKIP("SmolLM2-135M-Instruct.Q4_1.gguf not in the model cache (scripts/fetch-model smollm2-135m)");
    static const char *const extra[] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", NULL};
    redis_proc rp[3];
    memset(rp, 0, sizeof rp);
    int up = 1;
    for (int i = 0; i < 3; i++) up &= redis_proc_start(&rp[i], extra);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "redis-cli --cluster create 127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d --cluster-replicas 0 --cluster-yes "
             ">/dev/null 2>&1 && for i in $(seq 50); do redis-cli -p %d cluster info | grep -q cluster_state:ok && "
             "redis-cli -p %d cluster info | grep -q cluster_state:ok && redis-cli -p %d cluster info | grep -q "
             "cluster_state:ok && exit 0; sleep 0.1; done; exit 1",
             rp[0].port, rp[1].port, rp[2].port, rp[0].port, rp[1].port, rp[2].port);
    up = up && system(cmd) == 0;
    CHECKF(up, "three-node cluster did not form");
    if (up) {
        char url[160];
        snprintf(url, sizeof url, "redis://127.0.0.1:%d,127.0.0.1:%d", rp[1].port, rp[2].port);
        run_out a, b;
        run_cli(model, "q8_0", url, &a);
        run_cli(model, "q8_0", url, &b);
        CHECKF(a.rc == 0 && b.rc == 0 && a.cached == 0 && a.published >= 3 && b.cached == a.published * 128,
               "cluster: cached %ld then %ld, published %ld", a.cached, b.cached, a.published);
        CHECKF(!strcmp(a.text, b.text), "cluster: the warm run's text differs");
        /* the blocks are spread over the nodes */
        int nodes_with_keys = 0;
        for (int i = 0; i < 3; i++) {
            redisContext *c = redisConnect("127.0.0.1", rp[i].port);
            if (c && !c->err && n_keys(c) > 0) nodes_with_keys++;
            if (c) redisFree(c);
        }
        CHECKF(nodes_with_keys >= 2, "keys on %d node(s)", nodes_with_keys);
    }
    for (int i = 0; i < 3; i++) redis_proc_stop(&rp[i]);
}

int main(void)
{
    /* the CLI beside this binary's build directory, and a prompt of real text */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        snprintf(g_cli, sizeof g_cli, "%s/../sjkvarn", self);
    }
    snprintf(g_prompt, sizeof g_prompt, "/tmp/sjk_store_prompt_%d.txt", (int)getpid());
    FILE *in = fopen("docs/FORMAT.md", "rb"), *out = fopen(g_prompt, "wb");
    if (in && out) {
        char buf[1400];
        size_t got = fread(buf, 1, sizeof buf, in);
        fwrite(buf, 1, got, out);
    }
    if (in) fclose(in);
    if (out) fclose(out);
    RUN(test_two_processes_share_prefix_and_survive_faults);
    RUN(test_gemma3_windows_through_the_store);
    RUN(test_cluster_two_processes);
    unlink(g_prompt);
    return test_summary();
}
