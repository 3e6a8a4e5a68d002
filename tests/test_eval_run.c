/* test_eval_run.c — the lockstep driver of `sjkvarn eval` on a synthetic backend: a toy
 * "model" whose logits are a fixed function of the recent tokens, and whose "caches" add
 * noise of a known size. It pins down the bookkeeping the real study rests on: which
 * positions are scored, that an fp16 candidate scores exactly 0, that more noise scores
 * more KL, that the prompt cut keeps the query, and where the needles land. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eval_internal.h"
#include "harness.h"

enum { TOY_V = 64, TOY_BOS = 1 };

typedef struct toy_ctx {
    double noise;        /* logit noise of this "cache" */
    double bpv;
    size_t n_ctx, n;     /* capacity, tokens so far */
    uint64_t h;          /* rolling hash of the history */
    int32_t last[3];
} toy_ctx;

typedef struct toy { int n_created, n_freed; size_t feeds; } toy;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static sjk_status toy_tokenize(void *user, const char *text, size_t n, int add_bos,
                               int32_t *tokens, size_t cap, size_t *n_out)
{
    size_t k = 0;
    if (add_bos) { if (k < cap) tokens[k] = TOY_BOS; k++; }
    for (size_t i = 0; i < n; i++, k++)
        if (k < cap) tokens[k] = 4 + (int32_t)((unsigned char)text[i] % 60);
    *n_out = k;
    return SJK_OK;
}

static sjk_status toy_create(void *user, const char *kv, size_t n_ctx, void **out)
{
    toy_ctx *c = calloc(1, sizeof *c);
    if (!c) return SJK_ERR_NOMEM;
    if (!strcmp(kv, "f16")) { c->noise = 0; c->bpv = 16; }
    else if (!strcmp(kv, "lo")) { c->noise = 0.02; c->bpv = 8; }
    else if (!strcmp(kv, "hi")) { c->noise = 0.2; c->bpv = 4; }
    else { free(c); return SJK_ERR_PARAM; }
    c->n_ctx = n_ctx;
    ((toy *)user)->n_created++;
    *out = c;
    return SJK_OK;
}

static void toy_free(void *user, void *ctx)
{
    ((toy *)user)->n_freed++;
    free(ctx);
}

static sjk_status toy_feed(void *user, void *vctx, const int32_t *tok, size_t n, float *logits)
{
    toy_ctx *c = vctx;
    if (c->n + n > c->n_ctx) return SJK_ERR_RANGE;
    ((toy *)user)->feeds++;
    for (size_t i = 0; i < n; i++) {
        c->h = mix(c->h ^ (uint64_t)tok[i]);
        c->last[2] = c->last[1]; c->last[1] = c->last[0]; c->last[0] = tok[i];
        c->n++;
    }
    /* The clean logits depend on the last three tokens; the noise on the position. */
    uint64_t key = mix((uint64_t)c->last[0] * 131 + (uint64_t)c->last[1] * 7 + (uint64_t)c->last[2]);
    for (int v = 0; v < TOY_V; v++) {
        double clean = 4.0 * sin(0.37 * (double)v + (double)(key % 1000));
        uint64_t z = mix(((uint64_t)c->n << 8) ^ (uint64_t)v);
        double u = (double)(z >> 11) * 0x1.0p-53 - 0.5;
        logits[v] = (float)(clean + c->noise * u);
    }
    return SJK_OK;
}

static sjk_status toy_memory(void *user, void *vctx, sjk_eval_mem *m)
{
    toy_ctx *c = vctx;
    m->bpv_occupied = c->bpv;
    m->bpv_allocated = c->bpv + 1;
    m->kv_bytes = (uint64_t)(c->n * c->bpv);
    return SJK_OK;
}

static sjk_eval_backend toy_backend(toy *t)
{
    sjk_eval_backend be;
    memset(&be, 0, sizeof be);
    be.user = t;
    be.n_vocab = TOY_V;
    be.n_ctx_max = 4096;
    be.tokenize = toy_tokenize;
    be.ctx_create = toy_create;
    be.ctx_free = toy_free;
    be.ctx_feed = toy_feed;
    be.ctx_memory = toy_memory;
    return be;
}

static const char *TEXT =
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud "
    "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat.";

TEST(test_lockstep_scores_generated_positions_only)
{
    toy t = {0, 0, 0};
    sjk_eval_backend be = toy_backend(&t);
    const char *cfgs[] = {"f16", "lo", "hi"}, *docs[] = {"a", "b"};
    sjk_eval_study *st = sjk_eval_study_create(3, cfgs, 2, docs);
    sjk_eval_opts o = {.n_ctx = 256, .n_gen = 24, .prefill_chunk = 17};
    int32_t *prompt = NULL, gen1[24], gen2[24];
    size_t np = 0;
    CHECK(sjk_eval_prompt_tokens(&be, TEXT, strlen(TEXT), 100, &prompt, &np) == SJK_OK);
    CHECK(np == 100 && prompt[0] == TOY_BOS);
    CHECK(sjk_eval_run_doc(&be, st, 0, prompt, np, &o, gen1) == SJK_OK);
    CHECK(sjk_eval_run_doc(&be, st, 1, prompt, np, &o, gen2) == SJK_OK);
    CHECK(memcmp(gen1, gen2, sizeof gen1) == 0); /* greedy reference is deterministic */
    CHECK(t.n_created == 8 && t.n_freed == 8);  /* reference + 3, twice */
    const eval_col *k = &st->cols[0];
    CHECK(k->n == 48);
    for (size_t i = 0; i < k->n; i++) {
        CHECK(k->pos[i] == 99 + i % 24);
        CHECK(k->kl[i] == 0.0 && k->same[i]);  /* an f16 candidate is the reference */
    }
    CHECK(sjk_eval_study_finish(st, 200, 1) == SJK_OK);
    const sjk_eval_config_result *lo = sjk_eval_study_result(st, 1),
                                 *hi = sjk_eval_study_result(st, 2);
    CHECK(lo->s.mean > 0 && hi->s.mean > 20 * lo->s.mean); /* noise 10x: KL ~100x */
    CHECK(lo->bpv_occupied == 8 && hi->bpv_allocated == 5);
    CHECK(hi->kv_bytes == (uint64_t)(4 * (100 + 23)));    /* at the final context */
    const sjk_eval_pair *p = sjk_eval_study_pair(st, 1, 2);
    CHECK(p->ratio < 0.1 && p->ci_high < 1 && p->docs_won == 2);
    free(prompt);
    sjk_eval_study_free(st);
}

TEST(test_lockstep_respects_context_and_bad_configs)
{
    toy t = {0, 0, 0};
    sjk_eval_backend be = toy_backend(&t);
    const char *cfgs[] = {"nope"}, *docs[] = {"a"};
    sjk_eval_study *st = sjk_eval_study_create(1, cfgs, 1, docs);
    int32_t prompt[10] = {TOY_BOS, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    sjk_eval_opts o = {.n_ctx = 16, .n_gen = 8};
    CHECK(sjk_eval_run_doc(&be, st, 0, prompt, 10, &o, NULL) == SJK_ERR_RANGE); /* 18 > 16 */
    o.n_gen = 4;
    CHECK(sjk_eval_run_doc(&be, st, 0, prompt, 10, &o, NULL) == SJK_ERR_PARAM); /* "nope" */
    CHECK(t.n_created == t.n_freed);
    sjk_eval_study_free(st);
}

TEST(test_prompt_cut_keeps_query_after_form_feed)
{
    toy t = {0, 0, 0};
    sjk_eval_backend be = toy_backend(&t);
    char text[400];
    memset(text, 'a', 300);
    memcpy(text + 300, "\f\nQ: what?", 10);
    int32_t *tok = NULL;
    size_t n = 0;
    CHECK(sjk_eval_prompt_tokens(&be, text, 310, 50, &tok, &n) == SJK_OK);
    CHECK(n == 50 && tok[0] == TOY_BOS);
    /* the last 9 tokens are the query "\nQ: what?" whole */
    int32_t q[9];
    size_t nq = 0;
    toy_tokenize(&t, "\nQ: what?", 9, 0, q, 9, &nq);
    CHECK(nq == 9 && memcmp(tok + 41, q, sizeof q) == 0);
    free(tok);
    /* a query longer than the prompt is an error, not a silent cut */
    CHECK(sjk_eval_prompt_tokens(&be, text, 310, 8, &tok, &n) == SJK_ERR_RANGE);
    /* without a form feed: the head of the text */
    CHECK(sjk_eval_prompt_tokens(&be, text, 300, 20, &tok, &n) == SJK_OK && n == 20);
    free(tok);
}

TEST(test_needles_land_at_planned_distances)
{
    toy t = {0, 0, 0};
    sjk_eval_backend be = toy_backend(&t);
    const char *cfgs[] = {"f16", "hi"}, *docs[] = {"a"};
    sjk_eval_study *st = sjk_eval_study_create(2, cfgs, 1, docs);
    enum { HAY = 20000, CTX = 8192 };
    char *hay = malloc(HAY);
    for (int i = 0; i < HAY; i++) hay[i] = TEXT[i % 200];
    sjk_eval_opts o = {.n_ctx = CTX, .n_gen = 1};
    sjk_status rs = sjk_eval_run_needles(&be, st, 0, hay, HAY, &o, 11);
    CHECKF(rs == SJK_OK, "%s", sjk_status_str(rs));
    /* 8 needles x " NNNN" (5 toy tokens) x 2 configurations */
    CHECK(st->n_needles == 2 * 8 * 5);
    uint32_t planned_seen[8];
    size_t np = 0, n_exact = 0;
    for (size_t i = 0; i < st->n_needles; i++) {
        const eval_needle *nd = &st->needles[i];
        CHECK(nd->planned <= CTX && nd->distance < CTX);
        /* facts are placed so that the distance is the planned one, unless a fact had to
         * move back to fit before the questions (toy facts and questions are long: ~60
         * and ~100 tokens, so the nearest few move) */
        CHECK(nd->distance >= nd->planned && nd->distance <= nd->planned + 8 * (100 + 60));
        n_exact += nd->distance == nd->planned;
        if (nd->cfg == 0) CHECK(nd->kl == 0.0);
        size_t j = 0;
        while (j < np && planned_seen[j] != nd->planned) j++;
        if (j == np && np < 8) planned_seen[np++] = nd->planned;
    }
    CHECK(np == 8);
    uint32_t mn = UINT32_MAX, mx = 0;
    for (size_t j = 0; j < np; j++) {
        if (planned_seen[j] < mn) mn = planned_seen[j];
        if (planned_seen[j] > mx) mx = planned_seen[j];
    }
    CHECK(mn == 64 && mx == CTX * 3 / 4); /* geometric from 64 to 3/4 of the context */
    CHECK(n_exact >= 2 * 3); /* the three farthest land exactly (first answer token), twice */
    CHECK(t.n_created == t.n_freed);
    CHECK(sjk_eval_study_finish(st, 10, 1) == SJK_OK);
    const sjk_eval_config_result *r = sjk_eval_study_result(st, 0);
    CHECK(r->n_needle == 40 && r->needle_mean_kl == 0.0);
    free(hay);
    sjk_eval_study_free(st);
}

int main(void)
{
    RUN(test_lockstep_scores_generated_positions_only);
    RUN(test_lockstep_respects_context_and_bad_configs);
    RUN(test_prompt_cut_keeps_query_after_form_feed);
    RUN(test_needles_land_at_planned_distances);
    return test_summary();
}
