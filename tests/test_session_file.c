/* test_session_file.c — sjkh_session_save / _load on the real models: after a restore
 * the next token's logits are bit-identical to those of the session that was saved (for
 * a compressed cache with sealed records, a uniform cache, the host's own fp16 cache, and
 * gemma3's sliding-window layers); a damaged, truncated or mismatched file is refused and
 * leaves the session unchanged. SKIPs loudly without the model files. Under
 * SJK_TEST_LIGHT (`make valgrind`) each model runs one cache over fewer positions: SmolLM2
 * with sj:3/3t, no sink and a fixed tail of 0 (136 positions: one sealed record per layer
 * and head, and staged rows), Gemma 3 with f16 (24 positions: both kinds of layer). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "harness.h"
#include "support/session.h"
#include "model/kv.h"    /* sjkh_kv_layer_storage: to make one layer refuse positions */
#include "model/model.h" /* the session's kv */
#include "sjkhost.h"
#include "support/models.h"

static sjkh_session *mk(const sjkh_model *m, const char *kv)
{
    return test_session_new(m, kv, 768, 64, 2);
}

static void one_model(const char *file, const char *const *kvs, int n_kvs, int *ran, int np_light)
{
    const char *path = test_model_path(file);
    if (access(path, R_OK)) {
        SKIP_PART("%s missing (scripts/fetch-model): its caches not saved or resumed", file);
        return;
    }
    (*ran)++;
    sjkh_model *m = NULL;
    char err[512];
    CHECK(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK);
    if (!m) return;
    const sjkh_model_info *in = sjkh_model_get_info(m);
    enum { NP_FULL = 600 };
    const uint32_t NP = test_light() ? (uint32_t)np_light : NP_FULL, NP2 = test_light() ? 8 : 100;
    static int32_t ids[NP_FULL];
    for (uint32_t i = 0; i < NP; i++) ids[i] = (int32_t)((i * 7919u + 13u) % (in->n_vocab - 300)) + 200;
    float *a = malloc(in->n_vocab * sizeof *a), *b = malloc(in->n_vocab * sizeof *b);
    char tmp[] = "/tmp/sjk_session_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    for (int c = 0; c < n_kvs; c++) {
        sjkh_session *s1 = mk(m, kvs[c]), *s2 = mk(m, kvs[c]);
        if (!s1 || !s2) { sjkh_session_free(s1); sjkh_session_free(s2); continue; }
        CHECK(sjkh_session_feed(s1, ids, NP, NULL, 0, err, sizeof err) == SJK_OK);
        CHECKF(sjkh_session_save(s1, tmp, 4242, err, sizeof err) == SJK_OK, "%s", err);
        int32_t next = 777;
        CHECK(sjkh_session_feed(s1, &next, 1, a, 0, err, sizeof err) == SJK_OK);
        /* s2 holds something else first; the load replaces it */
        CHECK(sjkh_session_feed(s2, ids, NP2, NULL, 0, err, sizeof err) == SJK_OK);
        int32_t pending = 0;
        CHECKF(sjkh_session_load(s2, tmp, &pending, err, sizeof err) == SJK_OK, "%s: %s", kvs[c], err);
        CHECK(pending == 4242);
        CHECK(sjkh_session_n_past(s2) == NP);
        CHECK(sjkh_session_feed(s2, &next, 1, b, 0, err, sizeof err) == SJK_OK);
        CHECKF(memcmp(a, b, in->n_vocab * sizeof *a) == 0, "%s %s: logits differ after restore", file, kvs[c]);
        /* a flipped byte anywhere in the file is refused; the session is unchanged */
        FILE *f = fopen(tmp, "rb");
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc((size_t)len);
        CHECK(fread(buf, 1, (size_t)len, f) == (size_t)len);
        fclose(f);
        char bad[64];
        snprintf(bad, sizeof bad, "%s.bad", tmp);
        int refused = 0;
        for (int t = 0; t < 20; t++) {
            long pos = (long)((uint64_t)(t * 2654435761u) % (uint64_t)len);
            buf[pos] ^= 0x10;
            f = fopen(bad, "wb");
            fwrite(buf, 1, (size_t)(t == 19 ? len / 2 : len), f);
            fclose(f);
            buf[pos] ^= 0x10;
            if (sjkh_session_load(s2, bad, NULL, err, sizeof err) != SJK_OK) refused++;
        }
        CHECK(refused == 20);
        CHECK(sjkh_session_n_past(s2) == NP + 1);
        unlink(bad);
        free(buf);
        sjkh_session_free(s1);
        sjkh_session_free(s2);
        if (getenv("SJK_TEST_VERBOSE")) fprintf(stderr, "  %s --kv %s: %ld-byte session file, logits bit-identical\n", file, kvs[c], len);
    }
    /* another shape is a mismatch */
    sjkh_session *s3 = mk(m, "q8_0");
    if (s3 && strcmp(kvs[0], "q8_0")) {
        CHECK(sjkh_session_load(s3, tmp, NULL, err, sizeof err) == SJK_ERR_MISMATCH);
    }
    sjkh_session_free(s3);
    unlink(tmp);
    free(a);
    free(b);
    sjkh_model_free(m);
}

TEST(test_session_resume_bit_identical)
{
    int ran = 0;
    static const char *const smol[] = {"sj:3/3t:tail=128", "q8_0/q4_0", "host-f16"};
    static const char *const gemma[] = {"sj:4/4:tail_min=128:tail_max=256", "f16"};
    static const char *const smol_light[] = {"sj:3/3t:sink=0:tail=0"};
    static const char *const gemma_light[] = {"f16"};
    if (test_light()) {
        printf("  SJK_TEST_LIGHT: one cache per model, 136 / 24 positions (not 600)\n");
        one_model("SmolLM2-135M-Instruct.Q4_1.gguf", smol_light, 1, &ran, 136);
        one_model("gemma-3-270m-q4_k_m.gguf", gemma_light, 1, &ran, 24);
    } else {
        one_model("SmolLM2-135M-Instruct.Q4_1.gguf", smol, 3, &ran, 0);
        one_model("gemma-3-270m-q4_k_m.gguf", gemma, 2, &ran, 0);
    }
    if (!ran) SKIP("no model files in SJK_MODEL_DIR / ~/.cache/sjkvarn/models: run scripts/fetch-model");
}

/* A session saved before record format 4: its --kv said "sj:3/3t" for the float-table
 * trellis body (`tf` today) and its cache part says record format 1. Made here as that
 * writer made it: a `tf` session saved, then the header's --kv rewritten to the old
 * spelling (header CRC recomputed). It loads into a `tf` session, bit-identically, and a
 * `t` session (the int8-grid body) refuses it naming the new suffixes. */
TEST(test_session_saved_before_record_format_4)
{
    const char *path = test_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (access(path, R_OK)) SKIP("SmolLM2-135M-Instruct.Q4_1.gguf missing (scripts/fetch-model)");
    sjkh_model *m = NULL;
    char err[512];
    CHECK(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK);
    if (!m) return;
    const sjkh_model_info *in = sjkh_model_get_info(m);
    enum { NP = 200 };
    static int32_t ids[NP];
    for (uint32_t i = 0; i < NP; i++) ids[i] = (int32_t)((i * 7919u + 13u) % (in->n_vocab - 300)) + 200;
    char tmp[] = "/tmp/sjk_session_v3_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    float *a = malloc(in->n_vocab * sizeof *a), *b = malloc(in->n_vocab * sizeof *b);
    sjkh_session *s1 = mk(m, "sj:3/3tf:sink=0:tail=0"), *s2 = mk(m, "sj:3/3tf:sink=0:tail=0");
    sjkh_session *s3 = mk(m, "sj:3/3t:sink=0:tail=0");
    if (s1 && s2 && s3 && a && b) {
        CHECK(sjkh_session_feed(s1, ids, NP, NULL, 0, err, sizeof err) == SJK_OK);
        CHECKF(sjkh_session_save(s1, tmp, 7, err, sizeof err) == SJK_OK, "%s", err);
        FILE *f = fopen(tmp, "r+b");
        CHECK(f != NULL);
        if (f) {
            uint8_t h[256];
            CHECK(fread(h, 1, sizeof h, f) == sizeof h);
            CHECK(!strcmp((const char *)h + 88, "sj:3/3tf:sink=0:tail=0"));
            memset(h + 88, 0, 128);
            strcpy((char *)h + 88, "sj:3/3t:sink=0:tail=0");
            const uint32_t crc = sjk_crc32c(0, h, 252);
            for (int i = 0; i < 4; i++) h[252 + i] = (uint8_t)(crc >> (8 * i));
            fseek(f, 0, SEEK_SET);
            CHECK(fwrite(h, 1, sizeof h, f) == sizeof h);
            fclose(f);
        }
        int32_t next = 321, pending = 0;
        CHECK(sjkh_session_feed(s1, &next, 1, a, 0, err, sizeof err) == SJK_OK);
        CHECKF(sjkh_session_load(s2, tmp, &pending, err, sizeof err) == SJK_OK, "%s", err);
        CHECK(pending == 7 && sjkh_session_n_past(s2) == NP);
        CHECK(sjkh_session_feed(s2, &next, 1, b, 0, err, sizeof err) == SJK_OK);
        CHECK(memcmp(a, b, in->n_vocab * sizeof *a) == 0);
        CHECK(sjkh_session_load(s3, tmp, NULL, err, sizeof err) == SJK_ERR_MISMATCH);
        CHECKF(strstr(err, "record format 4") && strstr(err, "`tf`"), "%s", err);
        CHECK(sjkh_session_n_past(s3) == 0);
    }
    sjkh_session_free(s1);
    sjkh_session_free(s2);
    sjkh_session_free(s3);
    free(a);
    free(b);
    unlink(tmp);
    sjkh_model_free(m);
}

/* A feed that fails in the middle of a chunk leaves the layers at different lengths
 * (the layers before the failing one hold the chunk). The session must say so and
 * refuse to go on, or to be saved, until it is reset, instead of appending the next
 * tokens at positions that differ per layer. The failure is made by filling layer 1's
 * length to the context, so that its append is refused after layer 0's succeeded. */
TEST(test_feed_failure_mid_chunk_refuses_until_reset)
{
    const char *path = test_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (access(path, R_OK)) SKIP("no SmolLM2 in SJK_MODEL_DIR / ~/.cache/sjkvarn/models: run scripts/fetch-model");
    sjkh_model *m = NULL;
    char err[512];
    CHECK(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK);
    if (!m) return;
    for (int c = 0; c < 2; c++) {
        const char *kv = c ? "sj:4/4" : "host-f16"; /* libsjkvarn's cache and the host's own */
        sjkh_session *s = mk(m, kv);
        if (!s) continue;
        int32_t ids[12];
        for (int i = 0; i < 12; i++) ids[i] = 300 + 17 * i;
        CHECK(sjkh_session_feed(s, ids, 8, NULL, 0, err, sizeof err) == SJK_OK);
        uint32_t *len, saved;
        uint8_t *k, *v;
        size_t nb, rb;
        sjk_cache *cache;
        CHECK(sjkh_kv_layer_storage(s->kv, 1, &len, &k, &v, &nb, &rb, &cache) == SJK_OK);
        saved = *len;
        CHECK(saved == 8);
        *len = s->p.n_ctx; /* layer 1 is "full": its append fails after layer 0's */
        sjk_status st = sjkh_session_feed(s, ids + 8, 4, NULL, 0, err, sizeof err);
        CHECKF(st == SJK_ERR_RANGE, "%s: first failure %s", kv, sjk_status_str(st));
        CHECK(sjkh_session_n_past(s) == 8);
        CHECK(sjkh_kv_length(s->kv, 0) == 12 && sjkh_kv_length(s->kv, 2) == 8); /* the lengths differ */
        *len = saved;
        /* the session is not usable now, although layer 1 would accept positions again */
        st = sjkh_session_feed(s, ids + 8, 4, NULL, 0, err, sizeof err);
        CHECKF(st == SJK_ERR_RANGE && strstr(err, "reset"), "%s: %s: %s", kv, sjk_status_str(st), err);
        CHECK(sjkh_session_n_past(s) == 8 && sjkh_kv_length(s->kv, 0) == 12);
        char tmp[] = "/tmp/sjk_session_fail_XXXXXX";
        int fd = mkstemp(tmp);
        if (fd >= 0) close(fd);
        CHECK(sjkh_session_save(s, tmp, 0, err, sizeof err) != SJK_OK && strstr(err, "reset"));
        unlink(tmp);
        /* reset starts it over */
        CHECK(sjkh_session_reset(s) == SJK_OK);
        CHECK(sjkh_session_feed(s, ids, 12, NULL, 0, err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_n_past(s) == 12 && sjkh_kv_length(s->kv, 0) == 12 && sjkh_kv_length(s->kv, 1) == 12);
        sjkh_session_free(s);
    }
    sjkh_model_free(m);
}

int main(void)
{
    RUN(test_session_resume_bit_identical);
    RUN(test_feed_failure_mid_chunk_refuses_until_reset);
    RUN(test_session_saved_before_record_format_4);
    return test_summary();
}
