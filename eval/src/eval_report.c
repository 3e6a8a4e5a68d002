/* eval_report.c — the study's text outputs: a terminal table, CSV files and JSON.
 *
 * Every writer reads a finished study and writes to a FILE the caller owns. Non-finite
 * numbers (a ratio against a zero mean, an interval with no resamples) are "nan" in the
 * table, empty in CSV and null in JSON, so every output stays well-formed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_internal.h"

/* ---- shared helpers ---------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs("null", f);
}

static void csv_str(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* 17 significant digits: every double reads back exactly, so `eval --merge` of a run's
 * CSVs reproduces the run's numbers bit for bit. */
static void csv_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.17g", v);
}

static sjk_status io_status(FILE *f) { return ferror(f) ? SJK_ERR_IO : SJK_OK; }

/* Distinct planned needle distances, ascending, into out (cap entries); returns count. */
static size_t needle_distances(const sjk_eval_study *st, uint32_t *out, size_t cap)
{
    size_t m = 0;
    for (size_t i = 0; i < st->n_needles; i++) {
        uint32_t d = st->needles[i].planned;
        size_t j = 0;
        while (j < m && out[j] != d) j++;
        if (j < m || m == cap) continue;
        out[m++] = d;
    }
    for (size_t i = 1; i < m; i++)
        for (size_t j = i; j > 0 && out[j - 1] > out[j]; j--) {
            uint32_t t = out[j]; out[j] = out[j - 1]; out[j - 1] = t;
        }
    return m;
}

typedef struct needle_cell { size_t n; double kl, gold, ref_gold, distance; } needle_cell;

static needle_cell needle_at(const sjk_eval_study *st, size_t cfg, uint32_t planned)
{
    needle_cell c = {0, 0, 0, 0, 0};
    for (size_t i = 0; i < st->n_needles; i++) {
        const eval_needle *nd = &st->needles[i];
        if (nd->cfg != cfg || nd->planned != planned) continue;
        c.n++;
        c.kl += nd->kl;
        c.gold += nd->q_gold;
        c.ref_gold += nd->p_gold;
        c.distance += nd->distance;
    }
    if (c.n) { c.kl /= (double)c.n; c.gold /= (double)c.n; c.ref_gold /= (double)c.n;
               c.distance /= (double)c.n; }
    return c;
}

#define MAX_DIST 64

/* ---- terminal table ---------------------------------------------------------------- */

sjk_status sjk_eval_write_table(const sjk_eval_study *st, FILE *f)
{
    if (!st || !f || !st->finished) return SJK_ERR_PARAM;
    size_t w = 6;
    for (size_t c = 0; c < st->n_configs; c++) {
        size_t l = strlen(st->cols[c].name);
        if (l > w) w = l;
    }
    fprintf(f, "KL(p ‖ q) in nats over generated tokens, reference %s, %zu document(s)\n",
            st->reference, st->n_docs);
    fprintf(f, "%-*s %7s %10s %10s %10s %10s %10s %7s %7s %7s %9s %8s\n", (int)w, "config",
            "n", "mean", "median", "p90", "p99", "max", "same", "bpv", "bpv", "KV MiB",
            "tok/s");
    fprintf(f, "%-*s %7s %10s %10s %10s %10s %10s %7s %7s %7s %9s %8s\n", (int)w, "", "", "",
            "", "", "", "", "top", "occ", "alloc", "", "");
    for (size_t c = 0; c < st->n_configs; c++) {
        const sjk_eval_config_result *r = &st->res[c];
        fprintf(f, "%-*s %7zu %10.3e %10.3e %10.3e %10.3e %10.3e %6.2f%% %7.3f %7.3f %9.2f %8.1f\n",
                (int)w, r->config, r->s.n, r->s.mean, r->s.median, r->s.p90, r->s.p99, r->s.max,
                100.0 * r->s.same_top, r->bpv_occupied, r->bpv_allocated,
                (double)r->kv_bytes / 1048576.0, r->tokens_per_s);
    }
    if (st->n_pairs) {
        fprintf(f, "\npaired ratio of mean KL (a ÷ b; < 1: a is closer to %s), bootstrap 95%% CI\n",
                st->reference);
        fprintf(f, "%-*s %10s %21s %21s %9s %13s\n", (int)(2 * w + 4), "a ÷ b", "ratio",
                "CI positions", "CI documents", "a won", "a won");
        fprintf(f, "%-*s %10s %21s %21s %9s %13s\n", (int)(2 * w + 3), "", "", "", "",
                "documents", "positions");
        for (size_t a = 0; a < st->n_configs; a++)
            for (size_t b = a + 1; b < st->n_configs; b++) {
                const sjk_eval_pair *p = &st->pairs[eval_pair_index(st->n_configs, a, b)];
                char name[2 * SJK_EVAL_NAME_MAX + 8], c1[48], c2[48], dw[24], pw[48];
                snprintf(name, sizeof name, "%s ÷ %s", st->cols[a].name, st->cols[b].name);
                snprintf(c1, sizeof c1, "[%.3f, %.3f]", p->ci_low, p->ci_high);
                snprintf(c2, sizeof c2, "[%.3f, %.3f]", p->doc_ci_low, p->doc_ci_high);
                snprintf(dw, sizeof dw, "%u/%u", p->docs_won, p->n_docs);
                snprintf(pw, sizeof pw, "%zu/%zu", p->positions_won, p->n);
                /* "÷" is 2 bytes in UTF-8 but one column: pad by one more. */
                fprintf(f, "%-*s %10.4f %21s %21s %9s %13s\n", (int)(2 * w + 4), name,
                        p->ratio, c1, c2, dw, pw);
            }
        for (size_t a = 0; a < st->n_configs; a++)
            for (size_t b = a + 1; b < st->n_configs; b++) {
                const sjk_eval_pair *p = &st->pairs[eval_pair_index(st->n_configs, a, b)];
                if (p->n_docs_partial)
                    fprintf(f, "note: %s ÷ %s: %u document(s) were scored on different positions "
                               "(runs with different -n or --ctx?); only the common positions are paired\n",
                            st->cols[a].name, st->cols[b].name, p->n_docs_partial);
            }
    }
    uint32_t dist[MAX_DIST];
    size_t nd = needle_distances(st, dist, MAX_DIST);
    if (nd) {
        fprintf(f, "\nneedles: mean answer-token KL / top token is the gold answer (the reference's own rate below)\n");
        fprintf(f, "%-*s", (int)w, "distance");
        for (size_t j = 0; j < nd; j++) fprintf(f, "%17u", dist[j]);
        fprintf(f, "%17s\n", "all");
        for (size_t c = 0; c < st->n_configs; c++) {
            fprintf(f, "%-*s", (int)w, st->cols[c].name);
            for (size_t j = 0; j < nd; j++) {
                needle_cell cell = needle_at(st, c, dist[j]);
                fprintf(f, "  %8.2e %5.1f%%", cell.kl, 100.0 * cell.gold);
            }
            const sjk_eval_config_result *r = &st->res[c];
            fprintf(f, "  %8.2e %5.1f%%\n", r->needle_mean_kl, 100.0 * r->needle_gold_top);
        }
        fprintf(f, "%-*s", (int)w, "(ref. gold)");
        for (size_t j = 0; j < nd; j++) {
            needle_cell cell = needle_at(st, 0, dist[j]);
            fprintf(f, "  %8s %5.1f%%", "", 100.0 * cell.ref_gold);
        }
        fprintf(f, "  %8s %5.1f%%\n", "", 100.0 * st->res[0].needle_ref_gold_top);
    }
    return io_status(f);
}

/* ---- CSV --------------------------------------------------------------------------- */

sjk_status sjk_eval_write_csv_configs(const sjk_eval_study *st, FILE *f)
{
    if (!st || !f || !st->finished) return SJK_ERR_PARAM;
    fputs("config,n,mean_kl,median_kl,p90_kl,p99_kl,max_kl,same_top,bits_per_value,"
          "bits_per_value_allocated,kv_bytes,tokens_per_s,needle_n,needle_mean_kl,"
          "needle_gold_top\n", f);
    for (size_t c = 0; c < st->n_configs; c++) {
        const sjk_eval_config_result *r = &st->res[c];
        csv_str(f, r->config);
        fprintf(f, ",%zu", r->s.n);
        double v[] = {r->s.mean, r->s.median, r->s.p90, r->s.p99, r->s.max, r->s.same_top,
                      r->bpv_occupied, r->bpv_allocated};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) { fputc(',', f); csv_num(f, v[i]); }
        fprintf(f, ",%llu,", (unsigned long long)r->kv_bytes);
        csv_num(f, r->tokens_per_s);
        fprintf(f, ",%zu,", r->n_needle);
        csv_num(f, r->needle_mean_kl);
        fputc(',', f);
        csv_num(f, r->needle_gold_top);
        fputc('\n', f);
    }
    return io_status(f);
}

sjk_status sjk_eval_write_csv_pairs(const sjk_eval_study *st, FILE *f)
{
    if (!st || !f || !st->finished) return SJK_ERR_PARAM;
    fputs("a,b,ratio,ci_low,ci_high,doc_ci_low,doc_ci_high,docs_won,n_docs,positions_won,n\n", f);
    for (size_t a = 0; a < st->n_configs; a++)
        for (size_t b = a + 1; b < st->n_configs; b++) {
            const sjk_eval_pair *p = &st->pairs[eval_pair_index(st->n_configs, a, b)];
            csv_str(f, st->cols[a].name);
            fputc(',', f);
            csv_str(f, st->cols[b].name);
            double v[] = {p->ratio, p->ci_low, p->ci_high, p->doc_ci_low, p->doc_ci_high};
            for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) { fputc(',', f); csv_num(f, v[i]); }
            fprintf(f, ",%u,%u,%zu,%zu\n", p->docs_won, p->n_docs, p->positions_won, p->n);
        }
    return io_status(f);
}

sjk_status sjk_eval_write_csv_positions(const sjk_eval_study *st, FILE *f)
{
    if (!st || !f || !st->finished) return SJK_ERR_PARAM;
    fputs("config,doc,position,kl,same_top,bits_per_value\n", f);
    for (size_t c = 0; c < st->n_configs; c++) {
        const eval_col *k = &st->cols[c];
        for (size_t i = 0; i < k->n; i++) {
            csv_str(f, k->name);
            fputc(',', f);
            csv_str(f, st->doc_names[k->doc[i]]);
            fprintf(f, ",%u,", k->pos[i]);
            csv_num(f, k->kl[i]);
            fprintf(f, ",%u,", k->same[i]);
            csv_num(f, k->bpv_occ[i]);
            fputc('\n', f);
        }
    }
    return io_status(f);
}

/* ---- JSON -------------------------------------------------------------------------- */

sjk_status sjk_eval_write_json(const sjk_eval_study *st, FILE *f)
{
    if (!st || !f || !st->finished) return SJK_ERR_PARAM;
    fputs("{\n  \"reference\": ", f);
    json_str(f, st->reference);
    fputs(",\n  \"documents\": [", f);
    for (size_t d = 0; d < st->n_docs; d++) {
        if (d) fputs(", ", f);
        json_str(f, st->doc_names[d]);
    }
    fputs("],\n  \"configs\": [\n", f);
    for (size_t c = 0; c < st->n_configs; c++) {
        const sjk_eval_config_result *r = &st->res[c];
        fputs("    {\"config\": ", f);
        json_str(f, r->config);
        fprintf(f, ", \"n\": %zu", r->s.n);
        const char *keys[] = {"mean_kl", "median_kl", "p90_kl", "p99_kl", "max_kl", "same_top",
                              "bits_per_value", "bits_per_value_allocated", "tokens_per_s"};
        double v[] = {r->s.mean, r->s.median, r->s.p90, r->s.p99, r->s.max, r->s.same_top,
                      r->bpv_occupied, r->bpv_allocated, r->tokens_per_s};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            fprintf(f, ", \"%s\": ", keys[i]);
            json_num(f, v[i]);
        }
        fprintf(f, ", \"kv_bytes\": %llu", (unsigned long long)r->kv_bytes);
        if (r->n_needle) {
            fprintf(f, ", \"needle_n\": %zu, \"needle_mean_kl\": ", r->n_needle);
            json_num(f, r->needle_mean_kl);
            fputs(", \"needle_gold_top\": ", f);
            json_num(f, r->needle_gold_top);
        }
        fprintf(f, "}%s\n", c + 1 < st->n_configs ? "," : "");
    }
    fputs("  ],\n  \"pairs\": [\n", f);
    size_t k = 0;
    for (size_t a = 0; a < st->n_configs; a++)
        for (size_t b = a + 1; b < st->n_configs; b++, k++) {
            const sjk_eval_pair *p = &st->pairs[k];
            fputs("    {\"a\": ", f);
            json_str(f, st->cols[a].name);
            fputs(", \"b\": ", f);
            json_str(f, st->cols[b].name);
            const char *keys[] = {"ratio", "ci_low", "ci_high", "doc_ci_low", "doc_ci_high"};
            double v[] = {p->ratio, p->ci_low, p->ci_high, p->doc_ci_low, p->doc_ci_high};
            for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
                fprintf(f, ", \"%s\": ", keys[i]);
                json_num(f, v[i]);
            }
            fprintf(f, ", \"docs_won\": %u, \"n_docs\": %u, \"positions_won\": %zu, \"n\": %zu}%s\n",
                    p->docs_won, p->n_docs, p->positions_won, p->n,
                    k + 1 < st->n_pairs ? "," : "");
        }
    fputs("  ],\n  \"needles\": [\n", f);
    uint32_t dist[MAX_DIST];
    size_t nd = needle_distances(st, dist, MAX_DIST);
    int first = 1;
    for (size_t c = 0; c < st->n_configs; c++)
        for (size_t j = 0; j < nd; j++) {
            needle_cell cell = needle_at(st, c, dist[j]);
            if (!cell.n) continue;
            fputs(first ? "    {\"config\": " : ",\n    {\"config\": ", f);
            first = 0;
            json_str(f, st->cols[c].name);
            fprintf(f, ", \"planned_distance\": %u, \"mean_distance\": ", dist[j]);
            json_num(f, cell.distance);
            fprintf(f, ", \"n\": %zu, \"mean_kl\": ", cell.n);
            json_num(f, cell.kl);
            fputs(", \"gold_top\": ", f);
            json_num(f, cell.gold);
            fputs(", \"ref_gold_top\": ", f);
            json_num(f, cell.ref_gold);
            fputc('}', f);
        }
    fputs(first ? "  ]\n}\n" : "\n  ]\n}\n", f);
    return io_status(f);
}
