/* make_seeds.c — writes the C-generated seeds of the committed fuzz corpora:
 * fuzz/corpus/cache_file/ (cache files of the fuzz target's cache shape at several
 * states) and fuzz/corpus/record/ (real encoded records, every body, a few bit widths).
 * Regenerate: sh fuzz/make_seeds.sh (builds this against the library and runs it).
 * fuzz/corpus/cache_file/seed-N-format1 are the same states as written before record
 * format 4 (the trellis layer on the float tables, record format 1), kept for the old
 * reader's paths; they are not regenerated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "sjkvarn.h"

#define FUZZ_NAME unused_entry
#include "fuzz_cache_file.c"

static void put(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) { perror(path); exit(1); }
    fclose(f);
}

int main(void)
{
    sjk_rng r;
    sjk_rng_seed(&r, 1);
    sjk_cache *c = fuzz_cache_file_target();
    static float k[64], v[64];
    const uint32_t stops[] = {0, 100, 300, 700};
    uint32_t at = 0;
    for (int s = 0; s < 4; s++) {
        for (; at < stops[s]; at++)
            for (uint32_t l = 0; l < 2; l++) {
                for (int i = 0; i < 64; i++) { k[i] = (float)sjk_rng_normal(&r); v[i] = (float)sjk_rng_normal(&r); }
                if (sjk_cache_append(c, 0, l, k, v, 1) != SJK_OK) return 1;
            }
        size_t n;
        sjk_cache_save_memory(c, NULL, NULL, 0, &n);
        uint8_t *b = malloc(n);
        sjk_cache_save_memory(c, NULL, b, n, &n);
        char path[128];
        snprintf(path, sizeof path, "fuzz/corpus/cache_file/seed-%u", stops[s]);
        put(path, b, n);
        free(b);
    }
    sjk_cache_free(c);
    /* records: 3 header bytes (see fuzz_record.c) + one encoded record */
    static float kk[128 * 128], vv[128 * 128];
    for (size_t i = 0; i < 128 * 128; i++) { kk[i] = (float)sjk_rng_normal(&r); vv[i] = (float)sjk_rng_normal(&r); }
    const struct { uint8_t dsel, body, bk, bv; } cfg[] = {{0, 0, 4, 4}, {0, 1, 3, 3}, {1, 2, 3, 2}, {1, 0, 2, 2}, {0, 1, 2, 2},
                                                         {0, 4, 3, 3}, {1, 5, 4, 2}}; /* 4, 5: record format v4 */
    for (size_t i = 0; i < sizeof cfg / sizeof *cfg; i++) {
        sjk_record_params p = sjk_record_params_default();
        p.head_dim = cfg[i].dsel ? 128 : 64;
        p.body = cfg[i].body;
        p.bits_k = cfg[i].bk;
        p.bits_v = cfg[i].bv;
        size_t rn = sjk_record_nbytes(&p), sn = sjk_record_scratch_nbytes(&p);
        uint8_t *buf = malloc(3 + rn);
        void *scr = malloc(sn);
        buf[0] = (uint8_t)(cfg[i].dsel | cfg[i].body << 2);
        buf[1] = (uint8_t)(cfg[i].bk - 2);
        buf[2] = (uint8_t)(cfg[i].bv - 2);
        if (sjk_record_encode(&p, buf + 3, rn, kk, vv, scr, sn) != SJK_OK) return 1;
        char path[128];
        snprintf(path, sizeof path, "fuzz/corpus/record/seed-d%u-b%u-%u%u", p.head_dim, p.body, p.bits_k, p.bits_v);
        put(path, buf, 3 + rn);
        free(buf);
        free(scr);
    }
    return 0;
}
