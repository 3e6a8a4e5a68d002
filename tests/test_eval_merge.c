/* test_eval_merge.c — `sjkvarn eval --merge`: a study run in pieces (one document, or one
 * batch of configurations, per command) and merged from its CSV outputs reports what one
 * run over the union reports; duplicates and malformed inputs are refused.
 *
 * Library tests build studies whose KL values are a fixed function of (configuration,
 * document, position), write them with the study's own writers, merge them back and
 * compare with a study of the union built directly. The positions file keeps 9
 * significant digits, so merged numbers match to ~1e-9 relative; the terminal table (4
 * digits) and the positions CSV match byte for byte. CLI tests do the same with
 * `sjkvarn eval --synthetic` ($BUILD/sjkvarn; tests/run_tests.sh sets BUILD). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SJK_ALLOC_HOOK_DECLS_ONLY /* this file's own allocations are not counted */
#include "common/alloc_hook.h" /* sjk_alloc_fail_nth: fault injection in the library */
#include "harness.h"
#include "support/files.h"
#include "sjkeval.h"

static char dir[256], cli[1024];

#define N_GEN 24
static const char *const all_cfgs[] = {"x", "y", "z"};
static const char *const all_docs[] = {"A", "B", "C"};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* The score of configuration c (index into all_cfgs) at document d, position p: heavy-
 * tailed, larger for later configurations. salt != 0 gives another run's numbers. */
static double kl_at(size_t c, size_t d, uint32_t p, uint64_t salt)
{
    uint64_t h = mix(((uint64_t)c << 48) ^ ((uint64_t)d << 32) ^ p ^ (salt * 0x9E3779B97F4A7C15ull));
    double u = (double)(h >> 11) * 0x1.0p-53;
    return (double)(c + 1) * 1e-4 * exp(6.0 * u - 3.0);
}

static uint32_t pos_at(size_t d, uint32_t g) { return 1000u * (uint32_t)(d + 1) + 7u + g; }

static char *path_in(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", dir, name);
    return buf;
}

static char *capture(sjk_status (*w)(const sjk_eval_study *, FILE *), const sjk_eval_study *st)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    sjk_status s = w(st, f);
    fclose(f);
    if (s != SJK_OK) { free(buf); return NULL; }
    return buf;
}

static int write_file(const char *path, sjk_status (*w)(const sjk_eval_study *, FILE *),
                      const sjk_eval_study *st)
{
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    sjk_status s = w(st, f);
    return fclose(f) == 0 && s == SJK_OK;
}

/* A finished run of the configurations in cfg_mask (bit c: all_cfgs[c]) on the documents
 * in doc_mask, filled in lockstep as the driver does, with memory that varies by document
 * and a rate per document. With name, writes DIR/name.csv and DIR/name-positions.csv as
 * `eval --csv` does. With needles, adds needle answers too. */
static sjk_eval_study *make_run(const char *name, unsigned cfg_mask, unsigned doc_mask,
                                uint64_t salt, int needles)
{
    const char *cfgs[3], *docs[3];
    size_t cid[3], did[3], nc = 0, nd = 0;
    for (size_t c = 0; c < 3; c++)
        if (cfg_mask >> c & 1) { cid[nc] = c; cfgs[nc++] = all_cfgs[c]; }
    for (size_t d = 0; d < 3; d++)
        if (doc_mask >> d & 1) { did[nd] = d; docs[nd++] = all_docs[d]; }
    sjk_eval_study *st = sjk_eval_study_create(nc, cfgs, nd, docs);
    if (!st) return NULL;
    for (size_t j = 0; j < nd; j++) {
        size_t d = did[j];
        for (uint32_t g = 0; g < N_GEN; g++)
            for (size_t k = 0; k < nc; k++) {
                size_t c = cid[k];
                uint32_t p = pos_at(d, g);
                double kl = kl_at(c, d, p, salt);
                sjk_eval_cmp cmp = {kl, 3, (mix(p * 31u + c) % 9 == 0) ? 4u : 3u};
                sjk_eval_mem mem = {4.0 + c + 0.001 * g, 6.0 + c + 0.25 * (double)d,
                                    (uint64_t)(1000000 * (c + 1) + 1000 * d + g)};
                sjk_eval_study_add(st, k, j, p, &cmp, &mem);
            }
        for (size_t k = 0; k < nc; k++) {
            /* the driver feeds a document's prompt and all but the last generated token:
             * last scored position + 1 tokens */
            uint64_t tokens = pos_at(d, N_GEN - 1) + 1;
            sjk_eval_study_add_time(st, k, tokens, (double)tokens / (100.0 + 10.0 * (double)d + (double)cid[k]));
            if (needles) sjk_eval_study_add_needle(st, k, j, 100, 128, 0.01, 1, 1);
        }
    }
    if (sjk_eval_study_finish(st, 300, 7) != SJK_OK) { sjk_eval_study_free(st); return NULL; }
    if (name) {
        char p1[512], p2[512];
        snprintf(p1, sizeof p1, "%s/%s.csv", dir, name);
        snprintf(p2, sizeof p2, "%s/%s-positions.csv", dir, name);
        if (!write_file(p1, sjk_eval_write_csv_configs, st) ||
            !write_file(p2, sjk_eval_write_csv_positions, st)) {
            sjk_eval_study_free(st);
            return NULL;
        }
    }
    return st;
}

/* Merges DIR/<name>.csv for each name and finishes with the runs' bootstrap settings. */
static sjk_eval_study *merge(const char *const *names, size_t n, sjk_status *status,
                             sjk_eval_merge_info *info, char *err, size_t err_cap)
{
    char paths[8][512];
    const char *p[8];
    for (size_t i = 0; i < n && i < 8; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s", dir, names[i]);
        p[i] = paths[i];
    }
    sjk_eval_study *st = NULL;
    *status = sjk_eval_study_merge_csv(p, n, &st, info, err, err_cap);
    if (*status == SJK_OK && sjk_eval_study_finish(st, 300, 7) != SJK_OK) {
        *status = SJK_ERR_PARAM;
        sjk_eval_study_free(st);
        st = NULL;
    }
    return st;
}

static int near_rel(double a, double b, double tol)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return fabs(a - b) <= tol * fmax(fabs(a), fabs(b)) + 1e-300;
}

/* Every configuration and pair of got matches want (9-digit CSV precision); the rate too
 * if check_rate. */
static void check_same_study(const sjk_eval_study *got, const sjk_eval_study *want,
                             int check_rate)
{
    CHECK(sjk_eval_study_n_configs(got) == sjk_eval_study_n_configs(want));
    CHECK(sjk_eval_study_n_docs(got) == sjk_eval_study_n_docs(want));
    size_t nc = sjk_eval_study_n_configs(want);
    if (sjk_eval_study_n_configs(got) != nc) return;
    const double tol = 1e-8;
    for (size_t c = 0; c < nc; c++) {
        const sjk_eval_config_result *g = sjk_eval_study_result(got, c);
        const sjk_eval_config_result *w = sjk_eval_study_result(want, c);
        CHECK(g && w && !strcmp(g->config, w->config));
        if (!g || !w) return;
        CHECKF(g->s.n == w->s.n, "%s: n %zu vs %zu", w->config, g->s.n, w->s.n);
        CHECKF(near_rel(g->s.mean, w->s.mean, tol) && near_rel(g->s.median, w->s.median, tol) &&
               near_rel(g->s.p90, w->s.p90, tol) && near_rel(g->s.p99, w->s.p99, tol) &&
               near_rel(g->s.max, w->s.max, tol) && g->s.same_top == w->s.same_top,
               "%s: summary differs (mean %.12g vs %.12g)", w->config, g->s.mean, w->s.mean);
        CHECKF(near_rel(g->bpv_occupied, w->bpv_occupied, tol) &&
               near_rel(g->bpv_allocated, w->bpv_allocated, tol) && g->kv_bytes == w->kv_bytes,
               "%s: memory %.12g %.12g %llu vs %.12g %.12g %llu", w->config, g->bpv_occupied,
               g->bpv_allocated, (unsigned long long)g->kv_bytes, w->bpv_occupied,
               w->bpv_allocated, (unsigned long long)w->kv_bytes);
        CHECKF(!check_rate || near_rel(g->tokens_per_s, w->tokens_per_s, tol), "%s: tok/s %.12g vs %.12g",
               w->config, g->tokens_per_s, w->tokens_per_s);
        for (size_t b = c + 1; b < nc; b++) {
            const sjk_eval_pair *pg = sjk_eval_study_pair(got, c, b);
            const sjk_eval_pair *pw = sjk_eval_study_pair(want, c, b);
            CHECK(pg && pw);
            if (!pg || !pw) return;
            CHECKF(near_rel(pg->ratio, pw->ratio, tol) && near_rel(pg->ci_low, pw->ci_low, tol) &&
                   near_rel(pg->ci_high, pw->ci_high, tol) &&
                   near_rel(pg->doc_ci_low, pw->doc_ci_low, tol) &&
                   near_rel(pg->doc_ci_high, pw->doc_ci_high, tol),
                   "pair %zu,%zu: ratio %.12g [%.12g, %.12g] vs %.12g [%.12g, %.12g]", c, b,
                   pg->ratio, pg->doc_ci_low, pg->doc_ci_high, pw->ratio, pw->doc_ci_low,
                   pw->doc_ci_high);
            CHECK(pg->docs_won == pw->docs_won && pg->n_docs == pw->n_docs &&
                  pg->positions_won == pw->positions_won && pg->n == pw->n);
        }
    }
}

/* The outputs that are exact: the table and the positions CSV, byte for byte. */
static void check_same_text(const sjk_eval_study *got, const sjk_eval_study *want)
{
    char *a = capture(sjk_eval_write_table, got), *b = capture(sjk_eval_write_table, want);
    CHECK(a && b && !strcmp(a, b));
    if (a && b && strcmp(a, b)) fprintf(stderr, "merged:\n%s\nwanted:\n%s\n", a, b);
    free(a);
    free(b);
    a = capture(sjk_eval_write_csv_positions, got);
    b = capture(sjk_eval_write_csv_positions, want);
    CHECK(a && b && !strcmp(a, b));
    free(a);
    free(b);
}

TEST(test_study_pairs_by_key_not_index)
{
    /* b adds document 1 before document 0: the pair must still compare position with
     * position, and equal the lockstep study's pair exactly. */
    const char *cfgs[] = {"a", "b"}, *docs[] = {"d0", "d1"};
    sjk_eval_study *lock = sjk_eval_study_create(2, cfgs, 2, docs);
    sjk_eval_study *shuf = sjk_eval_study_create(2, cfgs, 2, docs);
    CHECK(lock && shuf);
    if (!lock || !shuf) return;
    for (size_t d = 0; d < 2; d++)
        for (uint32_t g = 0; g < 30; g++)
            for (size_t c = 0; c < 2; c++) {
                sjk_eval_cmp cmp = {kl_at(c, d, g, 0), 0, 0};
                sjk_eval_study_add(lock, c, d, g, &cmp, NULL);
            }
    for (size_t d = 0; d < 2; d++)
        for (uint32_t g = 0; g < 30; g++) {
            sjk_eval_cmp cmp = {kl_at(0, d, g, 0), 0, 0};
            sjk_eval_study_add(shuf, 0, d, g, &cmp, NULL);
        }
    for (size_t d = 2; d-- > 0;)
        for (uint32_t g = 30; g-- > 0;) {
            sjk_eval_cmp cmp = {kl_at(1, d, g, 0), 0, 0};
            sjk_eval_study_add(shuf, 1, d, g, &cmp, NULL);
        }
    CHECK(sjk_eval_study_finish(lock, 200, 3) == SJK_OK);
    CHECK(sjk_eval_study_finish(shuf, 200, 3) == SJK_OK);
    const sjk_eval_pair *p = sjk_eval_study_pair(lock, 0, 1), *q = sjk_eval_study_pair(shuf, 0, 1);
    CHECK(p && q && p->n == 60 && q->n == 60);
    CHECK(p && q && !memcmp(p, q, sizeof *p)); /* same numbers, bit for bit */
    sjk_eval_study_free(lock);
    sjk_eval_study_free(shuf);

    /* a key twice in one configuration cannot be paired */
    sjk_eval_study *dup = sjk_eval_study_create(2, cfgs, 1, docs);
    sjk_eval_cmp cmp = {0.1, 0, 0};
    CHECK(dup && sjk_eval_study_add(dup, 0, 0, 5, &cmp, NULL) == SJK_OK);
    CHECK(dup && sjk_eval_study_add(dup, 0, 0, 5, &cmp, NULL) == SJK_OK);
    CHECK(dup && sjk_eval_study_finish(dup, 10, 1) == SJK_ERR_PARAM);
    sjk_eval_study_free(dup);
}

/* Runs that scored different positions of the same document (another -n): the pair keeps
 * the common positions and counts the document as partial, so the report can say so. */
TEST(test_pair_counts_documents_scored_on_different_positions)
{
    const char *cfgs[] = {"a", "b"}, *docs[] = {"d0", "d1"};
    sjk_eval_study *st = sjk_eval_study_create(2, cfgs, 2, docs);
    CHECK(st != NULL);
    if (!st) return;
    for (size_t d = 0; d < 2; d++)
        for (uint32_t g = 0; g < 30; g++) {
            sjk_eval_cmp cmp = {kl_at(0, d, g, 0), 0, 0};
            sjk_eval_study_add(st, 0, d, g, &cmp, NULL);
            if (d == 0 && g >= 20) continue; /* b scored only 20 positions of d0 */
            cmp.kl = kl_at(1, d, g, 0);
            sjk_eval_study_add(st, 1, d, g, &cmp, NULL);
        }
    CHECK(sjk_eval_study_finish(st, 100, 1) == SJK_OK);
    const sjk_eval_pair *p = sjk_eval_study_pair(st, 0, 1);
    CHECK(p && p->n == 50 && p->n_docs == 2 && p->n_docs_partial == 1);
    char *txt = capture(sjk_eval_write_table, st);
    CHECK(txt && strstr(txt, "note: a ÷ b: 1 document(s) were scored on different positions"));
    free(txt);
    sjk_eval_study_free(st);
}

TEST(test_merge_of_one_run_reproduces_it)
{
    sjk_eval_study *run = make_run("one", 7, 3, 0, 0);
    CHECK(run != NULL);
    const char *names[] = {"one.csv"};
    sjk_status s;
    sjk_eval_merge_info info;
    char err[512];
    sjk_eval_study *m = merge(names, 1, &s, &info, err, sizeof err);
    CHECKF(s == SJK_OK && m, "%s", err);
    if (run && m) {
        check_same_study(m, run, 1);
        check_same_text(m, run);
        CHECK(info.n_files == 1 && info.n_rows == 3 * 2 * N_GEN && info.n_rows_repeated == 0 &&
              info.n_needle_dropped == 0);
        /* the merged CSV of configurations reads back as the same file would: merging the
         * merge changes nothing */
        char p1[512], p2[512];
        CHECK(write_file(path_in("again.csv", p1, sizeof p1), sjk_eval_write_csv_configs, m));
        CHECK(write_file(path_in("again-positions.csv", p2, sizeof p2), sjk_eval_write_csv_positions, m));
        const char *again[] = {"again.csv"};
        sjk_eval_study *m2 = merge(again, 1, &s, NULL, err, sizeof err);
        CHECKF(s == SJK_OK && m2, "%s", err);
        if (m2) {
            char *a = capture(sjk_eval_write_csv_configs, m), *b = capture(sjk_eval_write_csv_configs, m2);
            CHECK(a && b && !strcmp(a, b));
            free(a);
            free(b);
            a = capture(sjk_eval_write_json, m);
            b = capture(sjk_eval_write_json, m2);
            CHECK(a && b && !strcmp(a, b));
            free(a);
            free(b);
        }
        sjk_eval_study_free(m2);
    }
    sjk_eval_study_free(run);
    sjk_eval_study_free(m);
}

TEST(test_merge_split_by_document_equals_one_run)
{
    sjk_eval_study *full = make_run(NULL, 7, 7, 0, 0);
    sjk_eval_study *a = make_run("docA", 7, 1, 0, 0), *b = make_run("docB", 7, 2, 0, 0),
                   *c = make_run("docC", 7, 4, 0, 0);
    CHECK(full && a && b && c);
    const char *names[] = {"docA.csv", "docB.csv", "docC.csv"};
    sjk_status s;
    char err[512];
    sjk_eval_study *m = merge(names, 3, &s, NULL, err, sizeof err);
    CHECKF(s == SJK_OK && m, "%s", err);
    if (full && m) {
        check_same_study(m, full, 1);
        check_same_text(m, full);
        /* the point of merging: intervals over documents, and documents won, over all three */
        const sjk_eval_pair *p = sjk_eval_study_pair(m, 0, 2);
        CHECK(p && p->n_docs == 3 && p->n == 3 * N_GEN && isfinite(p->doc_ci_low) &&
              isfinite(p->doc_ci_high) && p->doc_ci_low <= p->ratio && p->ratio <= p->doc_ci_high);
        const sjk_eval_pair *p1 = sjk_eval_study_pair(a, 0, 2);
        CHECK(p1 && p1->n_docs == 1 && p1->doc_ci_low == p1->doc_ci_high); /* one document: no spread */
    }
    sjk_eval_study_free(full);
    sjk_eval_study_free(a);
    sjk_eval_study_free(b);
    sjk_eval_study_free(c);
    sjk_eval_study_free(m);
}

TEST(test_merge_config_batches_are_paired)
{
    /* run 1: x, y; run 2: z; same documents: x ÷ z and y ÷ z come out as in one run */
    sjk_eval_study *full = make_run(NULL, 7, 3, 0, 0);
    sjk_eval_study *r1 = make_run("batch1", 3, 3, 0, 0), *r2 = make_run("batch2", 4, 3, 0, 0);
    CHECK(full && r1 && r2);
    const char *names[] = {"batch1.csv", "batch2.csv"};
    sjk_status s;
    char err[512];
    sjk_eval_study *m = merge(names, 2, &s, NULL, err, sizeof err);
    CHECKF(s == SJK_OK && m, "%s", err);
    if (full && m) {
        check_same_study(m, full, 1);
        check_same_text(m, full);
        const sjk_eval_pair *p = sjk_eval_study_pair(m, 0, 2);
        CHECK(p && p->n == 2 * N_GEN && p->n_docs == 2 && isfinite(p->ratio));
    }
    sjk_eval_study_free(full);
    sjk_eval_study_free(r1);
    sjk_eval_study_free(r2);
    sjk_eval_study_free(m);
}

TEST(test_merge_pairs_only_common_documents)
{
    /* x, y on A and B; z on B only: x ÷ z is over B alone, x ÷ y over both */
    sjk_eval_study *r1 = make_run("cov1", 3, 3, 0, 0), *r2 = make_run("cov2", 4, 2, 0, 0);
    sjk_eval_study *onlyB = make_run(NULL, 5, 2, 0, 0); /* x and z on B, in one run */
    CHECK(r1 && r2 && onlyB);
    const char *names[] = {"cov1.csv", "cov2.csv"};
    sjk_status s;
    char err[512];
    sjk_eval_study *m = merge(names, 2, &s, NULL, err, sizeof err);
    CHECKF(s == SJK_OK && m, "%s", err);
    if (m && onlyB) {
        const sjk_eval_pair *xz = sjk_eval_study_pair(m, 0, 2), *want = sjk_eval_study_pair(onlyB, 0, 1);
        const sjk_eval_pair *xy = sjk_eval_study_pair(m, 0, 1);
        CHECK(xz && want && xz->n == N_GEN && xz->n_docs == 1);
        CHECK(xz && want && near_rel(xz->ratio, want->ratio, 1e-8) &&
              near_rel(xz->ci_low, want->ci_low, 1e-8) && near_rel(xz->ci_high, want->ci_high, 1e-8) &&
              xz->docs_won == want->docs_won && xz->positions_won == want->positions_won);
        CHECK(xy && xy->n == 2 * N_GEN && xy->n_docs == 2);
        const sjk_eval_config_result *z = sjk_eval_study_result(m, 2);
        CHECK(z && z->s.n == N_GEN);
    }
    sjk_eval_study_free(r1);
    sjk_eval_study_free(r2);
    sjk_eval_study_free(onlyB);
    sjk_eval_study_free(m);
}

TEST(test_merge_identical_repeat_counted_once)
{
    sjk_eval_study *ab = make_run("repAB", 3, 3, 0, 0), *b = make_run("repB", 3, 2, 0, 0);
    CHECK(ab && b);
    const char *names[] = {"repAB.csv", "repB.csv"};
    sjk_status s;
    sjk_eval_merge_info info;
    char err[512];
    sjk_eval_study *m = merge(names, 2, &s, &info, err, sizeof err);
    CHECKF(s == SJK_OK && m, "%s", err);
    if (m && ab) {
        /* the rate is all tokens over all seconds of both runs, so it differs */
        check_same_study(m, ab, 0);
        CHECK(info.n_rows == 2 * 3 * N_GEN && info.n_rows_repeated == 2 * N_GEN);
    }
    sjk_eval_study_free(m);
    const char *twice[] = {"repAB.csv", "repAB.csv"};
    m = merge(twice, 2, &s, &info, err, sizeof err);
    CHECKF(s == SJK_OK && m, "%s", err);
    if (m && ab) check_same_text(m, ab);
    sjk_eval_study_free(m);
    sjk_eval_study_free(ab);
    sjk_eval_study_free(b);
}

TEST(test_merge_refuses_conflicting_duplicate)
{
    sjk_eval_study *k1 = make_run("conf1", 3, 1, 0, 0), *k2 = make_run("conf2", 3, 1, 5, 0);
    CHECK(k1 && k2);
    const char *names[] = {"conf1.csv", "conf2.csv"};
    sjk_status s;
    char err[512] = "";
    sjk_eval_study *m = merge(names, 2, &s, NULL, err, sizeof err);
    CHECK(s == SJK_ERR_MISMATCH && m == NULL);
    CHECKF(strstr(err, "conf1-positions.csv") && strstr(err, "conf2-positions.csv") &&
           strstr(err, "different"), "%s", err);
    sjk_eval_study_free(k1);
    sjk_eval_study_free(k2);
}

TEST(test_merge_drops_needles_and_says_so)
{
    sjk_eval_study *r = make_run("needle", 3, 1, 0, 1);
    CHECK(r && sjk_eval_study_result(r, 0)->n_needle > 0);
    const char *names[] = {"needle.csv"};
    sjk_status s;
    sjk_eval_merge_info info;
    char err[512];
    sjk_eval_study *m = merge(names, 1, &s, &info, err, sizeof err);
    CHECKF(s == SJK_OK && m, "%s", err);
    if (m) {
        CHECK(info.n_needle_dropped == 2);
        CHECK(sjk_eval_study_result(m, 0)->n_needle == 0);
        char *t = capture(sjk_eval_write_table, m);
        CHECK(t && !strstr(t, "needles"));
        free(t);
    }
    sjk_eval_study_free(r);
    sjk_eval_study_free(m);
}

TEST(test_merge_survives_every_allocation_failure)
{
    if (!sjk_alloc_hook_built()) SKIP("libraries built without the allocation hook (build with ALLOC_HOOK=1)");
    sjk_eval_study *run = make_run("oom", 7, 3, 0, 0);
    CHECK(run != NULL);
    char p[512], err[512];
    const char *paths[] = {path_in("oom.csv", p, sizeof p)};
    for (long n = 1; n < 100000; n++) {
        long live = sjk_alloc_live();
        sjk_eval_study *m = NULL;
        sjk_alloc_fail_nth(n, 0);
        sjk_status s = sjk_eval_study_merge_csv(paths, 1, &m, NULL, err, sizeof err);
        if (s == SJK_OK) s = sjk_eval_study_finish(m, 50, 7);
        int failed = sjk_alloc_failed();
        sjk_alloc_fail_nth(0, 0);
        if (s != SJK_OK && m) { sjk_eval_study_free(m); m = NULL; }
        if (!failed) {
            CHECKF(s == SJK_OK && m, "no failure injected at n = %ld, but %s", n, sjk_status_str(s));
            sjk_eval_study_free(m);
            CHECK(sjk_alloc_live() == live);
            break;
        }
        CHECKF(s == SJK_ERR_NOMEM, "n = %ld: %s (%s)", n, sjk_status_str(s), err);
        sjk_eval_study_free(m);
        if (sjk_alloc_live() != live) { CHECKF(0, "n = %ld: %ld blocks leaked", n, sjk_alloc_live() - live); break; }
    }
    sjk_eval_study_free(run);
}

/* ---- malformed inputs ---------------------------------------------------------------- */

static const char main_hdr[] =
    "config,n,mean_kl,median_kl,p90_kl,p99_kl,max_kl,same_top,bits_per_value,"
    "bits_per_value_allocated,kv_bytes,tokens_per_s,needle_n,needle_mean_kl,needle_gold_top\n";
static const char pos_hdr[] = "config,doc,position,kl,same_top,bits_per_value\n";
static const char good_main_row[] = "q,2,0.1,0.1,0.1,0.1,0.2,1,4,6,1000,50,0,0,0\n";
static const char good_pos_rows[] = "q,A,10,0.1,1,4\nq,A,11,0.2,1,4\n";

static void put(const char *name, const char *a, const char *b)
{
    char p[512];
    FILE *f = fopen(path_in(name, p, sizeof p), "w");
    if (!f) return;
    fputs(a, f);
    fputs(b, f);
    fclose(f);
}

/* Writes bad.csv and bad-positions.csv and merges bad.csv alone. */
static sjk_status merge_bad(const char *main_text, const char *pos_text, char *err, size_t cap)
{
    put("bad.csv", main_text, "");
    put("bad-positions.csv", pos_text, "");
    const char *names[] = {"bad.csv"};
    sjk_status s;
    sjk_eval_study *m = merge(names, 1, &s, NULL, err, cap);
    if (s != SJK_OK && m) s = SJK_ERR_PARAM; /* an error must not return a study */
    sjk_eval_study_free(m);
    return s;
}

/* Issue 21 (UBSan): a run whose configurations scored no position reached qsort with a
 * NULL array. It is merged (or refused) with a defined result; `make ubsan` checks it. */
TEST(test_merge_of_runs_without_positions_is_defined)
{
    char err[512] = "", mbuf[1024];
    snprintf(mbuf, sizeof mbuf, "%s%s", main_hdr, "q,0,0,0,0,0,0,0,4,6,1000,50,0,0,0\n");
    sjk_status s = merge_bad(mbuf, pos_hdr, err, sizeof err);
    CHECKF(s == SJK_OK || s == SJK_ERR_FORMAT || s == SJK_ERR_MISMATCH, "status %s: %s", sjk_status_str(s), err);
    if (s != SJK_OK) CHECKF(err[0] != 0, "refused without a message");
}

TEST(test_merge_refuses_malformed_input)
{
    char err[512], mbuf[1024], pbuf[1024];
    /* control: the well-formed pair merges */
    snprintf(mbuf, sizeof mbuf, "%s%s", main_hdr, good_main_row);
    snprintf(pbuf, sizeof pbuf, "%s%s", pos_hdr, good_pos_rows);
    CHECKF(merge_bad(mbuf, pbuf, err, sizeof err) == SJK_OK, "%s", err);

    const char *names[] = {"missing.csv"};
    sjk_status s;
    sjk_eval_study *m = merge(names, 1, &s, NULL, err, sizeof err);
    CHECKF(s == SJK_ERR_IO && !m && strstr(err, "missing.csv"), "%s", err);
    put("lonely.csv", main_hdr, good_main_row); /* no lonely-positions.csv */
    const char *lonely[] = {"lonely.csv"};
    m = merge(lonely, 1, &s, NULL, err, sizeof err);
    CHECKF(s == SJK_ERR_IO && !m && strstr(err, "lonely-positions.csv"), "%s", err);

    struct { const char *what, *main_rows, *pos_rows; sjk_status want; const char *msg; } cases[] = {
        {"wrong main header", NULL, NULL, SJK_ERR_FORMAT, "first line"},
        {"wrong positions header", NULL, NULL, SJK_ERR_FORMAT, "first line"},
        {"non-numeric field", "q,2,abc,0.1,0.1,0.1,0.2,1,4,6,1000,50,0,0,0\n", NULL, SJK_ERR_FORMAT, "not a finite"},
        {"NaN in the main file", "q,2,nan,0.1,0.1,0.1,0.2,1,4,6,1000,50,0,0,0\n", NULL, SJK_ERR_FORMAT, "not a finite"},
        {"short row", "q,2,0.1\n", NULL, SJK_ERR_FORMAT, "fields"},
        {"configuration twice", "q,2,0.1,0.1,0.1,0.1,0.2,1,4,6,1000,50,0,0,0\n"
                                "q,2,0.1,0.1,0.1,0.1,0.2,1,4,6,1000,50,0,0,0\n", NULL, SJK_ERR_FORMAT, "twice"},
        {"no configurations", "", NULL, SJK_ERR_FORMAT, "no configurations"},
        {"NaN KL", NULL, "q,A,10,nan,1,4\nq,A,11,0.2,1,4\n", SJK_ERR_FORMAT, "nan"},
        {"inf KL", NULL, "q,A,10,inf,1,4\nq,A,11,0.2,1,4\n", SJK_ERR_FORMAT, "inf"},
        {"empty KL (non-finite)", NULL, "q,A,10,,1,4\nq,A,11,0.2,1,4\n", SJK_ERR_FORMAT, "bad-positions.csv:2"},
        {"negative KL", NULL, "q,A,10,-0.1,1,4\nq,A,11,0.2,1,4\n", SJK_ERR_FORMAT, "-0.1"},
        {"same_top not 0/1", NULL, "q,A,10,0.1,2,4\nq,A,11,0.2,1,4\n", SJK_ERR_FORMAT, "same_top"},
        {"position not an integer", NULL, "q,A,1.5,0.1,1,4\nq,A,11,0.2,1,4\n", SJK_ERR_FORMAT, "position"},
        {"duplicate row", NULL, "q,A,10,0.1,1,4\nq,A,10,0.1,1,4\n", SJK_ERR_FORMAT, "appears twice"},
        {"unterminated quote", NULL, "\"q,A,10,0.1,1,4\nq,A,11,0.2,1,4\n", SJK_ERR_FORMAT, "malformed"},
        {"configuration not in main", NULL, "q,A,10,0.1,1,4\nw,A,11,0.2,1,4\n", SJK_ERR_MISMATCH, "'w' is not in"},
        {"fewer positions than n", NULL, "q,A,10,0.1,1,4\n", SJK_ERR_MISMATCH, "lists 2 positions"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!cases[i].main_rows) snprintf(mbuf, sizeof mbuf, "%s%s", i == 0 ? "config,n\n" : main_hdr, good_main_row);
        else snprintf(mbuf, sizeof mbuf, "%s%s", main_hdr, cases[i].main_rows);
        if (i == 1) snprintf(pbuf, sizeof pbuf, "config,doc,position,kl\n%s", good_pos_rows);
        else snprintf(pbuf, sizeof pbuf, "%s%s", pos_hdr, cases[i].pos_rows ? cases[i].pos_rows : good_pos_rows);
        err[0] = 0;
        s = merge_bad(mbuf, pbuf, err, sizeof err);
        CHECKF(s == cases[i].want && strstr(err, cases[i].msg), "%s: status %s, '%s'",
               cases[i].what, sjk_status_str(s), err);
    }
}

/* ---- the command line ---------------------------------------------------------------- */

static int run_cli(const char *args, const char *out)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s eval %s >%s/%s 2>%s/err", cli, args, dir, out, dir);
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static char *slurp(const char *name)
{
    char p[512];
    return test_read_file(path_in(name, p, sizeof p), NULL);
}

static int same_files(const char *a, const char *b)
{
    char *x = slurp(a), *y = slurp(b);
    int r = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return r;
}

static int has(const char *name, const char *needle)
{
    char *s = slurp(name);
    int r = s && strstr(s, needle);
    free(s);
    return r;
}

TEST(test_merge_cli_round_trip_and_split)
{
    if (!*cli) SKIP("no CLI binary");
    char a[2048];
    const char *common = "--synthetic --kv f16,q8_0/q8_0,sj:4/4,sj:3/3 --ctx 512 -n 16 --boot 200 "
                         "--no-progress --docs none";
    /* the key test: a run's CSVs merged back print the run's table, byte for byte */
    snprintf(a, sizeof a, "%s --text %s/A.txt --text %s/B.txt --csv %s/r.csv", common, dir, dir, dir);
    CHECK(run_cli(a, "full.txt") == 0);
    snprintf(a, sizeof a, "--merge %s/r.csv --boot 200 --csv %s/m.csv --svg %s/svg", dir, dir, dir);
    CHECK(run_cli(a, "merged.txt") == 0);
    CHECK(same_files("full.txt", "merged.txt"));
    CHECK(same_files("r-positions.csv", "m-positions.csv"));
    CHECK(same_files("r.csv", "m.csv") && same_files("r-pairs.csv", "m-pairs.csv")); /* 17 digits: exact */
    CHECK(has("m-pairs.csv", "a,b,ratio") && has("svg/frontier.svg", "</svg>"));
    CHECK(has("err", "merged 1 run(s): 4 configuration(s), 2 document(s)"));
    snprintf(a, sizeof a, "--merge %s/r.csv --json", dir);
    CHECK(run_cli(a, "merged.json") == 0 && has("merged.json", "\"doc_ci_low\""));

    /* one document per command: the pairs (which do not depend on timing) are the same */
    snprintf(a, sizeof a, "%s --text %s/A.txt --csv %s/ra.csv", common, dir, dir);
    CHECK(run_cli(a, "ra.txt") == 0);
    snprintf(a, sizeof a, "%s --text %s/B.txt --csv %s/rb.csv", common, dir, dir);
    CHECK(run_cli(a, "rb.txt") == 0);
    snprintf(a, sizeof a, "--merge %s/ra.csv %s/rb.csv --boot 200", dir, dir);
    CHECK(run_cli(a, "split.txt") == 0);
    char *full = slurp("full.txt"), *split = slurp("split.txt");
    const char *pf = full ? strstr(full, "paired ratio") : NULL;
    const char *ps = split ? strstr(split, "paired ratio") : NULL;
    CHECK(pf && ps && !strcmp(pf, ps));
    CHECK(ps && strstr(ps, "2/2"));
    free(full);
    free(split);
}

TEST(test_merge_cli_refuses_and_writes_nothing)
{
    if (!*cli) SKIP("no CLI binary");
    char a[2048], p[512];
    CHECK(run_cli("--merge", "o") == 2 && has("err", "at least one"));
    snprintf(a, sizeof a, "--merge %s/r.csv -m gemma3-270m", dir);
    CHECK(run_cli(a, "o") == 2 && has("err", "does not apply"));
    snprintf(a, sizeof a, "--merge %s/r.csv --csv %s/r.csv", dir, dir);
    CHECK(run_cli(a, "o") == 2 && has("err", "overwrite"));
    snprintf(a, sizeof a, "--merge %s/r.csv --csv %s/r", dir, dir); /* would write r-positions.csv */
    CHECK(run_cli(a, "o") == 2 && has("err", "overwrite"));
    snprintf(a, sizeof a, "--merge %s/r.csv --csv %s/./r-positions.csv", dir, dir); /* OUT is an input */
    CHECK(run_cli(a, "o") == 2 && has("err", "overwrite"));
    snprintf(a, sizeof a, "--merge %s/r.csv %s/nothere.csv --csv %s/never.csv", dir, dir, dir);
    CHECK(run_cli(a, "o") == 2 && has("err", "nothere.csv"));
    CHECK(access(path_in("never.csv", p, sizeof p), F_OK) != 0);
    put("bad.csv", main_hdr, good_main_row);
    put("bad-positions.csv", pos_hdr, "q,A,10,nan,1,4\nq,A,11,0.2,1,4\n");
    snprintf(a, sizeof a, "--merge %s/bad.csv --csv %s/never.csv", dir, dir);
    CHECK(run_cli(a, "o") == 2 && has("err", "bad-positions.csv:2"));
    CHECK(access(path_in("never.csv", p, sizeof p), F_OK) != 0);
    CHECK(run_cli("--help", "o") == 0 && has("o", "--merge FILE.csv"));
}

static int setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/sjk_eval_merge_%d", (int)getpid());
    if (mkdir(dir, 0700) != 0) return 0;
    const char *b = getenv("BUILD");
    snprintf(cli, sizeof cli, "%s/sjkvarn", b && *b ? b : "build");
    if (access(cli, X_OK) != 0) cli[0] = 0;
    for (int k = 0; k < 2; k++) {
        char p[512];
        FILE *f = fopen(path_in(k ? "B.txt" : "A.txt", p, sizeof p), "w");
        if (!f) return 0;
        for (int i = 0; i < 30; i++)
            fprintf(f, "%s line %d: some words, numbers (%d) and punctuation.\n", k ? "Beta" : "Alpha", i, i * (k + 3));
        fclose(f);
    }
    return 1;
}

int main(void)
{
    if (!setup()) { fprintf(stderr, "cannot set up %s\n", dir); return 1; }
    RUN(test_study_pairs_by_key_not_index);
    RUN(test_pair_counts_documents_scored_on_different_positions);
    RUN(test_merge_of_one_run_reproduces_it);
    RUN(test_merge_split_by_document_equals_one_run);
    RUN(test_merge_config_batches_are_paired);
    RUN(test_merge_pairs_only_common_documents);
    RUN(test_merge_identical_repeat_counted_once);
    RUN(test_merge_refuses_conflicting_duplicate);
    RUN(test_merge_drops_needles_and_says_so);
    RUN(test_merge_survives_every_allocation_failure);
    RUN(test_merge_of_runs_without_positions_is_defined);
    RUN(test_merge_refuses_malformed_input);
    RUN(test_merge_cli_round_trip_and_split);
    RUN(test_merge_cli_refuses_and_writes_nothing);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_summary();
}
