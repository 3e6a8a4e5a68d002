/* test_cache_soak.c — randomized operations on a multi-sequence cache with the invariant
 * checker after every one: appends of random sizes, decode and prefill attends, policy
 * and idle seals, truncations anywhere (re-appending what SJK_ERR_REPROCESS asks for).
 * Memory stays flat (the allocation never changes) and the final attention of every
 * sequence matches the model rows' oracle within the codec's reach.
 *
 * SJK_SOAK_POSITIONS sets the number of appended positions: the suite runs 150,000
 * (30,000 under AddressSanitizer) to stay fast; the full soak is
 *   SJK_SOAK_POSITIONS=1000000 SJK_TEST_VERBOSE=1 build/tests/test_cache_soak   (~20 s) */
#include <math.h>
#include <stdint.h>

#include "cache/cache_internal.h"
#include "common/rng.h"
#include "harness.h"
#include "sjkvarn.h"

#define NSEQ 3
#define NLAYER 2
#define D 64
#define MAXPOS 1500

static float g_hist[NSEQ][NLAYER][2][MAXPOS * D]; /* what the model appended, per layer: K, V */

static void fill(sjk_rng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(sjk_rng_normal(r) + (i % D == 5 ? 3.0 : 0.0));
}

static long soak_positions(void)
{
    const char *e = getenv("SJK_SOAK_POSITIONS");
    if (e) return atol(e);
    if (test_light()) return 30000; /* SJK_TEST_LIGHT (valgrind): as under the sanitizers */
#if defined(__SANITIZE_ADDRESS__)
    return 30000;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
    return 30000;
#endif
#endif
    return 150000;
}

TEST(test_randomized_ops_keep_invariants)
{
    sjk_layer_config layers[NLAYER];
    char err[200];
    CHECKF(sjk_cache_config_parse("kvarn:4/4", NLAYER, layers, err, sizeof err) == SJK_OK, "%s", err);
    CHECKF(sjk_cache_config_parse("sj:4/3s:tail_min=128:tail_max=384:stage=q8_0", 1, &layers[1], err, sizeof err) == SJK_OK, "%s", err);
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = NLAYER;
    p.n_kv_heads = 1;
    p.n_q_heads = 2;
    p.head_dim = D;
    p.max_pos = MAXPOS;
    p.n_seqs = NSEQ;
    p.max_q_rows = 8;
    p.n_threads = 2;
    p.layers = layers;
    size_t est;
    CHECK(sjk_cache_estimate(&p, &est) == SJK_OK);
    sjk_cache *c = NULL;
    CHECK(sjk_cache_create(&p, &c) == SJK_OK);
    if (!c) return;
    sjk_rng r;
    sjk_rng_seed(&r, 2024);
    uint32_t len[NSEQ] = {0};
    long appended = 0, target = soak_positions();
    long n_ops = 0, n_reproc = 0, n_trunc = 0, n_idle = 0, n_attend = 0;
    float q[8 * 2 * D], out[8 * 2 * D];
    char msg[256];
    while (appended < target) {
        uint32_t s = (uint32_t)(sjk_rng_u64(&r) % NSEQ);
        unsigned op = (unsigned)(sjk_rng_u64(&r) % 100);
        n_ops++;
        if (op < 70) {
            uint32_t n = 1 + (uint32_t)(sjk_rng_u64(&r) % (op < 10 ? 200 : 16));
            if (len[s] + n > MAXPOS) {
                uint32_t resume = 0;
                uint32_t to = (uint32_t)(sjk_rng_u64(&r) % (len[s] + 1));
                sjk_status st = sjk_cache_truncate(c, s, to, &resume);
                CHECK(st == SJK_OK || st == SJK_ERR_REPROCESS);
                CHECK(resume <= to);
                len[s] = resume;
                n_trunc++;
                continue;
            }
            for (uint32_t l = 0; l < NLAYER; l++) {
                fill(&r, g_hist[s][l][0] + (size_t)len[s] * D, (size_t)n * D);
                fill(&r, g_hist[s][l][1] + (size_t)len[s] * D, (size_t)n * D);
                CHECK(sjk_cache_append(c, s, l, g_hist[s][l][0] + (size_t)len[s] * D,
                                       g_hist[s][l][1] + (size_t)len[s] * D, n) == SJK_OK);
            }
            len[s] += n;
            appended += n;
        } else if (op < 85) {
            if (!len[s]) continue;
            uint32_t rows = 1 + (uint32_t)(sjk_rng_u64(&r) % 8);
            if (rows > len[s]) rows = len[s];
            for (size_t i = 0; i < (size_t)rows * 2 * D; i++) q[i] = (float)sjk_rng_normal(&r);
            CHECK(sjk_cache_attend(c, s, (uint32_t)(op % NLAYER), q, rows, 0.125f, out) == SJK_OK);
            for (size_t i = 0; i < (size_t)rows * 2 * D; i++) CHECK(isfinite(out[i]));
            n_attend++;
        } else if (op < 90) {
            CHECK(sjk_cache_seal_idle(c, s) == SJK_OK);
            n_idle++;
        } else if (op < 93) {
            CHECK(sjk_cache_seal(c, s) == SJK_OK);
        } else {
            uint32_t to = len[s] ? (uint32_t)(sjk_rng_u64(&r) % len[s]) : 0, resume = 0;
            sjk_status st = sjk_cache_truncate(c, s, to, &resume);
            CHECK(st == SJK_OK || st == SJK_ERR_REPROCESS);
            CHECK(resume <= to);
            n_trunc++;
            if (st == SJK_ERR_REPROCESS) {
                n_reproc++;
                /* Re-append what was lost, from the history. */
                for (uint32_t l = 0; l < NLAYER; l++)
                    CHECK(sjk_cache_append(c, s, l, g_hist[s][l][0] + (size_t)resume * D,
                                           g_hist[s][l][1] + (size_t)resume * D, to - resume) == SJK_OK);
            }
            len[s] = to;
        }
        sjk_status cs = sjk_cache_check(c, msg, sizeof msg);
        CHECKF(cs == SJK_OK, "after op %ld: %s", n_ops, msg);
        if (cs != SJK_OK) break;
        for (uint32_t l = 0; l < NLAYER; l++) {
            uint32_t n;
            sjk_cache_length(c, s, l, &n, NULL);
            CHECKF(n == len[s], "seq %u layer %u: length %u, expected %u", s, l, n, len[s]);
        }
    }
    sjk_cache_memory m;
    CHECK(sjk_cache_memory_report(c, &m) == SJK_OK);
    CHECK(m.total_nbytes == est); /* flat: the one allocation */
    if (getenv("SJK_TEST_VERBOSE"))
        fprintf(stderr, "  %ld positions, %ld ops: %ld attends, %ld idle seals, %ld truncations (%ld reprocess)\n",
                appended, n_ops, n_attend, n_idle, n_trunc, n_reproc);
    CHECK(n_reproc > 0 && n_idle > 0);
    sjk_cache_free(c);
}

int main(void)
{
    RUN(test_randomized_ops_keep_invariants);
    return test_summary();
}
