/* plan_tier.c — the quality-floor table and the automatic cache tier (host/include/
 * sjkplan.h; the rule is written down in docs/PLAN.md).
 *
 * The rule, in one place:
 *   - the ladder is walked least compression first; a rung is taken if it is allowed,
 *     the whole cache of every session fits the budget, and no other allowed rung that
 *     fits is no larger with a measured mean KL no higher (dominated: see pass 2);
 *   - f16 is the reference of every KL measurement (its KL is 0 by definition): always
 *     allowed;
 *   - any other rung is allowed only if the table holds a MEASURED mean KL for this
 *     model (or for "*") that is <= max_kl: its first row at the measured context
 *     nearest to the plan's (sjkh_quality_floor_rows). A rung without a measurement is not allowed:
 *     the floor is a promise about quality, and an absent number promises nothing. The
 *     user can lift the floor (max_kl < 0, `--kl-floor off`) or name a configuration;
 *   - an explicit configuration is never replaced; it is only checked against the budget.
 */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan_internal.h"

#define FAIL(st, ...) plan_fail((st), err, err_cap, __VA_ARGS__)

/* The rungs are the measured frontier at 16K on Gemma 3 (docs/studies/gemma3-16k.md):
 *   - sj:6/6 with a short q8_0 ring, between q8_0/q8_0 and q8_0/q4_0 in size: on
 *     Qwen2.5-Coder-1.5B at 8K 0.13x q8_0/q8_0's KL at 0.81x its bytes, every document
 *     (docs/studies/qwen2.5-coder-1.5b.md, batch 10); measured on that model only, so
 *     on the others it is not allowed (no floor row);
 *   - sj:6/4 with a short q8_0 ring: record format v2's 6-bit keys (K carries most of
 *     the KL) beside 4-bit values, between q8_0/q4_0 and sj:4/4 ("Wide keys at 16K");
 *   - below sj:4/4, the trellis bodies with short rings ("The low end at 16K"): 4-bit
 *     trellis K and V, 4-bit trellis K with 3-bit V, then 3-bit K with 2-bit V, each
 *     smaller than the last and far below the comparators near its size; they replace the
 *     default-ring sj:3/3t and sj:3/2t, which are larger than sj:4/3t and worse.
 * Trellis readers are slower than the scalar ones (docs/benchmarks/attention.md): the walk
 * reaches them only when the scalar rungs do not fit.
 *   - each trellis rung has a twin with the codebooks trained on real K/V (`tr`: the same
 *     bytes and readers, docs/studies/real-codebooks.md "Real-data codebooks"). Where one study measured
 *     both, the one with the lower KL dominates the other (pass 2); where only the `t`
 *     rung is measured, the `tr` twin is not allowed and the `t` rung is taken.
 *   - a 1,024-position q8_0 tail (`tail=1024:stage=q8_0`) instead of the short 6-bit ring:
 *     every sealed row passes through the ring, and an 8-bit ring gives the 4/4 scalar
 *     body about the KL of the 4/4 trellis with the 6-bit ring, at the scalar reader's
 *     speed, and the 4/3 trellis a lower KL than that 4/4 trellis (docs/studies/gemma3-16k.md,
 *     "kvarn's fp16 tail at 16K"). At 16K on Gemma 3 each lies between the rungs around
 *     it in size.
 *   - the 4-bit trellis with that tail comes first of the 4-bit rungs with it: the same
 *     bytes as the scalar one and, on Gemma 3 at 16K (nine documents) and 32K, the lowest
 *     KL per byte measured (0.46x sj:4/4's KL at 0.74x its bytes at 16K, 0.35x the
 *     scalar body's with the same tail; float tables: on the int8 grid the grid study
 *     read it 1.37x that, still 0.62x sj:4/4's). Where one study measured it beside sj:4/4 and
 *     found it lower, sj:4/4 is dominated (pass 2) and this rung is the 4-bit choice;
 *     at 8K, where sj:4/4's default ring holds most of the context in 6 bits, sj:4/4 is
 *     lower (SmolLM2, Qwen) and stays first. Its reader is the int8 trellis one, slower
 *     than the scalar reader (docs/benchmarks/attention.md, the `--kv auto` rungs).
 *   - 5-bit scalar keys beside 3-bit trellis values with that tail (sj:5/3t), the 4/4t
 *     rung's bytes, come first of them: on the Qwen model at 32K the body's keys carry
 *     three quarters of the 4/4t rung's KL, and the split reads 0.50x kvarn's fp16 tail
 *     there, six documents (docs/studies/qwen2.5-coder-1.5b.md); at 8K it lost to the 4/4t rung in the
 *     study that measured both, which passes it over there. The context of the
 *     measurement decides (sjkh_quality_floor_rows); no other model measured it, so it is
 *     not allowed on them.
 *   - the trellis rungs with a q8_0 tail and the 3/2 rung each have a twin on the
 *     128-entry tables (`ts`, record format 5: the same bytes, a decode attention reader
 *     1.1-1.9x faster on Gemma 3; docs/benchmarks/attention.md), placed first. The two read the same KL within
 *     the study's resolution (docs/studies/gemma3-16k.md, "Record format 5"), so the `t`
 *     twin, and the `tr` one of the 3/2 rung (the same slower reader), dominates its `ts`
 *     twin only where its measured KL is lower by more than the factor TWIN_KL_MARGIN
 *     (ts_twin_of, pass 2), and a `t` or `tr` rung within that margin of its `ts` twin
 *     stands or falls with it (what dominated the twin dominates it); anything else
 *     dominates a `ts` rung by the plain rule. Where only the `t` rung is measured the
 *     `ts` twin is not allowed. */
static const char *const g_ladder[] = {"f16",
                                       "q8_0/q8_0",
                                       "sj:6/6:tail_min=256:tail_max=512:stage=q8_0",
                                       "q8_0/q4_0",
                                       "sj:6/4:tail_min=256:tail_max=512:stage=q8_0",
                                       "sj:4/4",
                                       "sj:5/3t:tail=1024:stage=q8_0",
                                       "sj:4/4ts:tail=1024:stage=q8_0",
                                       "sj:4/4t:tail=1024:stage=q8_0",
                                       "sj:4/4:tail=1024:stage=q8_0",
                                       "sj:4/4t:tail_min=256:tail_max=512",
                                       "sj:4/4tr:tail_min=256:tail_max=512",
                                       "sj:4/3ts:tail=1024:stage=q8_0",
                                       "sj:4/3t:tail=1024:stage=q8_0",
                                       "sj:4/3t:tail_min=256:tail_max=512",
                                       "sj:4/3tr:tail_min=256:tail_max=512",
                                       "sj:3/2ts:tail_min=128:tail_max=256",
                                       "sj:3/2t:tail_min=128:tail_max=256",
                                       "sj:3/2tr:tail_min=128:tail_max=256"};

/* How much lower a `t` (or `tr`) rung's measured KL must be than its `ts` twin's for the walk to
 * pass over the faster twin: single documents move by 0.66-1.77x between two builds of
 * one body, and a pair later found level (the int8 grid against the float tables, 1.02x
 * through one reader) read 1.37x on nine documents through two readers
 * (docs/studies/gemma3-16k.md, "Record format 4"), so a smaller difference between twins
 * is not evidence. */
#define TWIN_KL_MARGIN 1.25

/* 1 if fast is slow with the body suffix `t` or `tr` read as `ts` ("sj:4/4ts:tail=1024"
 * and "sj:4/4t:tail=1024" or "sj:4/4tr:tail=1024"): the same records and bytes on the
 * 128-entry tables, whose reader is the faster; the `tr` tables (real-data codebooks)
 * are 1,024-entry ones read as the `t` ones are. */
static int ts_twin_of(const char *fast, const char *slow)
{
    const char *p = strstr(fast, "ts");
    if (!p || (p[2] && p[2] != ':')) return 0;
    const size_t n = (size_t)(p - fast) + 1; /* through the 't' */
    if (strncmp(fast, slow, n)) return 0;
    const char *rest = slow + n;
    if (*rest == 'r') rest++;
    return !strcmp(p + 2, rest);
}

const char *const *sjkh_plan_ladder(size_t *n)
{
    if (n) *n = PLAN_ARRAY_LEN(g_ladder);
    return g_ladder;
}

/* Canonical spelling of a configuration ("q8_0" -> "q8_0/q8_0"), or the input itself
 * when it does not parse. */
static void canonical(const char *kv, char *dst, size_t cap)
{
    sjk_layer_config lc;
    if (!strcmp(kv, "host-f16") || sjk_cache_config_parse(kv, 1, &lc, NULL, 0) ||
        sjk_layer_config_str(&lc, dst, cap))
        snprintf(dst, cap, "%s", kv);
}

/* ---- the table ------------------------------------------------------------------------ */

void sjkh_quality_floor_free(sjkh_quality_floor *f)
{
    if (!f) return;
    free(f->rows);
    free(f);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = 0;
    return s;
}

sjk_status sjkh_quality_floor_parse(const char *text, size_t n, sjkh_quality_floor **out, char *err, size_t err_cap)
{
    if (!out || (!text && n)) return FAIL(SJK_ERR_PARAM, "quality floor: bad arguments");
    *out = NULL;
    sjkh_quality_floor *f = calloc(1, sizeof *f);
    if (!f) return FAIL(SJK_ERR_NOMEM, "quality floor: out of memory");
    size_t cap = 0, line_no = 0;
    int header = 0, with_ctx = 0; /* version 2 (model,context,config,...) or 1 (no context) */
    for (size_t at = 0; at < n;) {
        size_t e = at;
        while (e < n && text[e] != '\n') e++;
        char line[1024];
        line_no++;
        if (e - at >= sizeof line) {
            sjkh_quality_floor_free(f);
            return FAIL(SJK_ERR_FORMAT, "quality floor: line %zu is longer than %zu bytes", line_no, sizeof line - 1);
        }
        memcpy(line, text + at, e - at);
        line[e - at] = 0;
        at = e + 1;
        char *s = trim(line);
        if (!*s || *s == '#') continue;
        if (!header) { /* the first row names the columns, and so the version */
            if (!strcmp(s, "model,context,config,mean_kl,source")) with_ctx = 1;
            else if (strcmp(s, "model,config,mean_kl,source")) {
                sjkh_quality_floor_free(f);
                return FAIL(SJK_ERR_FORMAT, "quality floor: line %zu: expected the header "
                            "'model,context,config,mean_kl,source' (or version 1's 'model,config,mean_kl,source')",
                            line_no);
            }
            header = 1;
            continue;
        }
        char *ctx_field = NULL, ctx_buf[24];
        if (with_ctx) { /* split off the context column; the rest reads as version 1 */
            char *c0 = strchr(s, ',');
            char *c1 = c0 ? strchr(c0 + 1, ',') : NULL;
            if (!c1) {
                sjkh_quality_floor_free(f);
                return FAIL(SJK_ERR_FORMAT, "quality floor: line %zu: expected model,context,config,mean_kl,source",
                            line_no);
            }
            *c1 = 0;
            if (snprintf(ctx_buf, sizeof ctx_buf, "%s", trim(c0 + 1)) >= (int)sizeof ctx_buf) { /* kept: the move below overwrites it */
                sjkh_quality_floor_free(f);
                return FAIL(SJK_ERR_FORMAT, "quality floor: line %zu: the context is too long", line_no);
            }
            ctx_field = ctx_buf;
            memmove(c0 + 1, c1 + 1, strlen(c1 + 1) + 1); /* "model,config,..." */
        }
        char *c1 = strchr(s, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL, *c3 = c2 ? strchr(c2 + 1, ',') : NULL;
        if (!c3) {
            sjkh_quality_floor_free(f);
            return FAIL(SJK_ERR_FORMAT, "quality floor: line %zu: expected %s", line_no,
                        with_ctx ? "model,context,config,mean_kl,source" : "model,config,mean_kl,source");
        }
        *c1 = *c2 = *c3 = 0;
        char *model = trim(s), *config = trim(c1 + 1), *kl = trim(c2 + 1), *src = trim(c3 + 1);
        sjkh_floor_row r;
        memset(&r, 0, sizeof r);
        if (!*model || strlen(model) >= sizeof r.model || !*config || strlen(config) >= sizeof r.config) {
            sjkh_quality_floor_free(f);
            return FAIL(SJK_ERR_FORMAT, "quality floor: line %zu: empty or too long model/config", line_no);
        }
        if (ctx_field && strcmp(ctx_field, "*")) {
            char *end;
            errno = 0;
            unsigned long c = strtoul(ctx_field, &end, 10);
            if (errno || end == ctx_field || *end || *ctx_field == '-' || c == 0 || c > UINT32_MAX) {
                sjkh_quality_floor_free(f);
                return FAIL(SJK_ERR_FORMAT, "quality floor: line %zu: context '%s' is neither a token count > 0 "
                            "nor '*'", line_no, ctx_field);
            }
            r.context = (uint32_t)c;
        }
        snprintf(r.model, sizeof r.model, "%s", model);
        canonical(config, r.config, sizeof r.config);
        if (!strcmp(kl, "unmeasured") || !*kl) {
            r.mean_kl = -1;
        } else {
            char *end;
            errno = 0;
            r.mean_kl = strtod(kl, &end);
            if (errno || end == kl || *end || !isfinite(r.mean_kl) || r.mean_kl < 0) {
                sjkh_quality_floor_free(f);
                return FAIL(SJK_ERR_FORMAT, "quality floor: line %zu: mean_kl '%s' is neither a number >= 0 nor "
                            "'unmeasured'", line_no, kl);
            }
            if (!*src) {
                sjkh_quality_floor_free(f);
                return FAIL(SJK_ERR_FORMAT, "quality floor: line %zu: a measured row needs its source (the "
                            "`sjkvarn eval` command)", line_no);
            }
        }
        snprintf(r.source, sizeof r.source, "%s", src);
        if (f->n_rows == cap) {
            size_t nc = cap ? 2 * cap : 16;
            sjkh_floor_row *nr = realloc(f->rows, nc * sizeof *nr);
            if (!nr) {
                sjkh_quality_floor_free(f);
                return FAIL(SJK_ERR_NOMEM, "quality floor: out of memory");
            }
            f->rows = nr;
            cap = nc;
        }
        f->rows[f->n_rows++] = r;
    }
    *out = f;
    return SJK_OK;
}

sjk_status sjkh_quality_floor_load(const char *path, sjkh_quality_floor **out, char *err, size_t err_cap)
{
    if (!out || !path) return FAIL(SJK_ERR_PARAM, "quality floor: bad arguments");
    *out = NULL;
    int fd = sjk_file_open_regular(path, NULL); /* a FIFO is refused, never waited on */
    FILE *fp = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!fp) {
        int e = errno;
        if (fd >= 0) close(fd);
        return FAIL(SJK_ERR_IO, "quality floor: %s: %s", path, fd == -2 ? "not a regular file" : strerror(e));
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap) break;
        if (cap >= (16u << 20)) { free(buf); buf = NULL; break; }
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!buf || bad) {
        free(buf);
        return FAIL(bad ? SJK_ERR_IO : SJK_ERR_NOMEM, "quality floor: cannot read %s", path);
    }
    char e[512] = "";
    sjk_status st = sjkh_quality_floor_parse(buf, n, out, e, sizeof e);
    free(buf);
    if (st) return FAIL(st, "%s: %s", path, e);
    snprintf((*out)->path, sizeof (*out)->path, "%s", path);
    return SJK_OK;
}

const sjkh_floor_row *sjkh_quality_floor_find(const sjkh_quality_floor *f, const char *model, const char *config)
{
    if (!f || !config) return NULL;
    char c[64];
    canonical(config, c, sizeof c);
    const sjkh_floor_row *any = NULL;
    for (size_t i = 0; i < f->n_rows; i++) {
        const sjkh_floor_row *r = &f->rows[i];
        if (strcmp(r->config, c)) continue;
        if (model && !strcmp(r->model, model)) return r;
        if (!strcmp(r->model, "*") && !any) any = r;
    }
    return any;
}

/* How far a row's context is from the plan's, as |log2 ratio|; rows of no stated context
 * are farther than any that states one. */
static double ctx_distance(uint32_t row_ctx, uint32_t n_ctx)
{
    if (!row_ctx) return INFINITY;
    if (!n_ctx) n_ctx = 1;
    return fabs(log2((double)row_ctx / (double)n_ctx));
}

size_t sjkh_quality_floor_rows(const sjkh_quality_floor *f, const char *model, const char *config, uint32_t n_ctx,
                               const sjkh_floor_row **rows, size_t cap)
{
    if (!f || !config) return 0;
    char c[64];
    canonical(config, c, sizeof c);
    /* the model's own rows if it has any for this configuration, else the "*" model's */
    const char *who = "*";
    for (size_t i = 0; i < f->n_rows; i++)
        if (model && !strcmp(f->rows[i].config, c) && !strcmp(f->rows[i].model, model)) {
            who = model;
            break;
        }
    /* measured rows only, unless there are none */
    int measured = 0;
    for (size_t i = 0; i < f->n_rows && !measured; i++)
        measured = !strcmp(f->rows[i].config, c) && !strcmp(f->rows[i].model, who) && f->rows[i].mean_kl >= 0;
    /* the nearest context (a tie: the longer) */
    int have = 0;
    uint32_t best = 0;
    double best_d = 0;
    for (size_t i = 0; i < f->n_rows; i++) {
        const sjkh_floor_row *r = &f->rows[i];
        if (strcmp(r->config, c) || strcmp(r->model, who) || (measured && r->mean_kl < 0)) continue;
        double d = ctx_distance(r->context, n_ctx);
        if (!have || d < best_d - 1e-9 || (fabs(d - best_d) <= 1e-9 && r->context > best)) {
            best = r->context;
            best_d = d;
            have = 1;
        }
    }
    size_t k = 0;
    for (size_t i = 0; have && i < f->n_rows; i++) {
        const sjkh_floor_row *r = &f->rows[i];
        if (strcmp(r->config, c) || strcmp(r->model, who) || r->context != best || (measured && r->mean_kl < 0))
            continue;
        if (k < cap && rows) rows[k] = r;
        k++;
    }
    return k;
}

/* ---- choosing ------------------------------------------------------------------------- */

static void append(char *dst, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(dst);
    if (n + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst + n, cap - n, fmt, ap);
    va_end(ap);
}

static const char *verdict_str(sjkh_rung_verdict v)
{
    switch (v) {
    case SJKH_RUNG_FITS: return "fits";
    case SJKH_RUNG_TOO_BIG: return "too big";
    case SJKH_RUNG_UNMEASURED: return "no measured KL";
    case SJKH_RUNG_BELOW_FLOOR: return "KL above the floor";
    case SJKH_RUNG_DOMINATED: return "dominated";
    default: return "unsupported";
    }
}

/* Whether two floor rows' sources name the same study: equal up to the first ": " (a
 * generated row is "STUDY.csv: provenance"), or equal as a whole when neither has one. */
static int same_study(const char *a, const char *b)
{
    if (!a || !b) return 0;
    const char *ea = strstr(a, ": "), *eb = strstr(b, ": ");
    size_t na = ea ? (size_t)(ea - a) : strlen(a), nb = eb ? (size_t)(eb - b) : strlen(b);
    return na == nb && na > 0 && !memcmp(a, b, na);
}

#define ROWS_PER_RUNG 8 /* the measured rows of one rung at one context: one per study */

/* The measured rows of one rung that speak for this plan's context (the nearest measured
 * context, sjkh_quality_floor_rows), the first of them the rung's own number. */
typedef struct rung_rows {
    const sjkh_floor_row *row[ROWS_PER_RUNG];
    size_t n;
} rung_rows;

/* The first study (in rung a's row order, so a's own number's study first) that measured
 * both rungs: 1 with their mean KLs in that study, else 0. Means of different studies
 * (other documents, machines, trees) are never compared. */
static int shared_study(const rung_rows *a, const rung_rows *b, double *ka, double *kb)
{
    for (size_t i = 0; i < a->n; i++)
        for (size_t j = 0; j < b->n; j++)
            if (same_study(a->row[i]->source, b->row[j]->source)) {
                *ka = a->row[i]->mean_kl;
                *kb = b->row[j]->mean_kl;
                return 1;
            }
    return 0;
}

sjk_status sjkh_plan_choose_tier(const sjkh_plan_model *m, const sjkh_plan_params *p, const sjkh_tier_request *r,
                                 sjkh_tier_choice *out)
{
    if (!out) return SJK_ERR_PARAM;
    memset(out, 0, sizeof *out);
    if (!m || !p || !r) {
        snprintf(out->reason, sizeof out->reason, "bad arguments");
        return SJK_ERR_PARAM;
    }
    char err[256] = "", b_budget[32], b1[32], b2[32];
    sjkh_format_size(r->budget_nbytes, b_budget, sizeof b_budget);
    const char *sess = p->n_sessions == 1 ? "session" : "sessions";

    /* explicit: respected as given; only measured against the budget */
    if (r->kv && strcmp(r->kv, "auto")) {
        if (strlen(r->kv) >= sizeof out->kv) {
            snprintf(out->reason, sizeof out->reason, "configuration '%s' is too long", r->kv);
            return SJK_ERR_PARAM;
        }
        snprintf(out->kv, sizeof out->kv, "%s", r->kv);
        out->explicit_kv = 1;
        sjk_status st = sjkh_plan_estimate(m, r->kv, p, &out->size, err, sizeof err);
        if (st) {
            snprintf(out->reason, sizeof out->reason, "%s", err);
            return st;
        }
        sjkh_format_size(out->size.total_nbytes, b1, sizeof b1);
        out->fits = !r->budget_nbytes || out->size.total_nbytes <= r->budget_nbytes;
        if (!r->budget_nbytes)
            snprintf(out->reason, sizeof out->reason, "explicit --kv %s: %s for %u %s at context %u", r->kv, b1,
                     p->n_sessions, sess, p->n_ctx);
        else
            snprintf(out->reason, sizeof out->reason, "explicit --kv %s respected: %s for %u %s at context %u %s "
                     "the budget %s", r->kv, b1, p->n_sessions, sess, p->n_ctx,
                     out->fits ? "fits" : "does NOT fit", b_budget);
        return SJK_OK;
    }
    if (!r->budget_nbytes) {
        snprintf(out->reason, sizeof out->reason, "--kv auto needs a memory budget (--mem-budget SIZE)");
        return SJK_ERR_PARAM;
    }

    size_t n_ladder;
    const char *const *ladder = sjkh_plan_ladder(&n_ladder);
    int chosen = -1, cheapest_allowed = -1, cheapest_fitting_disallowed = -1;
    char why[1536] = "";
    char uerrs[PLAN_ARRAY_LEN(out->rungs)][256];
    rung_rows rows[PLAN_ARRAY_LEN(out->rungs)]; /* each rung's measured rows at this context */
    memset(rows, 0, sizeof rows);
    /* pass 1: every rung's size and verdict */
    for (size_t i = 0; i < n_ladder && i < PLAN_ARRAY_LEN(out->rungs); i++) {
        const char *kv = ladder[i];
        out->rungs[i].kv = kv;
        out->rungs[i].mean_kl = i == 0 ? 0.0 : -1.0;
        out->n_rungs = i + 1;
        sjkh_plan_size s;
        char uerr[256] = "";
        sjk_status st = sjkh_plan_estimate(m, kv, p, &s, uerr, sizeof uerr);
        if (st) {
            out->rungs[i].verdict = SJKH_RUNG_UNSUPPORTED;
            /* say why, or a refusal where every rung is unsupported reads "()" */
            const char *u = strncmp(uerr, "plan: ", 6) ? uerr : uerr + 6;
            snprintf(uerrs[i], sizeof uerrs[i], "%s", *u ? u : sjk_status_str(st));
            continue;
        }
        out->rungs[i].nbytes = s.total_nbytes;
        int fits = s.total_nbytes <= r->budget_nbytes;
        sjkh_rung_verdict v = fits ? SJKH_RUNG_FITS : SJKH_RUNG_TOO_BIG;
        if (i > 0) { /* the measured rows that speak for this context; the first is the rung's number */
            const sjkh_floor_row *all[ROWS_PER_RUNG];
            size_t n_all = sjkh_quality_floor_rows(r->floor, r->model_key, kv, p->n_ctx, all, ROWS_PER_RUNG);
            for (size_t k = 0; k < n_all && k < ROWS_PER_RUNG; k++)
                if (all[k]->mean_kl >= 0) rows[i].row[rows[i].n++] = all[k];
            if (rows[i].n) {
                out->rungs[i].mean_kl = rows[i].row[0]->mean_kl;
                out->rungs[i].kl_context = rows[i].row[0]->context;
            }
            if (r->max_kl >= 0) {
                if (!rows[i].n) v = SJKH_RUNG_UNMEASURED;
                else if (rows[i].row[0]->mean_kl > r->max_kl) v = SJKH_RUNG_BELOW_FLOOR;
            }
        }
        out->rungs[i].verdict = v;
        /* "cheapest" by bytes at this context: at short contexts an sj tier (sink +
         * staging ring + records) can cost more than a uniform one above it */
        if (v == SJKH_RUNG_FITS || v == SJKH_RUNG_TOO_BIG) {
            if (cheapest_allowed < 0 || s.total_nbytes < out->rungs[cheapest_allowed].nbytes)
                cheapest_allowed = (int)i;
        } else if (fits && cheapest_fitting_disallowed < 0) {
            cheapest_fitting_disallowed = (int)i;
        }
    }
    /* pass 2: the walk, least compression first. A rung that is allowed and fits is still
     * passed over when another allowed rung that fits is no larger at this context and
     * has a measured mean KL no higher in the same study, one of the two strictly: it is
     * dominated (the ladder is ordered by format, but the measured frontier of this model
     * decides; at 16K on Gemma 3 a 6-bit-K sj tier is both smaller and better than
     * q8_0/q4_0). Means of different studies (other documents, machines, trees) are not
     * compared: a nine-document mean is not a three-document one. */
    int dom_by[PLAN_ARRAY_LEN(out->rungs)]; /* the rung that dominated rung i, or -1 */
    for (size_t i = 0; i < PLAN_ARRAY_LEN(out->rungs); i++) dom_by[i] = -1;
    int said_unsupported = 0; /* the first unsupported rung says why; the rest name themselves */
    for (size_t i = 0; i < out->n_rungs && chosen < 0; i++) {
        const char *kv = ladder[i];
        sjkh_rung_verdict v = out->rungs[i].verdict;
        if (v == SJKH_RUNG_UNSUPPORTED) {
            if (said_unsupported) append(why, sizeof why, "%s%s (unsupported)", *why ? ", " : "", kv);
            else append(why, sizeof why, "%s%s (unsupported: %s)", *why ? ", " : "", kv, uerrs[i]);
            said_unsupported = 1;
            continue;
        }
        sjkh_format_size(out->rungs[i].nbytes, b1, sizeof b1);
        if (v == SJKH_RUNG_FITS && i > 0 && out->rungs[i].mean_kl >= 0) {
            int by = -1;
            double by_kj = 0, by_ki = 0; /* the two means of the study that decided */
            for (size_t j = 0; j < out->n_rungs && by < 0; j++) {
                double ki, kj;
                if (j == i || out->rungs[j].verdict != SJKH_RUNG_FITS || !shared_study(&rows[i], &rows[j], &ki, &kj))
                    continue;
                size_t nj = out->rungs[j].nbytes, ni = out->rungs[i].nbytes;
                if (ts_twin_of(kv, ladder[j])) { /* the slower twin: only by the margin */
                    if (kj * TWIN_KL_MARGIN < ki) by = (int)j;
                } else if (kj <= ki && nj <= ni && (kj < ki || nj < ni))
                    by = (int)j;
                if (by >= 0) {
                    by_kj = kj;
                    by_ki = ki;
                }
            }
            /* a `t` rung within the margin of its `ts` twin stands or falls with it: what
             * dominated the twin dominates it (else the slower twin would be taken for a
             * difference the study cannot resolve) */
            for (size_t k = 0; k < i && by < 0; k++) {
                double ki, kk;
                if (ts_twin_of(ladder[k], kv) && out->rungs[k].verdict == SJKH_RUNG_DOMINATED && dom_by[k] >= 0 &&
                    shared_study(&rows[i], &rows[k], &ki, &kk) && !(ki * TWIN_KL_MARGIN < kk)) {
                    by = dom_by[k];
                    if (!shared_study(&rows[i], &rows[by], &by_ki, &by_kj)) { /* the rungs' own numbers */
                        by_ki = out->rungs[i].mean_kl;
                        by_kj = out->rungs[by].mean_kl;
                    }
                }
            }
            if (by >= 0) {
                dom_by[i] = by;
                out->rungs[i].verdict = SJKH_RUNG_DOMINATED;
                sjkh_format_size(out->rungs[by].nbytes, b2, sizeof b2);
                append(why, sizeof why, "%s%s %s (dominated by %s: %s, mean KL %.4g <= %.4g)", *why ? ", " : "", kv,
                       b1, ladder[by], b2, by_kj, by_ki);
                continue;
            }
        }
        if (v == SJKH_RUNG_FITS) {
            chosen = (int)i;
            snprintf(out->kv, sizeof out->kv, "%s", kv);
            sjkh_plan_estimate(m, kv, p, &out->size, NULL, 0);
            out->fits = 1;
        } else {
            append(why, sizeof why, "%s%s %s (%s)", *why ? ", " : "", kv, b1, verdict_str(v));
        }
    }

    if (chosen >= 0) {
        sjkh_format_size(out->size.total_nbytes, b1, sizeof b1);
        snprintf(out->reason, sizeof out->reason, "auto tier: %s — %s for %u %s at context %u fits the budget %s",
                 out->kv, b1, p->n_sessions, sess, p->n_ctx, b_budget);
        if (chosen == 0) append(out->reason, sizeof out->reason, " (the f16 reference: no compression needed)");
        else if (r->max_kl >= 0) {
            append(out->reason, sizeof out->reason, "; measured mean KL %.4g", out->rungs[chosen].mean_kl);
            if (out->rungs[chosen].kl_context)
                append(out->reason, sizeof out->reason, " (at context %u)", out->rungs[chosen].kl_context);
            append(out->reason, sizeof out->reason, " <= floor %.4g", r->max_kl);
        }
        else append(out->reason, sizeof out->reason, "; quality floor off");
        if (*why) append(out->reason, sizeof out->reason, "; skipped: %s", why);
        return SJK_OK;
    }

    /* nothing fits: say what would */
    snprintf(out->reason, sizeof out->reason, "nothing fits the budget %s for %u %s at context %u (%s)", b_budget,
             p->n_sessions, sess, p->n_ctx, why);
    if (cheapest_allowed >= 0) {
        /* the longest context any allowed rung keeps resident in this budget */
        uint32_t best_ctx = 0;
        int best = -1;
        for (size_t i = 0; i < out->n_rungs; i++) {
            sjkh_rung_verdict v = out->rungs[i].verdict;
            if (v != SJKH_RUNG_FITS && v != SJKH_RUNG_TOO_BIG) continue;
            uint32_t ctx = 0;
            if (sjkh_plan_max_ctx(m, ladder[i], p, r->budget_nbytes, p->n_ctx, &ctx) == SJK_OK && ctx > best_ctx) {
                best_ctx = ctx;
                best = (int)i;
            }
        }
        sjkh_format_size(out->rungs[cheapest_allowed].nbytes, b2, sizeof b2);
        if (best >= 0)
            append(out->reason, sizeof out->reason, ". What would fit: context %u at %s (--ctx %u), or a budget "
                   "of %s for this context at %s", best_ctx, ladder[best], best_ctx, b2, ladder[cheapest_allowed]);
        else
            append(out->reason, sizeof out->reason, ". What would fit: a budget of %s for this context at %s (no "
                   "context fits %s)", b2, ladder[cheapest_allowed], b_budget);
    }
    if (cheapest_fitting_disallowed >= 0) {
        const char *kv = ladder[cheapest_fitting_disallowed];
        sjkh_rung_verdict v = out->rungs[cheapest_fitting_disallowed].verdict;
        if (v == SJKH_RUNG_UNMEASURED)
            append(out->reason, sizeof out->reason, ". %s would fit but has no measured KL for '%s' in the "
                   "quality-floor table: measure it with `sjkvarn eval -m %s --kv %s`, or lift the floor "
                   "(--kl-floor off), or name it (--kv %s)", kv, r->model_key ? r->model_key : "?",
                   r->model_key ? r->model_key : "MODEL", kv, kv);
        else
            append(out->reason, sizeof out->reason, ". %s would fit but its mean KL %.4g is above the floor %.4g "
                   "(--kl-floor, or --kv %s to accept it)", kv, out->rungs[cheapest_fitting_disallowed].mean_kl,
                   r->max_kl, kv);
    }
    return SJK_ERR_RANGE;
}
