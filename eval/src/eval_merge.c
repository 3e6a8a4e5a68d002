/* eval_merge.c — one study from the CSV outputs of several runs (`sjkvarn eval --merge`).
 *
 * A 16K-token study costs minutes per configuration per document, so it is run one
 * document (and one batch of configurations) per command, each writing
 *
 *   FILE.csv            config,n,...,bits_per_value_allocated,kv_bytes,tokens_per_s,needle_n,...
 *   FILE-positions.csv  config,doc,position,kl,same_top,bits_per_value     (one row per position)
 *
 * and the pieces are merged here into a study over their union, so that the document-
 * level intervals and "documents won" see every document. The positions carry everything
 * the summaries and pairs need; the main file adds what a run records only per
 * configuration (allocated bits per value, KV bytes, rate, needle count).
 *
 * Three passes: read every file into rows (validating as we go), sort the rows by
 * (config, document, file, position) to find repeats and compare duplicates across
 * files, then restore the reading order and add the kept rows to a fresh study. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval_internal.h"

#define MERGE_MAX_FIELDS 16
#define MERGE_PATH_MAX 4096

/* The headers the writers in eval_report.c put first. */
static const char main_header[] =
    "config,n,mean_kl,median_kl,p90_kl,p99_kl,max_kl,same_top,bits_per_value,"
    "bits_per_value_allocated,kv_bytes,tokens_per_s,needle_n,needle_mean_kl,needle_gold_top";
static const char pos_header[] = "config,doc,position,kl,same_top,bits_per_value";
enum { MAIN_FIELDS = 15, POS_FIELDS = 6 };

/* One scored position as read. */
typedef struct mrow {
    size_t seq;                 /* reading order: file, then line */
    uint32_t file, cfg, doc, pos;
    double kl, bpv;             /* KL in nats; bits per value occupied at that moment */
    uint8_t same, drop;         /* same top token; an identical repeat of an earlier file */
} mrow;

/* One configuration of one run: its row of the main file, and what the positions add. */
typedef struct mrun_cfg {
    int present;
    size_t n, n_read;           /* positions the main file lists; rows the positions file has */
    double bpv_alloc, tps;
    uint64_t kv_bytes, tokens;  /* tokens: Σ over its documents of last position + 1 */
} mrun_cfg;

typedef struct merger {
    const char *const *paths;
    size_t n_files;
    char names[SJK_EVAL_MAX_CONFIGS][SJK_EVAL_NAME_MAX];
    size_t n_cfgs;
    char **docs;                /* [n_docs] names, first appearance order */
    size_t n_docs, doc_cap, last_doc;
    mrow *rows;                 /* [n_rows] */
    size_t n_rows, row_cap;
    mrun_cfg *runs;             /* [n_files][SJK_EVAL_MAX_CONFIGS] */
    sjk_eval_merge_info info;
    char *err;
    size_t err_cap;
} merger;

static sjk_status fail(merger *m, sjk_status s, const char *fmt, ...)
{
    if (m->err && m->err_cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->err, m->err_cap, fmt, ap);
        va_end(ap);
    }
    return s;
}

/* BASE-positions.csv for FILE (BASE = FILE without a final ".csv"), as the CLI names it. */
static int positions_path(const char *path, char *buf, size_t cap)
{
    size_t l = strlen(path);
    if (l > 4 && !strcmp(path + l - 4, ".csv")) l -= 4;
    return snprintf(buf, cap, "%.*s-positions.csv", (int)l, path) < (int)cap;
}

/* Reads a whole file into a NUL-terminated buffer (allocated; *n bytes before the NUL). */
static sjk_status read_all(merger *m, const char *path, char **out, size_t *n)
{
    *out = NULL;
    int fd = sjk_file_open_regular(path, NULL); /* a FIFO is refused, never waited on */
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        return fail(m, SJK_ERR_IO, "%s: %s", path, fd == -2 ? "not a regular file" : strerror(e));
    }
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap + 1);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        size_t nc;
        char *nb = NULL;
        if (eval_mul_ok(cap, 2, &nc) && nc < SIZE_MAX) nb = realloc(buf, nc + 1);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap = nc;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) return fail(m, SJK_ERR_NOMEM, "%s: out of memory", path);
    if (bad) { free(buf); return fail(m, SJK_ERR_IO, "%s: read error", path); }
    buf[len] = 0;
    *out = buf;
    *n = len;
    return SJK_OK;
}

/* The next line of buf[*at .. n) without its "\n" (or "\r\n"), NUL-terminated in place;
 * NULL at the end. *bad is set if the line holds a NUL byte. */
static char *next_line(char *buf, size_t n, size_t *at, int *bad)
{
    if (*at >= n) return NULL;
    char *s = buf + *at, *e = memchr(s, '\n', n - *at);
    size_t l = e ? (size_t)(e - s) : n - *at;
    *at += l + (e != NULL);
    s[l] = 0;
    if (l && s[l - 1] == '\r') s[--l] = 0;
    *bad = strlen(s) != l;
    return s;
}

/* Splits one line in place into at most max fields, undoing the writer's quoting (a field
 * with a comma or quote is quoted, a quote doubled). Returns the field count, or -1 if the
 * line is malformed (an unterminated quote, text after a closing quote, a bare quote). */
static int csv_split(char *s, char **f, int max)
{
    int n = 0;
    for (;;) {
        if (n == max) return -1;
        if (*s == '"') {
            char *w = ++s;
            f[n++] = w;
            for (;;) {
                if (!*s) return -1;
                if (*s == '"' && s[1] == '"') { *w++ = '"'; s += 2; continue; }
                if (*s == '"') { s++; break; }
                *w++ = *s++;
            }
            char next = *s; /* w < s: terminating at w leaves *s alone */
            *w = 0;
            if (next == 0) return n;
            if (next != ',') return -1;
            s++;
        } else {
            f[n++] = s;
            char *c = strpbrk(s, ",\"");
            if (c && *c == '"') return -1;
            if (!c) return n;
            *c = 0;
            s = c + 1;
        }
    }
}

/* A finite number written as the writers write them (%.17g; %.9g before: digits, sign, point,
 * exponent); empty fields (the writers' non-finite values), "nan", "inf" and hex are
 * refused. */
static int parse_num(const char *s, double *v)
{
    if (!*s || s[strspn(s, "0123456789+-.eE")]) return 0;
    char *e;
    double x = strtod(s, &e);
    if (*e || !isfinite(x)) return 0;
    *v = x;
    return 1;
}

static int parse_uint(const char *s, uint64_t max, uint64_t *v)
{
    if (!*s || s[strspn(s, "0123456789")] || strlen(s) > 20) return 0;
    uint64_t x = 0;
    for (; *s; s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (d > max || x > (max - d) / 10) return 0;
        x = x * 10 + d;
    }
    *v = x;
    return 1;
}

static size_t find_cfg(const merger *m, const char *name)
{
    for (size_t c = 0; c < m->n_cfgs; c++)
        if (!strcmp(m->names[c], name)) return c;
    return SIZE_MAX;
}

/* Index of document name, added if new. Rows come grouped by document: try the last. */
static sjk_status doc_index(merger *m, const char *name, uint32_t *out)
{
    if (m->n_docs && !strcmp(m->docs[m->last_doc], name)) { *out = (uint32_t)m->last_doc; return SJK_OK; }
    for (size_t d = 0; d < m->n_docs; d++)
        if (!strcmp(m->docs[d], name)) { *out = (uint32_t)(m->last_doc = d); return SJK_OK; }
    if (m->n_docs >= UINT32_MAX) return SJK_ERR_RANGE;
    if (m->n_docs == m->doc_cap) {
        size_t nc = m->doc_cap ? 2 * m->doc_cap : 16, nb;
        if (!eval_mul_ok(nc, sizeof(char *), &nb)) return SJK_ERR_NOMEM;
        char **p = realloc(m->docs, nb);
        if (!p) return SJK_ERR_NOMEM;
        m->docs = p;
        m->doc_cap = nc;
    }
    size_t l = strlen(name);
    char *s = malloc(l + 1);
    if (!s) return SJK_ERR_NOMEM;
    memcpy(s, name, l + 1);
    m->docs[m->n_docs] = s;
    *out = (uint32_t)(m->last_doc = m->n_docs++);
    return SJK_OK;
}

static sjk_status push_row(merger *m, const mrow *r)
{
    if (m->n_rows == m->row_cap) {
        size_t nc = m->row_cap ? m->row_cap : 1024, nb;
        if (m->row_cap && !eval_mul_ok(m->row_cap, 2, &nc)) return SJK_ERR_NOMEM;
        if (!eval_mul_ok(nc, sizeof(mrow), &nb)) return SJK_ERR_NOMEM;
        mrow *p = realloc(m->rows, nb);
        if (!p) return SJK_ERR_NOMEM;
        m->rows = p;
        m->row_cap = nc;
    }
    m->rows[m->n_rows] = *r;
    m->rows[m->n_rows].seq = m->n_rows;
    m->n_rows++;
    return SJK_OK;
}

/* Reads path whole into *buf (n bytes) and checks its first line is header; *at is then
 * the offset of the second line. On error nothing is left allocated. */
static sjk_status read_csv(merger *m, const char *path, const char *header, const char *kind,
                           char **buf, size_t *n, size_t *at)
{
    sjk_status s = read_all(m, path, buf, n);
    if (s != SJK_OK) return s;
    int bad;
    *at = 0;
    const char *line = next_line(*buf, *n, at, &bad);
    if (line && !bad && !strcmp(line, header)) return SJK_OK;
    free(*buf);
    *buf = NULL;
    return fail(m, SJK_ERR_FORMAT, "%s: not a %s file of sjkvarn eval --csv (the first line "
                "must be \"%s\")", path, kind, header);
}

/* FILE: the header, then one row per configuration. */
static sjk_status read_main(merger *m, uint32_t fi)
{
    const char *path = m->paths[fi];
    char *buf, *line, *fld[MERGE_MAX_FIELDS];
    size_t n, at = 0, lineno = 1;
    int bad;
    sjk_status s = read_csv(m, path, main_header, "configurations", &buf, &n, &at);
    if (s != SJK_OK) return s;
    mrun_cfg *run = &m->runs[(size_t)fi * SJK_EVAL_MAX_CONFIGS];
    size_t rows = 0;
    while ((line = next_line(buf, n, &at, &bad)) != NULL) {
        lineno++;
        int nf = bad ? -1 : csv_split(line, fld, MERGE_MAX_FIELDS);
        if (nf != MAIN_FIELDS) {
            s = fail(m, SJK_ERR_FORMAT, "%s:%zu: malformed line (%d fields, want %d)", path,
                     lineno, nf < 0 ? 0 : nf, MAIN_FIELDS);
            goto done;
        }
        const char *name = fld[0];
        if (!*name || strlen(name) >= SJK_EVAL_NAME_MAX) {
            s = fail(m, SJK_ERR_FORMAT, "%s:%zu: configuration name empty or longer than %d "
                     "bytes", path, lineno, SJK_EVAL_NAME_MAX - 1);
            goto done;
        }
        uint64_t un, kv, nn;
        double v[MAIN_FIELDS];
        int ok = parse_uint(fld[1], UINT32_MAX, &un) && parse_uint(fld[10], UINT64_MAX, &kv) &&
                 parse_uint(fld[12], UINT32_MAX, &nn);
        for (int k = 2; k < MAIN_FIELDS && ok; k++)
            if (k != 10 && k != 12) ok = parse_num(fld[k], &v[k]);
        if (!ok) {
            s = fail(m, SJK_ERR_FORMAT, "%s:%zu: %s: a field is not a finite number (or a "
                     "count not a non-negative integer)", path, lineno, name);
            goto done;
        }
        size_t c = find_cfg(m, name);
        if (c == SIZE_MAX) {
            if (m->n_cfgs == SJK_EVAL_MAX_CONFIGS) {
                s = fail(m, SJK_ERR_RANGE, "%s:%zu: more than %d configurations in all", path,
                         lineno, SJK_EVAL_MAX_CONFIGS);
                goto done;
            }
            c = m->n_cfgs++;
            memcpy(m->names[c], name, strlen(name) + 1);
        }
        if (run[c].present) {
            s = fail(m, SJK_ERR_FORMAT, "%s:%zu: configuration %s appears twice", path,
                     lineno, name);
            goto done;
        }
        run[c].present = 1;
        run[c].n = (size_t)un;
        run[c].bpv_alloc = v[9];
        run[c].kv_bytes = kv;
        run[c].tps = v[11] > 0.0 ? v[11] : 0.0;
        if (nn) m->info.n_needle_dropped++;
        rows++;
    }
    if (!rows) s = fail(m, SJK_ERR_FORMAT, "%s: no configurations", path);
done:
    free(buf);
    return s;
}

/* BASE-positions.csv: the header, then one row per scored position per configuration. */
static sjk_status read_positions(merger *m, uint32_t fi)
{
    char path[MERGE_PATH_MAX];
    if (!positions_path(m->paths[fi], path, sizeof path))
        return fail(m, SJK_ERR_PARAM, "%s: path too long", m->paths[fi]);
    char *buf, *line, *fld[MERGE_MAX_FIELDS];
    size_t n, at = 0, lineno = 1;
    int bad;
    sjk_status s = read_csv(m, path, pos_header, "positions", &buf, &n, &at);
    if (s != SJK_OK) return s;
    mrun_cfg *run = &m->runs[(size_t)fi * SJK_EVAL_MAX_CONFIGS];
    while ((line = next_line(buf, n, &at, &bad)) != NULL) {
        lineno++;
        int nf = bad ? -1 : csv_split(line, fld, MERGE_MAX_FIELDS);
        if (nf != POS_FIELDS) {
            s = fail(m, SJK_ERR_FORMAT, "%s:%zu: malformed line (%d fields, want %d)", path,
                     lineno, nf < 0 ? 0 : nf, POS_FIELDS);
            goto done;
        }
        size_t c = find_cfg(m, fld[0]);
        if (c == SIZE_MAX || !run[c].present) {
            s = fail(m, SJK_ERR_MISMATCH, "%s:%zu: configuration '%s' is not in %s", path,
                     lineno, fld[0], m->paths[fi]);
            goto done;
        }
        mrow r;
        memset(&r, 0, sizeof r);
        uint64_t pos, same;
        if (!*fld[1]) {
            s = fail(m, SJK_ERR_FORMAT, "%s:%zu: empty document name", path, lineno);
            goto done;
        }
        if (!parse_uint(fld[2], UINT32_MAX, &pos) || !parse_num(fld[3], &r.kl) || r.kl < 0 ||
            !parse_uint(fld[4], 1, &same) || !parse_num(fld[5], &r.bpv)) {
            s = fail(m, SJK_ERR_FORMAT, "%s:%zu: want position (integer), kl (finite, >= 0), "
                     "same_top (0 or 1), bits_per_value (finite); got '%s', '%s', '%s', '%s'",
                     path, lineno, fld[2], fld[3], fld[4], fld[5]);
            goto done;
        }
        s = doc_index(m, fld[1], &r.doc);
        if (s == SJK_OK) {
            r.file = fi;
            r.cfg = (uint32_t)c;
            r.pos = (uint32_t)pos;
            r.same = (uint8_t)same;
            s = push_row(m, &r);
        }
        if (s != SJK_OK) { s = fail(m, s, "%s: %s", path, sjk_status_str(s)); goto done; }
        run[c].n_read++;
    }
    for (size_t c = 0; c < m->n_cfgs; c++)
        if (run[c].present && run[c].n_read != run[c].n) {
            s = fail(m, SJK_ERR_MISMATCH, "%s lists %zu positions of %s, %s has %zu",
                     m->paths[fi], run[c].n, m->names[c], path, run[c].n_read);
            goto done;
        }
done:
    free(buf);
    return s;
}

static int cmp_group(const void *x, const void *y)
{
    const mrow *a = x, *b = y;
    if (a->cfg != b->cfg) return a->cfg < b->cfg ? -1 : 1;
    if (a->doc != b->doc) return a->doc < b->doc ? -1 : 1;
    if (a->file != b->file) return a->file < b->file ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

static int cmp_seq(const void *x, const void *y)
{
    size_t a = ((const mrow *)x)->seq, b = ((const mrow *)y)->seq;
    return (a > b) - (a < b);
}

static int same_row(const mrow *a, const mrow *b)
{
    return a->pos == b->pos && a->kl == b->kl && a->same == b->same && a->bpv == b->bpv;
}

/* Refuses a position twice in one file; keeps the first file's rows of every
 * (config, document) and drops identical repeats from later files, refusing different
 * ones; counts each run's tokens. Leaves the rows in reading order. */
static sjk_status dedupe(merger *m)
{
    mrow *r = m->rows;
    size_t n = m->n_rows;
    char pa[MERGE_PATH_MAX], pb[MERGE_PATH_MAX];
    if (n) qsort(r, n, sizeof *r, cmp_group); /* r is NULL for an empty study */
    for (size_t i = 1; i < n; i++)
        if (r[i].cfg == r[i - 1].cfg && r[i].doc == r[i - 1].doc && r[i].file == r[i - 1].file &&
            r[i].pos == r[i - 1].pos) {
            positions_path(m->paths[r[i].file], pa, sizeof pa);
            return fail(m, SJK_ERR_FORMAT, "%s: configuration %s, document %s, position %u "
                        "appears twice", pa, m->names[r[i].cfg], m->docs[r[i].doc], r[i].pos);
        }
    for (size_t g = 0; g < n;) {
        size_t e = g, first_end = g;
        while (e < n && r[e].cfg == r[g].cfg && r[e].doc == r[g].doc) e++;
        while (first_end < e && r[first_end].file == r[g].file) first_end++;
        for (size_t a = g; a < e;) { /* each file's rows of this (config, document) */
            size_t b = a;
            while (b < e && r[b].file == r[a].file) b++;
            m->runs[(size_t)r[a].file * SJK_EVAL_MAX_CONFIGS + r[a].cfg].tokens +=
                (uint64_t)r[b - 1].pos + 1;
            if (a > g) {
                int equal = b - a == first_end - g;
                for (size_t k = 0; equal && k < b - a; k++) equal = same_row(&r[g + k], &r[a + k]);
                if (!equal) {
                    positions_path(m->paths[r[g].file], pa, sizeof pa);
                    positions_path(m->paths[r[a].file], pb, sizeof pb);
                    return fail(m, SJK_ERR_MISMATCH, "%s and %s both have configuration %s on "
                                "document %s, with different rows (merge only one of them)",
                                pa, pb, m->names[r[g].cfg], m->docs[r[g].doc]);
                }
                for (size_t k = a; k < b; k++) r[k].drop = 1;
                m->info.n_rows_repeated += b - a;
            }
            a = b;
        }
        g = e;
    }
    if (n) qsort(r, n, sizeof *r, cmp_seq);
    return SJK_OK;
}

static sjk_status build(merger *m, sjk_eval_study **out)
{
    if (m->n_docs == 0) return fail(m, SJK_ERR_FORMAT, "no positions in any file");
    const char *names[SJK_EVAL_MAX_CONFIGS];
    for (size_t c = 0; c < m->n_cfgs; c++) names[c] = m->names[c];
    sjk_eval_study *st = sjk_eval_study_create(m->n_cfgs, names, m->n_docs,
                                               (const char *const *)m->docs);
    if (!st) return fail(m, SJK_ERR_NOMEM, "out of memory");
    sjk_status s = SJK_OK;
    for (size_t i = 0; i < m->n_rows && s == SJK_OK; i++) {
        const mrow *r = &m->rows[i];
        if (r->drop) continue;
        const mrun_cfg *rc = &m->runs[(size_t)r->file * SJK_EVAL_MAX_CONFIGS + r->cfg];
        sjk_eval_cmp cmp = {r->kl, 0, r->same ? 0u : 1u};
        sjk_eval_mem mem = {r->bpv, rc->bpv_alloc, rc->kv_bytes};
        s = sjk_eval_study_add(st, r->cfg, r->doc, r->pos, &cmp, &mem);
    }
    for (size_t f = 0; f < m->n_files && s == SJK_OK; f++)
        for (size_t c = 0; c < m->n_cfgs; c++) {
            const mrun_cfg *rc = &m->runs[f * SJK_EVAL_MAX_CONFIGS + c];
            if (rc->present && rc->tps > 0.0 && rc->tokens)
                sjk_eval_study_add_time(st, c, rc->tokens, (double)rc->tokens / rc->tps);
        }
    if (s != SJK_OK) {
        sjk_eval_study_free(st);
        return fail(m, s, "building the study: %s", sjk_status_str(s));
    }
    *out = st;
    return SJK_OK;
}

sjk_status sjk_eval_study_merge_csv(const char *const *paths, size_t n_paths,
                                    sjk_eval_study **out, sjk_eval_merge_info *info,
                                    char *err, size_t err_cap)
{
    merger m;
    memset(&m, 0, sizeof m);
    m.err = err;
    m.err_cap = err_cap;
    if (err && err_cap) err[0] = 0;
    if (info) memset(info, 0, sizeof *info);
    if (!out) return fail(&m, SJK_ERR_PARAM, "no output study");
    *out = NULL;
    if (!paths || n_paths == 0 || n_paths > UINT32_MAX)
        return fail(&m, SJK_ERR_PARAM, "no files to merge");
    for (size_t f = 0; f < n_paths; f++)
        if (!paths[f]) return fail(&m, SJK_ERR_PARAM, "file %zu: no path", f);
    m.paths = paths;
    m.n_files = n_paths;
    m.info.n_files = n_paths;
    size_t nb;
    sjk_status s = SJK_OK;
    if (!eval_mul_ok(n_paths, SJK_EVAL_MAX_CONFIGS * sizeof(mrun_cfg), &nb) ||
        !(m.runs = calloc(1, nb)))
        s = fail(&m, SJK_ERR_NOMEM, "out of memory");
    for (size_t f = 0; f < n_paths && s == SJK_OK; f++) {
        s = read_main(&m, (uint32_t)f);
        if (s == SJK_OK) s = read_positions(&m, (uint32_t)f);
    }
    m.info.n_rows = m.n_rows;
    if (s == SJK_OK) s = dedupe(&m);
    if (s == SJK_OK) s = build(&m, out);
    if (s == SJK_OK && info) *info = m.info;
    for (size_t d = 0; d < m.n_docs; d++) free(m.docs[d]);
    free(m.docs);
    free(m.rows);
    free(m.runs);
    return s;
}
