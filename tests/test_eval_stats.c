/* test_eval_stats.c — the KL study's statistics and reports: KL against closed forms,
 * percentiles, paired bootstrap determinism, and well-formed CSV / JSON / SVG. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "harness.h"
#include "sjkeval.h"

/* ---- KL ------------------------------------------------------------------------------ */

TEST(test_kl_identical_is_zero)
{
    float x[7] = {0.5f, -2.f, 3.f, 3.f, 0.f, -40.f, 1.25f};
    sjk_eval_cmp c;
    CHECK(sjk_eval_compare_logits(x, x, 7, &c) == SJK_OK);
    CHECK(c.kl == 0.0);
    CHECK(c.top_p == 2 && c.top_q == 2); /* first index of the maximum */
}

TEST(test_kl_two_token_closed_form)
{
    /* p = (1/2, 1/2), q = (3/4, 1/4): KL = ½ ln(4/3). */
    float p[2] = {0.f, 0.f}, q[2] = {(float)log(3.0), 0.f};
    sjk_eval_cmp c;
    CHECK(sjk_eval_compare_logits(p, q, 2, &c) == SJK_OK);
    CHECK_NEAR(c.kl, 0.5 * log(4.0 / 3.0), 1e-7);
    /* and the other direction: KL(q ‖ p) = ¾ ln(3/2) + ¼ ln(1/2). */
    CHECK(sjk_eval_compare_logits(q, p, 2, &c) == SJK_OK);
    CHECK_NEAR(c.kl, 0.75 * log(1.5) + 0.25 * log(0.5), 1e-7);
}

TEST(test_kl_uniform_vs_softmax_closed_form)
{
    /* KL(uniform ‖ softmax(x)) = lse(x) − ln V − mean(x). */
    enum { V = 4096 };
    static float u[V], x[V];
    sjk_rng r;
    sjk_rng_seed(&r, 7);
    double mx = -1e300, mean = 0;
    for (int i = 0; i < V; i++) {
        u[i] = 3.0f;
        x[i] = (float)(2.0 * sjk_rng_normal(&r));
        mean += x[i];
        if (x[i] > mx) mx = x[i];
    }
    mean /= V;
    double s = 0;
    for (int i = 0; i < V; i++) s += exp(x[i] - mx);
    double want = mx + log(s) - log((double)V) - mean;
    sjk_eval_cmp c;
    CHECK(sjk_eval_compare_logits(u, x, V, &c) == SJK_OK);
    CHECK_NEAR(c.kl, want, 1e-9 * V);
}

TEST(test_kl_large_logits_do_not_overflow)
{
    /* Shift invariance and stability: logits near 1e4 give the two-token result. */
    float p[2] = {10000.f, 10000.f}, q[2] = {10000.f + (float)log(3.0), 10000.f};
    sjk_eval_cmp c;
    CHECK(sjk_eval_compare_logits(p, q, 2, &c) == SJK_OK);
    CHECK(isfinite(c.kl));
    CHECK_NEAR(c.kl, 0.5 * log(4.0 / 3.0), 2e-3); /* float spacing at 1e4 is ~1e-3 */
}

TEST(test_kl_rejects_nan_and_handles_neg_inf)
{
    float p[3] = {0.f, 1.f, 2.f}, q[3] = {0.f, NAN, 2.f};
    sjk_eval_cmp c;
    CHECK(sjk_eval_compare_logits(p, q, 3, &c) == SJK_ERR_RANGE);
    q[1] = INFINITY;
    CHECK(sjk_eval_compare_logits(p, q, 3, &c) == SJK_ERR_RANGE);
    CHECK(sjk_eval_compare_logits(p, q, 0, &c) == SJK_ERR_PARAM);
    CHECK(sjk_eval_compare_logits(NULL, q, 3, &c) == SJK_ERR_PARAM);
    /* p gives token 1 zero probability: it contributes nothing. */
    float p2[3] = {0.f, -INFINITY, 0.f}, q2[3] = {0.f, 5.f, 0.f};
    CHECK(sjk_eval_compare_logits(p2, q2, 3, &c) == SJK_OK);
    double lq = -log(2.0 + exp(5.0));
    CHECK_NEAR(c.kl, log(0.5) - lq, 1e-6);
    /* q gives zero to a token p does not: KL is infinite. */
    CHECK(sjk_eval_compare_logits(q2, p2, 3, &c) == SJK_OK);
    CHECK(isinf(c.kl));
}

TEST(test_prepared_reference_matches_direct_kl)
{
    enum { V = 5000 };
    static float p[V], q[V];
    static double prob[V];
    sjk_rng r;
    sjk_rng_seed(&r, 11);
    for (int i = 0; i < V; i++) {
        p[i] = (float)(3.0 * sjk_rng_normal(&r));
        q[i] = p[i] + (float)(0.3 * sjk_rng_normal(&r));
    }
    p[17] = -INFINITY; /* a token p excludes */
    sjk_eval_ref ref;
    sjk_eval_cmp a, b;
    CHECK(sjk_eval_ref_prepare(&ref, p, V, prob) == SJK_OK);
    CHECK(sjk_eval_compare_ref(&ref, q, &a) == SJK_OK);
    CHECK(sjk_eval_compare_logits(p, q, V, &b) == SJK_OK);
    CHECK_NEAR(a.kl, b.kl, 1e-12 * (1 + b.kl));
    CHECK(a.top_p == b.top_p && a.top_q == b.top_q);
    CHECK(sjk_eval_compare_ref(&ref, p, &a) == SJK_OK && a.kl == 0.0);
    q[3] = NAN;
    CHECK(sjk_eval_compare_ref(&ref, q, &a) == SJK_ERR_RANGE);
    CHECK(sjk_eval_ref_prepare(&ref, q, V, prob) == SJK_ERR_RANGE);
}

/* ---- summaries ----------------------------------------------------------------------- */

TEST(test_summary_percentiles_interpolate)
{
    double v[100];
    uint8_t same[100];
    for (int i = 0; i < 100; i++) { v[i] = 100 - i; same[i] = i % 4 != 0; } /* 100 .. 1 */
    sjk_eval_summary s;
    CHECK(sjk_eval_summarize(v, same, 100, &s) == SJK_OK);
    CHECK(s.n == 100);
    CHECK_NEAR(s.mean, 50.5, 1e-12);
    CHECK_NEAR(s.median, 50.5, 1e-12);
    CHECK_NEAR(s.p90, 90.1, 1e-9);
    CHECK_NEAR(s.p99, 99.01, 1e-9);
    CHECK_NEAR(s.max, 100, 0);
    CHECK_NEAR(s.same_top, 0.75, 1e-12);
    CHECK(v[0] == 100); /* input not reordered */
    CHECK(sjk_eval_summarize(NULL, NULL, 0, &s) == SJK_OK && s.n == 0 && s.mean == 0);
}

/* ---- paired bootstrap ---------------------------------------------------------------- */

static void make_pair_data(double *a, double *b, uint32_t *doc, size_t n, uint64_t seed)
{
    sjk_rng r;
    sjk_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        double base = exp(2.0 * sjk_rng_normal(&r)) * 1e-3; /* heavy-tailed */
        b[i] = base;
        a[i] = base * (0.5 + 0.3 * sjk_rng_uniform(&r));
        doc[i] = (uint32_t)(i % 5);
    }
}

TEST(test_pair_exact_ratio_has_degenerate_interval)
{
    enum { N = 300 };
    double a[N], b[N];
    uint32_t doc[N];
    make_pair_data(a, b, doc, N, 1);
    for (int i = 0; i < N; i++) a[i] = 0.5 * b[i];
    sjk_eval_pair p;
    CHECK(sjk_eval_pair_compare(a, b, doc, N, 5, 500, 42, &p) == SJK_OK);
    CHECK_NEAR(p.ratio, 0.5, 1e-12);
    CHECK_NEAR(p.ci_low, 0.5, 1e-12);
    CHECK_NEAR(p.ci_high, 0.5, 1e-12);
    CHECK_NEAR(p.doc_ci_low, 0.5, 1e-12);
    CHECK_NEAR(p.doc_ci_high, 0.5, 1e-12);
    CHECK(p.docs_won == 5 && p.n_docs == 5);
    CHECK(p.positions_won == N && p.n == N);
}

TEST(test_bootstrap_is_deterministic)
{
    enum { N = 1000 };
    double a[N], b[N];
    uint32_t doc[N];
    make_pair_data(a, b, doc, N, 3);
    sjk_eval_pair p1, p2, p3;
    CHECK(sjk_eval_pair_compare(a, b, doc, N, 5, 1000, 99, &p1) == SJK_OK);
    CHECK(sjk_eval_pair_compare(a, b, doc, N, 5, 1000, 99, &p2) == SJK_OK);
    CHECK(memcmp(&p1, &p2, sizeof p1) == 0);
    CHECK(sjk_eval_pair_compare(a, b, doc, N, 5, 1000, 100, &p3) == SJK_OK);
    CHECK(p3.ratio == p1.ratio);
    CHECK(p3.ci_low != p1.ci_low || p3.ci_high != p1.ci_high);
    /* The interval brackets the point estimate and sits below 1 (a is 35% lower). */
    CHECK(p1.ci_low < p1.ratio && p1.ratio < p1.ci_high);
    CHECK(p1.ci_high < 1.0);
    CHECK(p1.doc_ci_low <= p1.ratio && p1.ratio <= p1.doc_ci_high);
    /* No resamples: NaN intervals, the point estimate still there. */
    CHECK(sjk_eval_pair_compare(a, b, doc, N, 5, 0, 99, &p3) == SJK_OK);
    CHECK(isnan(p3.ci_low) && isnan(p3.doc_ci_high) && p3.ratio == p1.ratio);
}

TEST(test_pair_rejects_bad_document_index)
{
    double a[2] = {1, 2}, b[2] = {1, 2};
    uint32_t doc[2] = {0, 3};
    sjk_eval_pair p;
    CHECK(sjk_eval_pair_compare(a, b, doc, 2, 3, 10, 1, &p) == SJK_ERR_PARAM);
    /* b's mean is zero: the ratio is undefined (NaN), not a crash. */
    double z[2] = {0, 0};
    doc[1] = 1;
    CHECK(sjk_eval_pair_compare(a, z, doc, 2, 3, 10, 1, &p) == SJK_OK);
    CHECK(isnan(p.ratio));
}

/* ---- reports ------------------------------------------------------------------------- */

/* A minimal JSON checker: returns the end of one value or NULL. */
static const char *js_ws(const char *s) { while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') s++; return s; }
static const char *js_value(const char *s, int depth);
static const char *js_string(const char *s)
{
    if (*s != '"') return NULL;
    for (s++; *s && *s != '"'; s++) {
        if ((unsigned char)*s < 0x20) return NULL;
        if (*s == '\\') { s++; if (!*s) return NULL; }
    }
    return *s == '"' ? s + 1 : NULL;
}
static const char *js_value(const char *s, int depth)
{
    if (depth > 32) return NULL;
    s = js_ws(s);
    if (*s == '{' || *s == '[') {
        char close = *s == '{' ? '}' : ']';
        int obj = *s == '{';
        s = js_ws(s + 1);
        if (*s == close) return s + 1;
        for (;;) {
            if (obj) {
                s = js_string(js_ws(s));
                if (!s) return NULL;
                s = js_ws(s);
                if (*s++ != ':') return NULL;
            }
            s = js_value(s, depth + 1);
            if (!s) return NULL;
            s = js_ws(s);
            if (*s == ',') { s++; continue; }
            if (*s == close) return s + 1;
            return NULL;
        }
    }
    if (*s == '"') return js_string(s);
    if (!strncmp(s, "null", 4)) return s + 4;
    if (!strncmp(s, "true", 4)) return s + 4;
    if (!strncmp(s, "false", 5)) return s + 5;
    char *e;
    strtod(s, &e);
    if (e == s) return NULL;
    /* JSON numbers: no "nan"/"inf" spellings, no leading '+'. */
    for (const char *c = s; c < e; c++)
        if (!strchr("0123456789+-.eE", *c)) return NULL;
    return e;
}
static int json_ok(const char *s)
{
    const char *e = js_value(s, 0);
    return e && *js_ws(e) == 0;
}

/* Fields in one CSV line (RFC 4180 quoting); -1 if a quote is unbalanced. */
static int csv_fields(const char *line)
{
    int n = 1, q = 0;
    for (const char *c = line; *c && *c != '\n'; c++) {
        if (*c == '"') q = !q;
        else if (*c == ',' && !q) n++;
    }
    return q ? -1 : n;
}
static int csv_ok(const char *s, int *rows)
{
    int want = -1;
    *rows = 0;
    while (*s) {
        const char *nl = strchr(s, '\n');
        if (!nl) return 0; /* every row ends with a newline */
        int n = csv_fields(s);
        if (n < 0 || (want >= 0 && n != want)) return 0;
        want = n;
        (*rows)++;
        s = nl + 1;
    }
    return *rows > 0;
}

static char *capture(sjk_status (*w)(const sjk_eval_study *, FILE *), const sjk_eval_study *st,
                     sjk_status *out)
{
    char *buf = NULL;
    size_t len = 0;
    *out = SJK_ERR_IO;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    *out = w(st, f);
    fclose(f);
    return buf;
}

static sjk_eval_study *make_study(void)
{
    const char *cfgs[] = {"f16", "q8_0/q8_0", "sj4/4", "odd,\"name\""};
    const char *docs[] = {"agentic-0", "code-0", "doc with, comma"};
    sjk_eval_study *st = sjk_eval_study_create(4, cfgs, 3, docs);
    if (!st) return NULL;
    sjk_rng r;
    sjk_rng_seed(&r, 5);
    const double scale[4] = {0.0, 1e-4, 1e-3, 3e-3};
    const double bpv[4] = {16.0, 8.5, 4.6, 3.1};
    for (uint32_t d = 0; d < 3; d++)
        for (uint32_t g = 0; g < 40; g++) {
            double e = exp(sjk_rng_normal(&r));
            for (size_t c = 0; c < 4; c++) {
                sjk_eval_cmp cmp = {scale[c] * e * (1.0 + 0.2 * sjk_rng_uniform(&r)), 1,
                                    (uint32_t)(c == 3 && g % 7 == 0 ? 2 : 1)};
                sjk_eval_mem mem = {bpv[c], bpv[c] + 0.5, (uint64_t)(bpv[c] * 1e6)};
                sjk_eval_study_add(st, c, d, 1000 + g + 100 * d, &cmp, &mem);
            }
        }
    for (size_t c = 0; c < 4; c++) {
        sjk_eval_study_add_time(st, c, 1000, 2.0);
        for (uint32_t k = 0; k < 8; k++)
            sjk_eval_study_add_needle(st, c, 0, 30u << k, 32u << k, scale[c] * (k + 1),
                                      c < 3 || k < 6, 1);
    }
    return st;
}

TEST(test_study_summaries_and_pairs)
{
    sjk_eval_study *st = make_study();
    CHECK(st != NULL);
    if (!st) return;
    CHECK(sjk_eval_study_result(st, 0) == NULL); /* before finish */
    CHECK(sjk_eval_study_finish(st, 200, 1) == SJK_OK);
    const sjk_eval_config_result *r0 = sjk_eval_study_result(st, 0);
    const sjk_eval_config_result *r2 = sjk_eval_study_result(st, 2);
    CHECK(r0 && r0->s.n == 120 && r0->s.mean == 0.0 && r0->s.same_top == 1.0);
    CHECK(r2 && r2->s.mean > 0 && fabs(r2->bpv_occupied - 4.6) < 1e-12);
    CHECK(r2->kv_bytes == (uint64_t)(4.6 * 1e6));
    CHECK_NEAR(r2->tokens_per_s, 500.0, 1e-9);
    CHECK(r2->n_needle == 8 && r2->needle_gold_top == 1.0);
    const sjk_eval_config_result *r3 = sjk_eval_study_result(st, 3);
    CHECK_NEAR(r3->needle_gold_top, 0.75, 1e-12);
    const sjk_eval_pair *p = sjk_eval_study_pair(st, 1, 2);
    CHECK(p && p->ratio < 0.2 && p->ci_high < 1.0 && p->docs_won == 3);
    CHECK(sjk_eval_study_pair(st, 2, 1) == NULL);
    sjk_eval_study_free(st);
}

TEST(test_study_rejects_unequal_columns)
{
    const char *cfgs[] = {"a", "b"}, *docs[] = {"d"};
    sjk_eval_study *st = sjk_eval_study_create(2, cfgs, 1, docs);
    sjk_eval_cmp cmp = {0.1, 0, 0};
    CHECK(sjk_eval_study_add(st, 0, 0, 1, &cmp, NULL) == SJK_OK);
    CHECK(sjk_eval_study_add(st, 1, 1, 1, &cmp, NULL) == SJK_ERR_PARAM); /* bad doc */
    CHECK(sjk_eval_study_finish(st, 10, 1) == SJK_OK); /* pairs by (doc, pos): b has none */
    CHECK(sjk_eval_study_pair(st, 0, 1)->n == 0 && isnan(sjk_eval_study_pair(st, 0, 1)->ratio));
    sjk_eval_study_free(st);
    char longname[200]; /* names are --kv strings: at most SJKH_KV_STR_MAX (127) characters */
    memset(longname, 'x', 199);
    longname[199] = 0;
    const char *bad[] = {longname};
    CHECK(sjk_eval_study_create(1, bad, 1, docs) == NULL);
    CHECK(sjk_eval_study_create(0, cfgs, 1, docs) == NULL);
}

TEST(test_reports_are_well_formed)
{
    sjk_eval_study *st = make_study();
    CHECK(st && sjk_eval_study_finish(st, 100, 9) == SJK_OK);
    if (!st) return;
    sjk_status s = SJK_ERR_PARAM;
    int rows;
    char *json = capture(sjk_eval_write_json, st, &s);
    CHECK(s == SJK_OK && json && json_ok(json));
    if (json) {
        const char *keys[] = {"\"config\"", "\"mean_kl\"", "\"median_kl\"", "\"p99_kl\"",
                              "\"same_top\"", "\"bits_per_value\"", "\"kv_bytes\"", "\"ratio\"",
                              "\"ci_low\"", "\"ci_high\"", "\"planned_distance\""};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            CHECKF(strstr(json, keys[i]) != NULL, "missing %s", keys[i]);
        CHECK(strstr(json, "\"odd,\\\"name\\\"\"") != NULL); /* escaped */
        CHECK(!strstr(json, "nan") && !strstr(json, "inf"));
    }
    free(json);
    char *csv = capture(sjk_eval_write_csv_configs, st, &s);
    CHECK(s == SJK_OK && csv && csv_ok(csv, &rows) && rows == 5);
    free(csv);
    csv = capture(sjk_eval_write_csv_pairs, st, &s);
    CHECK(s == SJK_OK && csv && csv_ok(csv, &rows) && rows == 1 + 6);
    free(csv);
    csv = capture(sjk_eval_write_csv_positions, st, &s);
    CHECK(s == SJK_OK && csv && csv_ok(csv, &rows) && rows == 1 + 4 * 120);
    free(csv);
    char *tab = capture(sjk_eval_write_table, st, &s);
    CHECK(s == SJK_OK && tab && strstr(tab, "sj4/4") && strstr(tab, "needles"));
    free(tab);
    char *svg = capture(sjk_eval_write_svg_frontier, st, &s);
    CHECK(s == SJK_OK && svg && strstr(svg, "<svg") && strstr(svg, "</svg>") &&
          strstr(svg, "<circle") && !strstr(svg, "nan") && !strstr(svg, "inf"));
    free(svg);
    svg = capture(sjk_eval_write_svg_positions, st, &s);
    CHECK(s == SJK_OK && svg && strstr(svg, "<polyline") && strstr(svg, "</svg>") &&
          !strstr(svg, "nan") && !strstr(svg, "inf"));
    free(svg);
    sjk_eval_study_free(st);
}

TEST(test_json_writes_undefined_ratio_as_null)
{
    /* b identical to the reference (mean KL 0): a ÷ b is undefined. */
    const char *cfgs[] = {"q4_0/q4_0", "f16"}, *docs[] = {"d"};
    sjk_eval_study *st = sjk_eval_study_create(2, cfgs, 1, docs);
    for (uint32_t i = 0; i < 20; i++) {
        sjk_eval_cmp a = {0.01 * (i + 1), 0, 0}, b = {0.0, 0, 0};
        CHECK(sjk_eval_study_add(st, 0, 0, i, &a, NULL) == SJK_OK);
        CHECK(sjk_eval_study_add(st, 1, 0, i, &b, NULL) == SJK_OK);
    }
    CHECK(sjk_eval_study_finish(st, 50, 1) == SJK_OK);
    sjk_status s = SJK_ERR_PARAM;
    char *json = capture(sjk_eval_write_json, st, &s);
    CHECK(s == SJK_OK && json && json_ok(json) && strstr(json, "\"ratio\": null"));
    free(json);
    int rows = 0;
    char *csv = capture(sjk_eval_write_csv_pairs, st, &s);
    CHECK(s == SJK_OK && csv && csv_ok(csv, &rows) && rows == 2 && strstr(csv, "f16,,,,"));
    free(csv);
    sjk_eval_study_free(st);
}

TEST(test_writers_refuse_unfinished_study)
{
    sjk_eval_study *st = make_study();
    CHECK(sjk_eval_write_json(st, stdout) == SJK_ERR_PARAM);
    CHECK(sjk_eval_write_table(st, stdout) == SJK_ERR_PARAM);
    sjk_eval_study_free(st);
}

TEST(test_eta_format)
{
    char b[32];
    sjk_eval_format_eta(b, sizeof b, 0, 100, 5.0);
    CHECK(!strcmp(b, "?"));
    sjk_eval_format_eta(b, sizeof b, 25, 100, 10.0);
    CHECK(!strcmp(b, "30s"));
    sjk_eval_format_eta(b, sizeof b, 10, 100, 10.0);
    CHECK(!strcmp(b, "1m30s"));
    sjk_eval_format_eta(b, sizeof b, 1, 1000, 10.0);
    CHECK(!strcmp(b, "2h46m"));
}

int main(void)
{
    RUN(test_kl_identical_is_zero);
    RUN(test_kl_two_token_closed_form);
    RUN(test_kl_uniform_vs_softmax_closed_form);
    RUN(test_kl_large_logits_do_not_overflow);
    RUN(test_kl_rejects_nan_and_handles_neg_inf);
    RUN(test_prepared_reference_matches_direct_kl);
    RUN(test_summary_percentiles_interpolate);
    RUN(test_pair_exact_ratio_has_degenerate_interval);
    RUN(test_bootstrap_is_deterministic);
    RUN(test_pair_rejects_bad_document_index);
    RUN(test_study_summaries_and_pairs);
    RUN(test_study_rejects_unequal_columns);
    RUN(test_reports_are_well_formed);
    RUN(test_json_writes_undefined_ratio_as_null);
    RUN(test_writers_refuse_unfinished_study);
    RUN(test_eta_format);
    return test_summary();
}
