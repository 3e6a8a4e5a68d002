/* test_session_truncate.c — sjkh_session_truncate on the real models (the server's prefix
 * reuse): a session that held P + Q, cut back to P and fed R, gives the same logits as a
 * fresh session fed P + R, for the host's own fp16 cache, a uniform cache, an SJ cache
 * whose cut falls inside a sealed record (kept < keep: the record's start) and gemma3's
 * sliding-window layers; a ring that no longer holds the window empties the session
 * (kept = 0). Chunks of 8 tokens (below the prefill matmul path) on one thread, so both
 * sessions run the same per-row kernels whatever the chunk boundaries. SKIPs without the
 * model files. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "support/session.h"
#include "sjkhost.h"
#include "support/models.h"

static sjkh_session *mk(const sjkh_model *m, const char *kv, uint32_t n_ctx, uint32_t n_batch)
{
    return test_session_new(m, kv, n_ctx, n_batch, 1);
}

static int feed1(sjkh_session *s, const int32_t *ids, size_t n, float *logits)
{
    char err[256];
    return sjkh_session_feed(s, ids, n, logits, 0, err, sizeof err) ? -1 : 0;
}

/* 260 positions: with no sink and a fixed tail of 0, records 0-127 and 128-255 are
 * sealed; the cut at 200 falls inside the second */
enum { NP = 200, NQ = 60, NR = 6 };

static void one(const sjkh_model *m, const char *kv, int expect_cut_back)
{
    const size_t V = sjkh_model_get_info(m)->n_vocab;
    int32_t p[NP], q[NQ], r[NR];
    for (int i = 0; i < NP; i++) p[i] = (int32_t)((i * 7919u + 17u) % (V - 300)) + 200;
    for (int i = 0; i < NQ; i++) q[i] = (int32_t)((i * 104729u + 5u) % (V - 300)) + 200;
    for (int i = 0; i < NR; i++) r[i] = (int32_t)((i * 15485863u + 11u) % (V - 300)) + 200;
    sjkh_session *a = mk(m, kv, 320, 8), *b = mk(m, kv, 320, 8);
    float *la = malloc(V * sizeof(float)), *lb = malloc(V * sizeof(float));
    if (!a || !b || !la || !lb) goto done;
    CHECK(feed1(a, p, NP, la) == 0);
    CHECK(feed1(a, q, NQ, la) == 0);
    uint32_t kept = 999;
    CHECK(sjkh_session_truncate(a, NP, &kept) == SJK_OK);
    CHECK(kept <= NP);
    CHECK(sjkh_session_n_past(a) == kept);
    if (expect_cut_back) CHECKF(kept < NP, "%s: kept %u", kv, kept);
    else CHECKF(kept == NP, "%s: kept %u", kv, kept);
    printf("  %s: cut %d -> %d, kept %u\n", kv, NP + NQ, NP, kept);
    CHECK(feed1(a, p + kept, NP - kept, la) == 0);
    CHECK(feed1(a, r, NR, la) == 0);
    CHECK(feed1(b, p, NP, lb) == 0);
    CHECK(feed1(b, r, NR, lb) == 0);
    CHECKF(memcmp(la, lb, V * sizeof(float)) == 0, "%s: logits after truncate + refeed differ", kv);
    /* keep beyond the length: nothing changes */
    uint32_t n0 = sjkh_session_n_past(a);
    CHECK(sjkh_session_truncate(a, n0 + 10, &kept) == SJK_OK && kept == n0 && sjkh_session_n_past(a) == n0);
done:
    sjkh_session_free(a);
    sjkh_session_free(b);
    free(la);
    free(lb);
}

TEST(test_truncate_then_refeed_equals_fresh)
{
    int ran = 0;
    const char *files[2] = {"gemma-3-270m-q4_k_m.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"};
    for (int f = 0; f < 2; f++) {
        const char *path = test_model_path(files[f]);
        if (access(path, R_OK)) continue;
        ran++;
        sjkh_model *m = NULL;
        char err[512];
        CHECK(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK);
        if (!m) continue;
        if (f == 0) {
            /* SJK_TEST_LIGHT (the sanitizer and valgrind runs): Gemma 3 with the SJ cache
             * only (the record cut-back and the window layers); the uniform library cache
             * is SmolLM2's q8_0/q4_0 below */
            if (!test_light()) one(m, "f16", 0);
            one(m, "sj:4/4:sink=0:tail=0", 1);
        } else {
            one(m, "host-f16", 0);
            one(m, "q8_0/q4_0", 0);
        }
        sjkh_model_free(m);
    }
    if (!ran) SKIP("no model files (scripts/fetch-model all)");
}

/* Gemma 3's window layers: a ring of window + n_batch rows holds only n_batch positions
 * beyond the window; cutting back further than that empties the session. */
TEST(test_truncate_past_the_window_ring_empties)
{
    const char *path = test_model_path("gemma-3-270m-q4_k_m.gguf");
    if (access(path, R_OK)) SKIP("no Gemma 3 model file (scripts/fetch-model gemma3-270m)");
    sjkh_model *m = NULL;
    char err[512];
    CHECK(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK);
    if (!m) return;
    uint32_t W = sjkh_model_get_info(m)->sliding_window;
    sjkh_session *s = mk(m, "f16", 2048, 16); /* ring: W + 16 rows < n_ctx */
    const size_t N = W + 40;
    int32_t *ids = malloc(N * sizeof *ids);
    if (s && ids) {
        for (size_t i = 0; i < N; i++) ids[i] = (int32_t)(200 + i % 1000);
        CHECK(sjkh_session_feed(s, ids, N, NULL, 0, err, sizeof err) == SJK_OK);
        uint32_t kept = 1;
        CHECK(sjkh_session_truncate(s, (uint32_t)N - 10, &kept) == SJK_OK);
        CHECKF(kept == N - 10, "kept %u", kept); /* 10 back: the ring still holds the window */
        CHECK(sjkh_session_truncate(s, (uint32_t)N - 40, &kept) == SJK_OK);
        CHECKF(kept == 0, "kept %u", kept);        /* 30 more: beyond the ring's spare rows */
        CHECK(sjkh_session_n_past(s) == 0);
    }
    free(ids);
    sjkh_session_free(s);
    sjkh_model_free(m);
}

int main(void)
{
    RUN(test_truncate_then_refeed_equals_fresh);
    RUN(test_truncate_past_the_window_ring_empties);
    return test_summary();
}
