/* test_host_batch.c — sjkh_session_decode_batch on the real models: three sessions at
 * different positions (different prompts, lengths, caches) decode together in one pass;
 * each row's logits are compared with the same session decoding alone (a twin session fed
 * the same tokens one at a time): a decode batch takes the per-row kernels at any row
 * count, so the logits are bit-identical, also for 17 rows (past both prefill
 * thresholds). Bad batches
 * (a session twice, a full session, a token outside the vocabulary, a batch larger than
 * n_batch) are refused and change no session. SKIPs without the model files. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "support/session.h"
#include "sjkhost.h"
#include "support/models.h"

/* STEPS batched decode steps after the prefills; 2 under SJK_TEST_LIGHT (the sanitizer
 * and valgrind runs): still a first step and one more with every row's past grown by it */
enum { NS = 3, STEPS_FULL = 6, STEPS_LIGHT = 2 };

static sjkh_session *mk(const sjkh_model *m, const char *kv, uint32_t n_ctx)
{
    return test_session_new(m, kv, n_ctx, 32, 2);
}

static int32_t argmax(const float *x, size_t n)
{
    size_t b = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int32_t)b;
}

/* The model at file, counted in *ran; NULL (nothing counted) when the file is missing. */
static sjkh_model *load_model(const char *file, int *ran)
{
    const char *path = test_model_path(file);
    if (access(path, R_OK)) return NULL;
    (*ran)++;
    sjkh_model *m = NULL;
    char err[512];
    CHECKF(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK, "%s", err);
    return m;
}

static void one_model(const char *file, int *ran)
{
    sjkh_model *m = load_model(file, ran);
    char err[512];
    if (!m) return;
    const size_t V = sjkh_model_get_info(m)->n_vocab;
    const char *kvs[NS] = {"f16", "sj:4/4:sink=0:tail=0", "q8_0/q4_0"};
    const uint32_t plen[NS] = {5, 140, 37};
    sjkh_session *bat[NS], *one[NS];
    float *lb = malloc(NS * V * sizeof(float)), *l1 = malloc(V * sizeof(float));
    int32_t next[NS];
    int ok = lb && l1;
    for (int i = 0; i < NS; i++) {
        bat[i] = mk(m, kvs[i], 512);
        one[i] = mk(m, kvs[i], 512);
        ok = ok && bat[i] && one[i];
    }
    if (!ok) goto done;
    for (int i = 0; i < NS; i++) {
        int32_t ids[160];
        for (uint32_t t = 0; t < plen[i]; t++) ids[t] = (int32_t)((t * 7919u + 101u * (unsigned)i) % (V - 300)) + 200;
        CHECK(sjkh_session_feed(bat[i], ids, plen[i], l1, 0, err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_feed(one[i], ids, plen[i], l1, 0, err, sizeof err) == SJK_OK);
        next[i] = argmax(l1, V);
    }
    /* one row: the very pass of a single feed */
    sjk_status rs[NS];
    float maxd = 0;
    CHECK(sjkh_session_decode_batch(bat, 1, next, lb, rs, err, sizeof err) == SJK_OK);
    CHECK(rs[0] == SJK_OK);
    CHECK(sjkh_session_feed(one[0], next, 1, l1, 0, err, sizeof err) == SJK_OK);
    CHECK(memcmp(lb, l1, V * sizeof(float)) == 0);
    next[0] = argmax(l1, V);
    int agree = 0, total = 0;
    const int steps = test_light() ? STEPS_LIGHT : STEPS_FULL;
    for (int step = 0; step < steps; step++) {
        CHECKF(sjkh_session_decode_batch(bat, NS, next, lb, rs, err, sizeof err) == SJK_OK, "%s", err);
        for (int i = 0; i < NS; i++) {
            CHECK(rs[i] == SJK_OK);
            CHECK(sjkh_session_feed(one[i], &next[i], 1, l1, 0, err, sizeof err) == SJK_OK);
            float amax = 0;
            for (size_t v = 0; v < V; v++) {
                float d = fabsf(lb[i * V + v] - l1[v]);
                if (d > maxd) maxd = d;
                if (fabsf(l1[v]) > amax) amax = fabsf(l1[v]);
            }
            int32_t a = argmax(lb + i * V, V), b = argmax(l1, V);
            agree += a == b;
            total++;
            next[i] = b; /* both continue with the single session's token */
            CHECK(sjkh_session_n_past(bat[i]) == sjkh_session_n_past(one[i]));
        }
    }
    printf("  %s: %d sessions x %d steps, greedy tokens agree %d/%d, max |logit diff| %.3g\n", file, NS, steps, agree,
           total, maxd);
    CHECK(agree == total);
    CHECK(maxd == 0.0f);

    /* refused batches change nothing */
    uint32_t np0 = sjkh_session_n_past(bat[0]);
    sjkh_session *twice[2] = {bat[0], bat[0]};
    CHECK(sjkh_session_decode_batch(twice, 2, next, lb, rs, err, sizeof err) == SJK_ERR_PARAM);
    int32_t badtok[NS] = {next[0], (int32_t)V, next[2]};
    CHECK(sjkh_session_decode_batch(bat, NS, badtok, lb, rs, err, sizeof err) == SJK_ERR_RANGE);
    CHECK(sjkh_session_decode_batch(bat, 33, next, lb, rs, err, sizeof err) == SJK_ERR_PARAM);
    CHECK(sjkh_session_n_past(bat[0]) == np0);
    sjkh_session *full = mk(m, "f16", 4);
    if (full) {
        int32_t ids[4] = {200, 201, 202, 203};
        CHECK(sjkh_session_feed(full, ids, 4, NULL, 0, err, sizeof err) == SJK_OK);
        sjkh_session *pair[2] = {bat[0], full};
        CHECK(sjkh_session_decode_batch(pair, 2, next, lb, rs, err, sizeof err) == SJK_ERR_RANGE);
        CHECK(sjkh_session_n_past(bat[0]) == np0);
        sjkh_session_free(full);
    }
done:
    for (int i = 0; i < NS; i++) {
        sjkh_session_free(bat[i]);
        sjkh_session_free(one[i]);
    }
    free(lb);
    free(l1);
    sjkh_model_free(m);
}

/* A batch at and past the prefill thresholds (16 rows with 8-bit activations, 8 with
 * exact ones): a decode batch keeps the per-row kernels at any count (forward.c
 * decode_rows), so every row is still bit-identical to its session decoding alone. */
enum { NW = 17 };

static sjkh_session *mk_aq(const sjkh_model *m, unsigned act_quant)
{
    sjkh_session_params p = sjkh_session_params_default();
    p.n_ctx = 64;
    p.n_batch = 32;
    p.n_threads = 2;
    p.kv = "f16";
    p.act_quant = act_quant;
    sjkh_session *s = NULL;
    char err[256] = "";
    CHECKF(sjkh_session_create(m, &p, &s, err, sizeof err) == SJK_OK, "%s", err);
    return s;
}

static void wide_batch(const char *file, unsigned act_quant, int *ran)
{
    sjkh_model *m = load_model(file, ran);
    char err[512];
    if (!m) return;
    const size_t V = sjkh_model_get_info(m)->n_vocab;
    sjkh_session *bat[NW] = {0}, *one[NW] = {0};
    float *lb = malloc(NW * V * sizeof(float)), *l1 = malloc(V * sizeof(float));
    int32_t next[NW];
    sjk_status rs[NW];
    int ok = lb && l1, same = 0;
    for (int i = 0; i < NW && ok; i++) {
        bat[i] = mk_aq(m, act_quant);
        one[i] = mk_aq(m, act_quant);
        ok = bat[i] && one[i];
    }
    for (int i = 0; i < NW && ok; i++) {
        int32_t ids[24];
        const uint32_t n = 2 + (uint32_t)i;
        for (uint32_t t = 0; t < n; t++) ids[t] = (int32_t)((t * 7919u + 131u * (unsigned)i) % (V - 300)) + 200;
        CHECK(sjkh_session_feed(bat[i], ids, n, l1, 0, err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_feed(one[i], ids, n, l1, 0, err, sizeof err) == SJK_OK);
        next[i] = argmax(l1, V);
    }
    if (ok) {
        CHECKF(sjkh_session_decode_batch(bat, NW, next, lb, rs, err, sizeof err) == SJK_OK, "%s", err);
        for (int i = 0; i < NW; i++) {
            CHECK(rs[i] == SJK_OK);
            CHECK(sjkh_session_feed(one[i], &next[i], 1, l1, 0, err, sizeof err) == SJK_OK);
            same += memcmp(lb + i * V, l1, V * sizeof(float)) == 0;
        }
        printf("  %s, act_quant %u: a batch of %d rows, %d bit-identical to the session alone\n", file, act_quant, NW,
               same);
        CHECK(same == NW);
    }
    for (int i = 0; i < NW; i++) {
        sjkh_session_free(bat[i]);
        sjkh_session_free(one[i]);
    }
    free(lb);
    free(l1);
    sjkh_model_free(m);
}

TEST(test_wide_decode_batch_matches_single)
{
    int ran = 0;
    wide_batch("SmolLM2-135M-Instruct.Q4_1.gguf", 1, &ran);
    if (!test_light()) { /* (the sanitizer runs: the one case) */
        wide_batch("SmolLM2-135M-Instruct.Q4_1.gguf", 0, &ran);
        wide_batch("gemma-3-270m-q4_k_m.gguf", 1, &ran);
    }
    if (!ran) SKIP("no model files (scripts/fetch-model all)");
}

TEST(test_decode_batch_matches_single)
{
    int ran = 0;
    one_model("gemma-3-270m-q4_k_m.gguf", &ran);
    one_model("SmolLM2-135M-Instruct.Q4_1.gguf", &ran);
    if (!ran) SKIP("no model files (scripts/fetch-model all)");
}

int main(void)
{
    RUN(test_decode_batch_matches_single);
    RUN(test_wide_decode_batch_matches_single);
    return test_summary();
}
