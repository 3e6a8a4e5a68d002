/* test_cli_smoke.c — every command the README documents, run at a small size through the
 * real CLI ($BUILD/sjkvarn), checked for its exit status and the shape of its output.
 *
 * The table below is the whole test: one row per command line, run in order (later rows
 * may read what earlier ones wrote under $T). To cover a new command, add a row.
 *
 *   needs    what must exist first: NEED_GEMMA / NEED_SMOL (the model files of
 *            scripts/fetch-model), NEED_CORPUS (scripts/fetch-corpus). A row whose need
 *            is missing is a SKIP, which SJK_REQUIRE_ALL=1 (CI) counts as a failure.
 *   cmd      a sh command line run from the repository root with these variables set:
 *              $CLI    the sjkvarn binary under test     $T      a fresh scratch folder
 *              $GEMMA  path of the Gemma 3 270M GGUF    $SMOL   path of the SmolLM2 GGUF
 *            stdout goes to $T/out, stderr to $T/err.
 *   rc       the expected exit status.
 *   checks   what the output must look like, ';'-separated:
 *              json              stdout is one JSON value
 *              json:K1,K2        stdout is a JSON object with members K1, K2 ..., or a
 *                                non-empty array of such objects
 *              cols:W1 W2 ...    some stdout line holds the words W1, W2 ... in order
 *              out:TEXT          stdout contains TEXT      err:TEXT  stderr contains TEXT
 *              lines>=N          stdout has at least N non-empty lines
 *              file:PATH         PATH (after $T expansion) exists and is not empty
 *
 * Sized to take seconds: quick modes, contexts of a few hundred tokens, a few generated
 * tokens. The per-row times are printed to stderr (run the binary directly to see them). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "support/json_lite.h"

enum { NEED_NONE = 0, NEED_GEMMA = 1, NEED_SMOL = 2, NEED_CORPUS = 4 };

typedef struct smoke_row {
    unsigned needs;
    const char *cmd;
    int rc;
    const char *checks;
} smoke_row;

/* clang-format off */
static const smoke_row rows[] = {
    /* --- no model needed ------------------------------------------------------------ */
    {NEED_NONE, "$CLI version", 0, "out:sjkvarn "},
    {NEED_NONE, "$CLI --help", 0, "out:commands:;out:bench;out:inspect"},
    {NEED_NONE, "$CLI no-such-command", 2, "err:unknown command"},
    {NEED_NONE, "$CLI bench codec --quick --json --data gaussian --groups 1", 0,
     "json:format,data,bits_per_value,snr_db,encode_values_per_s,decode_values_per_s"},
    {NEED_NONE, "$CLI bench codec --quick --data outlier --groups 1 --bodies-only", 0,
     "cols:format data bits/v SNR;out:sj4/4tc-sj;out:sj2/2t-off;lines>=37"},
    {NEED_NONE, "$CLI bench attn --ctx 512 --geometry smollm2 --kv sj:4/4", 0,
     "cols:config context thr us/token;out:sj:4/4"},
    {NEED_NONE, "$CLI bench attn --ctx 512 --geometry gemma3 --kv q4_0 --json", 0,
     "json:geometry,config,context,threads,us_per_token,speedup_vs_f16"},
    {NEED_NONE, "$CLI bench trellis --quick", 0, "out:trellis-chan;lines>=10"},
    {NEED_NONE, "$CLI eval --synthetic --kv q8_0/q8_0,sj:4/4 --ctx 512 -n 8 --csv $T/syn.csv --svg $T", 0,
     "cols:config n mean median;out:sj:4/4;file:$T/syn.csv;file:$T/syn-positions.csv;file:$T/frontier.svg"},
    {NEED_NONE, "$CLI eval --merge $T/syn.csv --json", 0, "json:reference,documents,configs"},
    {NEED_NONE, "$CLI eval --merge $T/syn.csv", 0, "cols:config n mean;out:q8_0/q8_0"},
    {NEED_NONE, "$CLI inspect $T/syn.csv", 2, "err:not a GGUF"},
    {NEED_NONE, "$CLI inspect $T/no-such-file", 2, "err:no-such-file"},

    /* --- Gemma 3 270M ---------------------------------------------------------------- */
    {NEED_GEMMA, "$CLI plan -m gemma3-270m --ctx 8192", 0,
     "cols:config KiB/tok;out:sj:4/4;out:kvarn:4/4;out:auto tier"},
    {NEED_GEMMA, "$CLI plan -m $GEMMA --json", 0, "json:model,ctx,configs"},
    {NEED_GEMMA, "$CLI inspect $GEMMA", 0,
     "out:gemma3;out:18 layers;out:sliding-window;out:head dim 256;out:q4_K;out:tokenizer;out:runs here: yes"},
    {NEED_GEMMA, "$CLI inspect --json $GEMMA", 0,
     "json:kind,architecture,n_layers,layers,heads,head_dim,context,tensor_types,tokenizer,runnable"},
    {NEED_GEMMA, "$CLI run -m gemma3-270m -p 'The capital of France is' -n 4 --temp 0 -c 256 -t 2"
                 " --kv sj:4/4 --save $T/gemma.sess", 0, "out:The capital of France is;err:decode 4 tokens"},
    {NEED_GEMMA, "$CLI run -m gemma3-270m -p ' and' -n 4 --temp 0 -c 256 -t 1 --kv sj:4/4 --load $T/gemma.sess",
     0, "err:decode"},
    {NEED_GEMMA, "$CLI inspect $T/gemma.sess", 0,
     "out:session file;out:version 2;out:sj:4/4;out:fingerprint;cols:checksums: all"},
    {NEED_GEMMA, "$CLI inspect --json $T/gemma.sess", 0,
     "json:kind,version,n_past,kv,fingerprint,cache,checksums_ok"},
    {NEED_GEMMA, "$CLI inspect -m gemma3-270m $T/gemma.sess", 0, "cols:model: matches"},
    {NEED_GEMMA, "$CLI run -m gemma3-270m -p 'Hello' -n 4 --temp 0 -c 512 --kv auto --mem-budget 64M", 0,
     "err:auto tier"},
    /* the main job's pipeline at a tiny size (scripts/main-job with small knobs) */
    {NEED_GEMMA | NEED_CORPUS, "SJK_MAIN_CLI=$CLI SJK_MAIN_CTX=320 SJK_MAIN_NGEN=4 SJK_MAIN_DOCS=code-0"
                               " SJK_MAIN_OUT=$T/main SJK_MAIN_THREADS=2 scripts/main-job", 0,
     "cols:config n mean;out:sj:4/4;out:kvarn:4/4;file:$T/main/study.csv;file:$T/main/frontier.svg"},
    {NEED_GEMMA | NEED_CORPUS, "$CLI eval -m gemma3-270m --docs code-0 --ctx 200 -n 4 --threads 2 --kv kvarn:4/4"
                               " --json", 0, "json:reference,documents,configs"},

    /* --- SmolLM2-135M ---------------------------------------------------------------- */
    {NEED_SMOL, "$CLI run -m smollm2-135m -p 'The capital of France is' -n 4 --temp 0 -c 256", 0,
     "out:The capital of France is;err:decode 4 tokens"},
    {NEED_SMOL, "$CLI plan -m smollm2-135m --ctx 4096", 0, "cols:config KiB/tok;out:sj:4/4"},
    {NEED_SMOL, "$CLI inspect $SMOL", 0, "out:llama;out:30 layers;out:runs here: yes"},
};
/* clang-format on */

static char g_tmp[512], g_cli[1024], g_gemma[1024], g_smol[1024], g_corpus[1024];
static const smoke_row *g_row;

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_size > 0;
}

/* The file's bytes (NUL-terminated, *n = length) or NULL. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    while (b) {
        size_t r = fread(b + len, 1, cap - len - 1, f);
        len += r;
        if (len + 1 < cap) break;
        char *nb = realloc(b, cap *= 2);
        if (!nb) { free(b); b = NULL; }
        else b = nb;
    }
    fclose(f);
    if (!b) return NULL;
    b[len] = 0;
    *n = len;
    return b;
}

/* 1 if some line of text holds the space-separated words of `words` in order. */
static int has_cols(const char *text, const char *words)
{
    for (const char *line = text; *line;) {
        const char *eol = strchr(line, '\n');
        size_t ll = eol ? (size_t)(eol - line) : strlen(line);
        const char *at = line, *w = words;
        int ok = 1;
        while (*w && ok) {
            while (*w == ' ') w++;
            size_t wl = strcspn(w, " ");
            if (!wl) break;
            const char *hit = NULL;
            for (const char *p = at; p + wl <= line + ll; p++)
                if (!memcmp(p, w, wl)) { hit = p; break; }
            if (!hit) ok = 0;
            else at = hit + wl;
            w += wl;
        }
        if (ok) return 1;
        line = eol ? eol + 1 : line + ll;
    }
    return 0;
}

static size_t count_lines(const char *text)
{
    size_t n = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t ll = eol ? (size_t)(eol - p) : strlen(p);
        if (strspn(p, " \t") < ll) n++;
        p += ll + (eol ? 1 : 0);
    }
    return n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* $T in a check's argument. */
static void expand_t(const char *src, size_t n, char *dst, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        if (src[i] == '$' && i + 1 < n && src[i + 1] == 'T') {
            o += (size_t)snprintf(dst + o, cap - o, "%s", g_tmp);
            if (o >= cap) o = cap - 1;
            i++;
        } else {
            dst[o++] = src[i];
        }
    }
    dst[o] = 0;
}

static void run_row(void)
{
    const smoke_row *r = g_row;
    if ((r->needs & NEED_GEMMA) && !exists(g_gemma)) SKIP("%s missing (run scripts/fetch-model)", g_gemma);
    if ((r->needs & NEED_SMOL) && !exists(g_smol)) SKIP("%s missing (run scripts/fetch-model)", g_smol);
    if ((r->needs & NEED_CORPUS) && !exists(g_corpus)) SKIP("%s missing (run scripts/fetch-corpus)", g_corpus);
    char cmd[4096], out[600], err[600];
    snprintf(out, sizeof out, "%s/out", g_tmp);
    snprintf(err, sizeof err, "%s/err", g_tmp);
    /* The row goes into a script file (it has quotes of its own); the variables it uses
     * are in the environment. timeout: a hung command fails its row, not the suite. */
    char script[600];
    snprintf(script, sizeof script, "%s/cmd.sh", g_tmp);
    FILE *sf = fopen(script, "w");
    if (sf) {
        fprintf(sf, "%s\n", r->cmd);
        fclose(sf);
    }
    snprintf(cmd, sizeof cmd, "timeout 300 sh %s >%s 2>%s </dev/null", script, out, err);
    double t0 = now_s();
    int st = sf ? system(cmd) : -1;
    double dt = now_s() - t0;
    int rc = st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    fprintf(stderr, "  %6.2f s  rc %d  %s\n", dt, rc, r->cmd);
    size_t no = 0, ne = 0;
    char *so = slurp(out, &no), *se = slurp(err, &ne);
    if (!so || !se) {
        CHECKF(0, "cannot read the output of: %s", r->cmd);
        free(so), free(se);
        return;
    }
    CHECKF(rc == r->rc, "exit status %d, expected %d: %s\n--- stderr (tail):\n%s", rc, r->rc, r->cmd,
           ne > 1500 ? se + ne - 1500 : se);
    for (const char *c = r->checks; c && *c;) {
        size_t len = strcspn(c, ";");
        char arg[1024];
        const char *colon = memchr(c, ':', len);
        size_t kl = colon ? (size_t)(colon - c) : len;
        expand_t(colon ? colon + 1 : "", colon ? len - kl - 1 : 0, arg, sizeof arg);
        if (kl == 4 && !memcmp(c, "json", 4)) {
            char jerr[200];
            size_t n_rec = 0;
            int ok = json_lite_check(so, no, colon ? arg : NULL, &n_rec, jerr, sizeof jerr);
            CHECKF(ok, "stdout is not the expected JSON (%s): %s\n--- stdout (head):\n%.600s", jerr, r->cmd, so);
        } else if (kl == 4 && !memcmp(c, "cols", 4)) {
            CHECKF(has_cols(so, arg), "no line with the columns '%s': %s\n--- stdout (head):\n%.800s", arg, r->cmd, so);
        } else if (kl == 3 && !memcmp(c, "out", 3)) {
            CHECKF(strstr(so, arg) != NULL, "stdout lacks '%s': %s\n--- stdout (head):\n%.800s", arg, r->cmd, so);
        } else if (kl == 3 && !memcmp(c, "err", 3)) {
            CHECKF(strstr(se, arg) != NULL, "stderr lacks '%s': %s\n--- stderr (tail):\n%s", arg, r->cmd,
                   ne > 1500 ? se + ne - 1500 : se);
        } else if (len > 7 && !memcmp(c, "lines>=", 7)) {
            size_t want = (size_t)atol(c + 7), got = count_lines(so);
            CHECKF(got >= want, "%zu stdout lines, expected at least %zu: %s", got, want, r->cmd);
        } else if (kl == 4 && !memcmp(c, "file", 4)) {
            CHECKF(exists(arg), "%s was not written: %s", arg, r->cmd);
        } else {
            CHECKF(0, "unknown check '%.*s' in the table", (int)len, c);
        }
        c += len + (c[len] == ';');
    }
    free(so), free(se);
}

int main(void)
{
    const char *b = getenv("BUILD");
    snprintf(g_cli, sizeof g_cli, "%s/sjkvarn", b && *b ? b : "build");
    char abs_cli[4096];
    if (realpath(g_cli, abs_cli)) snprintf(g_cli, sizeof g_cli, "%.1000s", abs_cli); /* rows may cd */
    const char *md = getenv("SJK_MODEL_DIR"), *home = getenv("HOME"), *cd = getenv("SJK_CORPUS_DIR");
    char mdir[600], cdir[600];
    if (md && *md) snprintf(mdir, sizeof mdir, "%s", md);
    else snprintf(mdir, sizeof mdir, "%s/.cache/sjkvarn/models", home ? home : "");
    if (cd && *cd) snprintf(cdir, sizeof cdir, "%s", cd);
    else snprintf(cdir, sizeof cdir, "%s/.cache/sjkvarn/corpus", home ? home : "");
    snprintf(g_gemma, sizeof g_gemma, "%s/gemma-3-270m-q4_k_m.gguf", mdir);
    snprintf(g_smol, sizeof g_smol, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", mdir);
    snprintf(g_corpus, sizeof g_corpus, "%s/docs/code-0.txt", cdir);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sjk-cli-smoke-XXXXXX");
    if (!mkdtemp(g_tmp)) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    setenv("CLI", g_cli, 1);
    setenv("T", g_tmp, 1);
    setenv("GEMMA", g_gemma, 1);
    setenv("SMOL", g_smol, 1);
    int have_cli = access(g_cli, X_OK) == 0;
    double t0 = now_s();
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        g_row = &rows[i];
        if (!have_cli) {
            /* without the binary nothing can run: one failure per row, not a skip */
            fprintf(stderr, "FAIL %s: %s is not built (make all)\n", rows[i].cmd, g_cli);
            t_n_fail++;
            continue;
        }
        test_run_one(rows[i].cmd, run_row);
    }
    fprintf(stderr, "  total %.1f s\n", now_s() - t0);
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    return test_summary();
}
