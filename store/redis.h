/* redis.h — a small Redis client over hiredis for the prefix store: one node or a Redis
 * Cluster, with bounded timeouts and the cluster redirects handled here (Debian 12's
 * hiredis 0.14 has no cluster client).
 *
 * Routing: a key's slot is CRC16(key) mod 16384 (XMODEM CRC16, the `{tag}` rule of the
 * cluster specification). The slot map comes from CLUSTER SLOTS on the first node that
 * answers; a node without cluster support serves every slot. A `MOVED slot host:port`
 * reply updates the map and the command is resent there; `ASK slot host:port` sends
 * ASKING and the command to that node once, without updating the map; at most 5
 * redirects per command.
 *
 * Faults: every connect and every reply has a timeout (the URL's timeout_ms, default
 * 500 ms for replies, the same for connects); a node that fails is skipped for one second
 * before it is tried again, so a store that is down costs one timeout per second, not
 * one per command. Nothing here ever fails the caller's work: a command that gets no
 * reply yields a NULL reply. Not thread-safe: one handle per thread. */
#ifndef SJKS_REDIS_H
#define SJKS_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "sjkvarn.h"

typedef struct sjks_redis sjks_redis;

typedef struct sjks_redis_stats {
    uint64_t commands;     /* commands sent (including resends) */
    uint64_t failures;     /* commands that got no reply (connect, I/O, timeout, node skipped) */
    uint64_t moved, ask;   /* redirects followed */
    uint64_t connects;     /* connections opened */
} sjks_redis_stats;

/* Parses "redis://HOST:PORT[,HOST:PORT...][?timeout_ms=N]" (the scheme may be omitted)
 * and makes a handle; no connection is made yet. SJK_ERR_PARAM (with err) for a bad URL,
 * SJK_ERR_NOMEM. */
sjk_status sjks_redis_open(const char *url, sjks_redis **out, char *err, size_t err_cap);
void sjks_redis_close(sjks_redis *r);

/* Runs n commands as pipelines (one per node) and puts each one's reply into
 * replies[i] (free with freeReplyObject), or NULL when it got none. cmd i is
 * argv[i][0 .. argc[i]) with lengths argvlen[i]; argv[i][1] is its key. Returns the
 * number of commands that got a reply (error replies such as OOM count as replies). */
size_t sjks_redis_run(sjks_redis *r, size_t n, const int *argc, const char *const *const *argv,
                      const size_t *const *argvlen, redisReply **replies);

/* One command (argv[1] is the key), as sjks_redis_run with n = 1. */
redisReply *sjks_redis_cmd(sjks_redis *r, int argc, const char *const *argv, const size_t *argvlen);

/* The hash slot of a key (CRC16 XMODEM of the key, or of its first non-empty {tag}). */
uint32_t sjks_redis_slot(const char *key, size_t n);

void sjks_redis_get_stats(const sjks_redis *r, sjks_redis_stats *s);
/* 1 once a slot map came from CLUSTER SLOTS. */
int sjks_redis_is_cluster(const sjks_redis *r);

#endif
