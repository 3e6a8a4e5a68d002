/* redis.c — the prefix store's Redis client: nodes, the cluster slot map, pipelines and
 * redirects (redis.h says what it promises). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include "redis.h"

#define MAX_NODES 64
#define N_SLOTS 16384
#define MAX_REDIRECTS 5
#define RETRY_AFTER_S 1.0

typedef struct node {
    char host[256];
    int port;
    redisContext *c;
    double retry_at; /* monotonic seconds: skipped until then after a failure */
} node;

struct sjks_redis {
    node nodes[MAX_NODES];
    int n_nodes;
    int n_seeds;
    int16_t slots[N_SLOTS]; /* node index per slot, -1 unknown */
    int map_loaded, cluster;
    int timeout_ms;
    sjks_redis_stats st;
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint32_t sjks_redis_slot(const char *key, size_t n)
{
    size_t s = 0, e = n;
    for (size_t i = 0; i < n; i++)
        if (key[i] == '{') {
            for (size_t j = i + 1; j < n; j++)
                if (key[j] == '}') {
                    if (j > i + 1) s = i + 1, e = j;
                    break;
                }
            break;
        }
    uint16_t crc = 0; /* CRC16-CCITT (XMODEM): polynomial 0x1021, initial 0, no reflection */
    for (size_t i = s; i < e; i++) {
        crc ^= (uint16_t)((uint8_t)key[i] << 8);
        for (int b = 0; b < 8; b++) crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc % N_SLOTS;
}

static int node_find_or_add(sjks_redis *r, const char *host, size_t hlen, int port)
{
    for (int i = 0; i < r->n_nodes; i++)
        if (r->nodes[i].port == port && strlen(r->nodes[i].host) == hlen && !memcmp(r->nodes[i].host, host, hlen))
            return i;
    if (r->n_nodes == MAX_NODES || hlen >= sizeof r->nodes[0].host) return -1;
    node *nd = &r->nodes[r->n_nodes];
    memcpy(nd->host, host, hlen);
    nd->host[hlen] = 0;
    nd->port = port;
    nd->c = NULL;
    nd->retry_at = 0;
    return r->n_nodes++;
}

sjk_status sjks_redis_open(const char *url, sjks_redis **out, char *err, size_t err_cap)
{
    *out = NULL;
    if (!url || !*url) {
        if (err && err_cap) snprintf(err, err_cap, "empty store URL");
        return SJK_ERR_PARAM;
    }
    sjks_redis *r = calloc(1, sizeof *r);
    if (!r) return SJK_ERR_NOMEM;
    for (int i = 0; i < N_SLOTS; i++) r->slots[i] = -1;
    r->timeout_ms = 500;
    const char *p = url;
    if (!strncmp(p, "redis://", 8)) p += 8;
    const char *q = strchr(p, '?');
    size_t hosts_len = q ? (size_t)(q - p) : strlen(p);
    if (q) {
        int v = 0;
        if (sscanf(q, "?timeout_ms=%d", &v) != 1 || v < 1 || v > 60000) goto bad;
        r->timeout_ms = v;
    }
    for (size_t i = 0; i < hosts_len;) {
        size_t j = i;
        while (j < hosts_len && p[j] != ',') j++;
        const char *colon = NULL;
        for (size_t k = i; k < j; k++)
            if (p[k] == ':') colon = p + k;
        if (!colon || colon == p + i) goto bad;
        char port_s[8] = "";
        size_t pl = (size_t)(p + j - colon - 1);
        if (pl == 0 || pl >= sizeof port_s) goto bad;
        memcpy(port_s, colon + 1, pl);
        char *endp;
        long port = strtol(port_s, &endp, 10);
        if (*endp || port < 1 || port > 65535) goto bad;
        if (node_find_or_add(r, p + i, (size_t)(colon - p - i), (int)port) < 0) goto bad;
        i = j + 1;
    }
    if (!r->n_nodes) goto bad;
    r->n_seeds = r->n_nodes;
    *out = r;
    return SJK_OK;
bad:
    if (err && err_cap) snprintf(err, err_cap, "store URL '%s': expected redis://HOST:PORT[,HOST:PORT...][?timeout_ms=N]", url);
    free(r);
    return SJK_ERR_PARAM;
}

void sjks_redis_close(sjks_redis *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_nodes; i++)
        if (r->nodes[i].c) redisFree(r->nodes[i].c);
    free(r);
}

static void node_fail(node *nd)
{
    if (nd->c) redisFree(nd->c);
    nd->c = NULL;
    nd->retry_at = mono_s() + RETRY_AFTER_S;
}

/* A live connection to node i, or NULL (connect failed or the node is being skipped). */
static redisContext *node_conn(sjks_redis *r, int i)
{
    node *nd = &r->nodes[i];
    if (nd->c) return nd->c;
    if (mono_s() < nd->retry_at) return NULL;
    struct timeval tv = {r->timeout_ms / 1000, (r->timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(nd->host, nd->port, tv);
    r->st.connects++;
    if (!c || c->err || redisSetTimeout(c, tv) != REDIS_OK) {
        if (c) redisFree(c);
        node_fail(nd);
        return NULL;
    }
    nd->c = c;
    return c;
}

/* Loads the slot map from the first node that answers CLUSTER SLOTS. */
static void load_map(sjks_redis *r)
{
    for (int i = 0; i < r->n_nodes && !r->map_loaded; i++) {
        redisContext *c = node_conn(r, i);
        if (!c) continue;
        redisReply *rep = redisCommand(c, "CLUSTER SLOTS");
        r->st.commands++;
        if (!rep) {
            node_fail(&r->nodes[i]);
            continue;
        }
        if (rep->type == REDIS_REPLY_ERROR) { /* no cluster support: this node serves all */
            for (int s = 0; s < N_SLOTS; s++) r->slots[s] = (int16_t)i;
            r->map_loaded = 1;
            r->cluster = 0;
        } else if (rep->type == REDIS_REPLY_ARRAY) {
            for (size_t k = 0; k < rep->elements; k++) {
                redisReply *e = rep->element[k];
                if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
                    e->element[1]->type != REDIS_REPLY_INTEGER || e->element[2]->type != REDIS_REPLY_ARRAY ||
                    e->element[2]->elements < 2 || e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
                    e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
                    continue;
                long long lo = e->element[0]->integer, hi = e->element[1]->integer;
                redisReply *m = e->element[2];
                const char *host = m->element[0]->str;
                size_t hl = m->element[0]->len;
                if (hl == 0) host = r->nodes[i].host, hl = strlen(host); /* "" = the node asked */
                int ni = node_find_or_add(r, host, hl, (int)m->element[1]->integer);
                if (ni < 0 || lo < 0 || hi >= N_SLOTS || lo > hi) continue;
                for (long long s = lo; s <= hi; s++) r->slots[s] = (int16_t)ni;
            }
            r->map_loaded = 1;
            r->cluster = 1;
        }
        freeReplyObject(rep);
    }
}

static int route(sjks_redis *r, const char *key, size_t n)
{
    if (!r->map_loaded) load_map(r);
    int ni = r->slots[sjks_redis_slot(key, n)];
    return ni >= 0 ? ni : 0;
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK ...": 1 = moved, 2 = ask, with the node; 0 otherwise. */
static int redirect(sjks_redis *r, const redisReply *rep, int *ni, uint32_t *slot)
{
    if (!rep || rep->type != REDIS_REPLY_ERROR) return 0;
    int kind = !strncmp(rep->str, "MOVED ", 6) ? 1 : !strncmp(rep->str, "ASK ", 4) ? 2 : 0;
    if (!kind) return 0;
    const char *p = rep->str + (kind == 1 ? 6 : 4);
    char *endp;
    long s = strtol(p, &endp, 10);
    if (*endp != ' ' || s < 0 || s >= N_SLOTS) return 0;
    const char *hp = endp + 1, *colon = strrchr(hp, ':');
    if (!colon) return 0;
    long port = strtol(colon + 1, &endp, 10);
    if (port < 1 || port > 65535) return 0;
    int i = node_find_or_add(r, hp, (size_t)(colon - hp), (int)port);
    if (i < 0) return 0;
    *ni = i;
    *slot = (uint32_t)s;
    return kind;
}

size_t sjks_redis_run(sjks_redis *r, size_t n, const int *argc, const char *const *const *argv,
                      const size_t *const *argvlen, redisReply **replies)
{
    int *dest = malloc(n * sizeof *dest + 1);
    for (size_t i = 0; i < n; i++) replies[i] = NULL;
    if (!dest) return 0;
    for (size_t i = 0; i < n; i++) dest[i] = route(r, argv[i][1], argvlen[i][1]);
    /* one pipeline per node: append every command, then read the replies in order */
    for (int ni = 0; ni < r->n_nodes; ni++) {
        int any = 0;
        for (size_t i = 0; i < n && !any; i++) any = dest[i] == ni;
        if (!any) continue;
        redisContext *c = node_conn(r, ni);
        size_t sent = 0;
        for (size_t i = 0; i < n && c; i++)
            if (dest[i] == ni) {
                if (redisAppendCommandArgv(c, argc[i], (const char **)argv[i], argvlen[i]) != REDIS_OK) break;
                sent++;
                r->st.commands++;
            }
        int ok = c != NULL;
        for (size_t i = 0, k = 0; i < n && ok && k < sent; i++)
            if (dest[i] == ni) {
                void *rep = NULL;
                if (redisGetReply(c, &rep) != REDIS_OK || !rep) {
                    ok = 0;
                    break;
                }
                replies[i] = rep;
                k++;
            }
        if (c && !ok) node_fail(&r->nodes[ni]);
    }
    /* redirects, one command at a time */
    for (size_t i = 0; i < n; i++) {
        for (int hop = 0; hop < MAX_REDIRECTS; hop++) {
            int ni;
            uint32_t slot;
            int kind = redirect(r, replies[i], &ni, &slot);
            if (!kind) break;
            freeReplyObject(replies[i]);
            replies[i] = NULL;
            redisContext *c = node_conn(r, ni);
            if (!c) break;
            if (kind == 1) {
                r->st.moved++;
                r->slots[slot] = (int16_t)ni;
            } else {
                r->st.ask++;
                if (redisAppendCommand(c, "ASKING") != REDIS_OK) break;
            }
            if (redisAppendCommandArgv(c, argc[i], (const char **)argv[i], argvlen[i]) != REDIS_OK) break;
            r->st.commands += kind == 2 ? 2 : 1;
            void *rep = NULL;
            if (kind == 2) {
                if (redisGetReply(c, &rep) != REDIS_OK || !rep) {
                    node_fail(&r->nodes[ni]);
                    break;
                }
                freeReplyObject(rep);
                rep = NULL;
            }
            if (redisGetReply(c, &rep) != REDIS_OK || !rep) {
                node_fail(&r->nodes[ni]);
                break;
            }
            replies[i] = rep;
        }
    }
    size_t got = 0;
    for (size_t i = 0; i < n; i++) {
        if (replies[i]) got++;
        else r->st.failures++;
    }
    /* a node that failed may have moved its slots: reload the map next time */
    if (got < n && r->cluster) {
        r->map_loaded = 0;
        for (int s = 0; s < N_SLOTS; s++) r->slots[s] = -1;
    }
    free(dest);
    return got;
}

redisReply *sjks_redis_cmd(sjks_redis *r, int argc, const char *const *argv, const size_t *argvlen)
{
    redisReply *rep = NULL;
    const char *const *av[1] = {argv};
    const size_t *al[1] = {argvlen};
    sjks_redis_run(r, 1, &argc, av, al, &rep);
    return rep;
}

void sjks_redis_get_stats(const sjks_redis *r, sjks_redis_stats *s) { *s = r->st; }
int sjks_redis_is_cluster(const sjks_redis *r) { return r->cluster; }
