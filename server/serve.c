/* serve.c — boot and shutdown of `sjkvarn serve`.
 *
 * Boot: SIGINT/SIGTERM are blocked in every thread (the main thread takes them with
 * sigwait), the model and tokenizer are loaded once, --parallel sessions are created with
 * the configuration tools/cmd_serve.c chose, their caches are measured (a --mem-budget the
 * real allocation exceeds refuses the start, saying what fits), then the engine and the
 * HTTP daemon start and one line gives the address.
 *
 * Shutdown on SIGINT/SIGTERM: stop accepting, cancel running jobs at their next token (a
 * stream gets an error event and [DONE], a waiting request 503), wait (bounded) for the
 * connections to drain, free everything, exit 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefix_store.h"
#include "server.h"
#include "sjkplan.h"

srv_opts srv_opts_default(void)
{
    srv_opts o;
    memset(&o, 0, sizeof o);
    o.kv = "f16";
    o.host = "127.0.0.1";
    o.port = 8080;
    o.n_ctx = 4096;
    o.n_batch = 512;
    o.n_threads = 1;
    o.parallel = 1;
    o.window_type = SJKH_WINDOW_F16;
    o.max_body_nbytes = 1u << 20;
    o.max_tokens_default = 256;
    o.sse_ping_s = 10;
    return o;
}

static void srv_free(srv *S)
{
    sjks_store_close(S->store);
    srv_slots_free(S);
    sjkh_tokenizer_free(S->tok);
    sjkh_model_free(S->model);
    srv_metrics_destroy(&S->metrics);
    pthread_cond_destroy(&S->cv);
    pthread_mutex_destroy(&S->mu);
    free(S);
}

/* The prefix store for sessions as slots.c creates them (the fingerprint reads every
 * tensor byte once). No connection is made here: a store that is down at boot is a
 * store that misses. */
static int open_store(srv *S, char *err, size_t err_cap)
{
    const sjkh_session_params p = srv_session_params(S);
    double t0 = srv_now();
    if (sjks_store_open(S->o.prefix_store, S->model, &p, S->o.prefix_store_ttl, &S->store, err, err_cap))
        return -1;
    const uint8_t *fp = sjks_store_fingerprint(S->store);
    fprintf(stderr, "sjkvarn serve: prefix store %s, blocks kept %u s, fingerprint %02x%02x%02x%02x%02x%02x%02x%02x "
            "(%.2f s)\n", S->o.prefix_store, S->o.prefix_store_ttl ? S->o.prefix_store_ttl : 86400u, fp[0], fp[1],
            fp[2], fp[3], fp[4], fp[5], fp[6], fp[7], srv_now() - t0);
    return 0;
}

int srv_main(const srv_opts *o, const char *model_path, const char *kv_reason, size_t kv_planned_nbytes)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    srv *S = calloc(1, sizeof *S);
    if (!S) return 1;
    S->o = *o;
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->cv, NULL);
    srv_metrics_init(&S->metrics);
    S->t_start = srv_now();
    snprintf(S->model_path, sizeof S->model_path, "%s", model_path);
    snprintf(S->kv, sizeof S->kv, "%s", o->kv);
    snprintf(S->kv_reason, sizeof S->kv_reason, "%s", kv_reason ? kv_reason : "");
    S->kv_planned_nbytes = kv_planned_nbytes;
    const char *base = strrchr(model_path, '/');
    snprintf(S->model_id, sizeof S->model_id, "%s", o->alias ? o->alias : base ? base + 1 : model_path);

    int rc = 1;
    char err[1024] = "";
    double t0 = srv_now();
    if (sjkh_model_load(model_path, &S->model, err, sizeof err)) {
        fprintf(stderr, "sjkvarn serve: %s\n", err);
        goto done;
    }
    S->info = sjkh_model_get_info(S->model);
    if (sjkh_tokenizer_from_gguf(sjkh_model_gguf(S->model), &S->tok, err, sizeof err)) {
        fprintf(stderr, "sjkvarn serve: tokenizer: %s\n", err);
        goto done;
    }
    if (o->n_ctx > S->info->n_ctx_train) {
        fprintf(stderr, "sjkvarn serve: --ctx %u exceeds the model's context length %u\n", o->n_ctx,
                S->info->n_ctx_train);
        goto done;
    }
    sjk_status st = srv_slots_create(S, err, sizeof err);
    if (st) {
        fprintf(stderr, "sjkvarn serve: cannot create %u sessions of context %u with --kv %s: %s (%s)\n", o->parallel,
                o->n_ctx, S->kv, err, sjk_status_str(st));
        goto done;
    }
    char b_alloc[32], b_budget[32], b_one[32];
    sjkh_format_size(S->kv_allocated_nbytes, b_alloc, sizeof b_alloc);
    size_t per = S->kv_allocated_nbytes / o->parallel;
    sjkh_format_size(per, b_one, sizeof b_one);
    if (o->mem_budget) {
        size_t budget = o->mem_budget_nbytes;
        sjkh_format_size(budget, b_budget, sizeof b_budget);
        if (S->kv_allocated_nbytes > budget) {
            fprintf(stderr,
                    "sjkvarn serve: refusing to start: %u sessions at context %u with --kv %s allocate %s of KV "
                    "(%s each), more than --mem-budget %s; --parallel %zu would fit\n",
                    o->parallel, o->n_ctx, S->kv, b_alloc, b_one, b_budget, per ? budget / per : (size_t)0);
            goto done;
        }
    }
    fprintf(stderr, "sjkvarn serve: %s (%s, %u layers), loaded in %.2f s; %u sessions x context %u, kv %s: %s KV "
            "allocated (%s each)%s%s\n", model_path, S->info->arch_name, S->info->n_layers, srv_now() - t0,
            o->parallel, o->n_ctx, S->kv, b_alloc, b_one, o->mem_budget ? " within --mem-budget " : "",
            o->mem_budget ? b_budget : "");
    fprintf(stderr, "sjkvarn serve: kv: %s\n", S->kv_reason);
    if (o->prefix_store && open_store(S, err, sizeof err)) {
        fprintf(stderr, "sjkvarn serve: --prefix-store: %s\n", err);
        goto done;
    }
    if (srv_engine_start(S)) {
        fprintf(stderr, "sjkvarn serve: cannot start the engine thread\n");
        goto done;
    }
    if (srv_http_start(S, err, sizeof err)) {
        fprintf(stderr, "sjkvarn serve: %s\n", err);
        srv_engine_stop(S);
        goto done;
    }
    S->ready = 1;
    printf("sjkvarn serve: listening on http://%s:%u (model id '%s'%s)\n", o->host, S->port, S->model_id,
           o->api_key ? ", API key required" : "");
    fflush(stdout);

    int sig = 0;
    if (sigwait(&set, &sig) != 0) sig = SIGTERM;
    fprintf(stderr, "sjkvarn serve: %s: stopping (no new connections; running requests are cancelled)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    srv_http_quiesce(S);
    srv_engine_stop(S);
    srv_http_stop(S);
    fprintf(stderr, "sjkvarn serve: stopped\n");
    rc = 0;
done:
    srv_free(S);
    return rc;
}
