/* fuzz_cache_file.c — libFuzzer target: the cache-file loader (sjk_cache_restore_memory)
 * restoring into a small cache (D = 64, an sj layer with a short tail and a q8_0 layer,
 * one sequence). A restore that succeeds must leave a cache that passes sjk_cache_check
 * and can be attended; one that fails must leave the cache as it was (checked by its
 * length). Every input also goes through the readers of `sjkvarn inspect`:
 * sjk_cache_file_inspect (which must accept every file the restore accepts: it checks a
 * subset) and sjkh_session_file_inspect. The seed corpus is made by `fuzz/make_seeds.sh`
 * from the same cache shape. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/util.h"
#include "sjkhost.h"
#include "sjkvarn.h"

#ifndef FUZZ_NAME
#define FUZZ_NAME LLVMFuzzerTestOneInput
#endif

/* The cache the fuzzer restores into (shared with the seed generator). */
static sjk_cache *fuzz_cache_file_target(void)
{
    static sjk_cache *c;
    if (c) return c;
    static sjk_layer_config lay[2];
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = 2;
    p.n_kv_heads = 1;
    p.n_q_heads = 2;
    p.head_dim = 64;
    p.max_pos = 1024;
    p.max_q_rows = 2;
    if (sjk_cache_config_parse("sj:4/4:tail=128", 1, &lay[0], NULL, 0) != SJK_OK) abort();
    lay[0].tail_max = 256;
    if (sjk_cache_config_parse("q8_0", 1, &lay[1], NULL, 0) != SJK_OK) abort();
    p.layers = lay;
    if (sjk_cache_create(&p, &c) != SJK_OK) abort();
    return c;
}

/* Random bytes almost never carry valid CRC-32C checksums, so on its own the fuzzer only
 * reaches the checksum checks (coverage 37 in 300 s). Each input is therefore also tried
 * with its stated file size and every checksum recomputed (docs/FORMAT.md "Cache files":
 * the header's over bytes 0..123, then each section's over its 16-byte header and
 * payload, while the sections stay inside the input), which carries the mutations on to
 * the checks behind the checksums: versions, geometry, configuration, states, record
 * scales (coverage 99 in 150 s). */
static void reseal(uint8_t *b, size_t n)
{
    if (n < 128) return;
    sjk_wr_u32le(b + 56, (uint32_t)n); /* the file size the header states */
    sjk_wr_u32le(b + 60, (uint32_t)((uint64_t)n >> 32));
    sjk_wr_u32le(b + 124, sjk_crc32c(0, b, 124));
    for (size_t off = 128; n - off >= 20;) {
        const uint64_t len = sjk_rd_u32le(b + off + 8) | (uint64_t)sjk_rd_u32le(b + off + 12) << 32;
        if (len > n - off - 20) break;
        sjk_wr_u32le(b + off + 16 + len, sjk_crc32c(0, b + off, 16 + (size_t)len));
        off += 20 + (size_t)len;
    }
}

static void try_restore(sjk_cache *c, const uint8_t *data, size_t size)
{
    char err[256];
    uint32_t n_before, n_after;
    sjk_cache_file_info info;
    sjk_layer_config lay[4];
    uint32_t states[8];
    const sjk_status ist = sjk_cache_file_inspect(data, size, &info, lay, 4, states, 8, err, sizeof err);
    sjkh_session_file_info sinfo;
    sjkh_session_file_inspect(data, size, &sinfo, err, sizeof err);
    sjk_cache_length(c, 0, 0, &n_before, NULL);
    sjk_status st = sjk_cache_restore_memory(c, data, size, NULL, err, sizeof err);
    if (st == SJK_OK && ist != SJK_OK) abort(); /* inspect refused a file the restore took */
    if (st == SJK_OK) {
        if (sjk_cache_check(c, NULL, 0) != SJK_OK) abort();
        uint32_t n;
        sjk_cache_length(c, 0, 0, &n, NULL);
        if (n) {
            static float q[2 * 64], out[2 * 64];
            for (int i = 0; i < 128; i++) q[i] = (float)(i % 7) - 3.f;
            if (sjk_cache_attend(c, 0, 0, q, 1, 0.125f, out) != SJK_OK) abort();
        }
    } else {
        sjk_cache_length(c, 0, 0, &n_after, NULL);
        if (n_after != n_before) abort(); /* a refused file changed the cache */
    }
}

int FUZZ_NAME(const uint8_t *data, size_t size);
int FUZZ_NAME(const uint8_t *data, size_t size)
{
    sjk_cache *c = fuzz_cache_file_target();
    try_restore(c, data, size);
    if (size >= 128 && size <= (1u << 24)) {
        uint8_t *copy = malloc(size);
        if (!copy) return 0;
        memcpy(copy, data, size);
        reseal(copy, size);
        try_restore(c, copy, size);
        free(copy);
    }
    return 0;
}
