/* test_session_block.c — a session rebuilt from exported blocks continues bit-exactly.
 *
 * Session A feeds a prompt up to the cut, seals to it, exports its blocks (GROWING for
 * every block, WINDOW for those the window needs), then feeds the rest of the prompt and
 * one more token. Session B (fresh, same model and cache) imports those blocks, finishes,
 * feeds the same rest and token: its logits must be bit-identical to A's — for a
 * compressed cache with sealed records, a uniform cache, the host's own fp16 cache, and
 * Gemma 3's sliding-window layers (f16 and q8_0). A corrupted record is refused and
 * resets B. SKIPs without the model files (fails under SJK_REQUIRE_ALL=1). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sjkhost.h"
#include "support/models.h"

static sjkh_session *mk(const sjkh_model *m, const char *kv, uint32_t window_type)
{
    sjkh_session_params p = sjkh_session_params_default();
    p.n_ctx = 1024;
    p.n_batch = 96; /* not a divisor of 128: chunks straddle block edges */
    p.n_threads = 2;
    p.kv = kv;
    p.window_type = window_type;
    sjkh_session *s = NULL;
    char err[256];
    CHECKF(sjkh_session_create(m, &p, &s, err, sizeof err) == SJK_OK, "%s: %s", kv, err);
    return s;
}

static void one(const sjkh_model *m, const char *kv, uint32_t wt, const int32_t *ids, uint32_t n)
{
    const sjkh_model_info *in = sjkh_model_get_info(m);
    sjkh_session *a = mk(m, kv, wt), *b = mk(m, kv, wt);
    float *la = malloc(in->n_vocab * sizeof *la), *lb = malloc(in->n_vocab * sizeof *lb);
    uint8_t *blk[2][16] = {{0}};
    size_t nb[2][16] = {{0}};
    char err[256];
    if (!a || !b || !la || !lb) goto out;
    uint32_t cut = sjkh_session_block_cut(a, n), wf = sjkh_session_block_window_first(a, cut);
    CHECKF(cut >= 2 && cut <= 16, "%s: cut %u", kv, cut);
    if (cut < 2 || cut > 16) goto out;
    uint32_t P = cut * SJKH_BLOCK_TOKENS;
    CHECK(sjkh_session_feed(a, ids, P, NULL, 0, err, sizeof err) == SJK_OK);
    CHECK(sjkh_session_seal_to(a, P) == SJK_OK);
    for (uint32_t i = 0; i < cut; i++)
        for (int part = 0; part < 2; part++) {
            if (part == SJKH_BLOCK_WINDOW && (!in->sliding_window || i < wf)) continue;
            CHECK(sjkh_session_block_export(a, part, i, NULL, 0, &nb[part][i]) == SJK_OK);
            blk[part][i] = malloc(nb[part][i] ? nb[part][i] : 1);
            CHECKF(sjkh_session_block_export(a, part, i, blk[part][i], nb[part][i], NULL) == SJK_OK,
                   "%s: export part %d block %u", kv, part, i);
        }
    int32_t next = 4321;
    CHECK(sjkh_session_feed(a, ids + P, n - P, NULL, 0, err, sizeof err) == SJK_OK);
    CHECK(sjkh_session_feed(a, &next, 1, la, 0, err, sizeof err) == SJK_OK);

    /* a damaged record is refused and resets the session (compressed caches only) */
    if (!strncmp(kv, "sj", 2) && cut >= 3) {
        CHECK(sjkh_session_block_import(b, SJKH_BLOCK_GROWING, 0, blk[0][0], nb[0][0]) == SJK_OK);
        uint8_t *bad = malloc(nb[0][1]);
        memcpy(bad, blk[0][1], nb[0][1]);
        bad[nb[0][1] - 1] = 0x7F; /* the last fp16 scale field of the last layer/head: NaN */
        CHECK(sjkh_session_block_import(b, SJKH_BLOCK_GROWING, 1, bad, nb[0][1]) == SJK_ERR_CORRUPT);
        free(bad);
        CHECK(sjkh_session_block_finish(b, 1) != SJK_OK);
        CHECK(sjkh_session_block_import(b, SJKH_BLOCK_GROWING, 1, blk[0][1], nb[0][1]) == SJK_ERR_RANGE);
    }
    for (uint32_t i = 0; i < cut; i++)
        CHECKF(sjkh_session_block_import(b, SJKH_BLOCK_GROWING, i, blk[0][i], nb[0][i]) == SJK_OK, "%s: import %u",
               kv, i);
    if (in->sliding_window) {
        CHECK(sjkh_session_block_finish(b, cut) == SJK_ERR_RANGE); /* the window is missing */
        for (uint32_t i = wf; i < cut; i++)
            CHECK(sjkh_session_block_import(b, SJKH_BLOCK_WINDOW, i, blk[1][i], nb[1][i]) == SJK_OK);
    }
    CHECK(sjkh_session_block_finish(b, cut) == SJK_OK);
    CHECK(sjkh_session_n_past(b) == P);
    CHECK(sjkh_session_feed(b, ids + P, n - P, NULL, 0, err, sizeof err) == SJK_OK);
    CHECK(sjkh_session_feed(b, &next, 1, lb, 0, err, sizeof err) == SJK_OK);
    CHECKF(memcmp(la, lb, in->n_vocab * sizeof *la) == 0, "%s (window %u): logits differ", kv, wt);
out:
    for (int part = 0; part < 2; part++)
        for (int i = 0; i < 16; i++) free(blk[part][i]);
    free(la);
    free(lb);
    sjkh_session_free(a);
    sjkh_session_free(b);
}

static int run_model(const char *file, const char *const *kvs, int n_kvs, uint32_t n)
{
    const char *path = test_model_path(file);
    if (access(path, R_OK)) return 0;
    sjkh_model *m = NULL;
    char err[512];
    CHECKF(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK, "%s", err);
    if (!m) return 1;
    const sjkh_model_info *in = sjkh_model_get_info(m);
    int32_t ids[1024];
    for (uint32_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 7919u + 13u) % (in->n_vocab - 300)) + 200;
    /* sliding-window models: both window types (f16 and q8_0 rows); under SJK_TEST_LIGHT
     * q8_0 only: the window blocks are the same row copies for either row size, and each
     * `one` is two sessions of more than 640 Gemma positions (the window's first block
     * must be past block 0) */
    for (int c = 0; c < n_kvs; c++) {
        if (!in->sliding_window || !test_light()) one(m, kvs[c], 0, ids, n);
        if (in->sliding_window) one(m, kvs[c], 1, ids, n);
    }
    sjkh_model_free(m);
    return 1;
}

TEST(test_smollm2_blocks_continue_exactly)
{
    static const char *const kvs[] = {"sj:4/4:tail=128", "sj:3/2t:tail=128", "q8_0", "host-f16"};
    if (!run_model("SmolLM2-135M-Instruct.Q4_1.gguf", kvs, test_light() ? 1 : 4, test_light() ? 400 : 700))
        SKIP("SmolLM2-135M-Instruct.Q4_1.gguf not in the model cache (scripts/fetch-model smollm2-135m)");
}

TEST(test_gemma3_blocks_continue_exactly_with_windows)
{
    static const char *const kvs[] = {"sj:4/4:tail=128", "f16"};
    if (!run_model("gemma-3-270m-q4_k_m.gguf", kvs, test_light() ? 1 : 2, test_light() ? 700 : 900))
        SKIP("gemma-3-270m-q4_k_m.gguf not in the model cache (scripts/fetch-model gemma3-270m)");
}

int main(void)
{
    RUN(test_smollm2_blocks_continue_exactly);
    RUN(test_gemma3_blocks_continue_exactly_with_windows);
    return test_summary();
}
