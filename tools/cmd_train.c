/* cmd_train.c — `sjkvarn train-codebook`: trains the trellis codebooks and writes them as
 * a C file (src/codec/trellis_codebooks.c is its output, headed by the command line).
 *
 *   sjkvarn train-codebook --bits 2,3,4 --seed 1 --iters 40 --samples 1048576 \
 *       [--data gaussian] [--T 128] --out src/codec/trellis_codebooks.c
 *
 * --bits takes one K or a comma list; every table gets the same seed, iterations and
 * samples. MSE per iteration goes to stderr.
 *
 * On real data: `--data tiles:FILE[,FILE...] --tensor k|v|kv` trains on the K or V tiles (or both) of
 * tile capture files (`sjkvarn capture-tiles`, tools/tile_file.h), normalised as the tile
 * layer normalises them (--samples values, whole tiles taken evenly through the files);
 * `--init committed` starts from the committed table instead of shuffled quantiles; and
 * `--eval FILE[,FILE...] --tensor k|v` (with either data) codes that tensor's tiles of
 * capture files (or --eval-tensor's) with the committed
 * and the trained table through the whole tile layer (normalise, search, least-squares
 * refit) and prints each one's SNR on those tiles and the gain in dB. --out is then
 * optional (a trained-on-tiles table is a measurement, not the format's table).
 * `--table real --tensor k|v|k,v --eval FILE[,...]` trains nothing: it compares the
 * committed real-data tables (sjk_trellis_codebook_real, the `tr` body's) with the
 * committed Gaussian ones on the tiles; `--table grid` the committed Gaussian tables'
 * int8 grid (sjk_trellis_codebook_grid, record format 4's `t` body) with them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_files.h"
#include "cli_parse.h"
#include "codec/trellis.h"
#include "tile_file.h"

static void log_iter(void *ctx, unsigned iter, double mse)
{
    unsigned k = *(const unsigned *)ctx;
    fprintf(stderr, "k=%u iter %3u  mse %.6f  snr %.3f dB\n", k, iter, mse,
            -10.0 * log10(mse));
}

/* What the table writer needs (sjk_cli_out's callback). */
typedef struct train_job {
    int argc;
    char **argv;
    unsigned ks[3];
    int nk;
    int n_tensors;   /* 1, or 2 for --tensor k,v */
    int tie;         /* --tie s128: the 128-entry tables (sjk_trellis_tie) */
    float *cb[2][3]; /* the trained tables [tensor][i], [64 << ks[i]] */
} train_job;

static int write_table(void *ctx, FILE *f);

static void usage(FILE *f)
{
    fprintf(f, "usage: sjkvarn train-codebook --bits K[,K...] --seed S --iters N --samples M\n"
               "                              [--data gaussian] [--T 128] --out FILE\n"
               "       sjkvarn train-codebook --bits K[,K...] --iters N --samples M\n"
               "                              --data tiles:FILE[,FILE...] --tensor k|v|kv|k,v [--init committed]\n"
               "                              [--eval FILE[,FILE...] [--eval-tensor k|v|kv]] [--out FILE]\n"
               "       sjkvarn train-codebook --bits K[,K...] --table real|grid --tensor k|v|k,v --eval FILE[,FILE...]\n"
               "       sjkvarn train-codebook --bits K[,K...] --tie s128 --seed S --iters N --samples M --out FILE\n");
}

/* How many whole tiles of s fit in max_values values (at least one, at most all). */
static size_t tiles_wanted(const sjk_tile_set *s, size_t max_values)
{
    size_t want = max_values / ((size_t)s->D * s->G);
    if (want == 0) want = 1;
    return want > s->n ? s->n : want;
}

/* `want` tiles of a set as training sequences, taken evenly through it and normalised by
 * the tile layer (token axis): written to columns col .. col + want*D of the step-major
 * u[G][n_seq]. 0 on allocation failure. */
static int tile_sequences(float *u, size_t n_seq, size_t col, const sjk_tile_set *s, size_t want)
{
    const size_t D = s->D, G = s->G, m = D * G, R = D > G ? D : G;
    float *tu = malloc(m * sizeof *tu), *mean = malloc(2 * R * sizeof *mean);
    if (!tu || !mean) {
        free(tu);
        free(mean);
        return 0;
    }
    sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, 4, 0, SJK_TRELLIS_AXIS_TOKEN, SJK_TRELLIS_REFIT_LSQ, 0};
    for (size_t j = 0; j < want; j++) {
        size_t i = j * s->n / want; /* evenly through the set, whole tiles */
        tt.rows = s->rows[i];
        sjk_trellis_input in = {s->y + i * m, D, 1, NULL, 0};
        sjk_trellis_tile_normalize(&tt, &in, tu, mean, mean + R);
        for (size_t t = 0; t < G; t++) memcpy(u + t * n_seq + col + j * D, tu + t * D, D * sizeof *u);
    }
    free(tu);
    free(mean);
    return 1;
}

/* Loads each file of a comma list into its own set (files may hold tiles of different
 * shapes: one model each). Returns the number of sets (at most cap), 0 on failure. */
static int load_sets(const char *P, const char *list, int rows, const char *tensor, sjk_tile_set *sets, int cap)
{
    char buf[4096];
    int n = 0;
    if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf) {
        fprintf(stderr, "%s: file list too long\n", P);
        return 0;
    }
    for (char *save = NULL, *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        if (n == cap) {
            fprintf(stderr, "%s: at most %d files\n", P, cap);
            return 0;
        }
        if (!sjk_tile_set_load(P, f, rows, SJK_TILE_BALANCED, &sets[n])) return 0;
        if (sets[n].n == 0 || sets[n].G != 128) {
            fprintf(stderr, "%s: %s holds no %s tiles of 128 tokens\n", P, f, tensor);
            return 0;
        }
        n++;
    }
    return n;
}

/* Codes every tile of s at k bits with cb through the whole tile layer; returns the SNR
 * in dB of the reconstruction against the tile, the signal being each row's deviation
 * from its mean (what the codebook has to code). -1 on failure. */
static double tile_snr(const sjk_tile_set *s, unsigned k, const float *cb)
{
    const size_t D = s->D, G = s->G, m = D * G, R = D > G ? D : G;
    sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)k, 0, SJK_TRELLIS_AXIS_TOKEN, SJK_TRELLIS_REFIT_LSQ, 0};
    size_t sn = sjk_trellis_tile_scratch_nbytes(&tt);
    void *scratch = aligned_alloc(64, (sn + 63) & ~(size_t)63);
    uint8_t *payload = malloc(sjk_trellis_tile_payload_nbytes(&tt));
    float *a = malloc(3 * R * sizeof *a), *out = malloc(m * sizeof *out), *mean = malloc(2 * R * sizeof *mean);
    float *u = malloc(m * sizeof *u);
    double sig = 0, err = 0;
    int ok = scratch && payload && a && out && mean && u;
    for (size_t i = 0; ok && i < s->n; i++) {
        const float *y = s->y + i * m;
        const unsigned rows = s->rows[i];
        sjk_trellis_input in = {y, D, 1, NULL, 0};
        tt.rows = (uint8_t)rows;
        ok = sjk_trellis_tile_encode_cb(cb, &tt, payload, a, a + R, &in, scratch, sn) == SJK_OK &&
             sjk_trellis_tile_decode_cb(cb, &tt, out, payload, a, a + R, NULL) == SJK_OK &&
             sjk_trellis_tile_normalize(&tt, &in, u, mean, mean + R) == SJK_OK;
        for (size_t t = 0; ok && t < G; t++)
            for (size_t d = 0; d < D; d++) {
                double x = y[t * D + d], e = x - out[t * D + d], c = x - mean[rows ? t : d];
                sig += c * c;
                err += e * e;
            }
    }
    free(scratch);
    free(payload);
    free(a);
    free(out);
    free(mean);
    free(u);
    if (!ok || err <= 0) return -1;
    return 10.0 * log10(sig / err);
}

/* --table: which committed table stands against the Gaussian one (no training) */
enum { TABLE_NONE = 0, TABLE_REAL = 1, TABLE_GRID = 2 };

typedef struct train_opts {
    const char *P;
    const char *tiles;       /* training capture files, or NULL: Gaussian data */
    const char *eval, *eval_tensor;
    int init_committed;
    int table;               /* --table real|grid: no training, a committed table (TABLE_*) */
    int tie;                 /* --tie s128 (sjk_trellis_tie) */
    uint64_t seed, iters, samples, T;
} train_opts;

/* Trains the tables of ks[0..nk) for one tensor ("k", "v", "kv"; NULL with Gaussian
 * data) into cb[i] (allocated here), and with --eval prints their comparison. 1 on
 * success, else prints why and returns 0. */
static int train_tensor(const train_opts *o, const char *tensor, const unsigned *ks, int nk, float **cb)
{
    const char *P = o->P;
    int ok = 0;
    /* k: the K tiles (rows = channels), v: the V tiles, kv: both */
    const int rows = !tensor || !strcmp(tensor, "kv") ? -1 : !strcmp(tensor, "v") ? SJK_TRELLIS_ROWS_TOKENS
                                                                                : SJK_TRELLIS_ROWS_CHANNELS;
    const char *et = o->eval_tensor ? o->eval_tensor : tensor;
    const int eval_rows = !et || !strcmp(et, "kv") ? -1 : !strcmp(et, "v") ? SJK_TRELLIS_ROWS_TOKENS
                                                                          : SJK_TRELLIS_ROWS_CHANNELS;
    enum { MAX_SETS = 16 };
    sjk_tile_set train[MAX_SETS] = {{0}}, test[MAX_SETS] = {{0}};
    int n_train = 0, n_test = 0;
    char test_names[4096];
    float *u = NULL;
    size_t n_seq = 0, T = (size_t)o->T;
    if (o->tiles) {
        if (!(n_train = load_sets(P, o->tiles, rows, tensor, train, MAX_SETS))) goto done;
        /* --samples split evenly over the files, whole tiles from each */
        size_t want[MAX_SETS], col = 0;
        for (int f = 0; f < n_train; f++) {
            want[f] = tiles_wanted(&train[f], (size_t)o->samples / (size_t)n_train);
            n_seq += want[f] * train[f].D;
        }
        if (!(u = malloc(n_seq * 128 * sizeof *u))) {
            fprintf(stderr, "%s: out of memory\n", P);
            goto done;
        }
        for (int f = 0; f < n_train; f++) {
            if (!tile_sequences(u, n_seq, col, &train[f], want[f])) {
                fprintf(stderr, "%s: out of memory\n", P);
                goto done;
            }
            col += want[f] * train[f].D;
            fprintf(stderr, "%s: %s tiles of D = %u: %zu of %zu used for training\n", P, tensor, train[f].D,
                    want[f], train[f].n);
        }
        T = 128;
    }
    if (o->eval && !(n_test = load_sets(P, o->eval, eval_rows, et, test, MAX_SETS))) goto done;
    snprintf(test_names, sizeof test_names, "%s", o->eval ? o->eval : "");
    for (int i = 0; i < nk; i++) {
        unsigned k = ks[i];
        size_t n = SJK_TRELLIS_CB_SIZE(k);
        if (!(cb[i] = malloc(n * sizeof(float)))) goto done;
        const float *fixed = o->table == TABLE_REAL   ? sjk_trellis_codebook_real(k, rows == SJK_TRELLIS_ROWS_TOKENS)
                             : o->table == TABLE_GRID ? sjk_trellis_codebook_grid(sjk_trellis_codebook(k), k)
                                                      : NULL;
        if (fixed) { /* --table: a committed table, nothing trained */
            memcpy(cb[i], fixed, n * sizeof(float));
            continue;
        }
        sjk_trellis_train_params p = {k, o->seed, (unsigned)o->iters, (size_t)o->samples, T,
                                      o->tiles ? SJK_TRELLIS_DATA_GIVEN : SJK_TRELLIS_DATA_GAUSSIAN,
                                      u, n_seq, o->init_committed ? sjk_trellis_codebook(k) : NULL, (unsigned)o->tie};
        sjk_status st = sjk_trellis_train(&p, cb[i], log_iter, &k);
        if (st != SJK_OK) {
            fprintf(stderr, "%s: k=%u: %s\n", P, k, sjk_status_str(st));
            goto done;
        }
    }
    if (o->eval) {
        char *save = NULL, *name = strtok_r(test_names, ",", &save);
        for (int f = 0; f < n_test; f++, name = strtok_r(NULL, ",", &save))
            for (int i = 0; i < nk; i++) {
                double a = tile_snr(&test[f], ks[i], sjk_trellis_codebook(ks[i]));
                double b = tile_snr(&test[f], ks[i], cb[i]);
                if (a < 0 || b < 0) {
                    fprintf(stderr, "%s: --eval: coding the tiles failed\n", P);
                    goto done;
                }
                printf("%s,%s,%u,%zu,%.3f,%.3f,%.3f\n", name, et, ks[i], test[f].n, a, b, b - a);
            }
    }
    ok = 1;
done:
    free(u);
    for (int f = 0; f < MAX_SETS; f++) {
        sjk_tile_set_free(&train[f]);
        sjk_tile_set_free(&test[f]);
    }
    return ok;
}

int sjk_cmd_train(int argc, char **argv)
{
    const char *bits = NULL, *out = NULL, *data = "gaussian", *tensor = NULL, *init = NULL, *eval = NULL;
    const char *eval_tensor = NULL, *table = NULL, *tie = NULL;
    uint64_t seed = 1, iters = 40, samples = 1u << 20, T = 128;
    const char *P = "train-codebook";
    for (int i = 1; i < argc; i += 2) { /* --option value pairs */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "--help")) { usage(stdout); return 0; }
        if (!v) { fprintf(stderr, "train-codebook: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--bits")) bits = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--tensor")) tensor = v;
        else if (!strcmp(a, "--init")) init = v;
        else if (!strcmp(a, "--eval")) eval = v;
        else if (!strcmp(a, "--eval-tensor")) eval_tensor = v;
        else if (!strcmp(a, "--table")) table = v;
        else if (!strcmp(a, "--tie")) tie = v;
        else if (!strcmp(a, "--seed")) ok = sjk_cli_flag_u64(P, a, v, 0, UINT64_MAX, &seed);
        else if (!strcmp(a, "--iters")) ok = sjk_cli_flag_u64(P, a, v, 1, 99999, &iters);
        else if (!strcmp(a, "--samples")) ok = sjk_cli_flag_u64(P, a, v, 1, (uint64_t)1 << 34, &samples);
        else if (!strcmp(a, "--T")) ok = sjk_cli_flag_u64(P, a, v, 1, 1u << 20, &T);
        else { fprintf(stderr, "train-codebook: unknown option %s\n", a); usage(stderr); return 2; }
        if (!ok) return 2;
    }
    const int tiles = !strncmp(data, "tiles:", 6);
    if (!tiles && strcmp(data, "gaussian")) {
        fprintf(stderr, "train-codebook: --data must be gaussian or tiles:FILE[,FILE...]\n");
        return 2;
    }
    if (!bits || (!out && !eval)) { usage(stderr); return 2; }
    if ((tiles || eval) && (!tensor || (strcmp(tensor, "k") && strcmp(tensor, "v") && strcmp(tensor, "kv") &&
                                        strcmp(tensor, "k,v")))) {
        fprintf(stderr, "train-codebook: --data tiles: and --eval need --tensor k, v, kv or k,v\n");
        return 2;
    }
    if (eval_tensor && strcmp(eval_tensor, "k") && strcmp(eval_tensor, "v") && strcmp(eval_tensor, "kv")) {
        fprintf(stderr, "train-codebook: --eval-tensor takes k, v or kv\n");
        return 2;
    }
    if (init && strcmp(init, "committed")) {
        fprintf(stderr, "train-codebook: --init takes 'committed' (the table in src/codec/trellis_codebooks.c)\n");
        return 2;
    }

    if (tie && (strcmp(tie, "s128") || tiles || init || eval || table || tensor || !out)) {
        fprintf(stderr, "train-codebook: --tie s128 trains the 128-entry tables of the ts body on Gaussian data\n"
                        "  (--out FILE), without --data tiles:, --init, --eval, --table or --tensor\n");
        return 2;
    }
    train_job job = {argc, argv, {0}, 0, 1, tie != NULL, {{NULL}}};
    unsigned *ks = job.ks;
    int nk = 0;
    for (const char *p = bits; *p;) {
        if (*p < '2' || *p > '4' || nk == 3 || (p[1] && p[1] != ',')) {
            fprintf(stderr, "train-codebook: --bits must be a list of 2, 3, 4\n");
            return 2;
        }
        ks[nk++] = (unsigned)(*p - '0');
        p += p[1] ? 2 : 1;
    }
    job.nk = nk;
    /* the atomic path of every file the tools write (tools/cli_files.h): a build never
     * sees half a table, and a failed run leaves the previous one */
    if (out && !sjk_cli_check_target(P, "--out", out)) return 1;

    int rc = 1;
    /* --tensor k,v: one set of tables per tensor (the K tables, then the V tables) */
    const int two = tensor && !strcmp(tensor, "k,v");
    if (two && (eval_tensor || (!out && !table))) {
        fprintf(stderr, "train-codebook: --tensor k,v trains the K and V tables (--out), without --eval-tensor\n");
        return 2;
    }
    job.n_tensors = two ? 2 : 1;
    const int table_kind = !table ? TABLE_NONE : !strcmp(table, "real") ? TABLE_REAL : !strcmp(table, "grid") ? TABLE_GRID : -1;
    if (table && (table_kind < 0 || tiles || init || !eval || !tensor || !strcmp(tensor, "kv") || eval_tensor)) {
        fprintf(stderr, "train-codebook: --table real|grid compares the committed real-data tables (real) or the\n"
                        "  int8 grid of the Gaussian ones (grid) with the committed Gaussian tables, K (--tensor k)\n"
                        "  or V (v, or k,v for both), on --eval tiles, without --data, --init or --eval-tensor\n");
        return 2;
    }
    train_opts o = {P, tiles ? data + 6 : NULL, eval, eval_tensor, init != NULL, table_kind, tie != NULL, seed, iters, samples, T};
    if (eval) printf("file,tensor,bits,tiles,snr_committed_db,snr_trained_db,gain_db\n");
    for (int ti = 0; ti < job.n_tensors; ti++)
        if (!train_tensor(&o, two ? (ti ? "v" : "k") : tensor, ks, nk, job.cb[ti])) goto done;
    if (out) {
        sjk_cli_out w = {out, write_table, &job};
        if (!sjk_cli_write_set(P, &w, 1)) goto done;
    }
    rc = 0;
done:
    for (int ti = 0; ti < 2; ti++)
        for (int i = 0; i < 3; i++) free(job.cb[ti][i]);
    return rc;
}

/* The tables as C: with one tensor (Gaussian data, or tiles of k, v or kv) the committed
 * table's shape, sjk_trellis_codebook(k); with --tensor k,v the K and V tables of the
 * real-data body, sjk_trellis_codebook_real(k, is_v) (src/codec/trellis_codebooks_real.c). */
static int write_table_s128(const train_job *job, FILE *f);

static int write_table(void *ctx, FILE *f)
{
    const train_job *job = ctx;
    if (job->tie) return write_table_s128(job, f);
    const int two = job->n_tensors == 2;
    fprintf(f, "/* %s — GENERATED by the trellis codebook trainer; do not edit.\n"
               " * Regenerate with (from the repository root, after `make`):\n *\n *   ",
            two ? "trellis_codebooks_real.c" : "trellis_codebooks.c");
    if (two) fprintf(f, "scripts/train-real-codebooks, which ends with\n *   ");
    fprintf(f, "./sjkvarn");
    for (int i = 0; i < job->argc; i++) fprintf(f, " %s", job->argv[i]);
    fprintf(f, "\n *\n * Entry w is the reconstruction of window w = (code << 6) | previous 6 code bits,\n"
               " * for values normalised to zero mean and unit variance (src/codec/trellis.h)%s */\n"
               "#include \"codec/trellis_codebooks.h\"\n\n",
            two ? ";\n * trained on the balanced K and V tiles of real models (docs/FORMAT.md, body 3)." : ".");
    int have[5] = {0};
    for (int ti = 0; ti < job->n_tensors; ti++)
        for (int i = 0; i < job->nk; i++) {
            unsigned k = job->ks[i];
            size_t n = SJK_TRELLIS_CB_SIZE(k);
            fprintf(f, "static const float cb%s%u[%zu] = {\n", two ? (ti ? "v" : "k") : "", k, n);
            for (size_t w = 0; w < n; w++)
                fprintf(f, "%s%af,%s", w % 4 ? " " : "    ", (double)job->cb[ti][i][w], w % 4 == 3 ? "\n" : "");
            fprintf(f, "};\n\n");
            have[k] = 1;
        }
    if (two) {
        fprintf(f, "const float *sjk_trellis_codebook_real(unsigned k, int is_v)\n{\n    switch (k) {\n");
        for (unsigned k = 2; k <= 4; k++)
            if (have[k]) fprintf(f, "    case %u: return is_v ? cbv%u : cbk%u;\n", k, k, k);
    } else {
        fprintf(f, "const float *sjk_trellis_codebook(unsigned k)\n{\n    switch (k) {\n");
        for (unsigned k = 2; k <= 4; k++)
            if (have[k]) fprintf(f, "    case %u: return cb%u;\n", k, k);
    }
    fprintf(f, "    default: return 0;\n    }\n}\n");
    return 0;
}

/* --tie s128: the 128 entries A_k of each table on the int8 grid (step max|A| / 127,
 * entries rounded to nearest, the rule of sjk_trellis_codebook_grid), the shape of
 * sjk_trellis_s128_table (src/codec/trellis_codebooks_s128.c). */
static int write_table_s128(const train_job *job, FILE *f)
{
    fprintf(f, "/* trellis_codebooks_s128.c — GENERATED by the trellis codebook trainer; do not edit.\n"
               " * Regenerate with (from the repository root, after `make`):\n *\n *   ./sjkvarn");
    for (int i = 0; i < job->argc; i++) fprintf(f, " %s", job->argv[i]);
    fprintf(f, "\n *\n * The 128 entries of the SJK_BODY_TRELLIS_S128 tables, in units of the table's step:\n"
               " * window w = (code << 6) | previous 6 code bits reads entry sjk_trellis_s128_index(k, w)\n"
               " * (src/codec/trellis.h), for values normalised to zero mean and unit variance. */\n"
               "#include \"codec/trellis_codebooks.h\"\n\n");
    int have[5] = {0};
    for (int i = 0; i < job->nk; i++) {
        const unsigned k = job->ks[i];
        float a[SJK_TRELLIS_S128_ENTRIES], mx = 0;
        for (unsigned w = 0; w < SJK_TRELLIS_CB_SIZE(k); w++) a[sjk_trellis_s128_index(k, w)] = job->cb[0][i][w];
        for (unsigned e = 0; e < SJK_TRELLIS_S128_ENTRIES; e++) mx = fabsf(a[e]) > mx ? fabsf(a[e]) : mx;
        const float step = mx / 127.0f;
        fprintf(f, "static const float step%u = %af;\n", k, (double)step);
        fprintf(f, "static const int8_t a%u[%d] = {\n", k, SJK_TRELLIS_S128_ENTRIES);
        for (unsigned e = 0; e < SJK_TRELLIS_S128_ENTRIES; e++) {
            float c = nearbyintf(a[e] / step);
            c = c > 127 ? 127 : c < -127 ? -127 : c;
            fprintf(f, "%s%4d,%s", e % 16 ? "" : "    ", (int)c, e % 16 == 15 ? "\n" : "");
        }
        fprintf(f, "};\n\n");
        have[k] = 1;
    }
    fprintf(f, "const int8_t *sjk_trellis_s128_table(unsigned k, float *step)\n{\n    switch (k) {\n");
    for (unsigned k = 2; k <= 4; k++)
        if (have[k]) fprintf(f, "    case %u: if (step) *step = step%u; return a%u;\n", k, k, k);
    fprintf(f, "    default: return 0;\n    }\n}\n");
    return 0;
}
