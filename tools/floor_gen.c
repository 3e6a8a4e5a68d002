/* floor_gen.c — `sjkvarn plan --make-quality-floor MODEL@CTX=STUDY.csv ...`: the
 * quality-floor table of `--kv auto` (docs/quality-floor.csv) generated from committed
 * study CSVs (docs/results/kl-*.csv: what `sjkvarn eval --csv` writes, headed by '#'
 * provenance lines), so the table is never copied by hand.
 *
 * For each MODEL@CTX argument, in the order given, and each rung of the auto ladder but
 * f16 (the reference, always allowed): one row for every one of the argument's study
 * CSVs (MODEL@CTX=A.csv,B.csv: A first) that measured the rung, the configuration
 * compared in canonical form (q8_0 == q8_0/q8_0), the number copied as the study writes
 * it, and as the source the study's path and its provenance lines. The first of them is
 * the rung's number at that context; the others let the walk compare the rung with
 * rungs measured only in a later study (means are compared within one study). A rung none
 * of the studies measured gets one "unmeasured" row with the command that would measure
 * it. Every study must name the context CTX in its provenance (--ctx CTX); MODEL= without
 * @CTX writes rows of no stated context ("*"). The output depends on nothing but the
 * arguments and the files: tests/test_plan.c runs the command named in the table's own
 * header and checks the committed table equals its output byte for byte. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/file.h"
#include "sjkplan.h"
#include "sjkvarn.h"

#define PROG "sjkvarn plan --make-quality-floor"
#define STUDY_MAX_ROWS 256

typedef struct study {
    char path[1024];
    char prov[2048];                 /* the '#' lines, joined by " | " */
    char cfg[STUDY_MAX_ROWS][160];   /* canonical configuration */
    char kl[STUDY_MAX_ROWS][32];     /* mean_kl as written */
    size_t n;
} study;

static void canonical(const char *kv, char *dst, size_t cap)
{
    sjk_layer_config lc;
    if (sjk_cache_config_parse(kv, 1, &lc, NULL, 0) || sjk_layer_config_str(&lc, dst, cap))
        snprintf(dst, cap, "%s", kv);
}

/* Index of name in the comma-separated header line, or -1. */
static int column(const char *hdr, const char *name)
{
    int i = 0;
    for (const char *p = hdr;; i++) {
        size_t k = strcspn(p, ",\r\n");
        if (k == strlen(name) && !strncmp(p, name, k)) return i;
        if (p[k] != ',') return -1;
        p += k + 1;
    }
}

/* Field i of a comma-separated line into dst; 0 if absent. */
static int field(const char *line, int i, char *dst, size_t cap)
{
    const char *p = line;
    for (int k = 0; k < i; k++) {
        p = strchr(p, ',');
        if (!p) return 0;
        p++;
    }
    size_t n = strcspn(p, ",\r\n");
    if (n + 1 > cap) return 0;
    memcpy(dst, p, n);
    dst[n] = 0;
    return 1;
}

static int read_study(const char *path, study *s)
{
    memset(s, 0, sizeof *s);
    int fd = sjk_file_open_regular(path, NULL);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        fprintf(stderr, PROG ": %s: %s\n", path, fd == -2 ? "not a regular file" : strerror(errno));
        return 0;
    }
    char line[4096];
    int c_cfg = -1, c_kl = -1, have_hdr = 0, ok = 1;
    size_t np = 0;
    while (ok && fgets(line, sizeof line, f)) {
        if (line[0] == '#') {
            const char *t = line + 1 + (line[1] == ' ');
            size_t n = strcspn(t, "\r\n");
            np += (size_t)snprintf(s->prov + np, np < sizeof s->prov ? sizeof s->prov - np : 0, "%s%.*s",
                                   np ? " | " : "", (int)n, t);
            if (np >= sizeof s->prov) np = sizeof s->prov - 1;
            continue;
        }
        if (!have_hdr) {
            c_cfg = column(line, "config");
            c_kl = column(line, "mean_kl");
            have_hdr = 1;
            if (c_cfg < 0 || c_kl < 0) {
                fprintf(stderr, PROG ": %s: the first line is not an `eval --csv` header (config, mean_kl)\n", path);
                ok = 0;
            }
            continue;
        }
        if (line[0] == '\n' || line[0] == '\r') continue;
        char cfg[160];
        if (s->n == STUDY_MAX_ROWS || !field(line, c_cfg, cfg, sizeof cfg) ||
            !field(line, c_kl, s->kl[s->n], sizeof s->kl[s->n])) {
            fprintf(stderr, PROG ": %s: a row without config and mean_kl (or more than %d rows)\n", path,
                    STUDY_MAX_ROWS);
            ok = 0;
            break;
        }
        canonical(cfg, s->cfg[s->n], sizeof s->cfg[s->n]);
        s->n++;
    }
    fclose(f);
    if (ok && !have_hdr) {
        fprintf(stderr, PROG ": %s: empty\n", path);
        ok = 0;
    }
    return ok;
}

static const char k_header[] =
    "# quality-floor.csv — measured mean KL (nats, vs the f16 reference) per model and cache\n"
    "# configuration: the quality floor of `--kv auto` (docs/PLAN.md, \"Quality floor\").\n"
    "#\n"
    "# GENERATED from the committed study CSVs: do not edit; change a study CSV (or rerun the\n"
    "# study, scripts/kl-study) and regenerate with\n"
    "#   %s\n"
    "#\n"
    "# Columns: model,context,config,mean_kl,source (version 2; version 1 had no context)\n"
    "#   model    the name `sjkvarn run -m` takes (gemma3-270m, smollm2-135m), a GGUF file's\n"
    "#            base name without .gguf, or * for any model\n"
    "#   context  the context (tokens) the study measured at, or * for none stated; a plan\n"
    "#            uses each rung's rows of the measured context nearest to its own\n"
    "#   config   a KV configuration string (compared in canonical form: q8_0 == q8_0/q8_0)\n"
    "#   mean_kl  the mean KL of `sjkvarn eval` for that configuration, or \"unmeasured\"\n"
    "#   source   the study CSV and its provenance lines (the commands, trees and dates), or\n"
    "#            for an unmeasured row the command that would measure it (the rest of the\n"
    "#            line; commas allowed)\n"
    "#\n"
    "# A rung may have several rows at one context, one per study that measured it: the\n"
    "# first is its number; the walk compares two rungs only within a study that measured\n"
    "# both. A ladder rung without a measured row is NOT allowed under the floor (only f16,\n"
    "# the reference, always is).\n"
    "model,context,config,mean_kl,source\n";

#define FLOOR_MAX_STUDIES 8 /* per model */
#define FLOOR_MAX_RUNGS 32  /* ladder rungs (sjkh_plan_ladder) */

/* The index of the study's first row of configuration kv (compared canonically), or -1. */
static int study_row(const study *st, const char *kv)
{
    char want[160];
    canonical(kv, want, sizeof want);
    for (size_t k = 0; k < st->n; k++)
        if (!strcmp(st->cfg[k], want)) return (int)k;
    return -1;
}

/* Whether a study's provenance names context ctx (`--ctx CTX`, or "context CTX" in the
 * transcribed studies) and no other. */
static int names_context(const study *st, unsigned long ctx)
{
    int named = 0;
    static const char *const keys[] = {"--ctx ", "context "};
    for (size_t k = 0; k < 2; k++)
        for (const char *p = strstr(st->prov, keys[k]); p; p = strstr(p + 1, keys[k])) {
            const char *q = p + strlen(keys[k]);
            if (*q < '0' || *q > '9') continue;
            if (strtoul(q, NULL, 10) != ctx) return 0;
            named = 1;
        }
    return named;
}

/* One MODEL[@CTX]=A.csv[,B.csv...] argument: the model's name in *ml chars, the context
 * (0 without @CTX) and the studies, read into s[]; 0 on any error. */
static int read_studies(const char *arg, int *ml, unsigned long *ctx, study *s, size_t *n)
{
    const char *eq = strchr(arg, '=');
    *n = 0;
    *ctx = 0;
    if (!eq || eq == arg || !eq[1]) {
        fprintf(stderr, PROG ": '%s' is not MODEL[@CTX]=STUDY.csv[,STUDY.csv...]\n", arg);
        return 0;
    }
    const char *at = memchr(arg, '@', (size_t)(eq - arg));
    *ml = (int)((at ? at : eq) - arg);
    if (at) {
        char *end;
        errno = 0;
        *ctx = strtoul(at + 1, &end, 10);
        if (*ml == 0 || end != eq || at[1] < '1' || at[1] > '9' || errno || *ctx > 0xffffffffUL) {
            fprintf(stderr, PROG ": '%s': MODEL@CTX needs a model name and a context > 0 (tokens)\n", arg);
            return 0;
        }
    }
    for (const char *p = eq + 1; *p;) {
        size_t k = strcspn(p, ",");
        char path[1024];
        if (!k || k >= sizeof path || *n == FLOOR_MAX_STUDIES) {
            fprintf(stderr, PROG ": '%s': an empty or too long path, or more than %d studies\n", arg,
                    FLOOR_MAX_STUDIES);
            return 0;
        }
        memcpy(path, p, k);
        path[k] = 0;
        if (!read_study(path, &s[*n])) return 0;
        snprintf(s[*n].path, sizeof s[*n].path, "%s", path);
        if (*ctx && !names_context(&s[*n], *ctx)) {
            fprintf(stderr, PROG ": %s: its provenance lines do not name context %lu (--ctx %lu), or name "
                    "another\n", path, *ctx, *ctx);
            return 0;
        }
        (*n)++;
        p += k + (p[k] == ',');
    }
    return 1;
}

int sjk_plan_make_quality_floor(int argc, char **argv)
{
    if (argc < 1) {
        fprintf(stderr, "usage: " PROG " MODEL@CTX=STUDY.csv[,STUDY.csv...] [MODEL@CTX=...] > "
                        "docs/quality-floor.csv\n"
                        "  (a row for each study that measured a rung; the first is the rung's number at CTX)\n");
        return 2;
    }
    char cmd[4096];
    size_t nc = (size_t)snprintf(cmd, sizeof cmd, "sjkvarn plan --make-quality-floor");
    for (int i = 0; i < argc && nc < sizeof cmd; i++)
        nc += (size_t)snprintf(cmd + nc, sizeof cmd - nc, " %s", argv[i]);
    if (nc >= sizeof cmd) {
        fprintf(stderr, PROG ": arguments too long\n");
        return 2;
    }
    study *s = malloc(FLOOR_MAX_STUDIES * sizeof *s);
    if (!s) return 1;
    size_t n_ladder, n;
    const char *const *ladder = sjkh_plan_ladder(&n_ladder);
    if (n_ladder > FLOOR_MAX_RUNGS) { /* every rung gets a row: never a silent cut */
        fprintf(stderr, "plan --make-quality-floor: the ladder has %zu rungs, this generator holds %d\n", n_ladder,
                FLOOR_MAX_RUNGS);
        free(s);
        return 1;
    }
    /* everything is read and checked before anything is printed */
    int ml;
    unsigned long ctx;
    for (int i = 0; i < argc; i++)
        if (!read_studies(argv[i], &ml, &ctx, s, &n)) {
            free(s);
            return strchr(argv[i], '=') ? 1 : 2;
        }
    printf(k_header, cmd);
    for (int i = 0; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        read_studies(argv[i], &ml, &ctx, s, &n);
        char cs[24] = "*"; /* the context column */
        if (ctx) snprintf(cs, sizeof cs, "%lu", ctx);
        char missing[4096] = "";
        size_t nm = 0;
        int measured[FLOOR_MAX_RUNGS] = {0}; /* by any of this argument's studies */
        for (size_t r = 1; r < n_ladder; r++) {
            for (size_t j = 0; j < n && !measured[r]; j++) measured[r] = study_row(&s[j], ladder[r]) >= 0;
            if (!measured[r] && nm < sizeof missing)
                nm += (size_t)snprintf(missing + nm, sizeof missing - nm, "%s%s", nm ? "," : "", ladder[r]);
        }
        for (size_t r = 1; r < n_ladder; r++) {
            for (size_t j = 0; j < n; j++) { /* a row for each study that measured it */
                const int k = study_row(&s[j], ladder[r]);
                if (k >= 0) printf("%.*s,%s,%s,%s,%s: %s\n", ml, argv[i], cs, ladder[r], s[j].kl[k], s[j].path, s[j].prov);
            }
            if (!measured[r])
                printf("%.*s,%s,%s,unmeasured,not in %s; measure with: sjkvarn eval -m %.*s --kv %s --docs all "
                       "--ctx %lu --csv floor-%.*s.csv\n",
                       ml, argv[i], cs, ladder[r], eq + 1, ml, argv[i], missing, ctx ? ctx : 4096UL, ml, argv[i]);
        }
    }
    free(s);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
