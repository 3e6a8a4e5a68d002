/* test_kv_exact.c — the host's region attribution (":exact=LIST", host/model/kv.c): the
 * option's grammar, and attention through the fp16 view it builds:
 *   - exact=all gives the f16 cache's attention bit for bit (prefill and decode, across
 *     seals, and after a truncate);
 *   - exact=none is the configuration itself, read through fp16 rows: close to its own
 *     attention;
 *   - making one region exact moves the output toward the f16 one;
 *   - session storage (files, prefix blocks) is refused while the option is on. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "harness.h"
#include "model/kv.h"
#include "sjkhost.h"

#define L 2
#define NKV 2
#define NQ 4
#define D 128
#define CTX 1200
#define ROWS 64

TEST(test_exact_grammar)
{
    char rest[128], err[256];
    unsigned m = 99;
    CHECK(sjkh_kv_parse_exact("sj:4/4", rest, sizeof rest, &m, err, sizeof err) == 0 && m == 0);
    CHECK(sjkh_kv_parse_exact("sj:4/4:exact=all", rest, sizeof rest, &m, err, sizeof err) == 1);
    CHECK(!strcmp(rest, "sj:4/4") && m == 0xffu);
    CHECK(sjkh_kv_parse_exact("sj:4/4:exact=none:tail=256", rest, sizeof rest, &m, err, sizeof err) == 1);
    CHECK(!strcmp(rest, "sj:4/4:tail=256") && m == 0);
    /* bit 2 r + h: sink 0, body 1, ring 2, uniform 3; h = 1 for V */
    CHECK(sjkh_kv_parse_exact("sj:4/4:exact=body.k+ring", rest, sizeof rest, &m, err, sizeof err) == 1);
    CHECKF(m == ((1u << 2) | (3u << 4)), "mask %#x", m);
    CHECK(sjkh_kv_parse_exact("kvarn:4/4:exact=v", rest, sizeof rest, &m, err, sizeof err) == 1 && m == 0xaau);
    CHECK(sjkh_kv_parse_exact("q4_0:exact=uniform.k+sink.v", rest, sizeof rest, &m, err, sizeof err) == 1);
    CHECK(m == ((1u << 6) | (1u << 1)));
    const char *bad[] = {"sj:4/4:exact=", "sj:4/4:exact=bodyk", "sj:4/4:exact=body+", "sj:4/4:exact=body.x",
                         "sj:4/4:exact=k:exact=v", "sj:4/4:exact=+k", "sj:4/4:exact=ring..k"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        CHECKF(sjkh_kv_parse_exact(bad[i], rest, sizeof rest, &m, err, sizeof err) == -1 && err[0],
               "'%s' accepted", bad[i]);
    }
}

typedef struct run {
    sjkh_kv *kv;
    float *out; /* [CTX][NQ][D] attention output of every position */
} run;

static sjkh_kv *make(const char *cfg, uint32_t threads)
{
    static const uint8_t glob[L] = {1, 1};
    sjkh_kv_params p = {L, NKV, NQ, D, CTX, ROWS, threads, glob, 0, cfg, SJKH_WINDOW_F16};
    sjkh_kv *kv = NULL;
    char err[256] = "";
    sjk_status st = sjkh_kv_create(&p, &kv, err, sizeof err);
    CHECKF(st == SJK_OK, "%s: %s", cfg, err);
    return kv;
}

/* Feeds positions [from, to) of the synthetic rows in chunks of `chunk` (prefill, or 1 =
 * decode), attending after each append; out[pos] for layer 1. */
static int feed(sjkh_kv *kv, sjk_pool *pool, const float *k, const float *v, const float *q, uint32_t from,
                uint32_t to, uint32_t chunk, float *out)
{
    const size_t row = (size_t)NKV * D, qrow = (size_t)NQ * D;
    for (uint32_t t = from; t < to;) {
        uint32_t n = to - t < chunk ? to - t : chunk;
        for (uint32_t l = 0; l < L; l++) {
            if (sjkh_kv_append(kv, l, k + ((size_t)l * CTX + t) * row, v + ((size_t)l * CTX + t) * row, n))
                return 0;
            if (sjkh_kv_attend(kv, l, q + (size_t)t * qrow, n, 0.088f, out + (size_t)t * qrow, pool)) return 0;
        }
        t += n;
    }
    return 1;
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0 ? sqrt(e / s) : sqrt(e);
}

TEST(test_exact_attention)
{
    const size_t row = (size_t)NKV * D, qrow = (size_t)NQ * D;
    const uint32_t N = test_light() ? 700 : CTX;
    float *k = malloc(sizeof(float) * L * CTX * row), *v = malloc(sizeof(float) * L * CTX * row);
    float *q = malloc(sizeof(float) * CTX * qrow);
    float *o_f16 = calloc((size_t)CTX * qrow, sizeof(float)), *o = calloc((size_t)CTX * qrow, sizeof(float));
    float *o_sj = calloc((size_t)CTX * qrow, sizeof(float));
    sjk_pool *pool = NULL;
    CHECK(sjk_pool_create(2, 0, &pool) == SJK_OK);
    CHECK(k && v && q && o_f16 && o && o_sj && pool);
    if (!k || !v || !q || !o_f16 || !o || !o_sj || !pool) goto out;
    sjk_rng r;
    sjk_rng_seed(&r, 5);
    for (size_t i = 0; i < (size_t)L * CTX * row; i++) {
        k[i] = (float)(sjk_rng_normal(&r) + (i % D == 7 ? 4.0 : 0.5)); /* an offset channel */
        v[i] = (float)sjk_rng_normal(&r);
    }
    for (size_t i = 0; i < (size_t)CTX * qrow; i++) q[i] = (float)sjk_rng_normal(&r);

    const char *T = "sj:4/4:tail_min=128:tail_max=256";
    char cfg[128];
    sjkh_kv *ref = make("f16", 2);
    /* prefill 640 in chunks of ROWS (seals in between), then decode one by one */
    CHECK(ref && feed(ref, pool, k, v, q, 0, 640, ROWS, o_f16) && feed(ref, pool, k, v, q, 640, N, 1, o_f16));

    snprintf(cfg, sizeof cfg, "%s:exact=all", T);
    sjkh_kv *all = make(cfg, 2);
    CHECK(all && feed(all, pool, k, v, q, 0, 640, ROWS, o) && feed(all, pool, k, v, q, 640, N, 1, o));
    CHECKF(!memcmp(o, o_f16, sizeof(float) * N * qrow), "exact=all differs from f16 by %g",
           rel_diff(o, o_f16, (size_t)N * qrow));
    /* session storage is refused while the view is on */
    uint32_t *len;
    uint8_t *pk, *pv;
    size_t nb, rb;
    sjk_cache *c;
    CHECK(all && sjkh_kv_layer_storage(all, 0, &len, &pk, &pv, &nb, &rb, &c) == SJK_ERR_UNSUPPORTED);
    /* truncate back into the body, refeed: still the f16 result */
    uint32_t kept = 0;
    CHECK(all && sjkh_kv_truncate(all, 500, &kept) == SJK_OK && kept <= 500 && kept > 0);
    memset(o, 0, sizeof(float) * N * qrow);
    CHECK(all && feed(all, pool, k, v, q, kept, N, 7, o));
    {
        /* f16 fed the same way (chunks of 7 after `kept`) */
        sjkh_kv *ref2 = make("f16", 2);
        float *o2 = calloc((size_t)CTX * qrow, sizeof(float));
        CHECK(ref2 && o2 && feed(ref2, pool, k, v, q, 0, 640, ROWS, o2) && sjkh_kv_truncate(ref2, kept, &kept) == SJK_OK &&
              feed(ref2, pool, k, v, q, kept, N, 7, o2));
        CHECK(o2 && !memcmp(o + (size_t)kept * qrow, o2 + (size_t)kept * qrow, sizeof(float) * (N - kept) * qrow));
        free(o2);
        sjkh_kv_free(ref2);
    }
    sjkh_kv_free(all);

    /* exact=none: the configuration read through fp16 rows, close to its own attention */
    sjkh_kv *sj = make(T, 2);
    CHECK(sj && feed(sj, pool, k, v, q, 0, 640, ROWS, o_sj) && feed(sj, pool, k, v, q, 640, N, 1, o_sj));
    snprintf(cfg, sizeof cfg, "%s:exact=none", T);
    sjkh_kv *none = make(cfg, 2);
    memset(o, 0, sizeof(float) * N * qrow);
    CHECK(none && feed(none, pool, k, v, q, 0, 640, ROWS, o) && feed(none, pool, k, v, q, 640, N, 1, o));
    double e_sj = rel_diff(o_sj, o_f16, (size_t)N * qrow), e_none = rel_diff(o, o_sj, (size_t)N * qrow);
    CHECKF(e_sj > 1e-3, "sj:4/4 is not lossy here (%g)", e_sj);
    CHECKF(e_none < 0.05 * e_sj, "exact=none differs from sj itself by %g (sj's own error %g)", e_none, e_sj);
    sjkh_kv_free(none);
    sjkh_kv_free(sj);

    /* each region made exact removes part of the error; all three remove (nearly) all */
    const char *parts[] = {"body", "ring", "k", "v", "sink+body+ring"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        snprintf(cfg, sizeof cfg, "%s:exact=%s", T, parts[i]);
        sjkh_kv *x = make(cfg, 2);
        memset(o, 0, sizeof(float) * N * qrow);
        CHECK(x && feed(x, pool, k, v, q, 0, 640, ROWS, o) && feed(x, pool, k, v, q, 640, N, 1, o));
        double e = rel_diff(o, o_f16, (size_t)N * qrow);
        if (i == 4)
            CHECKF(!memcmp(o, o_f16, sizeof(float) * N * qrow), "exact=%s differs from f16 by %g", parts[i], e);
        else
            CHECKF(e < e_sj && e > 0, "exact=%s: error %g against sj's %g", parts[i], e, e_sj);
        sjkh_kv_free(x);
    }
    sjkh_kv_free(ref);
out:
    sjk_pool_free(pool);
    free(k); free(v); free(q); free(o_f16); free(o); free(o_sj);
}

TEST(test_exact_refuses_host_f16)
{
    static const uint8_t glob[L] = {1, 1};
    sjkh_kv_params p = {L, NKV, NQ, D, 256, ROWS, 1, glob, 0, "host-f16:exact=all", SJKH_WINDOW_F16};
    sjkh_kv *kv = NULL;
    char err[256] = "";
    CHECK(sjkh_kv_create(&p, &kv, err, sizeof err) == SJK_ERR_PARAM && !kv && strstr(err, "exact="));
    p.config = "sj:4/4:exact=bogus";
    CHECK(sjkh_kv_create(&p, &kv, err, sizeof err) == SJK_ERR_PARAM && !kv && strstr(err, "exact="));
}

int main(void)
{
    RUN(test_exact_grammar);
    RUN(test_exact_attention);
    RUN(test_exact_refuses_host_f16);
    return test_summary();
}
