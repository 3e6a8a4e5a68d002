/* engine.c — the scheduler: the one thread that runs the model for every slot.
 *
 * Each step (bounded work, then the queue is looked at again):
 *   1. start new jobs (reuse the held prefix or reset), cancel jobs whose client left or
 *      when the server stops;
 *   2. prefill: one chunk of at most n_batch prompt tokens for every slot still
 *      prefilling (a long prompt does not stall the others' decoding for its whole length);
 *   3. decode: every slot with a sampled token to feed joins ONE forward pass
 *      (sjkh_session_decode_batch: the weights are read once for all of them, each row
 *      attends its own cache); a row whose cache fails ends that job with 500 and resets
 *      that session alone;
 *   4. sample, detokenize, cut at stop strings, stream the new text, finish.
 *
 * With --prefix-store, a job whose session holds none of its prompt starts with a store
 * lookup (sjks_prefill_begin: EXISTS for every block up to the cut, GET, verify, import);
 * the prompt is then prefilled from the depth reached, in chunks that stop at every
 * 128-token edge before the cut (the canonical prefill of docs/STORE.md), and once its
 * first token is out the blocks the store lacked are published. All of that runs here,
 * never on an HTTP thread; every Redis round trip is bounded by the URL's timeout_ms, and
 * a store fault only means more prefill (counted in /metrics).
 *
 * Generation follows `sjkvarn run` exactly: the same prompt chunks, the same sampler, the
 * same count (min(max_tokens, n_ctx - prompt) tokens; the last sampled token is not fed),
 * the same end-of-generation tokens, so greedy text through the server equals `run`'s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prefix_store.h"
#include "redis.h"
#include "server.h"

/* Bytes of text[0..n) that end on a complete UTF-8 sequence (a token may end inside a
 * multi-byte character; the rest comes with the next token). */
static size_t utf8_complete(const char *t, size_t n)
{
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)t[i - 1] & 0xC0) == 0x80) i--, back++;
    if (i == 0) return n;
    unsigned c = (unsigned char)t[i - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return (need > back + 1) ? i - 1 : n;
}

static void count_tokens(srv *S, size_t prompt, size_t cached, size_t gen, double prefill_s, size_t prefilled)
{
    pthread_mutex_lock(&S->metrics.mu);
    S->metrics.prompt_tokens += prompt;
    S->metrics.cached_tokens += cached;
    S->metrics.gen_tokens += gen;
    S->metrics.prefill_s += prefill_s;
    S->metrics.prefill_tokens_run += prefilled;
    pthread_mutex_unlock(&S->metrics.mu);
}

/* Copies the store's counters into the metrics (the store handle is the engine's alone,
 * so /metrics reads this copy); fallback: this prefill recomputed blocks because of a
 * store fault. */
static void store_sync(srv *S, int fallback, double lookup_s, double publish_s)
{
    if (!S->store) return;
    sjks_store_stats st;
    sjks_redis_stats rs;
    sjks_store_get_stats(S->store, &st);
    sjks_store_get_redis_stats(S->store, &rs);
    srv_metrics *m = &S->metrics;
    pthread_mutex_lock(&m->mu);
    m->store = st;
    m->store_errors = rs.failures;
    m->store_redirects = rs.moved + rs.ask;
    m->store_fallbacks += fallback != 0;
    m->store_lookup_s += lookup_s;
    m->store_publish_s += publish_s;
    pthread_mutex_unlock(&m->mu);
}

/* Ends the slot's prefill state; publish: its blocks go to the store (only a prompt fed
 * to its end through a store lookup publishes anything, sjks_prefill_end). */
static void prefill_done(srv *S, srv_slot *sl, int publish)
{
    if (!sl->pf) return;
    sjks_prefill_report rep;
    memset(&rep, 0, sizeof rep);
    sjks_prefill_end(sl->pf, publish, &rep);
    sl->pf = NULL;
    if (publish) store_sync(S, 0, 0, rep.publish_s);
}

/* Sends the text not yet streamed, up to what a stop string could still claim. */
static void stream_text(srv_slot *sl, int final)
{
    srv_job *j = sl->job;
    if (!j->stream) return;
    size_t end = j->text.n;
    if (!final) {
        size_t hold = j->stop_max_nbytes ? j->stop_max_nbytes - 1 : 0;
        end = end > hold ? end - hold : 0;
        if (end < j->text_emitted) end = j->text_emitted;
        end = j->text_emitted + utf8_complete(j->text.p + j->text_emitted, end - j->text_emitted);
    }
    srv_buf b = {0};
    if (end > j->text_emitted || (!sl->role_sent && j->chat)) {
        srv_api_chunk(j, j->text.p ? j->text.p + j->text_emitted : "", end - j->text_emitted, NULL,
                      !sl->role_sent && j->chat, &b);
        sl->role_sent = 1;
        j->text_emitted = end;
    }
    if (b.n) srv_job_push(j, b.p, b.n);
    srv_buf_free(&b);
}

/* Ends the slot's job: the last chunks (stream), the job's result, the slot free again. */
static void end_job(srv *S, srv_slot *sl, srv_finish fin)
{
    srv_job *j = sl->job;
    j->finish = fin;
    if (j->stream && !atomic_load(&j->cancelled)) {
        srv_buf b = {0};
        if (fin == SRV_FINISH_ERROR) {
            srv_api_stream_error(j, &b);
            srv_buf_add(&b, "data: [DONE]\n\n", 14);
        } else {
            stream_text(sl, 1);
            srv_api_chunk(j, NULL, 0, srv_finish_name(fin), 0, &b);
            srv_api_stream_end(j, &b);
        }
        srv_job_push(j, b.p, b.n);
        srv_buf_free(&b);
    }
    count_tokens(S, 0, 0, j->n_gen, 0, 0);
    sjkh_sampler_free(sl->sampler);
    sl->sampler = NULL;
    sl->state = SRV_SLOT_IDLE;
    sl->pending = -1;
    srv_slot_measure(S, sl);
    pthread_mutex_lock(&S->mu);
    sl->finishing = 1;
    pthread_mutex_unlock(&S->mu);
    srv_job_finish(j);
    /* the reply is out; the slot stays busy until its blocks are published (a claim that
     * would reuse this slot waits for it: srv_slot_claim) */
    prefill_done(S, sl, fin != SRV_FINISH_ERROR);
    pthread_mutex_lock(&S->mu);
    sl->job = NULL;
    sl->busy = 0;
    sl->finishing = 0;
    sl->idle_sealed = 0;
    sl->last_used = srv_now();
    pthread_cond_broadcast(&S->cv);
    pthread_mutex_unlock(&S->mu);
    srv_job_unref(j);
}

static void fail_job(srv *S, srv_slot *sl, int status, const char *why)
{
    srv_job *j = sl->job;
    j->err_status = status;
    snprintf(j->err, sizeof j->err, "%s", why);
    fprintf(stderr, "sjkvarn serve: slot %u: %s\n", sl->id, why);
    prefill_done(S, sl, 0);
    /* the session's state is not to be trusted after a failed pass */
    sjkh_session_reset(sl->s);
    sl->n_held = 0;
    end_job(S, sl, SRV_FINISH_ERROR);
}

/* The prompt's prefill state: a session that holds none of the prompt goes through the
 * store (lookup, fetch, verify, import of the leading blocks); one that continues a held
 * prefix feeds the rest as it is. Returns the positions imported from the store, or -1
 * (out of memory). */
static long begin_prefill(srv *S, srv_slot *sl)
{
    srv_job *j = sl->job;
    size_t base = j->n_cached;
    int fresh = S->store && base == 0 && sjkh_session_n_past(sl->s) == 0;
    sjks_store_stats b4;
    if (fresh) sjks_store_get_stats(S->store, &b4);
    double t0 = srv_now();
    if (sjks_prefill_begin(fresh ? S->store : NULL, sl->s, j->prompt + base, j->n_prompt - base, &sl->pf) != SJK_OK)
        return -1;
    sl->pf_base = base;
    if (!fresh) return 0;
    sjks_store_stats af;
    sjks_store_get_stats(S->store, &af);
    store_sync(S, af.lookup_failures > b4.lookup_failures || af.rejected > b4.rejected, srv_now() - t0, 0);
    return (long)sjks_prefill_cached(sl->pf);
}

static void start_job(srv *S, srv_slot *sl)
{
    srv_job *j = sl->job;
    if (j->n_cached < sl->n_held) { /* keep the shared prefix (or less: a sealed record's start) */
        uint32_t kept = 0;
        if (sjkh_session_truncate(sl->s, (uint32_t)j->n_cached, &kept)) kept = 0;
        sl->n_held = kept;
        j->n_cached = kept;
    }
    if (S->store && j->n_cached > 0 && j->n_cached < j->n_prompt && j->n_prompt <= UINT32_MAX &&
        (size_t)sjkh_session_block_cut(sl->s, (uint32_t)j->n_prompt) * SJKH_BLOCK_TOKENS > j->n_cached &&
        sjks_store_probe(S->store, sl->s, j->prompt, j->n_prompt) > j->n_cached) {
        /* the store holds more of the prompt than the session: start fresh and import it */
        sjkh_session_reset(sl->s);
        sl->n_held = 0;
        j->n_cached = 0;
    }
    size_t reused = j->n_cached;
    sl->n_tokens_done = 0;
    sl->pending = -1;
    sl->role_sent = 0;
    size_t room = S->o.n_ctx - j->n_prompt; /* >= 1: api.c refuses prompts that fill the context */
    sl->max_gen = j->max_tokens < room ? j->max_tokens : room;
    long from_store = begin_prefill(S, sl);
    if (from_store < 0) {
        fail_job(S, sl, 500, "out of memory for the prefill");
        return;
    }
    if (from_store > 0) { /* the imported blocks are held like a reused prefix */
        memcpy(sl->held, j->prompt, (size_t)from_store * sizeof *sl->held);
        sl->n_held = (size_t)from_store;
        j->n_cached = (size_t)from_store;
    }
    sl->n_fed = j->n_cached;
    if (sjkh_sampler_create(&j->sampling, S->info->n_vocab, &sl->sampler)) {
        fail_job(S, sl, 500, "cannot create the sampler");
        return;
    }
    sl->state = SRV_SLOT_PREFILL;
    count_tokens(S, j->n_prompt, j->n_cached, 0, 0, 0);
    if (reused) {
        pthread_mutex_lock(&S->metrics.mu);
        S->metrics.prefix_hits++;
        pthread_mutex_unlock(&S->metrics.mu);
    }
    stream_text(sl, 0); /* the role chunk: the client sees the stream start before prefill */
}

/* A token was sampled from the slot's logits: emit it or finish. */
static void take_token(srv *S, srv_slot *sl, int32_t id)
{
    srv_job *j = sl->job;
    sl->n_tokens_done++;
    j->n_gen = sl->n_tokens_done;
    if (sl->n_tokens_done == 1) j->t_first = srv_now();
    if (sjkh_tokenizer_is_eog(S->tok, id)) {
        end_job(S, sl, SRV_FINISH_STOP);
        return;
    }
    char piece[512];
    size_t pn = 0;
    if (sjkh_tokenizer_token_to_piece(S->tok, id, 0, piece, sizeof piece, &pn) != SJK_OK) pn = 0;
    size_t before = j->text.n;
    if (srv_buf_add(&j->text, piece, pn)) {
        fail_job(S, sl, 500, "out of memory for the generated text");
        return;
    }
    for (size_t k = 0; k < j->n_stops; k++) {
        size_t sn = strlen(j->stops[k]);
        size_t from = before >= sn ? before - sn + 1 : 0;
        for (size_t p = from; p + sn <= j->text.n; p++)
            if (!memcmp(j->text.p + p, j->stops[k], sn)) {
                j->text.n = p;
                j->text.p[p] = 0;
                end_job(S, sl, SRV_FINISH_STOP);
                return;
            }
    }
    if (sl->n_tokens_done >= sl->max_gen) {
        sl->pending = id;
        end_job(S, sl, SRV_FINISH_LENGTH);
        return;
    }
    stream_text(sl, 0);
    sl->pending = id;
    sl->state = SRV_SLOT_DECODE;
}

/* One chunk of the prompt: at most n_batch tokens, and before the store's cut never
 * across a 128-token edge (sjks_prefill_next; the edge is sealed after it). */
static void prefill_chunk(srv *S, srv_slot *sl)
{
    srv_job *j = sl->job;
    size_t pos = 0;
    size_t c = sjks_prefill_next(sl->pf, S->o.n_batch, &pos);
    char err[256] = "";
    sjk_status st = SJK_ERR_RANGE;
    double t0 = srv_now();
    if (c > 0 && sl->pf_base + pos == sl->n_fed) {
        st = sjkh_session_feed(sl->s, j->prompt + sl->n_fed, c, sl->logits, 0, err, sizeof err);
        if (st == SJK_OK && (st = sjks_prefill_fed(sl->pf, c)) != SJK_OK)
            snprintf(err, sizeof err, "sealing at position %zu: %s", sl->n_fed + c, sjk_status_str(st));
    } else {
        snprintf(err, sizeof err, "the prefill lost its place (%zu + %zu of %zu)", sl->pf_base, pos, sl->n_fed);
    }
    count_tokens(S, 0, 0, 0, srv_now() - t0, st ? 0 : c);
    if (st) {
        char why[400];
        snprintf(why, sizeof why, "prefill failed: %s", err);
        fail_job(S, sl, 500, why);
        return;
    }
    memcpy(sl->held + sl->n_held, j->prompt + sl->n_fed, c * sizeof *sl->held);
    sl->n_held += c;
    sl->n_fed += c;
    if (sl->n_fed < j->n_prompt) return;
    take_token(S, sl, sjkh_sampler_sample(sl->sampler, sl->logits));
    /* the first token is out (or the job ended, which published): now the new blocks */
    if (sl->job) prefill_done(S, sl, 1);
}

/* One forward pass for every slot with a token to feed. */
static void decode_step(srv *S, srv_slot **rows, size_t n)
{
    const size_t V = S->info->n_vocab;
    for (size_t i = 0; i < n; i++) {
        S->batch_ss[i] = rows[i]->s;
        S->batch_tok[i] = rows[i]->pending;
    }
    char err[256] = "";
    double t0 = srv_now();
    sjk_status st = sjkh_session_decode_batch(S->batch_ss, n, S->batch_tok, S->batch_logits, S->batch_st, err,
                                              sizeof err);
    if (st) { /* refused as a whole (nothing changed): feed each alone, so one bad row fails alone */
        for (size_t i = 0; i < n; i++)
            S->batch_st[i] = sjkh_session_feed(rows[i]->s, &S->batch_tok[i], 1, S->batch_logits + i * V, 0, err,
                                               sizeof err);
    }
    double dt = srv_now() - t0;
    /* test only (srv_opts.test_fault): the marked job's row fails as a row the forward pass
     * reported corrupt would; its session is reset below like any failed row's */
    for (size_t i = 0; i < n; i++)
        if (rows[i]->job->test_fault && !S->batch_st[i]) S->batch_st[i] = SJK_ERR_CORRUPT;
    pthread_mutex_lock(&S->metrics.mu);
    S->metrics.decode_s += dt;
    S->metrics.decode_steps++;
    S->metrics.decode_rows += n;
    pthread_mutex_unlock(&S->metrics.mu);
    for (size_t i = 0; i < n; i++) {
        srv_slot *sl = rows[i];
        if (S->batch_st[i]) {
            char why[400];
            snprintf(why, sizeof why, "decode failed in the forward pass: %s", sjk_status_str(S->batch_st[i]));
            fail_job(S, sl, 500, why);
            continue;
        }
        sl->held[sl->n_held++] = sl->pending;
        sl->pending = -1;
        memcpy(sl->logits, S->batch_logits + i * V, V * sizeof(float));
        take_token(S, sl, sjkh_sampler_sample(sl->sampler, sl->logits));
    }
}

/* One step over every active slot. Returns the number of active slots it saw. */
static size_t step(srv *S)
{
    size_t n_act = 0;
    srv_slot **act = S->batch_slot;
    int stopping;
    pthread_mutex_lock(&S->mu);
    stopping = S->stopping;
    for (uint32_t i = 0; i < S->o.parallel; i++)
        if (S->slots[i].job) act[n_act++] = &S->slots[i];
    pthread_mutex_unlock(&S->mu);

    for (size_t i = 0; i < n_act; i++) {
        srv_slot *sl = act[i];
        srv_job *j = sl->job;
        if (atomic_load(&j->cancelled)) {
            /* the client left: free the slot now (what was fed stays a valid held prefix) */
            end_job(S, sl, SRV_FINISH_STOP);
            act[i] = NULL;
        } else if (stopping) {
            j->err_status = 503;
            snprintf(j->err, sizeof j->err, "the server is shutting down");
            end_job(S, sl, SRV_FINISH_ERROR);
            act[i] = NULL;
        } else if (sl->state == SRV_SLOT_IDLE) {
            start_job(S, sl);
            if (!sl->job) act[i] = NULL;
        }
    }
    for (size_t i = 0; i < n_act; i++)
        if (act[i] && act[i]->job && act[i]->state == SRV_SLOT_PREFILL) {
            prefill_chunk(S, act[i]);
            act[i] = NULL; /* a slot that just finished prefill decodes from the next step */
        }
    size_t n_dec = 0;
    for (size_t i = 0; i < n_act; i++)
        if (act[i] && act[i]->job && act[i]->state == SRV_SLOT_DECODE && act[i]->pending >= 0) act[n_dec++] = act[i];
    if (n_dec) decode_step(S, act, n_dec);
    return n_act;
}

static void *engine_main(void *arg)
{
    srv *S = arg;
    for (;;) {
        size_t n = step(S);
        pthread_mutex_lock(&S->mu);
        int any = 0;
        for (uint32_t i = 0; i < S->o.parallel; i++) any |= S->slots[i].job != NULL;
        if (!any && S->stopping) {
            pthread_mutex_unlock(&S->mu);
            break;
        }
        if (!any && n == 0) { /* idle: wait for work, at most a second (idle seals) */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&S->cv, &S->mu, &ts);
            pthread_mutex_unlock(&S->mu);
            srv_slots_idle_seal(S);
            continue;
        }
        pthread_mutex_unlock(&S->mu);
    }
    return NULL;
}

int srv_engine_start(srv *S)
{
    size_t P = S->o.parallel, V = S->info->n_vocab;
    S->batch_tok = malloc(P * sizeof *S->batch_tok);
    S->batch_ss = malloc(P * sizeof *S->batch_ss);
    S->batch_st = malloc(P * sizeof *S->batch_st);
    S->batch_slot = malloc(P * sizeof *S->batch_slot);
    S->batch_logits = malloc(P * V * sizeof *S->batch_logits);
    if (!S->batch_tok || !S->batch_ss || !S->batch_st || !S->batch_slot || !S->batch_logits) return -1;
    if (pthread_create(&S->engine, NULL, engine_main, S)) return -1;
    S->engine_started = 1;
    return 0;
}

void srv_engine_stop(srv *S)
{
    pthread_mutex_lock(&S->mu);
    S->stopping = 1;
    pthread_cond_broadcast(&S->cv);
    pthread_mutex_unlock(&S->mu);
    if (S->engine_started) pthread_join(S->engine, NULL);
    S->engine_started = 0;
    free(S->batch_tok);
    free(S->batch_ss);
    free(S->batch_st);
    free(S->batch_slot);
    free(S->batch_logits);
    S->batch_tok = NULL;
    S->batch_ss = NULL;
    S->batch_st = NULL;
    S->batch_slot = NULL;
    S->batch_logits = NULL;
}
