/* test_store_redis.c — the prefix store's pieces without a model: SHA-256 (FIPS 180-4
 * vectors), the cluster slot function, the key schema and the value format (pinned
 * bytes, every refusal), and the Redis client against real redis-server processes on
 * loopback: one node (pipelines, a node that is down, one that hangs: bounded
 * timeouts), and a three-node cluster made with `redis-cli --cluster create`, where a
 * slot is migrated under the client to exercise ASK and MOVED. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/util.h"
#include "harness.h"
#include "redis.h"
#include "sha256.h"
#include "support/redis_proc.h"
#include "value.h"

static void hexs(char *dst, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) sprintf(dst + 2 * i, "%02x", p[i]);
}

TEST(test_sha256_fips_vectors)
{
    uint8_t d[32];
    char h[65];
    sjks_sha256_once("abc", 3, d);
    hexs(h, d, 32);
    CHECK(!strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    sjks_sha256_once("", 0, d);
    hexs(h, d, 32);
    CHECK(!strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    const char *m56 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sjks_sha256_once(m56, strlen(m56), d);
    hexs(h, d, 32);
    CHECK(!strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    /* one million 'a', fed in uneven pieces */
    sjks_sha256 c;
    sjks_sha256_init(&c);
    static char a[1000];
    memset(a, 'a', sizeof a);
    for (size_t done = 0, step = 1; done < 1000000; done += step, step = step % 997 + 1)
        sjks_sha256_update(&c, a, done + step > 1000000 ? 1000000 - done : step);
    sjks_sha256_final(&c, d);
    hexs(h, d, 32);
    CHECK(!strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
}

TEST(test_cluster_slot_crc16)
{
    CHECK(sjks_redis_slot("123456789", 9) == 0x31C3 % 16384); /* XMODEM check value 0x31C3 */
    CHECK(sjks_redis_slot("{user1000}.following", 20) == sjks_redis_slot("user1000", 8));
    CHECK(sjks_redis_slot("foo{}{bar}", 10) == sjks_redis_slot("foo{}{bar}", 10));
    CHECK(sjks_redis_slot("foo{}{bar}", 10) != sjks_redis_slot("bar", 3)); /* empty tag: whole key */
    CHECK(sjks_redis_slot("foo{{bar}}zap", 13) == sjks_redis_slot("{bar", 4));
}

static void fill_meta(sjks_value_meta *m, uint8_t *fp, uint8_t *parent, uint8_t *chain, int32_t *tok,
                      sjkh_block_piece *pc)
{
    for (int i = 0; i < 32; i++) fp[i] = (uint8_t)i, parent[i] = (uint8_t)(0x40 + i), chain[i] = 0xAA;
    for (int i = 0; i < 128; i++) tok[i] = 1000 + i;
    pc[0] = (sjkh_block_piece){3, 0, 10};
    pc[1] = (sjkh_block_piece){3, 1, 6};
    *m = (sjks_value_meta){fp, parent, chain, 0, 5, tok, pc, 2};
}

TEST(test_value_format_is_pinned)
{
    uint8_t fp[32], parent[32], chain[32];
    int32_t tok[128];
    sjkh_block_piece pc[2];
    sjks_value_meta m;
    fill_meta(&m, fp, parent, chain, tok, pc);
    char key[SJKS_KEY_CAP];
    size_t kl = sjks_key(key, fp, 0, chain);
    CHECK(kl == 73 && !strcmp(key, "sjkv1:000102030405060708090a0b0c0d0e0f:g:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    sjks_key(key, fp, 1, chain);
    CHECK(key[39] == 'w');
    /* chain hash = SHA-256(parent || 128 int32 LE) */
    uint8_t c1[32], c2[32], buf[32 + 512];
    sjks_chain_hash(parent, tok, c1);
    memcpy(buf, parent, 32);
    for (int i = 0; i < 128; i++) sjk_wr_u32le(buf + 32 + 4 * i, (uint32_t)tok[i]);
    sjks_sha256_once(buf, sizeof buf, c2);
    CHECK(!memcmp(c1, c2, 32));

    size_t n = sjks_value_nbytes(2, 16);
    CHECK(n == 136 + 512 + 48 + 16 + 4);
    uint8_t v[800];
    size_t po = sjks_value_payload_offset(2);
    CHECK(po == 696);
    for (int i = 0; i < 16; i++) v[po + i] = (uint8_t)(0xC0 + i);
    CHECK(sjks_value_seal(&m, v, n) == SJK_OK);
    CHECK(sjks_value_seal(&m, v, n - 1) == SJK_ERR_BUFFER);
    CHECK(!memcmp(v, "SJKSTORE", 8));
    CHECK(sjk_rd_u32le(v + 8) == 1 && sjk_rd_u32le(v + 12) == 0 && sjk_rd_u32le(v + 16) == 5);
    CHECK(sjk_rd_u32le(v + 20) == 128 && sjk_rd_u32le(v + 24) == 2 && sjk_rd_u32le(v + 32) == 16);
    CHECK(v[40] == 0 && v[72] == 0x40 && v[104] == 0xAA && sjk_rd_u32le(v + 136) == 1000);
    CHECK(sjk_rd_u32le(v + 648) == 3 && sjk_rd_u32le(v + 652) == 0 && sjk_rd_u32le(v + 656) == 0 &&
          sjk_rd_u32le(v + 664) == 10);
    CHECK(sjk_rd_u32le(v + 672) == 3 && sjk_rd_u32le(v + 676) == 1 && sjk_rd_u32le(v + 680) == 10 &&
          sjk_rd_u32le(v + 688) == 6);
    CHECK(sjk_rd_u32le(v + n - 4) == sjk_crc32c(0, v, n - 4));
    CHECKF(sjk_rd_u32le(v + n - 4) == 0x648E1B85u, "CRC %08x: the value format changed (docs/FORMAT.md)",
           sjk_rd_u32le(v + n - 4));
    const uint8_t *pay;
    size_t pn;
    const char *why;
    CHECK(sjks_value_verify(&m, v, n, &pay, &pn, &why) == SJK_OK && pay == v + po && pn == 16);
}

TEST(test_value_refusals_name_the_field)
{
    uint8_t fp[32], parent[32], chain[32];
    int32_t tok[128];
    sjkh_block_piece pc[2];
    sjks_value_meta m;
    fill_meta(&m, fp, parent, chain, tok, pc);
    size_t n = sjks_value_nbytes(2, 16);
    uint8_t v[800], w[800];
    memset(v, 0x11, sizeof v);
    CHECK(sjks_value_seal(&m, v, n) == SJK_OK);
    const uint8_t *pay;
    size_t pn;
    const char *why = NULL;
    /* every single flipped byte is refused */
    int all = 1;
    for (size_t i = 0; i < n; i++) {
        memcpy(w, v, n);
        w[i] ^= 0x20;
        if (sjks_value_verify(&m, w, n, &pay, &pn, &why) == SJK_OK) all = 0;
    }
    CHECK(all);
    CHECK(sjks_value_verify(&m, v, n - 1, &pay, &pn, &why) == SJK_ERR_CORRUPT && !strcmp(why, "size"));
    CHECK(sjks_value_verify(&m, v, 10, &pay, &pn, &why) == SJK_ERR_FORMAT);
    /* a well-formed value for another fingerprint, token list or block: a mismatch */
    uint8_t fp2[32];
    memcpy(fp2, fp, 32);
    fp2[31] ^= 1;
    sjks_value_meta m2 = m;
    m2.fingerprint = fp2;
    CHECK(sjks_value_seal(&m2, w, n) == SJK_OK);
    CHECK(sjks_value_verify(&m, w, n, &pay, &pn, &why) == SJK_ERR_MISMATCH && !strcmp(why, "fingerprint"));
    int32_t tok2[128];
    memcpy(tok2, tok, sizeof tok);
    tok2[127]++;
    m2 = m;
    m2.tokens = tok2;
    CHECK(sjks_value_seal(&m2, w, n) == SJK_OK);
    CHECK(sjks_value_verify(&m, w, n, &pay, &pn, &why) == SJK_ERR_MISMATCH && !strcmp(why, "token ids"));
    m2 = m;
    m2.block = 6;
    CHECK(sjks_value_seal(&m2, w, n) == SJK_OK);
    CHECK(sjks_value_verify(&m, w, n, &pay, &pn, &why) == SJK_ERR_MISMATCH);
    /* a different layout (another cache configuration's pieces) */
    sjkh_block_piece pc2[2] = {{3, 0, 12}, {3, 1, 4}};
    m2 = m;
    m2.pieces = pc2;
    CHECK(sjks_value_seal(&m2, w, n) == SJK_OK);
    CHECK(sjks_value_verify(&m, w, n, &pay, &pn, &why) == SJK_ERR_CORRUPT && !strcmp(why, "offset table"));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static redisReply *cmd3(sjks_redis *r, const char *a0, const char *a1, const char *a2)
{
    const char *av[3] = {a0, a1, a2};
    size_t al[3] = {strlen(a0), strlen(a1), a2 ? strlen(a2) : 0};
    return sjks_redis_cmd(r, a2 ? 3 : 2, av, al);
}

static int reply_is(redisReply *rep, int type, const char *str)
{
    int ok = rep && rep->type == type && (!str || (rep->str && !strcmp(rep->str, str)));
    if (rep) freeReplyObject(rep);
    return ok;
}

TEST(test_single_node_pipeline_down_and_hung)
{
    if (!redis_available()) SKIP("redis-server is not installed (apt-get install redis-server)");
    redis_proc rp;
    CHECK(redis_proc_start(&rp, NULL));
    if (!rp.pid) return;
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout_ms=300", rp.port);
    sjks_redis *r = NULL;
    char err[200];
    CHECK(sjks_redis_open("redis://nohost", &r, err, sizeof err) == SJK_ERR_PARAM && r == NULL);
    CHECK(sjks_redis_open("redis://h:99999", &r, err, sizeof err) == SJK_ERR_PARAM);
    CHECK(sjks_redis_open(url, &r, err, sizeof err) == SJK_OK);
    CHECK(reply_is(cmd3(r, "SET", "k", "v"), REDIS_REPLY_STATUS, "OK"));
    CHECK(reply_is(cmd3(r, "GET", "k", NULL), REDIS_REPLY_STRING, "v"));
    CHECK(!sjks_redis_is_cluster(r));
    /* 200 commands in one pipeline, replies in order */
    enum { N = 200 };
    int argc[N];
    const char *argv[N][2];
    size_t alen[N][2];
    const char *const *avp[N];
    const size_t *alp[N];
    char keys[N][16];
    redisReply *rep[N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], i % 2 ? "k" : "absent%d", i);
        argc[i] = 2;
        argv[i][0] = "EXISTS";
        argv[i][1] = keys[i];
        alen[i][0] = 6;
        alen[i][1] = strlen(keys[i]);
        avp[i] = argv[i];
        alp[i] = alen[i];
    }
    CHECK(sjks_redis_run(r, N, argc, avp, alp, rep) == N);
    int in_order = 1;
    for (int i = 0; i < N; i++) {
        in_order &= rep[i] && rep[i]->type == REDIS_REPLY_INTEGER && rep[i]->integer == (i % 2);
        if (rep[i]) freeReplyObject(rep[i]);
    }
    CHECK(in_order);
    /* hung (SIGSTOP): the connection is open but nothing answers: one timeout, bounded */
    kill(rp.pid, SIGSTOP);
    double t0 = now_s();
    CHECK(cmd3(r, "GET", "k", NULL) == NULL);
    double t1 = now_s();
    CHECKF(t1 - t0 < 1.5, "a hung node took %.2f s (timeout 0.3 s)", t1 - t0);
    CHECK(cmd3(r, "GET", "k", NULL) == NULL); /* skipped for a second: immediate */
    CHECKF(now_s() - t1 < 0.1, "a failed node is retried at once");
    kill(rp.pid, SIGCONT);
    struct timespec ts = {1, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CHECK(reply_is(cmd3(r, "GET", "k", NULL), REDIS_REPLY_STRING, "v")); /* back */
    /* down: connection refused, bounded */
    redis_proc_stop(&rp);
    nanosleep(&ts, NULL);
    t0 = now_s();
    CHECK(cmd3(r, "GET", "k", NULL) == NULL);
    CHECKF(now_s() - t0 < 1.0, "a dead node took %.2f s", now_s() - t0);
    sjks_redis_stats s;
    sjks_redis_get_stats(r, &s);
    CHECK(s.failures >= 3);
    sjks_redis_close(r);
}

/* ---- a three-node cluster ---------------------------------------------------------- */

static int run_cmd(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Starts three cluster-enabled nodes and joins them with redis-cli --cluster create. */
static int cluster_start(redis_proc rp[3])
{
    static const char *const extra[] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                        "--cluster-node-timeout", "2000", NULL};
    for (int i = 0; i < 3; i++)
        if (!redis_proc_start(&rp[i], extra)) return 0;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "redis-cli --cluster create 127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d --cluster-replicas 0 "
             "--cluster-yes >/dev/null 2>&1",
             rp[0].port, rp[1].port, rp[2].port);
    if (run_cmd(cmd) != 0) return 0;
    for (int t = 0; t < 100; t++) {
        int ok = 1;
        for (int i = 0; i < 3; i++) {
            snprintf(cmd, sizeof cmd, "redis-cli -p %d cluster info 2>/dev/null | grep -q 'cluster_state:ok'",
                     rp[i].port);
            ok &= run_cmd(cmd) == 0;
        }
        if (ok) return 1;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* The index of the node that owns `slot` (from CLUSTER SLOTS) and every node's id. */
static int node_of_slot(redis_proc rp[3], uint32_t slot, char id[3][64])
{
    int owner = -1;
    for (int i = 0; i < 3; i++) {
        redisContext *c = redisConnect("127.0.0.1", rp[i].port);
        if (!c || c->err) {
            if (c) redisFree(c);
            return -1;
        }
        redisReply *r = redisCommand(c, "CLUSTER MYID");
        snprintf(id[i], 64, "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "");
        if (r) freeReplyObject(r);
        if (i == 0 && (r = redisCommand(c, "CLUSTER SLOTS")) && r->type == REDIS_REPLY_ARRAY) {
            for (size_t k = 0; k < r->elements; k++) {
                redisReply *e = r->element[k];
                if (e->elements >= 3 && (long long)slot >= e->element[0]->integer &&
                    (long long)slot <= e->element[1]->integer)
                    for (int j = 0; j < 3; j++)
                        if (e->element[2]->element[1]->integer == rp[j].port) owner = j;
            }
        }
        if (i == 0 && r) freeReplyObject(r);
        redisFree(c);
    }
    return owner;
}

TEST(test_cluster_redirects_ask_and_moved)
{
    if (!redis_available()) SKIP("redis-server is not installed (apt-get install redis-server)");
    redis_proc rp[3];
    memset(rp, 0, sizeof rp);
    sjks_redis *r = NULL;
    int up = cluster_start(rp);
    CHECKF(up, "three-node cluster did not form");
    if (!up) goto out;
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?timeout_ms=1000", rp[0].port); /* one seed: discovery */
    char err[200];
    CHECK(sjks_redis_open(url, &r, err, sizeof err) == SJK_OK);
    if (!r) goto out;
    /* keys spread over the three nodes */
    int all_ok = 1;
    for (int i = 0; i < 60; i++) {
        char k[32], v[32];
        snprintf(k, sizeof k, "key-%d", i);
        snprintf(v, sizeof v, "val-%d", i);
        all_ok &= reply_is(cmd3(r, "SET", k, v), REDIS_REPLY_STATUS, "OK");
    }
    for (int i = 0; i < 60; i++) {
        char k[32], v[32];
        snprintf(k, sizeof k, "key-%d", i);
        snprintf(v, sizeof v, "val-%d", i);
        all_ok &= reply_is(cmd3(r, "GET", k, NULL), REDIS_REPLY_STRING, v);
    }
    CHECK(all_ok);
    CHECK(sjks_redis_is_cluster(r));
    sjks_redis_stats s0;
    sjks_redis_get_stats(r, &s0);
    CHECK(s0.moved == 0); /* the slot map came from CLUSTER SLOTS */
    /* migrate the slot of {t} from its owner A to another node B under the client */
    uint32_t slot = sjks_redis_slot("{t}a", 4);
    char id[3][64];
    int a = node_of_slot(rp, slot, id), b = (a + 1) % 3;
    CHECKF(a >= 0, "owner of slot %u not found", slot);
    if (a < 0) goto out;
    CHECK(reply_is(cmd3(r, "SET", "{t}a", "one"), REDIS_REPLY_STATUS, "OK"));
    char cmd[512];
    snprintf(cmd, sizeof cmd, "redis-cli -p %d cluster setslot %u importing %s >/dev/null && "
             "redis-cli -p %d cluster setslot %u migrating %s >/dev/null",
             rp[b].port, slot, id[a], rp[a].port, slot, id[b]);
    CHECK(run_cmd(cmd) == 0);
    /* a new key of a migrating slot: A answers ASK, the client asks B */
    CHECK(reply_is(cmd3(r, "SET", "{t}b", "two"), REDIS_REPLY_STATUS, "OK"));
    CHECK(reply_is(cmd3(r, "GET", "{t}b", NULL), REDIS_REPLY_STRING, "two"));
    CHECK(reply_is(cmd3(r, "GET", "{t}a", NULL), REDIS_REPLY_STRING, "one")); /* still on A */
    sjks_redis_stats s1;
    sjks_redis_get_stats(r, &s1);
    CHECKF(s1.ask >= 2, "%llu ASK redirects", (unsigned long long)s1.ask);
    /* finish the move: the client's map is now stale and A answers MOVED */
    snprintf(cmd, sizeof cmd,
             "redis-cli -p %d migrate 127.0.0.1 %d '{t}a' 0 5000 >/dev/null && "
             "for p in %d %d %d; do redis-cli -p $p cluster setslot %u node %s >/dev/null || exit 1; done",
             rp[a].port, rp[b].port, rp[0].port, rp[1].port, rp[2].port, slot, id[b]);
    CHECK(run_cmd(cmd) == 0);
    CHECK(reply_is(cmd3(r, "GET", "{t}a", NULL), REDIS_REPLY_STRING, "one"));
    CHECK(reply_is(cmd3(r, "GET", "{t}b", NULL), REDIS_REPLY_STRING, "two"));
    sjks_redis_stats s2;
    sjks_redis_get_stats(r, &s2);
    CHECKF(s2.moved == s1.moved + 1, "%llu MOVED (one expected: the map is updated)", (unsigned long long)s2.moved);
out:
    sjks_redis_close(r);
    for (int i = 0; i < 3; i++) redis_proc_stop(&rp[i]);
}

int main(void)
{
    RUN(test_sha256_fips_vectors);
    RUN(test_cluster_slot_crc16);
    RUN(test_value_format_is_pinned);
    RUN(test_value_refusals_name_the_field);
    RUN(test_single_node_pipeline_down_and_hung);
    RUN(test_cluster_redirects_ask_and_moved);
    return test_summary();
}
