/* eval_run.c — the lockstep driver of the KL study (docs/DESIGN.md §4).
 *
 * One context per configuration, the reference's (an fp16 cache) first. All are fed the
 * same tokens; after each feed the reference's next-token logits p are compared with
 * every candidate's q at once, so no distribution is ever stored:
 *
 *   prompt ──> ref ─ p ─┬─ q1 ─> KL ─> study        step g = 0 .. n_gen-1:
 *          ──> cand 1 ──┘                              compare at the current logits,
 *          ──> cand 2 ─── q2 ─> KL ─> study            tok = argmax p (greedy),
 *                                                      feed tok to every context.
 *
 * Only distributions that predict a generated token are scored: the one after the last
 * prompt token and the one after each generated token but the last. Prompt positions are
 * never scored (their rare huge spikes would swamp a mean: docs/BACKGROUND.md, "The SJ-KVaRN proposal").
 *
 * The needle study plants facts at known look-back distances, asks for each, and scores
 * the teacher-forced answer tokens the same way. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_internal.h"

#define REFERENCE_KV "f16"

/* Tokenizes text into a fresh array; *n_out tokens. */
static sjk_status tokenize_alloc(const sjk_eval_backend *be, const char *text, size_t n,
                                 int add_bos, int32_t **out, size_t *n_out)
{
    size_t cap = n + 8, need = 0, nb;
    *out = NULL;
    *n_out = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!eval_mul_ok(cap, sizeof(int32_t), &nb)) return SJK_ERR_PARAM;
        int32_t *t = malloc(nb);
        if (!t) return SJK_ERR_NOMEM;
        sjk_status s = be->tokenize(be->user, text, n, add_bos, t, cap, &need);
        if (s != SJK_OK) { free(t); return s; }
        if (need <= cap) { *out = t; *n_out = need; return SJK_OK; }
        free(t);
        cap = need;
    }
    return SJK_ERR_RANGE;
}

sjk_status sjk_eval_prompt_tokens(const sjk_eval_backend *be, const char *text, size_t n,
                                  size_t n_prompt, int32_t **tokens, size_t *n_tokens)
{
    if (!be || !be->tokenize || !text || !tokens || !n_tokens || n_prompt == 0)
        return SJK_ERR_PARAM;
    *tokens = NULL;
    *n_tokens = 0;
    const char *ff = NULL;
    for (size_t i = n; i > 0; i--)
        if (text[i - 1] == '\f') { ff = text + i - 1; break; }
    int32_t *hay = NULL, *q = NULL;
    size_t nh = 0, nq = 0;
    size_t hay_n = ff ? (size_t)(ff - text) : n;
    sjk_status s = tokenize_alloc(be, text, hay_n, 1, &hay, &nh);
    if (s != SJK_OK) return s;
    if (ff) {
        s = tokenize_alloc(be, ff + 1, n - hay_n - 1, 0, &q, &nq);
        if (s != SJK_OK) { free(hay); return s; }
        if (nq >= n_prompt) { free(hay); free(q); return SJK_ERR_RANGE; }
    }
    size_t keep = nh < n_prompt - nq ? nh : n_prompt - nq;
    int32_t *t = realloc(hay, (keep + nq ? keep + nq : 1) * sizeof(int32_t));
    if (!t) { free(hay); free(q); return SJK_ERR_NOMEM; }
    if (nq) memcpy(t + keep, q, nq * sizeof(int32_t));
    free(q);
    *tokens = t;
    *n_tokens = keep + nq;
    return SJK_OK;
}

static uint32_t argmax(const float *x, size_t n)
{
    uint32_t a = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[a]) a = (uint32_t)i;
    return a;
}

/* The contexts of one run: [0] is the reference, [1 + c] configuration c. */
typedef struct lockstep {
    const sjk_eval_backend *be;
    sjk_eval_study *st;
    size_t n;            /* 1 + configurations */
    void **ctx;          /* [n] */
    float *p, *q;        /* [n_vocab] reference logits, candidate logits */
    float **q_all;       /* [n][n_vocab] latest logits of every context (q_all[0] = p) */
    double *prob;        /* [n_vocab] the reference's probabilities at this step */
    sjk_eval_progress *prog;
} lockstep;

static void lockstep_free(lockstep *L)
{
    if (L->ctx)
        for (size_t i = 0; i < L->n; i++)
            if (L->ctx[i]) L->be->ctx_free(L->be->user, L->ctx[i]);
    if (L->q_all)
        for (size_t i = 0; i < L->n; i++) free(L->q_all[i]);
    free(L->q_all);
    free(L->prob);
    free(L->ctx);
    memset(L, 0, sizeof *L);
}

static sjk_status lockstep_open(lockstep *L, const sjk_eval_backend *be, sjk_eval_study *st,
                                size_t n_ctx, sjk_eval_progress *prog, const char *reference)
{
    memset(L, 0, sizeof *L);
    L->be = be;
    L->st = st;
    L->prog = prog;
    L->n = st->n_configs + 1;
    L->ctx = calloc(L->n, sizeof *L->ctx);
    L->q_all = calloc(L->n, sizeof *L->q_all);
    L->prob = malloc(be->n_vocab * sizeof(double));
    if (!L->ctx || !L->q_all || !L->prob) { lockstep_free(L); return SJK_ERR_NOMEM; }
    for (size_t i = 0; i < L->n; i++) {
        L->q_all[i] = malloc(be->n_vocab * sizeof(float));
        if (!L->q_all[i]) { lockstep_free(L); return SJK_ERR_NOMEM; }
        const char *kv = i ? st->cols[i - 1].name : reference ? reference : REFERENCE_KV;
        sjk_status s = be->ctx_create(be->user, kv, n_ctx, &L->ctx[i]);
        if (s != SJK_OK) { lockstep_free(L); return s; }
    }
    L->p = L->q_all[0];
    return SJK_OK;
}

/* Feeds tokens to every context (in chunks of `chunk`, 0 = all at once); afterwards
 * q_all[i] holds context i's logits after the last token. */
static sjk_status lockstep_feed(lockstep *L, const int32_t *tok, size_t n, size_t chunk)
{
    if (n == 0) return SJK_OK;
    if (chunk == 0) chunk = n;
    for (size_t i = 0; i < L->n; i++) {
        double t0 = sjk_eval_now();
        for (size_t o = 0; o < n; o += chunk) {
            size_t m = n - o < chunk ? n - o : chunk;
            sjk_status s = L->be->ctx_feed(L->be->user, L->ctx[i], tok + o, m, L->q_all[i]);
            if (s != SJK_OK) return s;
            if (L->prog) sjk_eval_progress_add(L->prog, m);
        }
        if (i) sjk_eval_study_add_time(L->st, i - 1, n, sjk_eval_now() - t0);
    }
    return SJK_OK;
}

sjk_status sjk_eval_run_doc(const sjk_eval_backend *be, sjk_eval_study *st, size_t doc,
                            const int32_t *prompt, size_t n_prompt, const sjk_eval_opts *opts,
                            int32_t *gen_out)
{
    if (!be || !st || !prompt || !opts || n_prompt == 0 || opts->n_gen == 0 ||
        doc >= st->n_docs || !be->ctx_create || !be->ctx_feed || !be->ctx_free ||
        be->n_vocab == 0)
        return SJK_ERR_PARAM;
    size_t total;
    if (!eval_add_ok(n_prompt, opts->n_gen, &total) || total > opts->n_ctx ||
        total > UINT32_MAX)
        return SJK_ERR_RANGE;
    lockstep L;
    sjk_status s = lockstep_open(&L, be, st, opts->n_ctx, opts->progress, opts->reference);
    if (s != SJK_OK) return s;
    s = lockstep_feed(&L, prompt, n_prompt, opts->prefill_chunk);
    for (size_t g = 0; s == SJK_OK && g < opts->n_gen; g++) {
        uint32_t pos = (uint32_t)(n_prompt - 1 + g);
        sjk_eval_ref ref;
        s = sjk_eval_ref_prepare(&ref, L.p, be->n_vocab, L.prob);
        for (size_t c = 0; c < st->n_configs && s == SJK_OK; c++) {
            sjk_eval_cmp cmp;
            sjk_eval_mem mem = {0, 0, 0};
            s = sjk_eval_compare_ref(&ref, L.q_all[c + 1], &cmp);
            if (s == SJK_OK && be->ctx_memory) s = be->ctx_memory(be->user, L.ctx[c + 1], &mem);
            if (s == SJK_OK) s = sjk_eval_study_add(st, c, doc, pos, &cmp, &mem);
        }
        if (s != SJK_OK) break;
        int32_t tok = (int32_t)argmax(L.p, be->n_vocab);
        if (gen_out) gen_out[g] = tok;
        if (g + 1 < opts->n_gen) s = lockstep_feed(&L, &tok, 1, 0);
    }
    lockstep_free(&L);
    return s;
}

/* ---- needles ----------------------------------------------------------------------- */

static const char *const needle_adj[] = {"amber", "cobalt", "crimson", "ivory", "jade",
                                         "silver", "violet", "copper", "scarlet", "teal",
                                         "golden", "indigo"};
static const char *const needle_noun[] = {"falcon", "harbor", "lantern", "orchard", "glacier",
                                          "meadow", "compass", "quarry", "beacon", "canyon",
                                          "citadel", "reef"};

typedef struct needle {
    int32_t *fact, *question, *answer;
    size_t n_fact, n_question, n_answer;
    uint32_t planned;   /* planned look-back distance */
    size_t at;          /* start of the fact in the final sequence */
} needle;

sjk_status sjk_eval_run_needles(const sjk_eval_backend *be, sjk_eval_study *st, size_t doc,
                                const char *text, size_t n, const sjk_eval_opts *opts,
                                uint64_t seed)
{
    if (!be || !st || !text || !opts || doc >= st->n_docs || !be->tokenize) return SJK_ERR_PARAM;
    if (opts->n_ctx < 512) return SJK_ERR_RANGE;
    needle nd[SJK_EVAL_NEEDLES];
    memset(nd, 0, sizeof nd);
    int32_t *hay = NULL, *seq = NULL;
    size_t nh = 0;
    lockstep L;
    memset(&L, 0, sizeof L);
    sjk_status s = SJK_OK;

    /* Facts: distinct (adjective, noun) pairs and 4-digit codes drawn from the seed. */
    sjk_rng rng;
    sjk_rng_seed(&rng, seed ^ ((uint64_t)doc * 0x9E3779B97F4A7C15ull));
    uint8_t used[12][12];
    memset(used, 0, sizeof used);
    size_t need_q = 0, need_f = 0;
    for (int k = 0; k < SJK_EVAL_NEEDLES && s == SJK_OK; k++) {
        size_t a, b;
        do {
            a = (size_t)(sjk_rng_uniform(&rng) * 12);
            b = (size_t)(sjk_rng_uniform(&rng) * 12);
        } while (used[a][b]);
        used[a][b] = 1;
        unsigned code = 1000u + (unsigned)(sjk_rng_uniform(&rng) * 9000.0);
        char buf[256];
        int m = snprintf(buf, sizeof buf, "\nThe access code for the %s %s vault is %u.\n",
                         needle_adj[a], needle_noun[b], code);
        s = tokenize_alloc(be, buf, (size_t)m, 0, &nd[k].fact, &nd[k].n_fact);
        if (s != SJK_OK) break;
        m = snprintf(buf, sizeof buf, "\nQuestion: What is the access code for the %s %s "
                     "vault?\nAnswer: The access code for the %s %s vault is",
                     needle_adj[a], needle_noun[b], needle_adj[a], needle_noun[b]);
        s = tokenize_alloc(be, buf, (size_t)m, 0, &nd[k].question, &nd[k].n_question);
        if (s != SJK_OK) break;
        /* The gold answer is tokenized in context: the tokens that question + answer has
         * beyond the question's own (so a tokenizer's word-initial space handling matches
         * what the model would produce); alone only if the question is not a prefix. */
        int32_t *qa = NULL;
        size_t nqa = 0;
        int mq = m;
        m += snprintf(buf + m, sizeof buf - (size_t)m, " %u", code);
        s = tokenize_alloc(be, buf, (size_t)m, 0, &qa, &nqa);
        if (s != SJK_OK) break;
        if (nqa > nd[k].n_question &&
            !memcmp(qa, nd[k].question, nd[k].n_question * sizeof(int32_t))) {
            nd[k].n_answer = nqa - nd[k].n_question;
            memmove(qa, qa + nd[k].n_question, nd[k].n_answer * sizeof(int32_t));
            nd[k].answer = qa;
        } else {
            free(qa);
            s = tokenize_alloc(be, buf + mq, (size_t)(m - mq), 0, &nd[k].answer, &nd[k].n_answer);
        }
        if (s == SJK_OK && (nd[k].n_answer == 0 || nd[k].n_fact == 0)) s = SJK_ERR_RANGE;
        need_q += nd[k].n_question + nd[k].n_answer;
        need_f += nd[k].n_fact;
    }
    if (s != SJK_OK) goto done;

    /* Haystack: the text before any form feed, cut so everything fits n_ctx. */
    const char *ff = memchr(text, '\f', n);
    s = tokenize_alloc(be, text, ff ? (size_t)(ff - text) : n, 1, &hay, &nh);
    if (s != SJK_OK) goto done;
    if (need_q + need_f + 64 >= opts->n_ctx) { s = SJK_ERR_RANGE; goto done; }
    size_t keep = opts->n_ctx - need_q - need_f - 8;
    if (nh > keep) nh = keep;
    if (nh < 64) { s = SJK_ERR_RANGE; goto done; }
    size_t S = nh + need_f; /* where the questions start */

    /* Planned look-back distances, geometric from 64 to 3/4 of the context (the same
     * ladder for every document of a run, so distances pool; shorter only if the haystack
     * is). The distance of an answer is counted from the position whose logits predict
     * it back to the first token of its fact. Questions are asked nearest first, each
     * right after the previous answer, so needle k's answer is predicted at
     *   S + (questions and answers asked before k) + n_question_k - 1,
     * and its fact is placed that far minus d_k back, moved earlier only where needed
     * so that facts neither overlap nor run into the questions. */
    double dmin = 64.0, dmax = 0.75 * (double)opts->n_ctx;
    if (dmax > (double)(S - 2)) dmax = (double)(S - 2);
    if (dmin > dmax) dmin = dmax;
    size_t limit = S, asked_before[SJK_EVAL_NEEDLES], acc = 0;
    for (int k = SJK_EVAL_NEEDLES - 1; k >= 0; k--) { /* nearest (k = 7) asked first */
        asked_before[k] = acc;
        acc += nd[k].n_question + nd[k].n_answer;
    }
    for (int k = SJK_EVAL_NEEDLES - 1; k >= 0; k--) {
        double t = (double)(SJK_EVAL_NEEDLES - 1 - k) / (SJK_EVAL_NEEDLES - 1);
        uint32_t d = (uint32_t)llround(dmin * pow(dmax / dmin, t));
        size_t ask = S + asked_before[k] + nd[k].n_question - 1;
        size_t at = d < ask ? ask - d : 0;
        if (limit < nd[k].n_fact + 1) { s = SJK_ERR_RANGE; goto done; }
        if (at > limit - nd[k].n_fact) at = limit - nd[k].n_fact;
        if (at < 1) { s = SJK_ERR_RANGE; goto done; } /* never before BOS */
        nd[k].planned = d;
        nd[k].at = at;
        limit = at;
    }

    /* The final sequence: haystack with the facts spliced in at their starts. */
    seq = malloc((S ? S : 1) * sizeof(int32_t));
    if (!seq) { s = SJK_ERR_NOMEM; goto done; }
    size_t o = 0, h = 0;
    for (int k = 0; k < SJK_EVAL_NEEDLES; k++) {
        while (o < nd[k].at && h < nh) seq[o++] = hay[h++];
        nd[k].at = o;
        memcpy(seq + o, nd[k].fact, nd[k].n_fact * sizeof(int32_t));
        o += nd[k].n_fact;
    }
    while (h < nh) seq[o++] = hay[h++];

    s = lockstep_open(&L, be, st, opts->n_ctx, opts->progress, opts->reference);
    if (s != SJK_OK) goto done;
    s = lockstep_feed(&L, seq, o, opts->prefill_chunk);
    size_t pos = o;
    /* Ask nearest first (the order the placement above assumed). */
    int order[SJK_EVAL_NEEDLES];
    for (int k = 0; k < SJK_EVAL_NEEDLES; k++) order[k] = SJK_EVAL_NEEDLES - 1 - k;
    for (int qi = 0; qi < SJK_EVAL_NEEDLES && s == SJK_OK; qi++) {
        const needle *N = &nd[order[qi]];
        s = lockstep_feed(&L, N->question, N->n_question, 0);
        pos += N->n_question;
        for (size_t j = 0; j < N->n_answer && s == SJK_OK; j++) {
            uint32_t gold = (uint32_t)N->answer[j];
            uint32_t dist = (uint32_t)(pos - 1 - N->at);
            sjk_eval_ref ref;
            s = sjk_eval_ref_prepare(&ref, L.p, be->n_vocab, L.prob);
            for (size_t c = 0; c < st->n_configs && s == SJK_OK; c++) {
                sjk_eval_cmp cmp;
                s = sjk_eval_compare_ref(&ref, L.q_all[c + 1], &cmp);
                if (s == SJK_OK)
                    s = sjk_eval_study_add_needle(st, c, doc, dist, N->planned, cmp.kl,
                                                  cmp.top_q == gold, cmp.top_p == gold);
            }
            if (s == SJK_OK) s = lockstep_feed(&L, &N->answer[j], 1, 0);
            pos++;
        }
    }

done:
    lockstep_free(&L);
    for (int k = 0; k < SJK_EVAL_NEEDLES; k++) {
        free(nd[k].fact); free(nd[k].question); free(nd[k].answer);
    }
    free(hay);
    free(seq);
    return s;
}
