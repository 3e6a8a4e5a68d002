/* test_reliability_soak.c — the reliability soak: positions stream through a
 * two-sequence cache with random appends, policy seals (inside append), idle seals,
 * truncations anywhere (re-appending what SJK_ERR_REPROCESS asks for), and save/restore
 * cycles in which the work moves to a second cache restored from the first one's file
 * (memory, and every 64th cycle a real file through the atomic save). After every
 * operation sjk_cache_check must pass; after every restore both caches must attend
 * bit-identically; resident memory (/proc/self/statm) must stay flat after warm-up.
 *
 * SJK_SOAK_POSITIONS sets the positions appended: the suite runs 60,000 (15,000 under a
 * sanitizer or with SJK_TEST_LIGHT, which `make valgrind` sets); the full soak is
 *   SJK_SOAK_POSITIONS=1000000 SJK_TEST_VERBOSE=1 build/rel/tests/test_reliability_soak
 * (numbers in docs/RELIABILITY.md). */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "common/rng.h"
#include "harness.h"
#include "sjkvarn.h"

#define NSEQ 2
#define NLAYER 2
#define D 64
#define NKV 2
#define NQ 4
#define MAXPOS 3072
#define CHUNK 160

static long soak_positions(void)
{
    const char *e = getenv("SJK_SOAK_POSITIONS");
    if (e) return atol(e);
    if (getenv("SJK_TEST_LIGHT")) return 15000;
#if defined(__SANITIZE_ADDRESS__)
    return 15000;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
    return 15000;
#endif
#endif
    return 60000;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = -1;
    fclose(f);
    return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

static sjk_cache *make_cache(void)
{
    static sjk_layer_config lay[NLAYER];
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = NLAYER;
    p.n_kv_heads = NKV;
    p.n_q_heads = NQ;
    p.head_dim = D;
    p.max_pos = MAXPOS;
    p.n_seqs = NSEQ;
    p.max_q_rows = 4;
    p.n_threads = 2;
    sjk_cache_config_parse("sj:3/2t:tail_min=256:tail_max=512", 1, &lay[0], NULL, 0);
    sjk_cache_config_parse("kvarn:4/4", 1, &lay[1], NULL, 0);
    p.layers = lay;
    sjk_cache *c = NULL;
    CHECK(sjk_cache_create(&p, &c) == SJK_OK);
    return c;
}

static void rows(sjk_rng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)sjk_rng_normal(r) + (i % D == 7 ? 5.f : 0.f);
}

/* Appends n positions to every layer of seq (all layers stay the same length). */
static int append(sjk_cache *c, sjk_rng *r, uint32_t seq, uint32_t n)
{
    static float k[CHUNK * NKV * D], v[CHUNK * NKV * D];
    rows(r, k, (size_t)n * NKV * D);
    rows(r, v, (size_t)n * NKV * D);
    for (uint32_t l = 0; l < NLAYER; l++)
        if (sjk_cache_append(c, seq, l, k, v, n) != SJK_OK) return 0;
    return 1;
}

static int attend_equal(sjk_cache *a, sjk_cache *b)
{
    static float q[NQ * D], oa[NQ * D], ob[NQ * D];
    for (int i = 0; i < NQ * D; i++) q[i] = (float)((i * 37) % 11) - 5.f;
    for (uint32_t s = 0; s < NSEQ; s++)
        for (uint32_t l = 0; l < NLAYER; l++) {
            uint32_t n;
            sjk_cache_length(a, s, l, &n, NULL);
            if (!n) continue;
            if (sjk_cache_attend(a, s, l, q, 1, 0.125f, oa) != SJK_OK) return 0;
            if (sjk_cache_attend(b, s, l, q, 1, 0.125f, ob) != SJK_OK) return 0;
            if (memcmp(oa, ob, sizeof oa)) return 0;
        }
    return 1;
}

TEST(test_soak_seal_truncate_save_restore)
{
    sjk_cache *c[2] = {make_cache(), make_cache()};
    if (!c[0] || !c[1]) { sjk_cache_free(c[0]); sjk_cache_free(c[1]); return; }
    int cur = 0;
    size_t cap = 0;
    /* the largest file: every sequence full */
    {
        sjk_cache_memory m;
        sjk_cache_memory_report(c[0], &m);
        cap = m.total_nbytes + (1u << 20);
    }
    uint8_t *file = malloc(cap);
    if (file) memset(file, 0, cap); /* resident from the start: RSS then measures leaks only */
    char path[] = "/tmp/sjk_soak_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    sjk_rng r;
    sjk_rng_seed(&r, 20261130);
    const long target = soak_positions();
    long appended = 0, ops = 0, seals = 0, truncs = 0, reprocess = 0, cycles = 0, file_cycles = 0, bad = 0;
    long rss_warm = -1, rss_max = 0;
    char msg[256];
    while (appended < target && !bad) {
        sjk_cache *a = c[cur];
        uint32_t seq = (uint32_t)(sjk_rng_u64(&r) % NSEQ), n;
        sjk_cache_length(a, seq, 0, &n, NULL);
        uint64_t op = sjk_rng_u64(&r) % 100;
        if (op < 70) {
            uint32_t m = 1 + (uint32_t)(sjk_rng_u64(&r) % CHUNK);
            if (n + m > MAXPOS) {
                /* full: cut back to a random point (often inside the body) */
                uint32_t resume;
                sjk_status st = sjk_cache_truncate(a, seq, (uint32_t)(sjk_rng_u64(&r) % MAXPOS), &resume);
                truncs++;
                if (st == SJK_ERR_REPROCESS) reprocess++;
                else if (st != SJK_OK) bad++;
            } else if (append(a, &r, seq, m)) {
                appended += m;
            } else {
                bad++;
            }
        } else if (op < 80) {
            if (sjk_cache_seal_idle(a, seq) != SJK_OK) bad++;
            seals++;
        } else if (op < 88) {
            uint32_t resume, pos = n ? (uint32_t)(sjk_rng_u64(&r) % (n + 1)) : 0;
            sjk_status st = sjk_cache_truncate(a, seq, pos, &resume);
            truncs++;
            if (st == SJK_ERR_REPROCESS) {
                reprocess++;
                /* re-append what the caller must re-process */
                uint32_t need = pos - resume;
                while (need && !bad) {
                    uint32_t m = need < CHUNK ? need : CHUNK;
                    if (!append(a, &r, seq, m)) bad++;
                    need -= m;
                }
            } else if (st != SJK_OK) {
                bad++;
            }
        } else {
            /* save/restore cycle: continue on the other cache */
            sjk_cache *b = c[1 - cur];
            size_t fn;
            char err[256];
            sjk_status st;
            if (cycles % 64 == 0) {
                st = sjk_cache_save(a, path, NULL, err, sizeof err);
                if (st == SJK_OK) st = sjk_cache_restore(b, path, NULL, err, sizeof err);
                file_cycles++;
            } else {
                st = sjk_cache_save_memory(a, NULL, file, cap, &fn);
                if (st == SJK_OK) st = sjk_cache_restore_memory(b, file, fn, NULL, err, sizeof err);
            }
            if (st != SJK_OK) { fprintf(stderr, "  restore: %s\n", err); bad++; }
            if (!attend_equal(a, b)) { fprintf(stderr, "  restored cache attends differently\n"); bad++; }
            cur = 1 - cur;
            cycles++;
        }
        ops++;
        if (sjk_cache_check(c[cur], msg, sizeof msg) != SJK_OK) {
            fprintf(stderr, "  invariant broken after op %ld: %s\n", ops, msg);
            bad++;
        }
        /* warm-up: the caches' one allocation is touched as sequences first fill, which
         * takes a few thousand positions (2 x 2 caches x 3,072; the light soak's 10 % came
         * too early for that) */
        if (rss_warm < 0 && appended >= (target / 10 > 6000 ? target / 10 : 6000)) rss_warm = rss_kib();
        if (rss_warm >= 0 && ops % 256 == 0) {
            long x = rss_kib();
            if (x > rss_max) rss_max = x;
        }
    }
    long rss_end = rss_kib();
    if (rss_end > rss_max) rss_max = rss_end;
    CHECK(bad == 0);
    CHECK(appended >= target);
    CHECK(cycles > 0 && truncs > 0 && reprocess > 0 && seals > 0);
    /* flat: after warm-up, resident memory grows by less than 1 MiB. Under valgrind the
     * process's RSS is memcheck's too (shadow memory, translations of code first run late,
     * e.g. a rare truncation path): 8 MiB there; memcheck's leak check covers the rest. */
    const char *pre = getenv("LD_PRELOAD");
    long rss_bound = pre && strstr(pre, "vgpreload") ? 8192 : 1024;
    CHECKF(rss_warm < 0 || rss_max - rss_warm < rss_bound, "RSS grew from %ld KiB to %ld KiB (bound %ld KiB)", rss_warm,
           rss_max, rss_bound);
    if (getenv("SJK_TEST_VERBOSE"))
        fprintf(stderr,
                "  %ld positions, %ld ops: %ld idle seals, %ld truncations (%ld re-process), %ld save/restore cycles "
                "(%ld through files); RSS %ld KiB after warm-up, max %ld KiB\n",
                appended, ops, seals, truncs, reprocess, cycles, file_cycles, rss_warm, rss_max);
    unlink(path);
    free(file);
    sjk_cache_free(c[0]);
    sjk_cache_free(c[1]);
}

int main(void)
{
    RUN(test_soak_seal_truncate_save_restore);
    return test_summary();
}
