/* test_record_v1_fixture.c — record format versions in cache files. Old cache files stay
 * readable: a small cache file of record format v1 (tests/data/record-v1/cache.sjkc),
 * written by the tree before record format v2 existed, restores in this build and its
 * records decode to the same values; this build still writes v1 (the same section bytes)
 * for v1 widths; a layer with a body above 4 bits makes a v2 file, and a file that says v1
 * for one is refused. (Session files carry a cache file and restore through the same
 * reader.)
 *
 * The fixture and its expected hashes (tests/data/record-v1/expected.txt) were made by
 * this file's generator, built against the tree of commit b25de4e (record format v1):
 *
 *   make -j2 build/tests/test_record_v1_fixture && \
 *     build/tests/test_record_v1_fixture --write tests/data/record-v1
 *
 * Do not regenerate them with a newer tree: they pin what an old writer wrote.
 *
 * The cache: 4 layers (sj:4/4 scalar, sj:3/3 trellis, sj:3/2tc channel trellis, kvarn:4/2),
 * D = 64, 1 KV head, 640 positions of a fixed pseudo-random input with per-channel
 * offsets and outliers; sink 128, a fixed tail of 128 (so each layer seals 3 records and
 * keeps a ring). Hashes (64-bit FNV-1a): the bytes of every final block of every head
 * (sink rows and sealed records, sjk_cache_block_export), and the fp32 values of every
 * record decoded by the reference decoder (sjk_record_decode_ref). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/record.h"
#include "common/crc32c.h"
#include "harness.h"
#include "sjkvarn.h"

#define NL 4
#define NKV 1
#define HD 64
#define NPOS 640
#define MAXPOS 640

/* The v1 writer's "sj:3/3" (its default trellis body, the float codebooks) is "sj:3/3tf"
 * since record format 4 made the int8-grid body the default. */
static const char *const k_cfgs[NL] = {"sj:4/4:tail=128", "sj:3/3tf:tail=128", "sj:3/2tc:tail=128",
                                       "kvarn:4/2:tail=128"};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* A fixed input: xorshift noise, a per-channel offset (keys' common offset), one
 * outlier channel, a slow drift over positions. Integer arithmetic, then one exact
 * conversion, so every build and CPU makes the same floats. */
static void fill_input(uint32_t layer, uint32_t pos, float *k, float *v)
{
    uint64_t s = 0x9E3779B97F4A7C15ull ^ ((uint64_t)layer << 40) ^ ((uint64_t)pos << 8);
    for (uint32_t i = 0; i < NKV * HD; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int32_t a = (int32_t)(s & 0xFFFF) - 32768, b = (int32_t)((s >> 16) & 0xFFFF) - 32768;
        uint32_t d = i % HD;
        float off = (float)((int32_t)(d * 37 % 11) - 5) / 4.0f;
        float out = d == 7 ? 8.0f : 1.0f;
        k[i] = ((float)a / 16384.0f) * out + off + (float)(pos % 97) / 256.0f;
        v[i] = (float)b / 32768.0f * (d == 3 ? 4.0f : 1.0f);
    }
}

static sjk_cache *make_cache(sjk_layer_config *lc)
{
    for (uint32_t l = 0; l < NL; l++)
        if (sjk_cache_config_parse(k_cfgs[l], 1, &lc[l], NULL, 0) != SJK_OK) return NULL;
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = NL;
    p.n_kv_heads = NKV;
    p.n_q_heads = NKV;
    p.head_dim = HD;
    p.max_pos = MAXPOS;
    p.max_q_rows = 4;
    p.layers = lc;
    sjk_cache *c = NULL;
    return sjk_cache_create(&p, &c) == SJK_OK ? c : NULL;
}

static int fill_cache(sjk_cache *c)
{
    static float k[NKV * HD], v[NKV * HD];
    for (uint32_t l = 0; l < NL; l++)
        for (uint32_t pos = 0; pos < NPOS; pos++) {
            fill_input(l, pos, k, v);
            if (sjk_cache_append(c, 0, l, k, v, 1) != SJK_OK) return 0;
        }
    return 1;
}

/* The two hashes of a cache; 0 on any failure. */
static int hash_cache(const sjk_cache *c, const sjk_layer_config *lc, uint64_t *h_bytes, uint64_t *h_vals,
                      uint32_t *n_records)
{
    static uint8_t blk[1 << 16];
    static float kf[SJK_GROUP * HD], vf[SJK_GROUP * HD], kf2[SJK_GROUP * HD], vf2[SJK_GROUP * HD];
    uint64_t hb = 1469598103934665603ull, hv = hb;
    uint32_t nb = 0;
    *n_records = 0;
    if (sjk_cache_blocks_final(c, 0, &nb) != SJK_OK || nb == 0) return 0;
    for (uint32_t l = 0; l < NL; l++) {
        sjk_record_params rp = {HD, lc[l].bits_k, lc[l].bits_v, lc[l].body, lc[l].balance};
        for (uint32_t h = 0; h < NKV; h++)
            for (uint32_t b = 0; b < nb; b++) {
                size_t n = 0;
                if (sjk_cache_block_export(c, 0, l, h, b, blk, sizeof blk, &n) != SJK_OK) return 0;
                hb = fnv(hb, blk, n);
                if ((b + 1) * SJK_GROUP <= lc[l].sink) continue; /* a sink block: fp16 rows */
                if (n != sjk_record_nbytes(&rp)) return 0;
                if (sjk_record_decode_ref(&rp, kf, vf, blk, n) != SJK_OK) return 0;
                if (sjk_record_decode(&rp, kf2, vf2, blk, n) != SJK_OK) return 0;
                if (memcmp(kf, kf2, sizeof kf) || memcmp(vf, vf2, sizeof vf)) return 0;
                hv = fnv(hv, kf, sizeof kf);
                hv = fnv(hv, vf, sizeof vf);
                ++*n_records;
            }
    }
    *h_bytes = hb;
    *h_vals = hv;
    return 1;
}

static uint8_t *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long sz = ftell(f);
        if (sz > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)sz)) &&
            fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
            free(buf);
            buf = NULL;
        }
        *n = sz > 0 ? (size_t)sz : 0;
    }
    fclose(f);
    return buf;
}

/* Generator: writes DIR/cache.sjkc and DIR/expected.txt. */
static int write_fixture(const char *dir)
{
    sjk_layer_config lc[NL];
    sjk_cache *c = make_cache(lc);
    if (!c || !fill_cache(c)) return 1;
    uint64_t hb, hv;
    uint32_t nr;
    if (!hash_cache(c, lc, &hb, &hv, &nr)) return 1;
    char path[1024];
    snprintf(path, sizeof path, "%s/cache.sjkc", dir);
    char err[256];
    if (sjk_cache_save(c, path, NULL, err, sizeof err) != SJK_OK) {
        fprintf(stderr, "save: %s\n", err);
        return 1;
    }
    snprintf(path, sizeof path, "%s/expected.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    fprintf(f, "records %u\nblock_bytes %016llx\nrecord_values %016llx\n", nr, (unsigned long long)hb,
            (unsigned long long)hv);
    fclose(f);
    sjk_cache_free(c);
    return 0;
}

static int read_expected(uint32_t *nr, uint64_t *hb, uint64_t *hv)
{
    FILE *f = fopen(test_data_path("record-v1/expected.txt"), "r");
    if (!f) return 0;
    unsigned n = 0;
    unsigned long long a = 0, b = 0;
    int ok = fscanf(f, "records %u block_bytes %llx record_values %llx", &n, &a, &b) == 3;
    fclose(f);
    *nr = n, *hb = a, *hv = b;
    return ok;
}

TEST(test_v1_cache_file_restores_to_the_same_values)
{
    uint32_t want_nr;
    uint64_t want_hb, want_hv;
    if (!read_expected(&want_nr, &want_hb, &want_hv)) SKIP("tests/data/record-v1/expected.txt not found");
    size_t n = 0;
    uint8_t *file = read_all(test_data_path("record-v1/cache.sjkc"), &n);
    if (!file) SKIP("tests/data/record-v1/cache.sjkc not found");
    sjk_cache_file_info info;
    char err[256] = "";
    CHECKF(sjk_cache_file_inspect(file, n, &info, NULL, 0, NULL, 0, err, sizeof err) == SJK_OK, "%s", err);
    CHECK(info.record_version == 1);
    sjk_layer_config lc[NL];
    sjk_cache *c = make_cache(lc);
    CHECK(c != NULL);
    if (c) {
        CHECKF(sjk_cache_restore_memory(c, file, n, NULL, err, sizeof err) == SJK_OK, "%s", err);
        uint64_t hb = 0, hv = 0;
        uint32_t nr = 0;
        CHECK(hash_cache(c, lc, &hb, &hv, &nr));
        CHECK(nr == want_nr && nr >= NL * NKV * 2);
        CHECKF(hb == want_hb, "block bytes %016llx", (unsigned long long)hb);
        CHECKF(hv == want_hv, "record values %016llx", (unsigned long long)hv);
        sjk_cache_free(c);
    }
    free(file);
}

TEST(test_this_build_writes_the_v1_bytes_for_v1_widths)
{
    /* The same input sealed by this build: the same record bytes, and a file that still
     * says record format 1 (every width of it existed in v1). */
    uint32_t want_nr;
    uint64_t want_hb, want_hv;
    if (!read_expected(&want_nr, &want_hb, &want_hv)) SKIP("tests/data/record-v1/expected.txt not found");
    sjk_layer_config lc[NL];
    sjk_cache *c = make_cache(lc);
    CHECK(c != NULL);
    if (!c) return;
    CHECK(fill_cache(c));
    uint64_t hb = 0, hv = 0;
    uint32_t nr = 0;
    CHECK(hash_cache(c, lc, &hb, &hv, &nr));
    CHECK(nr == want_nr);
    CHECKF(hb == want_hb, "block bytes %016llx", (unsigned long long)hb);
    CHECKF(hv == want_hv, "record values %016llx", (unsigned long long)hv);
    size_t n = 0;
    CHECK(sjk_cache_save_memory(c, NULL, NULL, 0, &n) == SJK_OK);
    uint8_t *buf = malloc(n);
    CHECK(buf != NULL);
    if (buf && sjk_cache_save_memory(c, NULL, buf, n, &n) == SJK_OK) {
        sjk_cache_file_info info;
        CHECK(sjk_cache_file_inspect(buf, n, &info, NULL, 0, NULL, 0, NULL, 0) == SJK_OK);
        CHECK(info.record_version == 1);
        size_t fn = 0;
        uint8_t *file = read_all(test_data_path("record-v1/cache.sjkc"), &fn);
        /* the header's writer version differs between builds; the sections must not */
        CHECK(file && fn == n && !memcmp(file + 128, buf + 128, n - 128));
        free(file);
    }
    free(buf);
    sjk_cache_free(c);
}

/* Saves c to memory, checks the file's record format, restores it into c2 (same
 * configuration) and checks that both read the first record's 128 rows of layer 0 alike
 * (those rows of c are left in g_k1/g_v1). Returns the file (free()) with *n; NULL if
 * saving failed. */
static float g_k1[SJK_GROUP * HD], g_v1[SJK_GROUP * HD];
static uint8_t *save_restore_same_rows(sjk_cache *c, sjk_cache *c2, uint32_t want_version, size_t *n)
{
    *n = 0;
    CHECK(sjk_cache_save_memory(c, NULL, NULL, 0, n) == SJK_OK);
    uint8_t *buf = malloc(*n);
    if (!buf || sjk_cache_save_memory(c, NULL, buf, *n, n) != SJK_OK) {
        CHECK(0);
        free(buf);
        return NULL;
    }
    sjk_cache_file_info info;
    char err[256] = "";
    CHECK(sjk_cache_file_inspect(buf, *n, &info, NULL, 0, NULL, 0, err, sizeof err) == SJK_OK);
    CHECKF(info.record_version == want_version, "record format %u, want %u", info.record_version, want_version);
    CHECKF(sjk_cache_restore_memory(c2, buf, *n, NULL, err, sizeof err) == SJK_OK, "%s", err);
    static float k2[SJK_GROUP * HD], v2[SJK_GROUP * HD];
    static uint8_t scr[1 << 16];
    CHECK(sjk_cache_read_scratch_nbytes(c) <= sizeof scr);
    CHECK(sjk_cache_read_rows(c, 0, 0, 0, 128, 128, g_k1, g_v1, NULL, scr, sizeof scr) == SJK_OK);
    CHECK(sjk_cache_read_rows(c2, 0, 0, 0, 128, 128, k2, v2, NULL, scr, sizeof scr) == SJK_OK);
    CHECK(!memcmp(g_k1, k2, sizeof k2) && !memcmp(g_v1, v2, sizeof v2));
    return buf;
}

/* Two caches of these n_layers layers (HD, 512 positions), the first filled with 500
 * positions of the fixed input per layer; 0 (both freed) if one could not be made. */
static int two_caches(const sjk_layer_config *lc, uint32_t n_layers, sjk_cache **c, sjk_cache **c2)
{
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = n_layers;
    p.head_dim = HD;
    p.max_pos = 512;
    p.max_q_rows = 4;
    p.layers = lc;
    CHECK(sjk_cache_create(&p, c) == SJK_OK && sjk_cache_create(&p, c2) == SJK_OK);
    if (!*c || !*c2) {
        sjk_cache_free(*c);
        sjk_cache_free(*c2);
        *c = *c2 = NULL;
        return 0;
    }
    static float k[HD], v[HD];
    for (uint32_t l = 0; l < n_layers; l++)
        for (uint32_t pos = 0; pos < 500; pos++) {
            fill_input(l, pos, k, v);
            CHECK(sjk_cache_append(*c, 0, l, k, v, 1) == SJK_OK);
        }
    return 1;
}

TEST(test_wide_bodies_write_record_format_2)
{
    /* A cache with a body above 4 bits saves record format 2, restores, and a file that
     * claims format 1 for such layers is refused as corrupt (by restore and inspect). */
    sjk_layer_config lc[2];
    CHECK(sjk_cache_config_parse("sj:8/4:tail=128", 1, &lc[0], NULL, 0) == SJK_OK);
    CHECK(sjk_cache_config_parse("sj:4/4:tail=128", 1, &lc[1], NULL, 0) == SJK_OK);
    sjk_cache *c = NULL, *c2 = NULL;
    if (!two_caches(lc, 2, &c, &c2)) return;
    static float k[HD], v[HD];
    size_t n = 0;
    uint8_t *buf = save_restore_same_rows(c, c2, 2, &n);
    if (buf) {
        sjk_cache_file_info info;
        char err[256] = "";
        const float *k1 = g_k1;
        /* the 8-bit K of the first record is close to the input */
        double e = 0, s = 0;
        for (uint32_t t = 0; t < 128; t++) {
            fill_input(0, 128 + t, k, v);
            for (uint32_t d = 0; d < HD; d++) e += (k1[t * HD + d] - k[d]) * (k1[t * HD + d] - k[d]), s += k[d] * k[d];
        }
        CHECKF(10 * log10(s / e) > 35, "8-bit K: %.1f dB", 10 * log10(s / e));
        /* the same bytes claiming record format 1 */
        sjk_wr_u32le(buf + 16, 1);
        sjk_wr_u32le(buf + 124, sjk_crc32c(0, buf, 124));
        CHECK(sjk_cache_file_inspect(buf, n, &info, NULL, 0, NULL, 0, err, sizeof err) == SJK_ERR_CORRUPT);
        CHECKF(strstr(err, "above 4 bits"), "%s", err);
        CHECK(sjk_cache_restore_memory(c2, buf, n, NULL, err, sizeof err) == SJK_ERR_CORRUPT);
        CHECKF(strstr(err, "above 4 bits"), "%s", err);
        sjk_wr_u32le(buf + 16, SJK_RECORD_FORMAT_VERSION + 1); /* a format this build does not know */
        sjk_wr_u32le(buf + 124, sjk_crc32c(0, buf, 124));
        CHECK(sjk_cache_restore_memory(c2, buf, n, NULL, err, sizeof err) == SJK_ERR_FORMAT);
    }
    free(buf);
    sjk_cache_free(c);
    sjk_cache_free(c2);
}

/* Saves c (record format `want`, restored to the same rows in c2), then rewrites the
 * header to claim format `claim`: the restore must refuse it as corrupt naming `what`. */
static void check_claimed_format_refused(sjk_cache *c, sjk_cache *c2, uint32_t want, uint32_t claim, const char *what)
{
    size_t n = 0;
    uint8_t *buf = save_restore_same_rows(c, c2, want, &n);
    if (buf) {
        char err[256] = "";
        sjk_wr_u32le(buf + 16, claim);
        sjk_wr_u32le(buf + 124, sjk_crc32c(0, buf, 124));
        CHECK(sjk_cache_restore_memory(c2, buf, n, NULL, err, sizeof err) == SJK_ERR_CORRUPT);
        CHECKF(strstr(err, what), "%s", err);
    }
    free(buf);
}

/* A cache with the real-data trellis body on its float tables (sj:B/Btrf, `tr` before
 * record format 4) saves record format 3 and restores to the same rows; the same bytes
 * claiming format 2 are refused as corrupt. */
TEST(test_real_trellis_body_writes_record_format_3)
{
    sjk_layer_config lc;
    CHECK(sjk_cache_config_parse("sj:3/2trf:tail=128", 1, &lc, NULL, 0) == SJK_OK);
    sjk_cache *c = NULL, *c2 = NULL;
    if (!two_caches(&lc, 1, &c, &c2)) return;
    check_claimed_format_refused(c, c2, 3, 2, "real-data trellis");
    sjk_cache_free(c);
    sjk_cache_free(c2);
}

/* The trellis on the 128-entry tables (sj:B/Bts, record format 5) saves format 5 and
 * restores to the same rows; the same bytes claiming format 4 are refused as corrupt. */
TEST(test_s128_trellis_body_writes_record_format_5)
{
    sjk_layer_config lc[2];
    CHECK(sjk_cache_config_parse("sj:3/2ts:tail=128", 1, &lc[0], NULL, 0) == SJK_OK);
    CHECK(sjk_cache_config_parse("sj:4/4ts:tail=128", 1, &lc[1], NULL, 0) == SJK_OK);
    CHECK(lc[0].body == SJK_BODY_TRELLIS_S128 && lc[1].body == SJK_BODY_TRELLIS_S128);
    sjk_cache *c = NULL, *c2 = NULL;
    if (!two_caches(lc, 2, &c, &c2)) return;
    check_claimed_format_refused(c, c2, 5, 4, "128-entry");
    sjk_cache_free(c);
    sjk_cache_free(c2);
}

/* The int8-grid bodies (sj:B/Bt and B/Btr since record format 4) save format 4 and restore
 * to the same rows; the same bytes claiming format 3 are refused as corrupt, and a file of
 * the float-table body (`tf`, record format 1) does not restore into a cache of the grid body:
 * the layer's body differs (the caller names `tf` to read it). */
TEST(test_grid_trellis_bodies_write_record_format_4)
{
    sjk_layer_config lc[2];
    CHECK(sjk_cache_config_parse("sj:3/2t:tail=128", 1, &lc[0], NULL, 0) == SJK_OK);
    CHECK(sjk_cache_config_parse("sj:4/4tr:tail=128", 1, &lc[1], NULL, 0) == SJK_OK);
    CHECK(lc[0].body == SJK_BODY_TRELLIS_I8 && lc[1].body == SJK_BODY_TRELLIS_REAL_I8);
    sjk_cache *c = NULL, *c2 = NULL;
    if (!two_caches(lc, 2, &c, &c2)) return;
    static float k[HD], v[HD];
    check_claimed_format_refused(c, c2, 4, 3, "int8-grid");
    sjk_cache_free(c);
    sjk_cache_free(c2);
    /* a float-table file (record format 1) into a grid cache: refused by the body, the cache intact */
    sjk_layer_config lf;
    CHECK(sjk_cache_config_parse("sj:3/2tf:tail=128", 1, &lf, NULL, 0) == SJK_OK);
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = 1;
    p.head_dim = HD;
    p.max_pos = 512;
    p.max_q_rows = 4;
    p.layers = &lf;
    sjk_cache *cf = NULL, *cg = NULL;
    CHECK(sjk_cache_create(&p, &cf) == SJK_OK);
    p.layers = &lc[0];
    CHECK(sjk_cache_create(&p, &cg) == SJK_OK);
    if (!cf || !cg) { sjk_cache_free(cf); sjk_cache_free(cg); return; }
    for (uint32_t pos = 0; pos < 300; pos++) {
        fill_input(0, pos, k, v);
        CHECK(sjk_cache_append(cf, 0, 0, k, v, 1) == SJK_OK);
    }
    size_t n = 0;
    CHECK(sjk_cache_save_memory(cf, NULL, NULL, 0, &n) == SJK_OK);
    uint8_t *buf = malloc(n);
    if (buf && sjk_cache_save_memory(cf, NULL, buf, n, &n) == SJK_OK) {
        sjk_cache_file_info info;
        char err[256] = "";
        CHECK(sjk_cache_file_inspect(buf, n, &info, NULL, 0, NULL, 0, NULL, 0) == SJK_OK && info.record_version == 1);
        CHECK(sjk_cache_restore_memory(cg, buf, n, NULL, err, sizeof err) == SJK_ERR_MISMATCH);
        CHECKF(strstr(err, "body"), "%s", err);
        uint32_t len = 1;
        CHECK(sjk_cache_length(cg, 0, 0, &len, NULL) == SJK_OK && len == 0);
    }
    free(buf);
    sjk_cache_free(cf);
    sjk_cache_free(cg);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--write")) return write_fixture(argv[2]);
    RUN(test_v1_cache_file_restores_to_the_same_values);
    RUN(test_this_build_writes_the_v1_bytes_for_v1_widths);
    RUN(test_wide_bodies_write_record_format_2);
    RUN(test_grid_trellis_bodies_write_record_format_4);
    RUN(test_s128_trellis_body_writes_record_format_5);
    RUN(test_real_trellis_body_writes_record_format_3);
    return test_summary();
}
