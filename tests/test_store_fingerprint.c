/* test_store_fingerprint.c — the prefix store's fingerprint names a model's content and
 * the cache configuration, never where the file lies: the same bytes at another path
 * (and another mtime) give the same fingerprint; one flipped tensor byte, another --kv
 * or another window type give another. SKIPs without the model files. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "support/models.h"
#include "prefix_store.h"

/* Writes a copy of src to a new temporary file (path in dst), with the byte at `flip`
 * (if not SIZE_MAX) inverted. 1 on success. */
static int copy_file(const char *src, char *dst, size_t flip)
{
    FILE *in = fopen(src, "rb");
    int fd = mkstemp(dst);
    FILE *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int ok = in && out;
    static char buf[1 << 16];
    size_t n, at = 0;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (flip >= at && flip < at + n) buf[flip - at] ^= (char)0xFF;
        ok = fwrite(buf, 1, n, out) == n;
        at += n;
    }
    if (in) fclose(in);
    if (out) ok &= fclose(out) == 0;
    return ok;
}

static int fp_of(const char *path, const char *kv, uint32_t window_type, uint8_t out[32])
{
    sjkh_model *m = NULL;
    char err[256];
    if (sjkh_model_load(path, &m, err, sizeof err) != SJK_OK) return 0;
    sjkh_session_params sp = sjkh_session_params_default();
    sp.kv = kv;
    sp.window_type = window_type;
    int ok = sjks_fingerprint(m, &sp, out) == SJK_OK;
    sjkh_model_free(m);
    return ok;
}

TEST(test_fingerprint_is_content_not_path)
{
    const char *path = test_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (access(path, R_OK)) SKIP("SmolLM2-135M-Instruct.Q4_1.gguf not in the model cache (scripts/fetch-model smollm2-135m)");
    uint8_t a[32], b[32], c[32], d[32], e[32];
    CHECK(fp_of(path, "sj:4/4", 0, a));
    char copy[] = "/tmp/sjk_fp_copy_XXXXXX", flipped[] = "/tmp/sjk_fp_flip_XXXXXX";
    CHECK(copy_file(path, copy, SIZE_MAX));
    sleep(1); /* another mtime */
    CHECK(fp_of(copy, "sj:4/4", 0, b));
    CHECK(!memcmp(a, b, 32));
    /* one byte in the middle of the last tensor's data */
    sjkh_gguf *g = NULL;
    char err[256];
    CHECK(sjkh_gguf_open(path, &g, err, sizeof err) == SJK_OK);
    if (g) {
        const sjkh_tensor *t = sjkh_gguf_tensor(g, sjkh_gguf_n_tensors(g) - 1);
        CHECK(copy_file(path, flipped, (size_t)t->file_offset + t->nbytes / 2));
        sjkh_gguf_close(g);
        CHECK(fp_of(flipped, "sj:4/4", 0, c));
        CHECK(memcmp(a, c, 32) != 0);
    }
    CHECK(fp_of(path, "sj:4/4:tail=256", 0, d)); /* another cache configuration */
    CHECK(memcmp(a, d, 32) != 0);
    CHECK(fp_of(path, "sj:3/2t", 0, e));
    CHECK(memcmp(a, e, 32) != 0 && memcmp(d, e, 32) != 0);
    unlink(copy);
    unlink(flipped);
}

TEST(test_fingerprint_window_type)
{
    const char *path = test_model_path("gemma-3-270m-q4_k_m.gguf");
    if (access(path, R_OK)) SKIP("gemma-3-270m-q4_k_m.gguf not in the model cache (scripts/fetch-model gemma3-270m)");
    uint8_t a[32], b[32];
    CHECK(fp_of(path, "f16", SJKH_WINDOW_F16, a));
    CHECK(fp_of(path, "f16", SJKH_WINDOW_Q8_0, b));
    CHECK(memcmp(a, b, 32) != 0);
}

int main(void)
{
    RUN(test_fingerprint_is_content_not_path);
    RUN(test_fingerprint_window_type);
    return test_summary();
}
