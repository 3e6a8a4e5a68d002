/* test_inspect.c — the readers behind `sjkvarn inspect` on good and hostile files:
 * sjk_cache_file_inspect (cache files), sjkh_session_file_inspect (session files, a
 * container built here byte by byte from docs/FORMAT.md) and the CLI itself on truncated,
 * bit-flipped, patched and random files: each must give an error (exit 1 or 2), never a
 * crash, and a good file must report exactly what was saved. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codec/record.h"
#include "common/crc32c.h"
#include "common/rng.h"
#include "common/util.h"
#include "harness.h"
#include "support/gguf_writer.h"
#include "support/json_lite.h"
#include "sjkhost.h"
#include "sjkvarn.h"

/* A small cache of two layers (sj 4/4 with a 128/256 tail, q8_0) and two sequences,
 * filled with different lengths so records, ring and rows are all present. */
static sjk_layer_config g_lay[2];
static uint8_t g_fp[SJK_FINGERPRINT_NBYTES];

static sjk_cache *make_cache(void)
{
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = 2;
    p.n_kv_heads = 1;
    p.n_q_heads = 2;
    p.head_dim = 64;
    p.max_pos = 1024;
    p.n_seqs = 2;
    p.max_q_rows = 2;
    if (sjk_cache_config_parse("sj:4/4:tail=128", 1, &g_lay[0], NULL, 0) != SJK_OK) return NULL;
    g_lay[0].tail_max = 256;
    if (sjk_cache_config_parse("q8_0", 1, &g_lay[1], NULL, 0) != SJK_OK) return NULL;
    p.layers = g_lay;
    sjk_cache *c = NULL;
    if (sjk_cache_create(&p, &c) != SJK_OK) return NULL;
    sjk_rng r;
    sjk_rng_seed(&r, 7);
    static float k[600 * 64], v[600 * 64];
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) k[i] = (float)sjk_rng_normal(&r), v[i] = (float)sjk_rng_normal(&r);
    const uint32_t len[2] = {600, 77};
    for (uint32_t s = 0; s < 2; s++)
        for (uint32_t l = 0; l < 2; l++)
            if (sjk_cache_append(c, s, l, k, v, len[s]) != SJK_OK) {
                sjk_cache_free(c);
                return NULL;
            }
    for (int i = 0; i < SJK_FINGERPRINT_NBYTES; i++) g_fp[i] = (uint8_t)(i * 37 + 1);
    return c;
}

static uint8_t *save(sjk_cache *c, size_t *n)
{
    sjk_cache_save_memory(c, g_fp, NULL, 0, n);
    uint8_t *b = malloc(*n);
    if (b && sjk_cache_save_memory(c, g_fp, b, *n, n) != SJK_OK) { free(b); b = NULL; }
    return b;
}

static sjk_status inspect(const uint8_t *b, size_t n, sjk_cache_file_info *in)
{
    sjk_layer_config lay[4];
    uint32_t st[16];
    char err[256];
    return sjk_cache_file_inspect(b, n, in, lay, 4, st, 16, err, sizeof err);
}

TEST(test_cache_file_inspect_reports_what_was_saved)
{
    sjk_cache *c = make_cache();
    if (!c) { CHECK(0); return; }
    size_t n = 0;
    uint8_t *b = save(c, &n);
    CHECK(b != NULL);
    sjk_cache_file_info in;
    sjk_layer_config lay[2];
    uint32_t st[8];
    char err[256];
    CHECKF(sjk_cache_file_inspect(b, n, &in, lay, 2, st, 8, err, sizeof err) == SJK_OK, "%s", err);
    CHECK(in.file_version == SJK_CACHE_FILE_VERSION && in.record_version == 1); /* v1 widths: a v1 file */
    CHECK(in.n_layers == 2 && in.n_kv_heads == 1 && in.n_q_heads == 2 && in.head_dim == 64 && in.max_pos == 1024 &&
          in.n_seqs == 2);
    CHECK(in.file_nbytes == n && in.n_sections == 2 + 2 * 2 && in.n_sections_ok == 6 && in.n_sections_bad == 0);
    CHECK(!memcmp(in.fingerprint, g_fp, sizeof g_fp));
    for (uint32_t l = 0; l < 2; l++) {
        char a[96], e[96];
        CHECK(sjk_layer_config_str(&lay[l], a, sizeof a) == SJK_OK && sjk_layer_config_str(&g_lay[l], e, sizeof e) == SJK_OK);
        CHECKF(!strcmp(a, e), "layer %u: %s, saved %s", l, a, e);
    }
    for (uint32_t s = 0; s < 2; s++)
        for (uint32_t l = 0; l < 2; l++) {
            uint32_t N, B;
            CHECK(sjk_cache_length(c, s, l, &N, &B) == SJK_OK);
            CHECKF(st[2 * (s * 2 + l)] == N && st[2 * (s * 2 + l) + 1] == B, "seq %u layer %u", s, l);
        }
    /* the 600-position sequence has sealed records and a ring: the test covers them */
    uint32_t N, B;
    sjk_cache_length(c, 0, 0, &N, &B);
    CHECK(B > 128 && N > B);
    /* NULL arrays are fine */
    CHECK(sjk_cache_file_inspect(b, n, &in, NULL, 0, NULL, 0, NULL, 0) == SJK_OK);
    free(b);
    sjk_cache_free(c);
}

TEST(test_cache_file_inspect_every_truncation_is_an_error)
{
    sjk_cache *c = make_cache();
    if (!c) { CHECK(0); return; }
    size_t n = 0;
    uint8_t *b = save(c, &n);
    size_t step = test_light() ? 97 : 1, bad = 0;
    for (size_t len = 0; len < n; len += step) {
        uint8_t *t = malloc(len ? len : 1); /* exact size: ASan sees a read past the end */
        memcpy(t, b, len);
        sjk_cache_file_info in;
        if (inspect(t, len, &in) == SJK_OK) bad++;
        free(t);
    }
    CHECKF(bad == 0, "%zu truncations passed", bad);
    free(b);
    sjk_cache_free(c);
}

TEST(test_cache_file_inspect_every_flipped_byte_is_caught)
{
    sjk_cache *c = make_cache();
    if (!c) { CHECK(0); return; }
    size_t n = 0;
    uint8_t *b = save(c, &n);
    size_t step = test_light() ? 13 : 1, missed = 0, first = 0;
    for (size_t i = 0; i < n; i += step) {
        b[i] ^= (uint8_t)(1u << (i % 8));
        sjk_cache_file_info in;
        if (inspect(b, n, &in) == SJK_OK && !missed++) first = i;
        b[i] ^= (uint8_t)(1u << (i % 8));
    }
    CHECKF(missed == 0, "%zu flipped bytes passed, the first at %zu", missed, first);
    sjk_cache_file_info in;
    CHECK(inspect(b, n, &in) == SJK_OK); /* restored */
    free(b);
    sjk_cache_free(c);
}

/* Header fields patched to hostile values with the header CRC recomputed, so the reader
 * goes past the checksum: section count, layers, sequences, file size. */
TEST(test_cache_file_inspect_hostile_header_fields)
{
    sjk_cache *c = make_cache();
    if (!c) { CHECK(0); return; }
    size_t n = 0;
    uint8_t *b = save(c, &n);
    uint8_t *t = malloc(n);
    const struct { size_t off; uint32_t v; } patches[] = {
        {24, 0}, {24, 0xFFFFFFFFu}, {24, 1u << 28}, {44, 0}, {44, 0xFFFFFFFFu}, {48, 0}, {48, 0xFFFFFFFFu},
        {48, 7}, {56, 0}, {56, 0xFFFFFFFFu}, {60, 1}, {8, 1}, {8, 3}, {16, SJK_RECORD_FORMAT_VERSION + 1}, {16, 0}, {12, 64},
    };
    for (size_t k = 0; k < sizeof patches / sizeof patches[0]; k++) {
        memcpy(t, b, n);
        sjk_wr_u32le(t + patches[k].off, patches[k].v);
        sjk_wr_u32le(t + 124, sjk_crc32c(0, t, 124));
        sjk_cache_file_info in;
        sjk_status st = inspect(t, n, &in);
        CHECKF(st == SJK_ERR_CORRUPT || st == SJK_ERR_FORMAT, "patch %zu (offset %zu = %u): %s", k, patches[k].off,
               patches[k].v, sjk_status_str(st));
    }
    /* a section size pointing past the end, its CRC recomputed */
    memcpy(t, b, n);
    sjk_wr_u32le(t + 128 + 8, 0x7FFFFFFFu);
    sjk_cache_file_info in;
    CHECK(inspect(t, n, &in) == SJK_ERR_CORRUPT);
    free(t);
    free(b);
    sjk_cache_free(c);
}

TEST(test_cache_file_inspect_random_bytes)
{
    sjk_rng r;
    sjk_rng_seed(&r, 99);
    const int iters = test_light() ? 200 : 3000;
    int passed = 0;
    for (int it = 0; it < iters; it++) {
        size_t n = (size_t)(sjk_rng_uniform(&r) * 600);
        uint8_t *b = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(sjk_rng_uniform(&r) * 256);
        if (n >= 8 && it % 2) memcpy(b, "SJKVCACH", 8);
        if (n >= 128 && it % 4 == 1) sjk_wr_u32le(b + 124, sjk_crc32c(0, b, 124));
        sjk_cache_file_info in;
        passed += inspect(b, n, &in) == SJK_OK;
        free(b);
    }
    CHECK(passed == 0);
}

/* ---- session files: the container, built from docs/FORMAT.md ---------------------- */

static uint8_t *make_session(const uint8_t *cache, size_t cache_n, size_t *n_out)
{
    const size_t host_rows = 3 * 64; /* a host section of some rows (contents opaque here) */
    const size_t host_n = 4 + 4 + host_rows + 4;
    size_t n = 256 + host_n + cache_n;
    uint8_t *f = calloc(1, n);
    if (!f) return NULL;
    memcpy(f, "SJKHSESS", 8);
    sjk_wr_u32le(f + 8, 2);
    sjk_wr_u32le(f + 12, 256);
    sjk_wr_u32le(f + 16, 77);   /* n_past */
    sjk_wr_u32le(f + 20, 18);   /* n_layers */
    sjk_wr_u32le(f + 24, 1024); /* n_ctx */
    sjk_wr_u32le(f + 28, 512);  /* n_batch */
    sjk_wr_u32le(f + 32, 4242); /* pending token */
    sjk_wr_u32le(f + 36, 1);    /* window q8_0 */
    sjk_wr_u32le(f + 40, (uint32_t)host_n);
    sjk_wr_u32le(f + 48, (uint32_t)cache_n);
    memcpy(f + 56, g_fp, sizeof g_fp);
    snprintf((char *)f + 88, 128, "sj:4/4");
    sjk_wr_u32le(f + 252, sjk_crc32c(0, f, 252));
    uint8_t *h = f + 256;
    sjk_wr_u32le(h, 77);
    for (size_t i = 4; i < host_n - 4; i++) h[i] = (uint8_t)(i * 11);
    sjk_wr_u32le(h + host_n - 4, sjk_crc32c(0, h, host_n - 4));
    memcpy(f + 256 + host_n, cache, cache_n);
    *n_out = n;
    return f;
}

TEST(test_session_file_inspect_reads_the_container)
{
    sjk_cache *c = make_cache();
    if (!c) { CHECK(0); return; }
    size_t cn = 0, n = 0;
    uint8_t *cb = save(c, &cn), *f = make_session(cb, cn, &n);
    sjkh_session_file_info in;
    char err[256];
    CHECKF(sjkh_session_file_inspect(f, n, &in, err, sizeof err) == SJK_OK, "%s", err);
    CHECK(in.version == 2 && in.n_past == 77 && in.n_layers == 18 && in.n_ctx == 1024 && in.n_batch == 512);
    CHECK(in.pending_token == 4242 && in.window_type == 1 && !strcmp(in.kv, "sj:4/4"));
    CHECK(in.header_ok && in.host_ok && !memcmp(in.fingerprint, g_fp, sizeof g_fp));
    CHECK(in.cache_offset + in.cache_nbytes == n && in.cache_nbytes == cn);
    sjk_cache_file_info ci;
    CHECK(inspect(f + in.cache_offset, (size_t)in.cache_nbytes, &ci) == SJK_OK);
    /* every truncation and every flipped byte of the header and host section fails */
    size_t bad = 0;
    for (size_t len = 0; len < n; len += test_light() ? 31 : 1) {
        if (sjkh_session_file_inspect(f, len, &in, err, sizeof err) == SJK_OK) bad++;
    }
    for (size_t i = 0; i < (size_t)in.cache_offset; i++) {
        f[i] ^= 0x10;
        if (sjkh_session_file_inspect(f, n, &in, err, sizeof err) == SJK_OK) bad++;
        f[i] ^= 0x10;
    }
    CHECKF(bad == 0, "%zu damaged session files passed", bad);
    free(f);
    free(cb);
    sjk_cache_free(c);
}

/* ---- the CLI on hostile files ----------------------------------------------------- */

static char g_cli[1024], g_dir[256];

/* Runs `sjkvarn inspect [--json] PATH` quietly; returns its exit status, or 128 + the
 * signal that killed it. */
static int cli_inspect(const char *path, int json)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s inspect %s%s >/dev/null 2>&1", g_cli, json ? "--json " : "", path);
    int st = system(cmd);
    if (st == -1) return -1;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (n) fwrite(p, 1, n, f);
    fclose(f);
}

TEST(test_cli_inspect_hostile_files_exit_cleanly)
{
    if (access(g_cli, X_OK)) SKIP("%s is not built", g_cli);
    sjk_cache *c = make_cache();
    if (!c) { CHECK(0); return; }
    size_t cn = 0, n = 0;
    uint8_t *cb = save(c, &cn), *f = make_session(cb, cn, &n);
    char path[512];
    snprintf(path, sizeof path, "%s/f", g_dir);
    /* the good files first */
    write_file(path, cb, cn);
    CHECK(cli_inspect(path, 0) == 0 && cli_inspect(path, 1) == 0);
    write_file(path, f, n);
    CHECK(cli_inspect(path, 0) == 0 && cli_inspect(path, 1) == 0);
    /* truncations and flips at spread-out places of both, random junk, empty files */
    int crashes = 0, passes = 0, runs = 0;
    const uint8_t *files[2] = {cb, f};
    const size_t sizes[2] = {cn, n};
    const int per = test_light() ? 6 : 12;
    for (int w = 0; w < 2; w++)
        for (int k = 0; k < per; k++) {
            size_t at = (size_t)((double)k / per * (double)sizes[w]);
            int rc;
            write_file(path, files[w], at); /* truncated */
            rc = cli_inspect(path, k % 2);
            crashes += rc >= 128 || rc < 0, passes += rc == 0, runs++;
            uint8_t *t = malloc(sizes[w]);
            memcpy(t, files[w], sizes[w]);
            t[at] ^= 0x5a; /* flipped */
            write_file(path, t, sizes[w]);
            rc = cli_inspect(path, k % 2);
            crashes += rc >= 128 || rc < 0, passes += rc == 0, runs++;
            free(t);
        }
    static uint8_t junk[4096];
    sjk_rng r;
    sjk_rng_seed(&r, 5);
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(sjk_rng_uniform(&r) * 256);
    const char *magics[] = {"GGUF", "SJKHSESS", "SJKVCACH", "XXXX"};
    for (int m = 0; m < 4; m++) {
        memcpy(junk, magics[m], strlen(magics[m]));
        write_file(path, junk, sizeof junk);
        int rc = cli_inspect(path, m % 2);
        crashes += rc >= 128 || rc < 0, passes += rc == 0, runs++;
    }
    write_file(path, junk, 0);
    int rc = cli_inspect(path, 0);
    crashes += rc >= 128 || rc < 0, passes += rc == 0, runs++;
    CHECKF(crashes == 0, "%d of %d runs crashed", crashes, runs);
    CHECKF(passes == 0, "%d of %d damaged files were reported intact", passes, runs);
    free(f);
    free(cb);
    sjk_cache_free(c);
}

/* Metadata-only GGUF files (no tensors): a plausible model the host cannot run, and
 * hostile geometry. Both are valid GGUF, so inspect reports them (exit 0) and says why
 * the host cannot run them; it must never crash on what the metadata claims. */
static void gguf_meta_file(const char *path, const char *arch, uint32_t layers, uint32_t heads, uint32_t kv_heads)
{
    gw_buf w;
    memset(&w, 0, sizeof w);
    gw_u32(&w, 0x46554747u); /* "GGUF" */
    gw_u32(&w, 3);
    gw_u64(&w, 0); /* tensors */
    gw_u64(&w, 0); /* kv count, patched below */
    char key[96];
    gw_kv_str(&w, "general.architecture", arch);
    gw_kv_str(&w, "general.name", "test \"model\"\n");
    snprintf(key, sizeof key, "%s.block_count", arch);
    gw_kv_u32(&w, key, layers);
    snprintf(key, sizeof key, "%s.context_length", arch);
    gw_kv_u32(&w, key, 32768);
    snprintf(key, sizeof key, "%s.embedding_length", arch);
    gw_kv_u32(&w, key, heads * 128u); /* a whole number of 128-wide heads */
    snprintf(key, sizeof key, "%s.attention.head_count", arch);
    gw_kv_u32(&w, key, heads);
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    gw_kv_u32(&w, key, kv_heads);
    memcpy(w.p + 16, &w.n_kv, 8);
    while (w.n % 32) gw_bytes(&w, "", 1);
    write_file(path, w.p, w.n);
    free(w.p);
}

TEST(test_cli_inspect_gguf_the_host_cannot_run)
{
    if (access(g_cli, X_OK)) SKIP("%s is not built", g_cli);
    char path[512], cmd[4096], out[600];
    snprintf(path, sizeof path, "%s/m.gguf", g_dir);
    snprintf(out, sizeof out, "%s/out", g_dir);
    gguf_meta_file(path, "qwen2", 48, 40, 8);
    snprintf(cmd, sizeof cmd, "%s inspect %s >%s 2>&1", g_cli, path, out);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    FILE *f = fopen(out, "r");
    char buf[8192] = "";
    if (f) {
        buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
        fclose(f);
    }
    CHECKF(strstr(buf, "48 layers") && strstr(buf, "40 query / 8 KV") && strstr(buf, "runs here: no"), "%s", buf);
    /* --json escapes the name's quotes and newline and parses */
    snprintf(cmd, sizeof cmd, "%s inspect --json %s >%s 2>/dev/null", g_cli, path, out);
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    buf[0] = 0;
    if ((f = fopen(out, "r"))) {
        buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
        fclose(f);
    }
    char jerr[200];
    CHECKF(json_lite_check(buf, strlen(buf), "kind,architecture,n_layers,heads,runnable,why_not", NULL, jerr,
                           sizeof jerr), "%s: %s", jerr, buf);
    CHECK(strstr(buf, "test \\\"model\\\"?") != NULL); /* quotes escaped, control bytes as ? */
    /* hostile geometry: more layers than any cache holds, no heads, zero layers */
    const uint32_t bad[][3] = {{4000000000u, 8, 8}, {4, 0, 0}, {0, 8, 8}, {2, 8, 3}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        gguf_meta_file(path, k % 2 ? "llama" : "gemma3", bad[k][0], bad[k][1], bad[k][2]);
        int rc = cli_inspect(path, 0), rcj = cli_inspect(path, 1);
        CHECKF(rc == 0 && rcj == 0, "geometry %u/%u/%u: exit %d, --json %d", bad[k][0], bad[k][1], bad[k][2], rc, rcj);
    }
}

int main(void)
{
    const char *b = getenv("BUILD");
    snprintf(g_cli, sizeof g_cli, "%s/sjkvarn", b && *b ? b : "build");
    snprintf(g_dir, sizeof g_dir, "/tmp/sjk-inspect-XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    RUN(test_cache_file_inspect_reports_what_was_saved);
    RUN(test_cache_file_inspect_every_truncation_is_an_error);
    RUN(test_cache_file_inspect_every_flipped_byte_is_caught);
    RUN(test_cache_file_inspect_hostile_header_fields);
    RUN(test_cache_file_inspect_random_bytes);
    RUN(test_session_file_inspect_reads_the_container);
    RUN(test_cli_inspect_hostile_files_exit_cleanly);
    RUN(test_cli_inspect_gguf_the_host_cannot_run);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_dir);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return test_summary();
}
