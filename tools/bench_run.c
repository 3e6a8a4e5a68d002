/* bench_run.c — `sjkvarn bench run`: end-to-end prefill and decode speed of the host on a
 * real model, per KV configuration and context, against llama.cpp measured in the same run.
 *
 * Method (docs/benchmarks/end-to-end.md):
 *   prompt   real text (the corpus cache ${SJK_CORPUS_DIR:-~/.cache/sjkvarn/corpus}/docs,
 *            else a few long Debian text files), tokenized once with BOS; when it is
 *            shorter than the longest context its ids (BOS excluded) are repeated.
 *   prefill  wall time of one sjkh_session_feed of the first `context` ids (n_batch 512),
 *            in a fresh session of context + n_gen positions; tokens/s = context / time.
 *   decode   n_gen greedy steps after that prompt, one token per feed; tokens/s =
 *            n_gen / time (argmax included, as on the llama.cpp side). With
 *            --decode-rounds R the session is saved after the prompt and R - 1 more
 *            rounds resume it in fresh children (configurations alternating, each
 *            round's tokens checked against round 1's); the row's rate is the median.
 *   memory   kv_bytes = sjkh_session_kv_report's total (the growing layers' configured
 *            cache plus the sliding-window caches), checked against the size model
 *            (sjkh_plan_estimate, which prices the cache with sjk_cache_estimate) — the
 *            row says "kv_check ok" when they are equal; peak RSS of the row (each row
 *            runs in a forked child, so ru_maxrss from wait4 is that row's alone; it
 *            includes the weights' pages) and the growth of anonymous resident memory
 *            over the session's life (KV pages touched so far, activations, pools).
 *   llama.cpp  only when asked (--llama-cpp PYTHON or SJK_LLAMA_CPP_PYTHON): the bench
 *            writes the prompt ids to a temporary file and runs bench/llama_cpp_speed.py
 *            with that interpreter for the same model, threads, context and n_gen, so
 *            both engines process identical prompt tokens. Without it the bench says so
 *            on stderr and in the table and prints our rows only. Rows alternate per
 *            context (llama.cpp, then ours) so both see similar machine load.
 * Ratios (x_prefill, x_decode) are ours over llama.cpp's fp16-cache row at the same
 * context; x_f16 (JSON decode_vs_f16) is a row's decode rate over our own f16 row's at
 * the same context (when --kv lists f16 before it): what a compressed cache costs or
 * gains in decode speed. */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "cli_files.h"
#include "cli_parse.h"
#include "models.h"
#include "sjkhost.h"
#include "sjkplan.h"

int sjk_bench_run(int argc, char **argv);

#define BR_MAX_CTX 16
#define BR_MAX_KV 8
#define BR_ITEM_NBYTES (SJKH_KV_STR_MAX + 1) /* one --kv or --ctx list item */
#define BR_MAX_ROUNDS SJK_BENCH_MEDIAN_MAX

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One measured row. Written by the child through a pipe, so plain data only. */
typedef struct br_row {
    int ok;
    char err[256];
    double prefill_s, decode_s;
    uint32_t context, n_gen;
    size_t kv_bytes, kv_growing, kv_window, kv_planned;
    double bits_per_value;
    size_t rss_grow;   /* RssAnon growth from before session create to after decode */
    long peak_rss_kib; /* filled by the parent from wait4 */
    int32_t first_gen[8];
    uint64_t gen_hash; /* FNV-1a of every generated token: resumed rounds must match round 1 */
} br_row;

typedef struct br_llama {
    int ok;
    double prefill_s, decode_s;
    long peak_rss_kib;
    char settings[256];
} br_llama;

/* Anonymous resident bytes (RssAnon): heap and other private memory the process has
 * touched, without the weights' file-backed mapping, which pages in as the forward pass
 * first reads it. */
static size_t rss_anon_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kib = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "RssAnon:", 8)) kib = (size_t)strtoull(line + 8, NULL, 10);
    fclose(f);
    return kib * 1024;
}

/* Appends a whole file to *buf (grown as needed). Returns 0 if it cannot be read. */
static int append_file(const char *path, char **buf, size_t *len, size_t *cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    for (;;) {
        if (*cap - *len < 65536) {
            size_t nc = *cap ? *cap * 2 : (size_t)1 << 20;
            char *nb = realloc(*buf, nc);
            if (!nb) break;
            *buf = nb;
            *cap = nc;
        }
        size_t r = fread(*buf + *len, 1, *cap - *len - 1, f);
        *len += r;
        if (r == 0) break;
    }
    fclose(f);
    return 1;
}

/* Prompt ids: real text until about want_bytes, tokenized with BOS, then repeated (BOS
 * excluded) up to n_want ids. *src names where the text came from. */
static int32_t *prompt_ids(const sjkh_tokenizer *tok, size_t n_want, char *src, size_t src_cap)
{
    static const char *const corpus_docs[] = {"retrieval-0.txt", "code-0.txt", "agentic-0.txt", "retrieval-1.txt",
                                              "code-1.txt", "agentic-1.txt", "retrieval-2.txt", "code-2.txt",
                                              "agentic-2.txt"};
    static const char *const debian[] = {"/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/GFDL-1.3",
                                         "/usr/share/common-licenses/LGPL-3", "/usr/share/common-licenses/Apache-2.0",
                                         "/etc/services"};
    const size_t want_bytes = n_want * 6 + 4096;
    char *text = NULL, dir[3072], path[4096];
    size_t len = 0, cap = 0;
    const char *cd = getenv("SJK_CORPUS_DIR"), *home = getenv("HOME");
    if (cd && *cd) snprintf(dir, sizeof dir, "%s/docs", cd);
    else snprintf(dir, sizeof dir, "%s/.cache/sjkvarn/corpus/docs", home ? home : ".");
    int n_files = 0;
    for (size_t i = 0; i < sizeof corpus_docs / sizeof *corpus_docs && len < want_bytes; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, corpus_docs[i]);
        n_files += append_file(path, &text, &len, &cap);
    }
    if (n_files) snprintf(src, src_cap, "%s (%d files)", dir, n_files);
    else {
        for (size_t i = 0; i < sizeof debian / sizeof *debian && len < want_bytes; i++)
            n_files += append_file(debian[i], &text, &len, &cap);
        snprintf(src, src_cap, "/usr/share/common-licenses and /etc/services (%d files)", n_files);
    }
    if (!text || len == 0) {
        fprintf(stderr, "sjkvarn bench run: no prompt text (corpus cache %s empty; scripts/fetch-corpus fills it)\n", dir);
        free(text);
        return NULL;
    }
    size_t n = 0;
    int32_t *ids = sjk_cli_tokenize("sjkvarn bench run", "the prompt text", tok, text, len, SJKH_TOKENIZE_ADD_SPECIAL, &n);
    if (ids && n < 2) {
        fprintf(stderr, "sjkvarn bench run: the prompt text has fewer than 2 tokens\n");
        free(ids);
        ids = NULL;
    }
    int32_t *grown = ids && n < n_want ? realloc(ids, n_want * sizeof *ids) : ids;
    if (!grown) {
        free(text);
        free(ids);
        return NULL;
    }
    ids = grown;
    free(text);
    size_t first = (sjkh_tokenizer_add_bos(tok) && ids[0] == sjkh_tokenizer_bos(tok)) ? 1 : 0;
    for (size_t i = n, j = first; i < n_want; i++) {
        ids[i] = ids[j++];
        if (j == n) j = first;
    }
    return ids;
}

static int argmax(const float *x, uint32_t n)
{
    int b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = (int)i;
    return b;
}

/* One row, in the calling (child) process. With snap set and resume 0, the session is also
 * saved to snap between prefill and decode (untimed), so that later rounds can resume it;
 * with resume 1 there is no prefill: the session is loaded from snap and only the decode
 * is timed, from the same state and pending token as the first round. */
static void measure(const sjkh_model *m, const sjkh_plan_model *pm, const int32_t *ids, uint32_t ctx, uint32_t n_gen,
                    uint32_t threads, const char *kv, uint32_t window_type, const char *snap, int resume, br_row *r)
{
    const sjkh_model_info *in = sjkh_model_get_info(m);
    sjkh_session *s = NULL;
    float *logits = malloc((size_t)in->n_vocab * sizeof *logits);
    r->context = ctx;
    r->n_gen = n_gen;
    if (!logits) {
        snprintf(r->err, sizeof r->err, "out of memory");
        return;
    }
    size_t rss0 = rss_anon_now();
    sjkh_session_params sp = sjkh_session_params_default();
    sp.n_ctx = ctx + n_gen;
    sp.n_batch = 512;
    sp.n_threads = threads;
    sp.kv = kv;
    sp.window_type = window_type;
    if (sjkh_session_create(m, &sp, &s, r->err, sizeof r->err)) goto done;
    int32_t tokv;
    if (resume) {
        if (sjkh_session_load(s, snap, &tokv, r->err, sizeof r->err)) goto done;
    } else {
        double t0 = now_s();
        if (sjkh_session_feed(s, ids, ctx, logits, 0, r->err, sizeof r->err)) goto done;
        r->prefill_s = now_s() - t0;
        tokv = argmax(logits, in->n_vocab);
        if (snap && sjkh_session_save(s, snap, tokv, r->err, sizeof r->err)) goto done;
    }
    double t1 = now_s();
    r->gen_hash = 14695981039346656037ull;
    for (uint32_t i = 0; i < n_gen; i++) {
        if (i < 8) r->first_gen[i] = tokv;
        r->gen_hash = (r->gen_hash ^ (uint32_t)tokv) * 1099511628211ull;
        if (sjkh_session_feed(s, &tokv, 1, logits, 0, r->err, sizeof r->err)) goto done;
        tokv = argmax(logits, in->n_vocab);
    }
    double t2 = now_s();
    r->decode_s = t2 - t1;
    r->rss_grow = rss_anon_now() - rss0;
    sjkh_kv_report rep;
    if (sjkh_session_kv_report(s, &rep)) {
        snprintf(r->err, sizeof r->err, "kv report failed");
        goto done;
    }
    r->kv_bytes = rep.total_nbytes;
    r->kv_growing = rep.growing_nbytes;
    r->kv_window = rep.window_nbytes;
    r->bits_per_value = rep.bits_per_value;
    sjkh_plan_params pp = sjkh_plan_params_default();
    pp.n_ctx = sp.n_ctx;
    pp.n_batch = sp.n_batch;
    pp.n_threads = sp.n_threads;
    pp.window_type = window_type;
    sjkh_plan_size ps;
    char perr[256];
    if (!sjkh_plan_estimate(pm, kv, &pp, &ps, perr, sizeof perr)) r->kv_planned = ps.session_nbytes;
    r->ok = 1;
done:
    sjkh_session_free(s);
    free(logits);
}

/* Runs measure() in a child so the row's peak RSS is its own. */
static void measure_forked(const sjkh_model *m, const sjkh_plan_model *pm, const int32_t *ids, uint32_t ctx,
                           uint32_t n_gen, uint32_t threads, const char *kv, uint32_t window_type, const char *snap,
                           int resume, br_row *r)
{
    memset(r, 0, sizeof *r);
    int fd[2];
    fflush(stdout);
    fflush(stderr);
    if (pipe(fd)) {
        snprintf(r->err, sizeof r->err, "pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(r->err, sizeof r->err, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return;
    }
    if (pid == 0) {
        close(fd[0]);
        br_row c;
        memset(&c, 0, sizeof c);
        measure(m, pm, ids, ctx, n_gen, threads, kv, window_type, snap, resume, &c);
        const char *p = (const char *)&c;
        size_t left = sizeof c;
        while (left) {
            ssize_t w = write(fd[1], p, left);
            if (w <= 0) break;
            p += w;
            left -= (size_t)w;
        }
        _exit(0);
    }
    close(fd[1]);
    char *p = (char *)r;
    size_t got = 0;
    while (got < sizeof *r) {
        ssize_t n = read(fd[0], p + got, sizeof *r - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd[0]);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    if (got != sizeof *r) {
        memset(r, 0, sizeof *r);
        snprintf(r->err, sizeof r->err, "the measuring process died (status %d)", status);
    }
    r->peak_rss_kib = ru.ru_maxrss;
}

static double json_num(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

/* The llama.cpp row at one context: runs the oracle script with `python`, spawned with
 * an argument vector (no shell: any byte in a path is passed as it is), its stdout read
 * through a pipe. */
static void llama_row(const char *python, const char *script, const char *model, const char *ids_path,
                      uint32_t threads, uint32_t n_gen, uint32_t ctx, br_llama *r)
{
    memset(r, 0, sizeof *r);
    char a_threads[16], a_gen[16], a_ctx[16];
    snprintf(a_threads, sizeof a_threads, "%u", threads);
    snprintf(a_gen, sizeof a_gen, "%u", n_gen);
    snprintf(a_ctx, sizeof a_ctx, "%u", ctx);
    char *const args[] = {(char *)python, (char *)script, (char *)model, (char *)ids_path, a_threads, a_gen, a_ctx,
                          NULL};
    fflush(stdout);
    int pfd[2];
    if (pipe(pfd) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_addclose(&fa, pfd[0]);
    posix_spawn_file_actions_addclose(&fa, pfd[1]);
    extern char **environ;
    pid_t pid;
    int e = posix_spawnp(&pid, python, &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (e != 0) {
        fprintf(stderr, "sjkvarn bench run: cannot start %s: %s\n", python, strerror(e));
        close(pfd[0]);
        return;
    }
    FILE *f = fdopen(pfd[0], "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"llama.cpp\"")) continue;
        r->prefill_s = json_num(line, "prefill_s");
        r->decode_s = json_num(line, "decode_s");
        r->peak_rss_kib = (long)json_num(line, "peak_rss_kib");
        const char *st = strstr(line, "\"settings\": \"");
        if (st) {
            st += strlen("\"settings\": \"");
            size_t k = 0;
            while (st[k] && st[k] != '"' && k + 1 < sizeof r->settings) k++;
            memcpy(r->settings, st, k);
            r->settings[k] = 0;
        }
        r->ok = r->prefill_s > 0 && r->decode_s > 0;
    }
    if (f) fclose(f);
    else close(pfd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) r->ok = 0;
}

/* bench/llama_cpp_speed.py: next to the source tree the binary was built in, or the cwd. */
static int find_script(char *out, size_t cap)
{
    const char *env = getenv("SJK_LLAMA_CPP_SCRIPT");
    struct stat st;
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return stat(out, &st) == 0;
    }
    char exe[2048];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        for (int up = 0; up < 4; up++) {
            char *sl = strrchr(exe, '/');
            if (!sl) break;
            *sl = 0;
            snprintf(out, cap, "%s/bench/llama_cpp_speed.py", exe);
            if (!stat(out, &st)) return 1;
        }
    }
    snprintf(out, cap, "bench/llama_cpp_speed.py");
    return stat(out, &st) == 0;
}

static int parse_list(const char *s, char items[][BR_ITEM_NBYTES], int max)
{
    int n = 0;
    while (*s && n < max) {
        size_t k = strcspn(s, ",");
        if (k == 0 || k >= BR_ITEM_NBYTES) return -1;
        memcpy(items[n], s, k);
        items[n][k] = 0;
        n++;
        s += k;
        if (*s == ',') s++;
    }
    return *s ? -1 : n;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sjkvarn bench run [--json] [--quick] [-m MODEL] [-t THREADS] [--ctx 512,4096,16384,32768]\n"
            "                         [--kv f16,sj:4/4] [--window f16|q8_0] [-n GEN] [--decode-rounds R]\n"
            "                         [--llama-cpp PYTHON]\n"
            "\n"
            "  Prefill and decode tokens/s of the host on a real model, per KV cache and context,\n"
            "  with llama.cpp's figures for the same model, threads and prompt ids in the same run.\n"
            "  -m MODEL         a known model name (listed below; default gemma3-270m) or a .gguf path\n"
            "  -t THREADS       threads for both engines (default: online CPUs)\n"
            "  --ctx LIST       prompt lengths (default 512,4096,16384,32768); a length past the\n"
            "                   model's context becomes that context minus GEN (8160 on SmolLM2)\n"
            "  --quick          contexts 512,4096 only\n"
            "  --kv LIST        cache configurations of the growing layers (default f16,sj:4/4)\n"
            "  --window T       storage of the sliding-window layers: f16 (default) | q8_0\n"
            "  -n GEN           greedy tokens decoded after the prompt (default 32)\n"
            "  --decode-rounds R  decode R times per row (default 1, at most 64): the session is\n"
            "                   saved after the prompt and each later round resumes it in a fresh\n"
            "                   process, configurations alternating; decode/s is the median and\n"
            "                   x_f16 the median of the per-round ratios (the rounds go to stderr)\n"
            "  --llama-cpp PY   python with llama-cpp-python (the oracle venv of\n"
            "                   tests/oracle/build-llama-cpp.sh); default $SJK_LLAMA_CPP_PYTHON.\n"
            "                   Runs bench/llama_cpp_speed.py (or $SJK_LLAMA_CPP_SCRIPT).\n"
            "  --json           one JSON object per row on stdout\n");
    sjk_model_usage(f);
}

int sjk_bench_run(int argc, char **argv)
{
    const char *model = "gemma3-270m", *python = getenv("SJK_LLAMA_CPP_PYTHON");
    char ctx_s[BR_MAX_CTX][BR_ITEM_NBYTES], kv_s[BR_MAX_KV][BR_ITEM_NBYTES];
    int n_ctx = parse_list("512,4096,16384,32768", ctx_s, BR_MAX_CTX);
    int n_kv = parse_list("f16,sj:4/4", kv_s, BR_MAX_KV);
    int json = 0;
    uint32_t window_type = SJKH_WINDOW_F16;
    uint32_t threads = sjk_cli_threads_default(), n_gen = 32, rounds = 1;
    const char *P = "sjkvarn bench run";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--quick")) n_ctx = parse_list("512,4096", ctx_s, BR_MAX_CTX);
        else if (v && (!strcmp(a, "-m") || !strcmp(a, "--model"))) model = argv[++i];
        else if (v && !strcmp(a, "--llama-cpp")) python = argv[++i];
        else if (v && !strcmp(a, "--ctx")) n_ctx = parse_list(argv[++i], ctx_s, BR_MAX_CTX);
        else if (v && !strcmp(a, "--kv")) n_kv = parse_list(argv[++i], kv_s, BR_MAX_KV);
        else if (v && !strcmp(a, "--window")) {
            if (!sjk_cli_flag_window(P, a, argv[++i], &window_type)) return 2;
        }
        else if (v && (!strcmp(a, "-t") || !strcmp(a, "--threads"))) {
            if (!sjk_cli_flag_threads(P, a, argv[++i], &threads)) return 2;
        }
        else if (v && (!strcmp(a, "-n") || !strcmp(a, "--n-gen"))) {
            if (!sjk_cli_flag_u32(P, a, argv[++i], 1, 512, &n_gen)) return 2;
        }
        else if (v && !strcmp(a, "--decode-rounds")) {
            if (!sjk_cli_flag_u32(P, a, argv[++i], 1, BR_MAX_ROUNDS, &rounds)) return 2;
        }
        else {
            fprintf(stderr, "sjkvarn bench run: unknown flag or missing value: %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (n_ctx <= 0 || n_kv <= 0) {
        fprintf(stderr, "sjkvarn bench run: bad --ctx or --kv list\n");
        return 2;
    }
    for (int i = 0; i < n_kv; i++)
        if (!sjk_cli_check_kv(P, "--kv", kv_s[i], 0)) return 2;
    uint32_t ctxs[BR_MAX_CTX];
    for (int i = 0; i < n_ctx; i++) {
        size_t l = strlen(ctx_s[i]);
        int k = l > 1 && (ctx_s[i][l - 1] == 'K' || ctx_s[i][l - 1] == 'k');
        if (k) ctx_s[i][l - 1] = 0;
        uint64_t c;
        if (!sjk_cli_parse_u64(ctx_s[i], 1, (1u << 24) >> (k ? 10 : 0), &c)) {
            fprintf(stderr, "sjkvarn bench run: bad context '%s%s'\n", ctx_s[i], k ? "K" : "");
            return 2;
        }
        ctxs[i] = (uint32_t)(k ? c << 10 : c);
    }

    char path[4096], err[1024] = "", src[4096], script[4096], ids_path[64] = "";
    if (!sjk_cli_resolve_model("sjkvarn bench run", model, path, sizeof path)) return 1;
    sjkh_model *m = NULL;
    sjkh_tokenizer *tok = NULL;
    sjkh_plan_model *pm = malloc(sizeof *pm);
    int32_t *ids = NULL;
    int rc = 1;
    if (!pm) goto done;
    if (sjkh_model_load(path, &m, err, sizeof err) || sjkh_plan_model_open(path, pm, err, sizeof err)) {
        fprintf(stderr, "sjkvarn bench run: %s\n", err);
        goto done;
    }
    if (sjkh_tokenizer_from_gguf(sjkh_model_gguf(m), &tok, err, sizeof err)) {
        fprintf(stderr, "sjkvarn bench run: tokenizer: %s\n", err);
        goto done;
    }
    const sjkh_model_info *in = sjkh_model_get_info(m);
    int n_keep = 0;
    for (int i = 0; i < n_ctx; i++) {
        /* Past the model's context: measure at its context instead (once), with the
         * prompt shortened so that the generated tokens fit too. */
        uint32_t c = ctxs[i] < in->n_ctx_train ? ctxs[i] : in->n_ctx_train;
        if ((uint64_t)c + (uint64_t)n_gen > in->n_ctx_train) {
            if (in->n_ctx_train <= (uint32_t)n_gen) continue;
            c = in->n_ctx_train - (uint32_t)n_gen;
        }
        if (c != ctxs[i])
            fprintf(stderr, "sjkvarn bench run: context %u: prompt of %u tokens (the model's context is %u, %u of "
                            "them for generated tokens)\n", ctxs[i], c, in->n_ctx_train, n_gen);
        int dup = 0;
        for (int j = 0; j < n_keep; j++) dup |= ctxs[j] == c;
        if (!dup) ctxs[n_keep++] = c;
    }
    for (int ki = 0; ki < n_kv; ki++) { /* reject a bad --kv before any measuring */
        sjkh_plan_params pp = sjkh_plan_params_default();
        pp.window_type = window_type;
        sjkh_plan_size ps;
        if (sjkh_plan_estimate(pm, kv_s[ki], &pp, &ps, err, sizeof err)) {
            fprintf(stderr, "sjkvarn bench run: --kv %s: %s\n", kv_s[ki], err);
            goto done;
        }
    }
    uint32_t max_ctx = 0;
    for (int i = 0; i < n_keep; i++)
        if (ctxs[i] > max_ctx) max_ctx = ctxs[i];
    if (!n_keep) goto done;
    if (!(ids = prompt_ids(tok, max_ctx, src, sizeof src))) goto done;

    int have_llama = 0;
    if (!python || !*python) {
        fprintf(stderr, "\n*** sjkvarn bench run: NO llama.cpp BASELINE in this run: pass --llama-cpp PYTHON or set\n"
                        "*** SJK_LLAMA_CPP_PYTHON (the oracle venv of tests/oracle/build-llama-cpp.sh, e.g.\n"
                        "*** ~/.cache/sjkvarn/oracle-venv/bin/python). Printing our rows only; ratios are absent.\n\n");
    } else if (!find_script(script, sizeof script)) {
        fprintf(stderr, "\n*** sjkvarn bench run: NO llama.cpp BASELINE: cannot find bench/llama_cpp_speed.py (run from\n"
                        "*** the source tree or set SJK_LLAMA_CPP_SCRIPT). Printing our rows only.\n\n");
    } else {
        snprintf(ids_path, sizeof ids_path, "/tmp/sjk-bench-run-ids-XXXXXX");
        int fd = mkstemp(ids_path);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f) {
            fprintf(stderr, "sjkvarn bench run: cannot write the prompt ids for llama.cpp\n");
            if (fd >= 0) close(fd);
            ids_path[0] = 0;
            goto done;
        }
        for (uint32_t i = 0; i < max_ctx; i++) fprintf(f, "%d%c", ids[i], i % 32 == 31 ? '\n' : ' ');
        fclose(f);
        have_llama = 1;
    }

    double la[3];
    if (getloadavg(la, 3) < 0) la[0] = la[1] = la[2] = -1;
    fprintf(stderr, "sjkvarn bench run: %s (%s), %u threads, %u generated tokens, prompt from %s; load average %.2f %.2f %.2f\n",
            path, in->arch_name, threads, n_gen, src, la[0], la[1], la[2]);
    if (!json)
        printf("%-10s %-8s %6s %10s %10s %9s %9s %7s %11s %11s %9s\n", "engine", "kv", "ctx", "prefill/s", "decode/s",
               "x_prefill", "x_decode", "x_f16", "kv_bytes", "peak_rss", "kv_check");
    const char *mname = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int all_ok = 1;
    for (int ci = 0; ci < n_keep; ci++) {
        uint32_t ctx = ctxs[ci];
        br_llama L;
        memset(&L, 0, sizeof L);
        if (have_llama) {
            llama_row(python, script, path, ids_path, (uint32_t)threads, (uint32_t)n_gen, ctx, &L);
            if (!L.ok) fprintf(stderr, "sjkvarn bench run: the llama.cpp run at context %u failed (see above)\n", ctx);
        }
        double lp = L.ok ? ctx / L.prefill_s : 0, ld = L.ok ? n_gen / L.decode_s : 0;
        if (L.ok) {
            if (json)
                printf("{\"engine\":\"llama.cpp\",\"model\":\"%s\",\"kv\":\"f16\",\"context\":%u,\"n_gen\":%u,"
                       "\"threads\":%u,\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.3f,\"kv_bytes\":null,"
                       "\"peak_rss_bytes\":%ld,\"settings\":\"%s\"}\n",
                       mname, ctx, n_gen, threads, lp, ld, L.peak_rss_kib * 1024, L.settings);
            else
                printf("%-10s %-8s %6u %10.1f %10.2f %9s %9s %7s %11s %8.1fMiB %9s\n", "llama.cpp", "f16", ctx, lp, ld, "1.00",
                       "1.00", "-", "-", L.peak_rss_kib / 1024.0, "-");
        }
        /* Round 1 prefills each configuration and decodes; with --decode-rounds R > 1 it
         * also saves the session after the prompt, and rounds 2..R load it in a fresh
         * child and decode the same n_gen tokens again, the configurations' order reversed
         * every other round. A row's decode rate is the median of its rounds and x_f16 the
         * median of its per-round ratios to the f16 row's rate in the same round. */
        br_row rows[BR_MAX_KV];
        double rate[BR_MAX_KV][BR_MAX_ROUNDS];
        char snaps[BR_MAX_KV][64];
        memset(snaps, 0, sizeof snaps);
        for (int ki = 0; ki < n_kv; ki++) {
            if (rounds > 1) {
                const char *td = getenv("TMPDIR");
                snprintf(snaps[ki], sizeof snaps[ki], "%s/sjk-bench-snap-XXXXXX", td && *td && strlen(td) < 32 ? td : "/tmp");
                int fd = mkstemp(snaps[ki]);
                if (fd < 0) {
                    fprintf(stderr, "sjkvarn bench run: cannot create a session snapshot in %s: %s\n", snaps[ki], strerror(errno));
                    snaps[ki][0] = 0;
                    all_ok = 0;
                    memset(&rows[ki], 0, sizeof rows[ki]);
                    continue;
                }
                close(fd);
            }
            measure_forked(m, pm, ids, ctx, (uint32_t)n_gen, (uint32_t)threads, kv_s[ki], window_type,
                           snaps[ki][0] ? snaps[ki] : NULL, 0, &rows[ki]);
            if (rows[ki].ok) rate[ki][0] = n_gen / rows[ki].decode_s;
            else {
                fprintf(stderr, "sjkvarn bench run: %s at context %u: %s\n", kv_s[ki], ctx, rows[ki].err);
                all_ok = 0;
            }
        }
        for (uint32_t ro = 1; ro < rounds; ro++)
            for (int j = 0; j < n_kv; j++) {
                int ki = ro % 2 ? n_kv - 1 - j : j;
                if (!rows[ki].ok) continue;
                br_row q;
                measure_forked(m, pm, ids, ctx, (uint32_t)n_gen, (uint32_t)threads, kv_s[ki], window_type, snaps[ki], 1, &q);
                if (q.ok && q.gen_hash != rows[ki].gen_hash)
                    snprintf(q.err, sizeof q.err, "round %u resumed from the saved session generated other tokens than round 1", ro + 1), q.ok = 0;
                if (!q.ok) {
                    fprintf(stderr, "sjkvarn bench run: %s at context %u, round %u: %s\n", kv_s[ki], ctx, ro + 1, q.err);
                    rows[ki].ok = 0;
                    all_ok = 0;
                    continue;
                }
                rate[ki][ro] = n_gen / q.decode_s;
                if (q.peak_rss_kib > rows[ki].peak_rss_kib) rows[ki].peak_rss_kib = q.peak_rss_kib;
            }
        for (int ki = 0; ki < n_kv; ki++)
            if (snaps[ki][0]) unlink(snaps[ki]);
        if (rounds > 1)
            for (int ki = 0; ki < n_kv; ki++) {
                if (!rows[ki].ok) continue;
                fprintf(stderr, "sjkvarn bench run: %s at context %u: decode tok/s by round:", kv_s[ki], ctx);
                for (uint32_t ro = 0; ro < rounds; ro++) fprintf(stderr, " %.2f", rate[ki][ro]);
                fprintf(stderr, "\n");
            }
        int fi = -1; /* our f16 row at this context, when --kv lists it before a row */
        for (int ki = 0; ki < n_kv; ki++) {
            br_row r = rows[ki];
            if (!r.ok) continue;
            if (fi < 0 && !strcmp(kv_s[ki], "f16")) fi = ki;
            double p = ctx / r.prefill_s, d = sjk_bench_median(rate[ki], rounds), xf16 = 0;
            if (fi >= 0) {
                double x[BR_MAX_ROUNDS];
                for (uint32_t ro = 0; ro < rounds; ro++) x[ro] = rate[ki][ro] / rate[fi][ro];
                xf16 = sjk_bench_median(x, rounds);
            }
            const char *check = r.kv_planned == 0 ? "no-plan" : r.kv_planned == r.kv_bytes ? "ok" : "MISMATCH";
            if (r.kv_planned && r.kv_planned != r.kv_bytes) all_ok = 0;
            if (json) {
                printf("{\"engine\":\"sjkvarn\",\"model\":\"%s\",\"kv\":\"%s\",\"window\":\"%s\",\"context\":%u,\"n_gen\":%u,"
                       "\"threads\":%u,\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.3f,\"kv_bytes\":%zu,"
                       "\"kv_growing_bytes\":%zu,\"kv_window_bytes\":%zu,\"kv_planned_bytes\":%zu,"
                       "\"kv_bits_per_value\":%.4f,\"peak_rss_bytes\":%ld,\"anon_rss_growth_bytes\":%zu",
                       mname, kv_s[ki], sjkh_window_type_name(window_type), ctx, n_gen, threads, p, d, r.kv_bytes, r.kv_growing, r.kv_window,
                       r.kv_planned, r.bits_per_value, r.peak_rss_kib * 1024, r.rss_grow);
                if (L.ok) printf(",\"prefill_vs_llama_cpp\":%.4f,\"decode_vs_llama_cpp\":%.4f", p / lp, d / ld);
                else printf(",\"prefill_vs_llama_cpp\":null,\"decode_vs_llama_cpp\":null");
                if (xf16 > 0) printf(",\"decode_vs_f16\":%.4f", xf16);
                else printf(",\"decode_vs_f16\":null");
                printf(",\"decode_rounds\":%u,\"decode_tok_s_rounds\":[", rounds);
                for (uint32_t ro = 0; ro < rounds; ro++) printf("%s%.3f", ro ? "," : "", rate[ki][ro]);
                printf("]}\n");
            } else {
                char xp[16] = "-", xd[16] = "-", xf[16] = "-";
                if (L.ok) {
                    snprintf(xp, sizeof xp, "%.2f", p / lp);
                    snprintf(xd, sizeof xd, "%.2f", d / ld);
                }
                if (xf16 > 0) snprintf(xf, sizeof xf, "%.2f", xf16);
                printf("%-10s %-8s %6u %10.1f %10.2f %9s %9s %7s %11zu %8.1fMiB %9s\n", "sjkvarn", kv_s[ki], ctx, p, d, xp, xd,
                       xf, r.kv_bytes, r.peak_rss_kib / 1024.0, check);
            }
            fflush(stdout);
        }
    }
    if (getloadavg(la, 3) < 0) la[0] = la[1] = la[2] = -1;
    fprintf(stderr, "sjkvarn bench run: done; load average %.2f %.2f %.2f%s\n", la[0], la[1], la[2],
            have_llama ? "" : "  (NO llama.cpp baseline in this run)");
    rc = all_ok ? 0 : 1;
done:
    if (ids_path[0]) unlink(ids_path);
    free(ids);
    free(pm);
    sjkh_tokenizer_free(tok);
    sjkh_model_free(m);
    return rc;
}
