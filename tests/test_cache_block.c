/* test_cache_block.c — block export / import (sjk_cache_block_*, sjk_cache_seal_to).
 *
 * The property a prefix store relies on: cache A is filled with P + R positions in two
 * phases (P positions, sjk_cache_seal_to(P), then R more); cache B imports A's blocks
 * 0 .. P/128 - 1 of every layer and appends the same R positions. Attention over A and
 * over B must then be bit-identical, for every configuration kind (uniform, sj with
 * scalar and trellis bodies, kvarn, a sink of 256, mixed tiers), and a rejected block
 * must leave B as it was. */
#include <stdint.h>

#include "common/rng.h"
#include "common/util.h"
#include "harness.h"
#include "sjkvarn.h"

#define D 64
#define H 2
#define HQ 4
#define L 3

static void rows(sjk_rng *r, float *k, float *v, size_t n)
{
    for (size_t i = 0; i < n * H * D; i++) {
        k[i] = (float)(sjk_rng_normal(r) + 0.3 * (double)(i % D == 5));
        v[i] = (float)sjk_rng_normal(r);
    }
}

static sjk_cache *make(const char *cfg, uint32_t max_pos)
{
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = L;
    p.n_kv_heads = H;
    p.n_q_heads = HQ;
    p.head_dim = D;
    p.max_pos = max_pos;
    p.max_q_rows = 64;
    p.n_threads = 2;
    sjk_layer_config lc[L];
    char err[200];
    if (sjk_cache_config_parse(cfg, L, lc, err, sizeof err) != SJK_OK) {
        fprintf(stderr, "  %s: %s\n", cfg, err);
        return NULL;
    }
    p.layers = lc;
    sjk_cache *c = NULL;
    return sjk_cache_create(&p, &c) == SJK_OK ? c : NULL;
}

/* Appends n rows to every layer in chunks of 64, as a host's prefill does. */
static int feed(sjk_cache *c, const float *k, const float *v, size_t n)
{
    for (size_t at = 0; at < n; at += 64) {
        size_t m = n - at < 64 ? n - at : 64;
        for (uint32_t l = 0; l < L; l++)
            if (sjk_cache_append(c, 0, l, k + at * H * D, v + at * H * D, m) != SJK_OK) return 0;
    }
    return 1;
}

/* Copies blocks [0, n) of every layer from a to b. 1 on success. */
/* n rows of the generator seeded with seed into k and v, fed to every layer (feed). */
static int fill(sjk_cache *c, uint64_t seed, float *k, float *v, size_t n)
{
    sjk_rng r;
    sjk_rng_seed(&r, seed);
    rows(&r, k, v, n);
    return feed(c, k, v, n);
}

static int copy_blocks(const sjk_cache *a, sjk_cache *b, uint32_t n)
{
    static uint8_t buf[H * 2 * 128 * 512 * 2];
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t l = 0; l < L; l++) {
            size_t nb = 0;
            if (sjk_cache_block_nbytes(a, l, i, &nb) != SJK_OK || nb * H > sizeof buf) return 0;
            for (uint32_t h = 0; h < H; h++)
                if (sjk_cache_block_export(a, 0, l, h, i, buf + h * nb, nb, NULL) != SJK_OK) return 0;
            if (sjk_cache_block_import(b, 0, l, i, buf, nb * H) != SJK_OK) return 0;
        }
    return 1;
}

static int attend_equal(sjk_cache *a, sjk_cache *b, sjk_rng *r, size_t n_rows)
{
    static float q[64 * HQ * D], oa[64 * HQ * D], ob[64 * HQ * D];
    for (size_t i = 0; i < n_rows * HQ * D; i++) q[i] = (float)sjk_rng_normal(r);
    for (uint32_t l = 0; l < L; l++) {
        if (sjk_cache_attend(a, 0, l, q, n_rows, 0.125f, oa) != SJK_OK) return 0;
        if (sjk_cache_attend(b, 0, l, q, n_rows, 0.125f, ob) != SJK_OK) return 0;
        if (memcmp(oa, ob, n_rows * HQ * D * sizeof *oa)) return 0;
    }
    return 1;
}

static void two_phase(const char *cfg, uint32_t P, uint32_t R)
{
    static float k[4096 * H * D], v[4096 * H * D];
    sjk_rng r;
    sjk_rng_seed(&r, 7);
    rows(&r, k, v, P + R);
    sjk_cache *a = make(cfg, 4096), *b = make(cfg, 3000);
    CHECKF(a && b, "%s: create", cfg);
    if (!a || !b) goto out;
    CHECK(feed(a, k, v, P));
    CHECK(sjk_cache_seal_to(a, 0, P) == SJK_OK);
    uint32_t nf = 0;
    CHECK(sjk_cache_blocks_final(a, 0, &nf) == SJK_OK);
    CHECKF(nf == P / 128, "%s: %u final blocks, want %u", cfg, nf, P / 128);
    CHECK(feed(a, k + (size_t)P * H * D, v + (size_t)P * H * D, R));
    /* blocks stay exportable after the remainder was appended */
    CHECKF(copy_blocks(a, b, P / 128), "%s: copy", cfg);
    CHECK(feed(b, k + (size_t)P * H * D, v + (size_t)P * H * D, R));
    for (uint32_t l = 0; l < L; l++) {
        uint32_t na, ba, nb, bb;
        sjk_cache_length(a, 0, l, &na, &ba);
        sjk_cache_length(b, 0, l, &nb, &bb);
        CHECKF(na == nb && ba == bb, "%s layer %u: length %u/%u body %u/%u", cfg, l, na, nb, ba, bb);
    }
    char msg[200];
    CHECKF(sjk_cache_check(b, msg, sizeof msg) == SJK_OK, "%s: %s", cfg, msg);
    CHECKF(attend_equal(a, b, &r, 1), "%s: decode attention differs", cfg);
    /* both keep going the same way, through further seals */
    CHECK(feed(a, k, v, 700));
    CHECK(feed(b, k, v, 700));
    CHECKF(attend_equal(a, b, &r, 1), "%s: attention after 700 more positions differs", cfg);
out:
    sjk_cache_free(a);
    sjk_cache_free(b);
}

TEST(test_import_then_remainder_is_bit_identical)
{
    static const char *const cfgs[] = {"f16", "q8_0/q4_0", "q4_0:rot", "sj:4/4:tail=256", "sj:3/2t:tail=256",
                                       "sj:4/4:tail_min=256:tail_max=640", "kvarn:4/4", "sj:4/4:sink=256:tail=128",
                                       "sj:3/3t:edge=4/4:tail=128"};
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) {
        two_phase(cfgs[i], 1024, 300);
        two_phase(cfgs[i], 128, 200); /* the sink only */
    }
}

TEST(test_export_refuses_unfinal_blocks)
{
    sjk_cache *a = make("sj:4/4:tail=256", 2048);
    CHECK(a != NULL);
    if (!a) return;
    static float k[1000 * H * D], v[1000 * H * D];
    CHECK(fill(a, 3, k, v, 1000));
    uint8_t buf[64 * 1024];
    uint32_t nf = 0;
    sjk_cache_blocks_final(a, 0, &nf);
    uint32_t n, b;
    sjk_cache_length(a, 0, 0, &n, &b);
    CHECK(nf == b / 128 && nf >= 2);
    size_t nb = 0;
    CHECK(sjk_cache_block_export(a, 0, 0, 0, nf - 1, buf, sizeof buf, &nb) == SJK_OK);
    CHECK(sjk_cache_block_export(a, 0, 0, 0, nf, buf, sizeof buf, &nb) == SJK_ERR_RANGE); /* in the ring */
    CHECK(sjk_cache_block_export(a, 0, 0, 0, nf - 1, buf, nb - 1, NULL) == SJK_ERR_BUFFER);
    CHECK(sjk_cache_block_nbytes(a, 0, 100, &nb) == SJK_ERR_RANGE);
    sjk_cache_free(a);
}

TEST(test_import_rejects_and_changes_nothing)
{
    sjk_cache *a = make("sj:4/4:tail=128", 2048), *b = make("sj:4/4:tail=128", 2048);
    CHECK(a && b);
    if (!a || !b) goto out;
    static float k[1024 * H * D], v[1024 * H * D];
    CHECK(fill(a, 5, k, v, 1024));
    CHECK(sjk_cache_seal_to(a, 0, 1024) == SJK_OK);
    static uint8_t buf[H * 64 * 1024];
    size_t nb = 0;
    CHECK(copy_blocks(a, b, 1)); /* the sink */
    CHECK(sjk_cache_block_nbytes(a, 0, 1, &nb) == SJK_OK);
    for (uint32_t h = 0; h < H; h++) CHECK(sjk_cache_block_export(a, 0, 0, h, 1, buf + h * nb, nb, NULL) == SJK_OK);
    /* out of order, wrong size, non-finite scale: refused, length unchanged */
    CHECK(sjk_cache_block_import(b, 0, 0, 2, buf, nb * H) == SJK_ERR_RANGE);
    CHECK(sjk_cache_block_import(b, 0, 0, 1, buf, nb * H - 1) == SJK_ERR_BUFFER);
    uint8_t save0 = buf[nb - 1], save1 = buf[nb - 2];
    buf[nb - 1] = 0x7C; /* last fp16 scale field of head 0 -> Inf */
    buf[nb - 2] = 0x00;
    CHECK(sjk_cache_block_import(b, 0, 0, 1, buf, nb * H) == SJK_ERR_CORRUPT);
    uint32_t n, bb;
    sjk_cache_length(b, 0, 0, &n, &bb);
    CHECK(n == 128 && bb == 128);
    buf[nb - 1] = save0;
    buf[nb - 2] = save1;
    CHECK(sjk_cache_block_import(b, 0, 0, 1, buf, nb * H) == SJK_OK);
    sjk_cache_length(b, 0, 0, &n, &bb);
    CHECK(n == 256 && bb == 256);
    /* a non-finite sink value is refused too */
    sjk_cache *c = make("sj:4/4:tail=128", 2048);
    CHECK(c != NULL);
    if (c) {
        CHECK(sjk_cache_block_nbytes(a, 0, 0, &nb) == SJK_OK);
        for (uint32_t h = 0; h < H; h++) sjk_cache_block_export(a, 0, 0, h, 0, buf + h * nb, nb, NULL);
        buf[nb * H - 1] = 0xFF;
        CHECK(sjk_cache_block_import(c, 0, 0, 0, buf, nb * H) == SJK_ERR_CORRUPT);
        sjk_cache_length(c, 0, 0, &n, &bb);
        CHECK(n == 0);
        sjk_cache_free(c);
    }
out:
    sjk_cache_free(a);
    sjk_cache_free(b);
}

TEST(test_seal_to_respects_slots_and_policy)
{
    /* seal_to never seals past the record slots, and a later append seals by policy */
    sjk_cache *a = make("sj:4/4:tail=256", 1024);
    CHECK(a != NULL);
    if (!a) return;
    static float k[1024 * H * D], v[1024 * H * D];
    CHECK(fill(a, 9, k, v, 1024));
    CHECK(sjk_cache_seal_to(a, 0, 1024) == SJK_OK);
    uint32_t n, b;
    sjk_cache_length(a, 0, 0, &n, &b);
    CHECKF(b == 128 + (1024 - 128 - 256) / 128 * 128, "body end %u", b);
    char msg[200];
    CHECKF(sjk_cache_check(a, msg, sizeof msg) == SJK_OK, "%s", msg);
    sjk_cache_free(a);
}

int main(void)
{
    RUN(test_import_then_remainder_is_bit_identical);
    RUN(test_export_refuses_unfinal_blocks);
    RUN(test_import_rejects_and_changes_nothing);
    RUN(test_seal_to_respects_slots_and_policy);
    return test_summary();
}
