/* cmd_eval.c — `sjkvarn eval`: the KL study (docs/DESIGN.md §4). Parses the command line, loads the
 * documents, opens the backend (the host, or the synthetic stand-in), runs every document
 * through the lockstep driver and writes the table / JSON / CSV / SVG outputs. All the
 * measuring is in eval/src/eval_*.c; this file is plumbing and error messages. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "kv_auto.h"
#include "cli_files.h"
#include "cli_parse.h"
#include "eval_backends.h"
#include "sjkeval.h"
#include "sjkhost.h"

#define MAX_DOCS 256
#define MAX_CFGS 32
#define MAX_DOC_NBYTES (64u << 20)

static const char usage_text[] =
"usage: sjkvarn eval -m MODEL --kv CFG[,CFG...] [--docs SET] [--text FILE]... [options]\n"
"       sjkvarn eval --merge FILE.csv [FILE.csv...] [--json] [--csv FILE] [--svg DIR]\n"
"                    [--boot N] [--seed N] [--ref NAME]\n"
"\n"
"KL(p_f16 || q) in nats between a reference run with an fp16 cache and each candidate\n"
"cache, on the tokens the reference generates (greedy). Every candidate replays the same\n"
"token stream in lockstep; only generated positions are scored.\n"
"\n"
"  -m MODEL       a known model name (listed below) or a path to a GGUF file\n"
"  --kv LIST      candidate cache configurations, comma-separated, e.g.\n"
"                 q8_0/q8_0,sj:4/4,kvarn:4/4,kvarn:4/4:tail=1024,sj:3/3t (README: \"KV\n"
"                 configuration strings\"), or host-f16 (the host's own fp16 cache); the\n"
"                 reference is always \"f16\"\n"
"  --docs SET     corpus documents (scripts/fetch-corpus): all | agentic | retrieval |\n"
"                 code | KIND:N or all:N (the first N of each kind) | NAME[,NAME...] |\n"
"                 none. Default: all, or none when --text is given\n"
"  --text FILE    any text file as one more document (repeatable). A form feed splits a\n"
"                 document into a haystack, cut to fit, and a query that is always kept\n"
"  -n N           generated (scored) tokens per document (default 256)\n"
"  --ctx N        context of each run: the prompt is the first N - n tokens (default 4096,\n"
"                 at most the model's context)\n"
"  --needle       also run the needle study: 8 facts planted per document at look-back\n"
"                 distances up to the context, each asked for; answer-token KL per distance\n"
"  --json         print JSON on stdout instead of the table\n"
"  --csv FILE     write FILE (one row per configuration), BASE-pairs.csv and\n"
"                 BASE-positions.csv (BASE = FILE without .csv)\n"
"  --svg DIR      write DIR/frontier.svg (mean KL vs bits per value), DIR/frontier-allocated.svg\n"
"                 (the same against allocated bits per value) and DIR/positions.svg\n"
"  --ref CFG      the reference's cache configuration (default f16)\n"
"  --prefill-chunk N  prompt tokens per forward pass (default 512; 1 = token by token)\n"
"  --act-quant 0|1  0 (default): exact f32 activations, logits continuous in K/V, so\n"
"                 cache differences are not buried under activation-rounding noise;\n"
"                 1: 8-bit activations as llama.cpp (faster; docs/EVAL.md)\n"
"  --window T     storage of the sliding-window layers (gemma3) of every session, the\n"
"                 reference's included: f16 (default) | q8_0\n"
"  --threads N    threads per forward pass (default: online CPUs)\n"
"  --boot N       bootstrap resamples (default 2000); --seed N: their seed (default 1)\n"
"  --corpus DIR   corpus directory (default ${SJK_CORPUS_DIR:-~/.cache/sjkvarn/corpus})\n"
"  --synthetic    no model: a synthetic stand-in that checks the pipeline end to end\n"
"                 (its numbers measure nothing)\n"
"  --progress, --no-progress   force the progress bar on stderr on or off (default: on\n"
"                 when stderr is a terminal)\n"
"  --merge FILE.csv...  no run: load runs written by --csv (each FILE.csv and its\n"
"                 BASE-positions.csv), e.g. one per document or per batch of\n"
"                 configurations, and report them as one study: every output, pairs\n"
"                 over the positions both configurations have, intervals over all\n"
"                 documents. A (config, document) in two files must be identical. Needle\n"
"                 results are not in the CSVs and are left out; --ref only names the\n"
"                 reference (docs/EVAL.md \"Running a study in pieces\")\n"
"\n"
"Exit status: 0 done, 1 a run failed, 2 bad arguments or missing inputs, 3 the host cannot\n"
"run this model (unsupported architecture or tensor type).\n";

typedef struct doc {
    char name[128];
    char *text;
    size_t n;
    int32_t *prompt;
    size_t n_prompt;
} doc;

typedef struct eval_args {
    const char *model, *docs, *csv, *svg, *corpus, *ref;
    const char *kv[MAX_CFGS];
    size_t n_kv;
    char kv_buf[4096];
    const char *texts[MAX_DOCS];
    size_t n_texts;
    uint32_t n_gen, n_ctx, threads, boot, seed, chunk, act_quant;
    uint32_t window_type;
    int json, needle, synthetic, progress; /* progress: -1 auto, 0 off, 1 on */
    const char *merge[MAX_DOCS];           /* --merge FILE.csv...: the runs to merge */
    size_t n_merge;
    int merging;
    const char *run_opt;                   /* the last option that only a run takes */
    sjk_kv_auto_opts ka;                   /* --kv auto: --mem-budget, --kl-floor, ... */
} eval_args;

/* FILE.csv's family: FILE.csv itself, BASE-pairs.csv and BASE-positions.csv (BASE = FILE
 * without .csv), as `--csv` writes them. 0 if a path does not fit. */
static int csv_family(const char *file, char main_path[4096], char pairs[4096], char positions[4096])
{
    size_t n = strlen(file), b = n > 4 && !strcmp(file + n - 4, ".csv") ? n - 4 : n;
    if (n >= 4096 || b + 16 >= 4096) return 0;
    memcpy(main_path, file, n + 1);
    snprintf(pairs, 4096, "%.*s-pairs.csv", (int)b, file);
    snprintf(positions, 4096, "%.*s-positions.csv", (int)b, file);
    return 1;
}

/* 1 if both paths name the same existing file (device and inode: ./x and x, links). */
static int same_file(const char *p, const char *q)
{
    struct stat a, b;
    return stat(p, &a) == 0 && stat(q, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

#define P "sjkvarn eval"
static int parse_args(int argc, char **argv, eval_args *a)
{
    memset(a, 0, sizeof *a);
    a->n_gen = 256;
    a->n_ctx = 4096;
    a->boot = 2000;
    a->seed = 1;
    a->chunk = 512;
    a->progress = -1;
    a->threads = sjk_cli_threads_default();
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int has = i + 1 < argc;
        const char *v = has ? argv[i + 1] : NULL;
#define NEED()                                                                      \
    do {                                                                            \
        if (!has) { fprintf(stderr, "sjkvarn eval: %s needs a value\n", o); return 0; } \
        i++;                                                                        \
    } while (0)
        if (!strcmp(o, "--merge")) { a->merging = 1; continue; }
        if (a->merging && o[0] != '-') { /* --merge's files: every argument that is no option */
            if (a->n_merge == MAX_DOCS) { fprintf(stderr, "sjkvarn eval: --merge: more than %d files\n", MAX_DOCS); return 0; }
            a->merge[a->n_merge++] = o;
            continue;
        }
        if (strcmp(o, "--json") && strcmp(o, "--csv") && strcmp(o, "--svg") && strcmp(o, "--boot") &&
            strcmp(o, "--seed") && strcmp(o, "--ref") && strcmp(o, "--progress") &&
            strcmp(o, "--no-progress"))
            a->run_opt = o;
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) { NEED(); a->model = v; }
        else if (!strcmp(o, "--kv")) {
            NEED();
            if (strlen(v) >= sizeof a->kv_buf) { fprintf(stderr, "sjkvarn eval: --kv too long\n"); return 0; }
            memcpy(a->kv_buf, v, strlen(v) + 1);
            a->n_kv = 0;
            char *save = NULL;
            for (char *t = strtok_r(a->kv_buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (a->n_kv == MAX_CFGS) { fprintf(stderr, "sjkvarn eval: at most %d configurations\n", MAX_CFGS); return 0; }
                a->kv[a->n_kv++] = t;
            }
        }
        else if (!strcmp(o, "--docs")) { NEED(); a->docs = v; }
        else if (!strcmp(o, "--text")) {
            NEED();
            if (a->n_texts == MAX_DOCS) { fprintf(stderr, "sjkvarn eval: too many --text\n"); return 0; }
            a->texts[a->n_texts++] = v;
        }
        else if (!strcmp(o, "-n")) { NEED(); if (!sjk_cli_flag_u32(P, o, v, 1, 1 << 20, &a->n_gen)) return 0; }
        else if (!strcmp(o, "--ctx")) { NEED(); if (!sjk_cli_flag_u32(P, o, v, 16, 1 << 22, &a->n_ctx)) return 0; }
        else if (!strcmp(o, "--threads") || !strcmp(o, "-t")) { NEED(); if (!sjk_cli_flag_threads(P, o, v, &a->threads)) return 0; }
        else if (!strcmp(o, "--boot")) { NEED(); if (!sjk_cli_flag_u32(P, o, v, 0, 1000000, &a->boot)) return 0; }
        else if (!strcmp(o, "--seed")) { NEED(); if (!sjk_cli_flag_u32(P, o, v, 0, 0x7fffffffu, &a->seed)) return 0; }
        else if (!strcmp(o, "--csv")) { NEED(); a->csv = v; }
        else if (!strcmp(o, "--svg")) { NEED(); a->svg = v; }
        else if (!strcmp(o, "--corpus")) { NEED(); a->corpus = v; }
        else if (!strcmp(o, "--ref")) { NEED(); a->ref = v; }
        else if (!strcmp(o, "--act-quant")) { NEED(); if (!sjk_cli_flag_u32(P, o, v, 0, 1, &a->act_quant)) return 0; }
        else if (!strcmp(o, "--window")) { NEED(); if (!sjk_cli_flag_window(P, o, v, &a->window_type)) return 0; }
        else if (!strcmp(o, "--prefill-chunk")) { NEED(); if (!sjk_cli_flag_u32(P, o, v, 1, 65536, &a->chunk)) return 0; }
        else if (!strcmp(o, "--json")) a->json = 1;
        else if (!strcmp(o, "--needle")) a->needle = 1;
        else if (!strcmp(o, "--synthetic")) a->synthetic = 1;
        else if (!strcmp(o, "--progress")) a->progress = 1;
        else if (!strcmp(o, "--no-progress")) a->progress = 0;
        else if (!strcmp(o, "--mem-budget") || !strcmp(o, "--kl-floor") || !strcmp(o, "--quality-floor")) {
            NEED();
            if (sjk_kv_auto_flag(&a->ka, "sjkvarn eval", o, v) < 0) return 0;
        }
        else { fprintf(stderr, "sjkvarn eval: unknown option '%s' (see --help)\n", o); return 0; }
#undef NEED
    }
    if (a->merging) {
        if (!a->n_merge) {
            fprintf(stderr, "sjkvarn eval: --merge needs at least one FILE.csv\n");
            return 0;
        }
        if (a->run_opt) {
            fprintf(stderr, "sjkvarn eval: --merge reports finished runs; %s does not apply\n",
                    a->run_opt);
            return 0;
        }
        /* --csv OUT writes OUT and BASE-{pairs,positions}.csv: refuse if any of them is an
         * input (FILE.csv or its BASE-positions.csv), by identity, not by spelling */
        if (a->csv) {
            char out[3][4096], in[2][4096];
            if (!csv_family(a->csv, out[0], out[1], out[2])) {
                fprintf(stderr, "sjkvarn eval: --csv %s: path too long\n", a->csv);
                return 0;
            }
            for (size_t i = 0; i < a->n_merge; i++) {
                char pairs[4096];
                if (!csv_family(a->merge[i], in[0], pairs, in[1])) {
                    fprintf(stderr, "sjkvarn eval: --merge %s: path too long\n", a->merge[i]);
                    return 0;
                }
                for (int o = 0; o < 3; o++)
                    for (int k = 0; k < 2; k++)
                        if (same_file(out[o], in[k])) {
                            fprintf(stderr, "sjkvarn eval: --csv %s would overwrite %s, an input of --merge\n",
                                    a->csv, in[k]);
                            return 0;
                        }
            }
        }
        return 1;
    }
    if (!a->model && !a->synthetic) {
        fprintf(stderr, "sjkvarn eval: -m MODEL is required (or --synthetic)\n");
        return 0;
    }
    if (a->ref && !sjk_cli_check_kv(P, "--ref", a->ref, 0)) return 0;
    if (!a->n_kv) {
        fprintf(stderr, "sjkvarn eval: --kv is required, e.g. --kv q8_0/q8_0,sj:4/4\n");
        return 0;
    }
    if (a->n_gen >= a->n_ctx) {
        fprintf(stderr, "sjkvarn eval: -n %u leaves no prompt in --ctx %u\n", a->n_gen, a->n_ctx);
        return 0;
    }
    /* Each configuration must parse, and names must be distinct (pairs are by name). */
    for (size_t i = 0; i < a->n_kv; i++) {
        /* "auto" is resolved after the model is known; "host-f16" is the host's own fp16
         * cache, not a libsjkvarn configuration */
        if (!sjk_cli_check_kv(P, "--kv", a->kv[i], 1)) return 0;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(a->kv[i], a->kv[j])) {
                fprintf(stderr, "sjkvarn eval: --kv: '%s' given twice\n", a->kv[i]);
                return 0;
            }
    }
    return 1;
}

/* ---- documents ----------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *n, char *err, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, cap, "%s: %s", path, strerror(errno)); return NULL; }
    size_t len = 0, alloc = 1 << 16;
    char *buf = malloc(alloc + 1);
    while (buf) {
        size_t r = fread(buf + len, 1, alloc - len, f);
        len += r;
        if (len < alloc) break;
        if (alloc >= MAX_DOC_NBYTES) { free(buf); buf = NULL; snprintf(err, cap, "%s: larger than %u bytes", path, MAX_DOC_NBYTES); fclose(f); return NULL; }
        alloc *= 2;
        char *nb = realloc(buf, alloc + 1);
        if (!nb) { free(buf); buf = NULL; }
        else buf = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) { snprintf(err, cap, "%s: out of memory", path); return NULL; }
    if (bad) { free(buf); snprintf(err, cap, "%s: read error", path); return NULL; }
    if (len == 0) { free(buf); snprintf(err, cap, "%s: empty file", path); return NULL; }
    buf[len] = 0;
    *n = len;
    return buf;
}

static const char *const kinds[] = {"agentic", "retrieval", "code"};

static int add_doc(doc *docs, size_t *nd, const char *name, const char *path)
{
    if (*nd == MAX_DOCS) { fprintf(stderr, "sjkvarn eval: more than %d documents\n", MAX_DOCS); return 0; }
    doc *d = &docs[*nd];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    char err[512];
    d->text = read_file(path, &d->n, err, sizeof err);
    if (!d->text) { fprintf(stderr, "sjkvarn eval: %s\n", err); return 0; }
    (*nd)++;
    return 1;
}

static int corpus_doc(doc *docs, size_t *nd, const char *dir, const char *name, int quiet_missing)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/docs/%s.txt", dir, name) >= (int)sizeof path) {
        fprintf(stderr, "sjkvarn eval: corpus path too long\n");
        return 0;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (quiet_missing) return -1;
        fprintf(stderr, "sjkvarn eval: document '%s' not found at %s (run scripts/fetch-corpus, "
                "or pass --corpus DIR)\n", name, path);
        return 0;
    }
    return add_doc(docs, nd, name, path);
}

/* Resolves --docs SET into documents. */
static int load_docs(const eval_args *a, doc *docs, size_t *nd)
{
    char dir[4096];
    const char *env = getenv("SJK_CORPUS_DIR"), *home = getenv("HOME");
    if (a->corpus) snprintf(dir, sizeof dir, "%s", a->corpus);
    else if (env && *env) snprintf(dir, sizeof dir, "%s", env);
    else snprintf(dir, sizeof dir, "%s/.cache/sjkvarn/corpus", home ? home : ".");
    const char *set = a->docs ? a->docs : (a->n_texts ? "none" : "all");
    if (strcmp(set, "none") != 0) {
        char kind[32] = "";
        uint32_t per32 = 0;
        long per = -1;
        const char *colon = strchr(set, ':');
        if (colon && (size_t)(colon - set) < sizeof kind) {
            memcpy(kind, set, (size_t)(colon - set));
            kind[colon - set] = 0;
            if (!sjk_cli_flag_u32("sjkvarn eval", "--docs KIND:N", colon + 1, 1, 1000, &per32)) return 0;
            per = per32;
        } else if (strlen(set) < sizeof kind) {
            snprintf(kind, sizeof kind, "%s", set);
        }
        int is_kind = !strcmp(kind, "all");
        for (size_t k = 0; k < 3; k++) is_kind |= !strcmp(kind, kinds[k]);
        if (is_kind) {
            for (size_t k = 0; k < 3; k++) {
                if (strcmp(kind, "all") && strcmp(kind, kinds[k])) continue;
                for (long i = 0; per < 0 || i < per; i++) {
                    char name[64];
                    snprintf(name, sizeof name, "%s-%ld", kinds[k], i);
                    int r = corpus_doc(docs, nd, dir, name, i > 0 || per < 0);
                    if (r == 0) return 0;
                    if (r < 0) {
                        if (i == 0) {
                            fprintf(stderr, "sjkvarn eval: no %s documents in %s/docs (run "
                                    "scripts/fetch-corpus, or pass --corpus DIR)\n", kinds[k], dir);
                            return 0;
                        }
                        if (per > 0)
                            fprintf(stderr, "sjkvarn eval: note: only %ld %s document(s)\n", i, kinds[k]);
                        break;
                    }
                }
            }
        } else if (colon) {
            fprintf(stderr, "sjkvarn eval: --docs '%s': KIND:N needs KIND = all, agentic, "
                    "retrieval or code\n", set);
            return 0;
        } else {
            char buf[4096];
            snprintf(buf, sizeof buf, "%s", set);
            char *save = NULL;
            for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (!corpus_doc(docs, nd, dir, t, 0)) return 0;
        }
    }
    for (size_t i = 0; i < a->n_texts; i++) {
        const char *b = strrchr(a->texts[i], '/');
        if (!add_doc(docs, nd, b ? b + 1 : a->texts[i], a->texts[i])) return 0;
    }
    if (*nd == 0) {
        fprintf(stderr, "sjkvarn eval: no documents (use --docs or --text)\n");
        return 0;
    }
    return 1;
}

/* ---- outputs ------------------------------------------------------------------------- */

/* One output file: a study writer bound to the study (sjk_cli_out's callback). */
typedef struct study_out {
    sjk_status (*fn)(const sjk_eval_study *, FILE *);
    const sjk_eval_study *st;
} study_out;

static int write_study(void *ctx, FILE *f)
{
    const study_out *o = ctx;
    return o->fn(o->st, f) == SJK_OK ? 0 : -1;
}

/* The paths --csv and --svg write (CSV family, then the two plots). */
typedef struct out_paths {
    char p[6][4096];
    sjk_status (*fn[6])(const sjk_eval_study *, FILE *);
    size_t n;
} out_paths;

static int output_paths(const eval_args *a, out_paths *o)
{
    o->n = 0;
    if (a->csv) {
        if (!csv_family(a->csv, o->p[0], o->p[1], o->p[2])) {
            fprintf(stderr, "sjkvarn eval: --csv %s: path too long\n", a->csv);
            return 0;
        }
        o->fn[0] = sjk_eval_write_csv_configs;
        o->fn[1] = sjk_eval_write_csv_pairs;
        o->fn[2] = sjk_eval_write_csv_positions;
        o->n = 3;
    }
    if (a->svg) {
        if (snprintf(o->p[o->n], 4096, "%s/frontier.svg", a->svg) >= 4096 ||
            snprintf(o->p[o->n + 1], 4096, "%s/positions.svg", a->svg) >= 4096 ||
            snprintf(o->p[o->n + 2], 4096, "%s/frontier-allocated.svg", a->svg) >= 4096) {
            fprintf(stderr, "sjkvarn eval: --svg %s: path too long\n", a->svg);
            return 0;
        }
        o->fn[o->n] = sjk_eval_write_svg_frontier;
        o->fn[o->n + 1] = sjk_eval_write_svg_positions;
        o->fn[o->n + 2] = sjk_eval_write_svg_frontier_allocated;
        o->n += 3;
    }
    return 1;
}

/* Before the run: every output can be written (a failure after an hour of study would
 * lose it). --svg's directory is created here. */
static int check_outputs(const eval_args *a)
{
    out_paths o;
    if (!output_paths(a, &o)) return 0;
    if (a->svg && mkdir(a->svg, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "sjkvarn eval: --svg %s: %s\n", a->svg, strerror(errno));
        return 0;
    }
    for (size_t i = 0; i < o.n; i++)
        if (!sjk_cli_check_target("sjkvarn eval", i < 3 && a->csv ? "--csv" : "--svg", o.p[i])) return 0;
    return 1;
}

/* The files, all or none (tools/cli_files.h): the CSV family and the plots are replaced
 * together only once every one of them is written in full. */
static int write_outputs(const eval_args *a, const sjk_eval_study *st)
{
    int ok = 1;
    out_paths o;
    if (!check_outputs(a) || !output_paths(a, &o)) return 0;
    study_out so[6];
    sjk_cli_out outs[6];
    for (size_t i = 0; i < o.n; i++) {
        so[i].fn = o.fn[i];
        so[i].st = st;
        outs[i].path = o.p[i];
        outs[i].write = write_study;
        outs[i].ctx = &so[i];
    }
    if (o.n && !sjk_cli_write_set("sjkvarn eval", outs, o.n)) ok = 0;
    for (size_t i = 0; ok && i < o.n; i++) fprintf(stderr, "sjkvarn eval: wrote %s\n", o.p[i]);
    sjk_status s = a->json ? sjk_eval_write_json(st, stdout) : sjk_eval_write_table(st, stdout);
    if (s != SJK_OK) { fprintf(stderr, "sjkvarn eval: writing results: %s\n", sjk_status_str(s)); ok = 0; }
    return ok;
}

/* ---- the command --------------------------------------------------------------------- */

static void free_docs(doc *docs, size_t nd)
{
    for (size_t i = 0; i < nd; i++) { free(docs[i].text); free(docs[i].prompt); }
    free(docs);
}

/* --merge: one study from the CSV outputs of several runs (eval/src/eval_merge.c). Every
 * input is read and checked before anything is written. */
static int run_merge(const eval_args *a)
{
    sjk_eval_study *st = NULL;
    sjk_eval_merge_info info;
    char err[1024];
    sjk_status s = sjk_eval_study_merge_csv(a->merge, a->n_merge, &st, &info, err, sizeof err);
    if (s != SJK_OK) {
        fprintf(stderr, "sjkvarn eval: --merge: %s\n", err);
        return s == SJK_ERR_NOMEM ? 1 : 2;
    }
    if (a->ref && sjk_eval_study_set_reference(st, a->ref) != SJK_OK) {
        fprintf(stderr, "sjkvarn eval: --ref '%s' is longer than 63 characters\n", a->ref);
        sjk_eval_study_free(st);
        return 2;
    }
    fprintf(stderr, "sjkvarn eval: merged %zu run(s): %zu configuration(s), %zu document(s), "
            "%zu position rows", info.n_files, sjk_eval_study_n_configs(st),
            sjk_eval_study_n_docs(st), info.n_rows);
    if (info.n_rows_repeated)
        fprintf(stderr, " (%zu identical repeats counted once)", info.n_rows_repeated);
    fputc('\n', stderr);
    if (info.n_needle_dropped)
        fprintf(stderr, "sjkvarn eval: note: needle results (in %zu configuration row(s) of "
                "the inputs) are not kept in the CSVs; the merged report has none\n",
                info.n_needle_dropped);
    int rc = 0;
    s = sjk_eval_study_finish(st, (uint32_t)a->boot, (uint64_t)a->seed);
    if (s != SJK_OK) { fprintf(stderr, "sjkvarn eval: statistics: %s\n", sjk_status_str(s)); rc = 1; }
    else if (!write_outputs(a, st)) rc = 1;
    sjk_eval_study_free(st);
    return rc;
}

static const char *be_error(const sjk_eval_backend *be)
{
    const char *e = be->last_error ? be->last_error(be->user) : NULL;
    return e && *e ? e : "";
}

int sjk_cmd_eval(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage_text, stdout);
        fputs(sjk_kv_auto_usage, stdout);
        sjk_model_usage(stdout);
        return 0;
    }
    eval_args a;
    if (!parse_args(argc, argv, &a)) {
        fprintf(stderr, "(sjkvarn eval --help for usage)\n");
        return 2;
    }
    if (!check_outputs(&a)) return 2; /* before any work */
    if (a.merging) return run_merge(&a);
    char model_path[4096] = "";
    if (!a.synthetic && !sjk_cli_resolve_model("sjkvarn eval", a.model, model_path, sizeof model_path)) return 2;
    static char kv_auto[SJKH_KV_STR_MAX + 1]; /* --kv auto: the tier chosen for --ctx under --mem-budget */
    for (size_t i = 0; i < a.n_kv; i++) {
        if (strcmp(a.kv[i], "auto")) continue;
        if (a.synthetic) { fprintf(stderr, "sjkvarn eval: --kv auto needs a model\n"); return 2; }
        if (!sjk_kv_auto_resolve(&a.ka, "sjkvarn eval", model_path, a.model, a.n_ctx, a.chunk,
                                 a.threads, "auto", kv_auto, sizeof kv_auto))
            return 2;
        a.kv[i] = kv_auto;
        for (size_t j = 0; j < a.n_kv; j++)
            if (j != i && !strcmp(a.kv[j], kv_auto)) {
                fprintf(stderr, "sjkvarn eval: --kv auto chose %s, which is already a candidate\n", kv_auto);
                return 2;
            }
    }
    doc *docs = calloc(MAX_DOCS, sizeof *docs);
    size_t nd = 0;
    if (!docs) { fprintf(stderr, "sjkvarn eval: out of memory\n"); return 1; }
    if (!load_docs(&a, docs, &nd)) { free_docs(docs, nd); return 2; }

    sjk_eval_backend be;
    void *hstate = NULL;
    if (a.synthetic) {
        sjk_eval_synthetic_open(&be);
        fprintf(stderr, "sjkvarn eval: SYNTHETIC backend (no model; a pipeline check whose "
                "numbers measure nothing)\n");
    } else {
        char err[1024];
        sjk_status s = sjk_eval_host_open(model_path, (unsigned)a.threads, &be, &hstate, err, sizeof err);
        if (s != SJK_OK) {
            fprintf(stderr, "sjkvarn eval: %s\n", err);
            free_docs(docs, nd);
            return s == SJK_ERR_UNSUPPORTED ? 3 : 1;
        }
        sjk_eval_host_set_act_quant(hstate, (unsigned)a.act_quant);
        sjk_eval_host_set_window(hstate, a.window_type);
        fprintf(stderr, "sjkvarn eval: %s: %s\n", model_path, sjk_eval_host_describe(hstate));
    }
    int rc = 0;
    sjk_eval_study *st = NULL;
    if (be.n_ctx_max && (size_t)a.n_ctx > be.n_ctx_max) {
        fprintf(stderr, "sjkvarn eval: --ctx %u exceeds the model's context %zu\n", a.n_ctx, be.n_ctx_max);
        rc = 2;
        goto out;
    }

    /* Prompts first (cheap), so the progress bar knows the total. */
    size_t n_prompt = (size_t)(a.n_ctx - a.n_gen);
    uint64_t total = 0;
    for (size_t i = 0; i < nd; i++) {
        sjk_status s = sjk_eval_prompt_tokens(&be, docs[i].text, docs[i].n, n_prompt,
                                              &docs[i].prompt, &docs[i].n_prompt);
        if (s != SJK_OK) {
            fprintf(stderr, "sjkvarn eval: %s: tokenizing: %s%s%s\n", docs[i].name,
                    s == SJK_ERR_RANGE ? "its query (after the form feed) does not fit the prompt"
                                       : sjk_status_str(s),
                    *be_error(&be) ? ": " : "", be_error(&be));
            rc = 1;
            goto out;
        }
        if (docs[i].n_prompt < n_prompt)
            fprintf(stderr, "sjkvarn eval: note: %s has only %zu tokens (prompt %zu)\n",
                    docs[i].name, docs[i].n_prompt, n_prompt);
        total += (uint64_t)(docs[i].n_prompt + (size_t)a.n_gen - 1) * (a.n_kv + 1);
        if (a.needle) total += (uint64_t)a.n_ctx * (a.n_kv + 1);
    }
    const char *doc_names[MAX_DOCS];
    for (size_t i = 0; i < nd; i++) doc_names[i] = docs[i].name;
    st = sjk_eval_study_create(a.n_kv, a.kv, nd, doc_names);
    if (!st) { fprintf(stderr, "sjkvarn eval: out of memory\n"); rc = 1; goto out; }
    fprintf(stderr, "sjkvarn eval: %zu document(s), context %u (prompt <= %zu, %u generated), "
            "reference %s, %zu candidate(s)\n", nd, a.n_ctx, n_prompt, a.n_gen, a.ref ? a.ref : "f16", a.n_kv);

    sjk_eval_progress prog;
    sjk_eval_progress_start(&prog, a.progress == 0 ? NULL : stderr, a.progress == 1, total, "eval");
    sjk_eval_opts opts = {(size_t)a.n_ctx, (size_t)a.n_gen, (size_t)a.chunk, &prog, a.ref};
    if (a.ref) sjk_eval_study_set_reference(st, a.ref);
    for (size_t i = 0; i < nd && rc == 0; i++) {
        const char *what = "";
        sjk_status s = sjk_eval_run_doc(&be, st, i, docs[i].prompt, docs[i].n_prompt, &opts, NULL);
        if (s == SJK_OK && a.needle) {
            what = "needle study: ";
            s = sjk_eval_run_needles(&be, st, i, docs[i].text, docs[i].n, &opts, (uint64_t)a.seed);
        }
        if (s != SJK_OK) {
            sjk_eval_progress_end(&prog);
            if (*what && s == SJK_ERR_RANGE)
                fprintf(stderr, "sjkvarn eval: %s: needle study: the haystack, 8 facts and 8 "
                        "questions do not fit --ctx %u (at least 512; try 2048 or more)\n",
                        docs[i].name, a.n_ctx);
            else
                fprintf(stderr, "sjkvarn eval: %s: %s%s%s%s\n", docs[i].name, what,
                        sjk_status_str(s), *be_error(&be) ? ": " : "", be_error(&be));
            rc = 1;
        }
    }
    sjk_eval_progress_end(&prog);
    if (rc) goto out;
    sjk_status s = sjk_eval_study_finish(st, (uint32_t)a.boot, (uint64_t)a.seed);
    if (s != SJK_OK) { fprintf(stderr, "sjkvarn eval: statistics: %s\n", sjk_status_str(s)); rc = 1; goto out; }
    if (!write_outputs(&a, st)) rc = 1;
out:
    sjk_eval_study_free(st);
    if (a.synthetic) { /* nothing to close */ }
    else sjk_eval_host_close(hstate);
    free_docs(docs, nd);
    return rc;
}
