/* prefix_store.h — a prefix store of sealed KV blocks shared through Redis
 * (docs/STORE.md). Links hiredis; used by the CLI (`sjkvarn run --prefix-store`) and the
 * server, never by libsjkvarn or libsjkhost.
 *
 * sjks_store_prefill replaces sjkh_session_feed for a prompt into a fresh session:
 *
 *   1. cut = sjkh_session_block_cut(n); chain hashes c_0 .. c_{cut-1} of the prompt
 *   2. one pipeline of EXISTS for every block's key (and its window key); hits = the
 *      leading run up to the first miss (and, with window layers, the deepest depth
 *      whose window blocks are all present)
 *   3. GET those values in pipelines of 16, verify each (value.h) before a byte enters
 *      the cache, import them; the first that fails ends the run of hits (a miss)
 *   4. feed up to the cut, seal to it, keep the window blocks the cut needs
 *   5. feed the rest (the logits of the last token come back)
 *   6. publish every block the store lacks: SET key value NX EX ttl, pipelined
 *
 * Faults never fail the prefill: a store that is down, slow (timeouts), full (an OOM
 * reply to SET) or has lost keys (eviction) is a miss or a skipped publish, logged and
 * counted; the prompt is then prefilled as without a store. Not thread-safe: one store
 * handle per thread (the server gives each worker its own). */
#ifndef SJKS_PREFIX_STORE_H
#define SJKS_PREFIX_STORE_H

#include <stdint.h>
#include <stdio.h>

#include "sjkhost.h"
#include "value.h"

typedef struct sjks_store sjks_store;

typedef struct sjks_store_stats {
    uint64_t lookups;          /* prefills that asked the store */
    uint64_t probes;           /* sjks_store_probe calls */
    uint64_t lookup_failures;  /* lookups that got no answer (store down or slow) */
    uint64_t hit_blocks;       /* blocks imported from the store */
    uint64_t hit_tokens;       /* positions they cover */
    uint64_t miss_blocks;      /* blocks of a cut that were not imported */
    uint64_t rejected;         /* fetched values refused (missing, corrupt, foreign) */
    uint64_t fetched_bytes;
    uint64_t published;        /* values written */
    uint64_t publish_exists;   /* SET NX that found the key already there */
    uint64_t publish_failures; /* SETs without an OK (store down, slow, OOM) */
    uint64_t published_bytes;
    uint64_t prefilled_tokens; /* positions computed by prefills through this store */
} sjks_store_stats;

typedef struct sjks_prefill_report {
    uint32_t cached_tokens;    /* positions imported from the store */
    uint32_t prefilled_tokens; /* positions computed */
    uint32_t published_blocks;
    double lookup_s, fetch_s, publish_s;
} sjks_prefill_report;

/* The store's fingerprint of a model and session configuration (32 bytes, SHA-256;
 * docs/STORE.md "Fingerprint"): metadata but general.*, every tensor's name, type, shape
 * and a CRC-32C of its bytes, the geometry and rope bases, the growing layers' resolved
 * cache configuration, the window storage type and the block and value format versions. Reads
 * every tensor byte once (about 0.1 s per 250 MB). SJK_ERR_PARAM for a bad kv string. */
sjk_status sjks_fingerprint(const sjkh_model *m, const sjkh_session_params *sp, uint8_t out[32]);

/* Opens a store for sessions of (m, sp): the URL as sjks_redis_open takes it
 * ("redis://HOST:PORT[,HOST:PORT...][?timeout_ms=N]"), values kept ttl_s seconds
 * (0: one day). No connection is made yet. SJK_ERR_PARAM (bad URL or kv), SJK_ERR_NOMEM. */
sjk_status sjks_store_open(const char *url, const sjkh_model *m, const sjkh_session_params *sp, uint32_t ttl_s,
                           sjks_store **out, char *err, size_t err_cap);
void sjks_store_close(sjks_store *st);
/* Where the store logs each fault (one line each); NULL silences. Default stderr. */
void sjks_store_set_log(sjks_store *st, FILE *f);
const uint8_t *sjks_store_fingerprint(const sjks_store *st);

/* Feeds ids[0..n) into s (as sjkh_session_feed with all_logits 0), through the store
 * when s is fresh (n_past 0); a session that already holds positions is fed directly.
 * Errors are the feed's own (SJK_ERR_RANGE, ...); the store never causes one. rep may be
 * NULL. */
sjk_status sjks_store_prefill(sjks_store *st, sjkh_session *s, const int32_t *ids, size_t n, float *logits,
                              sjks_prefill_report *rep, char *err, size_t err_cap);

/* The same in steps, for a caller that interleaves prefill chunks with other work (the
 * server): begin (lookup, fetch, import; sjks_prefill_cached says how many positions
 * came from the store), then repeatedly next (the chunk [pos, pos + len) to feed now,
 * at most max_len; 0 when the prompt is done), sjkh_session_feed it, fed(len); then end
 * (publishes when publish != 0 and the whole prompt was fed; frees the state). With
 * st NULL or a session that is not fresh, begin imports nothing and next hands out the
 * prompt as it is. Chunks before the cut stop at every block edge and fed seals there:
 * that is what makes the blocks canonical. */
typedef struct sjks_prefill sjks_prefill;
sjk_status sjks_prefill_begin(sjks_store *st, sjkh_session *s, const int32_t *ids, size_t n, sjks_prefill **out);
uint32_t sjks_prefill_cached(const sjks_prefill *f);
/* How many leading positions of ids the store holds now (one EXISTS pipeline, nothing
 * fetched or imported; 0 when it does not answer), for a session like s (its cut and
 * window geometry; what s holds does not matter). The server asks it when a session
 * already holds a prefix of the prompt: a store that holds more is worth a reset. */
uint32_t sjks_store_probe(sjks_store *st, const sjkh_session *s, const int32_t *ids, size_t n);
size_t sjks_prefill_next(const sjks_prefill *f, size_t max_len, size_t *pos);
sjk_status sjks_prefill_fed(sjks_prefill *f, size_t len);
void sjks_prefill_end(sjks_prefill *f, int publish, sjks_prefill_report *rep);

void sjks_store_get_stats(const sjks_store *st, sjks_store_stats *out);
/* The Redis client's counters (redirects, failures), for /metrics. */
struct sjks_redis_stats;
void sjks_store_get_redis_stats(const sjks_store *st, struct sjks_redis_stats *out);

#endif
