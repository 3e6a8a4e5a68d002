/* eval_host.c — binds the KL study's driver (sjkeval.h) to the host (sjkhost.h): one
 * model, one tokenizer, and one session per cache configuration, created and freed by
 * the driver as it goes. The reference is a session whose growing layers use the
 * library's "f16" cache; candidates use their configuration string as it is.
 *
 * Bits per value come from the session's KV report: occupied as the report gives it;
 * allocated = the bytes the growing layers' cache allocates for K/V (sink, record slots
 * with their headers and scales, the whole staging ring, centering means, uniform rows,
 * host fp16 rows) plus the scratch only compressed layers need (seal tiles and record
 * scratch, sjk_cache_memory.seal_scratch_nbytes), over the values the session can hold
 * (n_ctx positions x 2 (K and V) x global layers x KV heads x head_dim). Left out: the
 * attention buffers (rotated queries, partial softmax states), whose size is set by the
 * prefill batch and the thread count and is the same for every configuration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval_backends.h"
#include "sjkhost.h"

typedef struct host_state {
    sjkh_model *model;
    sjkh_tokenizer *tok;
    const sjkh_model_info *info;
    unsigned n_threads;
    unsigned act_quant; /* sjkh_session_params.act_quant for new sessions (default 0) */
    uint32_t window_type; /* sjkh_session_params.window_type for new sessions (default f16) */
    char err[512];
    char desc[256];
} host_state;

typedef struct host_ctx {
    sjkh_session *s;
    uint32_t n_ctx;
} host_ctx;

static sjk_status h_tokenize(void *user, const char *text, size_t n, int add_bos,
                             int32_t *tokens, size_t cap, size_t *n_out)
{
    host_state *h = user;
    sjk_status s = sjkh_tokenizer_encode(h->tok, text, n, add_bos ? SJKH_TOKENIZE_ADD_SPECIAL : 0,
                                         tokens, cap, n_out);
    if (s == SJK_ERR_BUFFER) return SJK_OK; /* *n_out says how many; the driver retries */
    if (s != SJK_OK) snprintf(h->err, sizeof h->err, "tokenizer: %s", sjk_status_str(s));
    return s;
}

static sjk_status h_create(void *user, const char *kv, size_t n_ctx, void **out)
{
    host_state *h = user;
    host_ctx *c = calloc(1, sizeof *c);
    if (!c) return SJK_ERR_NOMEM;
    sjkh_session_params p = sjkh_session_params_default();
    p.n_ctx = (uint32_t)n_ctx;
    p.n_threads = h->n_threads;
    p.kv = kv;
    p.act_quant = h->act_quant;
    p.window_type = h->window_type;
    char e[256] = "";
    sjk_status s = sjkh_session_create(h->model, &p, &c->s, e, sizeof e);
    if (s != SJK_OK) {
        snprintf(h->err, sizeof h->err, "session with cache '%s': %s", kv, e[0] ? e : sjk_status_str(s));
        free(c);
        return s;
    }
    c->n_ctx = (uint32_t)n_ctx;
    *out = c;
    return SJK_OK;
}

static void h_free(void *user, void *ctx)
{
    (void)user;
    host_ctx *c = ctx;
    if (!c) return;
    sjkh_session_free(c->s);
    free(c);
}

static sjk_status h_feed(void *user, void *ctx, const int32_t *tokens, size_t n, float *logits)
{
    host_state *h = user;
    host_ctx *c = ctx;
    char e[256] = "";
    sjk_status s = sjkh_session_feed(c->s, tokens, n, logits, 0, e, sizeof e);
    if (s != SJK_OK) snprintf(h->err, sizeof h->err, "forward pass: %s", e[0] ? e : sjk_status_str(s));
    return s;
}

static sjk_status h_memory(void *user, void *ctx, sjk_eval_mem *m)
{
    host_state *h = user;
    host_ctx *c = ctx;
    sjkh_kv_report r;
    sjk_status s = sjkh_session_kv_report(c->s, &r);
    if (s != SJK_OK) return s;
    double values = (double)c->n_ctx * 2.0 * (double)h->info->n_global_layers *
                    (double)h->info->n_head_kv * (double)h->info->head_dim;
    size_t kv_nbytes = r.growing_nbytes;
    sjk_cache *cache = sjkh_session_cache(c->s);
    if (cache) {
        sjk_cache_memory cm;
        if ((s = sjk_cache_memory_report(cache, &cm)) != SJK_OK) return s;
        kv_nbytes = r.growing_nbytes - cm.total_nbytes + cm.sink_nbytes + cm.body_nbytes + cm.ring_nbytes +
                    cm.uniform_nbytes + cm.seal_scratch_nbytes;
    }
    m->bpv_occupied = r.bits_per_value;
    m->bpv_allocated = values > 0 ? 8.0 * (double)kv_nbytes / values : 0.0;
    m->kv_bytes = r.growing_nbytes;
    return SJK_OK;
}

static const char *h_last_error(void *user) { return ((host_state *)user)->err; }

sjk_status sjk_eval_host_open(const char *model_path, unsigned n_threads, sjk_eval_backend *be,
                              void **state, char *err, size_t err_cap)
{
    *state = NULL;
    host_state *h = calloc(1, sizeof *h);
    if (!h) return SJK_ERR_NOMEM;
    char e[256] = "";
    sjk_status s = sjkh_model_load(model_path, &h->model, e, sizeof e);
    if (s != SJK_OK) {
        snprintf(err, err_cap, "%s: %s", model_path, e[0] ? e : sjk_status_str(s));
        free(h);
        return s;
    }
    s = sjkh_tokenizer_from_gguf(sjkh_model_gguf(h->model), &h->tok, e, sizeof e);
    if (s != SJK_OK) {
        snprintf(err, err_cap, "%s: tokenizer: %s", model_path, e[0] ? e : sjk_status_str(s));
        sjkh_model_free(h->model);
        free(h);
        return s;
    }
    h->info = sjkh_model_get_info(h->model);
    h->n_threads = n_threads ? n_threads : 1;
    snprintf(h->desc, sizeof h->desc, "%s, %u layers (%u with a growing cache), %u KV head(s) "
             "of D = %u, vocabulary %u, context %u",
             h->info->arch_name, h->info->n_layers, h->info->n_global_layers,
             h->info->n_head_kv, h->info->head_dim, h->info->n_vocab, h->info->n_ctx_train);
    memset(be, 0, sizeof *be);
    be->user = h;
    be->n_vocab = h->info->n_vocab;
    be->n_ctx_max = h->info->n_ctx_train;
    be->tokenize = h_tokenize;
    be->ctx_create = h_create;
    be->ctx_free = h_free;
    be->ctx_feed = h_feed;
    be->ctx_memory = h_memory;
    be->last_error = h_last_error;
    *state = h;
    return SJK_OK;
}

void sjk_eval_host_close(void *state)
{
    host_state *h = state;
    if (!h) return;
    sjkh_tokenizer_free(h->tok);
    sjkh_model_free(h->model);
    free(h);
}

const char *sjk_eval_host_describe(void *state) { return state ? ((host_state *)state)->desc : ""; }

void sjk_eval_host_set_act_quant(void *state, unsigned act_quant)
{
    if (state) ((host_state *)state)->act_quant = act_quant;
}

void sjk_eval_host_set_window(void *state, uint32_t window_type)
{
    if (state) ((host_state *)state)->window_type = window_type;
}
