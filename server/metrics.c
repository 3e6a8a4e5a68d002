/* metrics.c — GET /metrics in the Prometheus text format (version 0.0.4): request and
 * token counters, prefill and decode rates, sessions, KV bytes by region, seals and
 * prefix-cache hits. docs/SERVER.md lists every series. */
#include <stdio.h>
#include <string.h>

#include "server.h"

void srv_metrics_init(srv_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void srv_metrics_destroy(srv_metrics *m) { pthread_mutex_destroy(&m->mu); }

void srv_metrics_count(srv_metrics *m, int kind)
{
    pthread_mutex_lock(&m->mu);
    m->requests[kind]++;
    pthread_mutex_unlock(&m->mu);
}

static void series(srv_buf *o, const char *name, const char *type, const char *help)
{
    srv_buf_addf(o, "# HELP sjkvarn_%s %s\n# TYPE sjkvarn_%s %s\n", name, help, name, type);
}

static void counter(srv_buf *o, const char *name, const char *help, uint64_t v)
{
    series(o, name, "counter", help);
    srv_buf_addf(o, "sjkvarn_%s %llu\n", name, (unsigned long long)v);
}

/* The prefix store's series (all zero without --prefix-store). */
static void store_series(const srv *S, const srv_metrics *m, srv_buf *o)
{
    series(o, "store_enabled", "gauge", "1 when --prefix-store is set");
    srv_buf_addf(o, "sjkvarn_store_enabled %d\n", S->store != NULL);
    counter(o, "store_lookups_total", "prefills that looked the prompt's blocks up in the store", m->store.lookups);
    counter(o, "store_lookup_failures_total", "lookups that got no answer (store down or slow): prefilled instead",
            m->store.lookup_failures);
    counter(o, "store_hit_blocks_total", "128-token blocks imported from the store", m->store.hit_blocks);
    counter(o, "store_hit_tokens_total", "prompt positions imported from the store", m->store.hit_tokens);
    counter(o, "store_miss_blocks_total", "blocks of a lookup's prompt not imported (absent, refused, after a miss)",
            m->store.miss_blocks);
    counter(o, "store_rejected_total", "fetched values refused (vanished, corrupt, truncated, foreign): misses",
            m->store.rejected);
    counter(o, "store_fallbacks_total", "prefills that recomputed blocks because of a store fault (no answer or a "
            "refused value)", m->store_fallbacks);
    counter(o, "store_fetched_bytes_total", "value bytes fetched from the store", m->store.fetched_bytes);
    counter(o, "store_published_total", "block values written to the store", m->store.published);
    counter(o, "store_publish_exists_total", "publishes that found the block already stored (SET NX)",
            m->store.publish_exists);
    counter(o, "store_publish_failures_total", "publishes without an OK (store down, slow or full)",
            m->store.publish_failures);
    counter(o, "store_published_bytes_total", "value bytes written to the store", m->store.published_bytes);
    counter(o, "store_errors_total", "Redis commands that got no reply (connect, I/O, timeout)", m->store_errors);
    counter(o, "store_redirects_total", "Redis Cluster MOVED and ASK redirects followed", m->store_redirects);
    series(o, "store_seconds_total", "counter", "engine time in store lookups (with fetch and import) and publishes");
    srv_buf_addf(o, "sjkvarn_store_seconds_total{op=\"lookup\"} %.6f\n", m->store_lookup_s);
    srv_buf_addf(o, "sjkvarn_store_seconds_total{op=\"publish\"} %.6f\n", m->store_publish_s);
}

void srv_metrics_render(srv *S, srv_buf *o)
{
    srv_metrics m;
    pthread_mutex_lock(&S->metrics.mu);
    m = S->metrics;
    pthread_mutex_unlock(&S->metrics.mu);

    series(o, "requests_total", "counter", "HTTP requests by kind");
    static const char *const kinds[] = {"chat", "completions", "other"};
    for (int k = 0; k < 3; k++) srv_buf_addf(o, "sjkvarn_requests_total{kind=\"%s\"} %llu\n", kinds[k],
                                             (unsigned long long)m.requests[k]);
    series(o, "errors_total", "counter", "error replies by class");
    srv_buf_addf(o, "sjkvarn_errors_total{class=\"4xx\"} %llu\n", (unsigned long long)m.requests[SRV_M_4XX]);
    srv_buf_addf(o, "sjkvarn_errors_total{class=\"5xx\"} %llu\n", (unsigned long long)m.requests[SRV_M_5XX]);
    srv_buf_addf(o, "sjkvarn_errors_total{class=\"busy_503\"} %llu\n", (unsigned long long)m.requests[SRV_M_503]);
    series(o, "prompt_tokens_total", "counter", "prompt tokens of accepted requests");
    srv_buf_addf(o, "sjkvarn_prompt_tokens_total %llu\n", (unsigned long long)m.prompt_tokens);
    series(o, "prompt_tokens_cached_total", "counter", "prompt tokens reused from a session's cache");
    srv_buf_addf(o, "sjkvarn_prompt_tokens_cached_total %llu\n", (unsigned long long)m.cached_tokens);
    series(o, "prefill_tokens_total", "counter", "prompt tokens run through the model");
    srv_buf_addf(o, "sjkvarn_prefill_tokens_total %llu\n", (unsigned long long)m.prefill_tokens_run);
    series(o, "generated_tokens_total", "counter", "sampled tokens");
    srv_buf_addf(o, "sjkvarn_generated_tokens_total %llu\n", (unsigned long long)m.gen_tokens);
    series(o, "prefix_cache_hits_total", "counter", "requests that continued a session's cache");
    srv_buf_addf(o, "sjkvarn_prefix_cache_hits_total %llu\n", (unsigned long long)m.prefix_hits);
    series(o, "prefill_seconds_total", "counter", "engine time in prefill");
    srv_buf_addf(o, "sjkvarn_prefill_seconds_total %.6f\n", m.prefill_s);
    series(o, "decode_seconds_total", "counter", "engine time in batched decode steps");
    srv_buf_addf(o, "sjkvarn_decode_seconds_total %.6f\n", m.decode_s);
    series(o, "decode_steps_total", "counter", "batched decode forward passes");
    srv_buf_addf(o, "sjkvarn_decode_steps_total %llu\n", (unsigned long long)m.decode_steps);
    series(o, "decode_rows_total", "counter", "session rows over all decode passes (rows / steps = mean batch)");
    srv_buf_addf(o, "sjkvarn_decode_rows_total %llu\n", (unsigned long long)m.decode_rows);
    series(o, "prefill_tokens_per_second", "gauge", "prefill tokens per engine second, since start");
    srv_buf_addf(o, "sjkvarn_prefill_tokens_per_second %.3f\n",
                 m.prefill_s > 0 ? (double)m.prefill_tokens_run / m.prefill_s : 0.0);
    series(o, "decode_tokens_per_second", "gauge", "decoded tokens (all sessions) per engine second, since start");
    srv_buf_addf(o, "sjkvarn_decode_tokens_per_second %.3f\n", m.decode_s > 0 ? (double)m.decode_rows / m.decode_s : 0.0);
    series(o, "idle_seals_total", "counter", "idle sessions sealed back to tail_min (--idle-seal)");
    srv_buf_addf(o, "sjkvarn_idle_seals_total %llu\n", (unsigned long long)m.idle_seals);
    store_series(S, &m, o);

    size_t busy = 0, held = 0, sealed = 0, occ = 0, total = 0, win = 0;
    size_t sink = 0, body = 0, ring = 0, uni = 0, scratch = 0, hostf = 0;
    pthread_mutex_lock(&S->mu);
    for (uint32_t i = 0; i < S->o.parallel; i++) {
        const srv_slot *sl = &S->slots[i];
        busy += sl->job != NULL;
        held += sl->n_held;
        sealed += sl->sealed_positions;
        occ += sl->kv.occupied_nbytes;
        total += sl->kv.total_nbytes;
        win += sl->kv.window_nbytes;
        sink += sl->mem.sink_nbytes;
        body += sl->mem.body_nbytes;
        ring += sl->mem.ring_nbytes;
        uni += sl->mem.uniform_nbytes;
        scratch += sl->mem.scratch_nbytes;
        hostf += sl->kv.growing_nbytes - sl->mem.total_nbytes;
    }
    pthread_mutex_unlock(&S->mu);
    series(o, "sessions", "gauge", "sessions (slots) by state");
    srv_buf_addf(o, "sjkvarn_sessions{state=\"processing\"} %zu\n", busy);
    srv_buf_addf(o, "sjkvarn_sessions{state=\"idle\"} %zu\n", (size_t)S->o.parallel - busy);
    series(o, "cached_positions", "gauge", "positions held in the sessions' caches");
    srv_buf_addf(o, "sjkvarn_cached_positions %zu\n", held);
    series(o, "sealed_positions", "gauge", "positions in sealed records (sum over growing layers and sessions)");
    srv_buf_addf(o, "sjkvarn_sealed_positions %zu\n", sealed);
    series(o, "kv_bytes", "gauge", "KV memory allocated, by region (all sessions)");
    srv_buf_addf(o, "sjkvarn_kv_bytes{region=\"sink\"} %zu\n", sink);
    srv_buf_addf(o, "sjkvarn_kv_bytes{region=\"body\"} %zu\n", body);
    srv_buf_addf(o, "sjkvarn_kv_bytes{region=\"ring\"} %zu\n", ring);
    srv_buf_addf(o, "sjkvarn_kv_bytes{region=\"uniform\"} %zu\n", uni);
    srv_buf_addf(o, "sjkvarn_kv_bytes{region=\"scratch\"} %zu\n", scratch);
    srv_buf_addf(o, "sjkvarn_kv_bytes{region=\"host_f16\"} %zu\n", hostf);
    srv_buf_addf(o, "sjkvarn_kv_bytes{region=\"window\"} %zu\n", win);
    srv_buf_addf(o, "sjkvarn_kv_bytes{region=\"total\"} %zu\n", total);
    series(o, "kv_occupied_bytes", "gauge", "KV bytes holding live K/V now (all sessions)");
    srv_buf_addf(o, "sjkvarn_kv_occupied_bytes %zu\n", occ);
    series(o, "uptime_seconds", "gauge", "seconds since the server started");
    srv_buf_addf(o, "sjkvarn_uptime_seconds %.3f\n", srv_now() - S->t_start);
}
