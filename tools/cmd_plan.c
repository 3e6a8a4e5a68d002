/* cmd_plan.c — `sjkvarn plan`: the capacity table of a model (docs/DESIGN.md §5): per cache
 * configuration, KiB per token, % of f16, the largest context resident in a budget and
 * the sessions that fit at a context; and what `--kv auto` would choose. Metadata only:
 * no weights are read, so any GGUF works, however large. All numbers come from the size
 * model (plan/include/sjkplan.h), which prices caches with sjk_cache_estimate. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_parse.h"
#include "kv_auto.h"
#include "sjkplan.h"

#define PROG "sjkvarn plan"
#define MAX_CFGS 32

static const char *const g_default_cfgs[] = {"f16",    "q8_0/q8_0", "q8_0/q4_0", "q5_0/q5_0", "q4_0/q4_0",
                                             "tq5_0",  "turbo4",    "turbo3",    "sj:4/4",    "sj:3/3t",
                                             "sj:3/2t", "kvarn:4/4"};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sjkvarn plan -m MODEL [--ctx N] [--budget SIZE] [--sessions K] [--json]\n"
            "\n"
            "KV memory per cache configuration for a GGUF model, from its metadata only (no\n"
            "weights are loaded): KiB per token over the layers whose cache grows with the\n"
            "context, %% of f16, the KV memory of one session at --ctx, the largest context that\n"
            "keeps --sessions sessions resident in --budget, and how many sessions fit at --ctx.\n"
            "Sliding-window and recurrent layers are bounded and counted once per session.\n"
            "\n"
            "  -m, --model M      a known model name (listed below) or a path to any .gguf\n"
            "  -c, --ctx N        context per session (default: the model's context length)\n"
            "      --budget SIZE  KV memory budget: 512M, 8G, 8GiB, bytes (default 8GiB)\n"
            "      --sessions K   sessions sharing the budget (default 1)\n"
            "      --kv LIST      configurations to show, comma-separated (default: f16, q8_0,\n"
            "                     q8_0/q4_0, q5_0, q4_0, tq5_0, turbo4, turbo3, sj:4/4, sj:3/3t,\n"
            "                     sj:3/2t, kvarn:4/4)\n"
            "  -t, --threads N    threads per session, as `run` would use, 1..256 (default: online\n"
            "                     CPUs). KV memory grows with -t (up to 64, the cache's threads)\n"
            "                     times -b: the cache keeps attention scratch per thread\n"
            "  -b, --batch-size N prefill chunk, as `run` (default 512)\n"
            "      --window T     storage of sliding-window layers, as `run`: f16 (default) | q8_0\n"
            "      --kl-floor X|off, --quality-floor FILE   the floor of the auto-tier line\n"
            "      --json         JSON on stdout instead of the table (it adds each configuration's\n"
            "                     allocated K/V bytes and bits per value as `eval` counts them)\n"
            "\n"
            "       sjkvarn plan --make-quality-floor MODEL@CTX=STUDY.csv[,STUDY.csv] [MODEL@CTX=...]\n"
            "                     the quality-floor table (docs/quality-floor.csv) from study CSVs\n"
            "                     (docs/results/kl-*.csv), on stdout\n"
            "\n"
            "Sizes are exact: they are what sjkvarn run / eval allocate for the KV caches\n"
            "(weights and activations are not in the budget).\n");
    sjk_model_usage(f);
}

static int flag_is(const char *a, const char *s1, const char *s2)
{
    return !strcmp(a, s1) || (s2 && !strcmp(a, s2));
}

typedef struct row {
    const char *kv;
    sjk_status st;
    char err[256];
    sjkh_plan_size s;
    uint32_t max_ctx;
    size_t sessions;
} row;

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

int sjk_cmd_plan(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--make-quality-floor")) return sjk_plan_make_quality_floor(argc - 2, argv + 2);
    const char *model = NULL, *kv_list = NULL, *budget_s = "8GiB", *budget_flag = "--budget";
    uint32_t n_ctx = 0, sessions = 1, threads = 0, batch = 512, window_type = SJKH_WINDOW_F16;
    int json = 0;
    sjk_kv_auto_opts ka;
    memset(&ka, 0, sizeof ka);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define IS(s1, s2) flag_is(a, s1, s2)
        if (IS("-h", "--help")) {
            usage(stdout);
            return 0;
        }
        if (IS("--json", NULL)) {
            json = 1;
            continue;
        }
        int r = strcmp(a, "--mem-budget") ? sjk_kv_auto_flag(&ka, PROG, a, v) : 0;
        if (r < 0) return 2;
        if (r > 0) {
            i++;
            continue;
        }
        if (!v) {
            fprintf(stderr, PROG ": %s needs a value (or is unknown)\n", a);
            usage(stderr);
            return 2;
        }
        int ok = 1;
        if (IS("-m", "--model")) model = v;
        else if (IS("--kv", NULL)) kv_list = v;
        else if (IS("--budget", "--mem-budget")) {
            budget_s = v;
            budget_flag = a; /* the error names the spelling the user typed */
        }
        else if (IS("-c", "--ctx")) ok = sjk_cli_flag_u32(PROG, a, v, 1, 1u << 30, &n_ctx);
        else if (IS("--sessions", NULL)) ok = sjk_cli_flag_u32(PROG, a, v, 1, 1u << 20, &sessions);
        else if (IS("-t", "--threads")) ok = sjk_cli_flag_threads(PROG, a, v, &threads);
        else if (IS("-b", "--batch-size")) ok = sjk_cli_flag_u32(PROG, a, v, 1, 65536, &batch);
        else if (IS("--window", NULL)) ok = sjk_cli_flag_window(PROG, a, v, &window_type);
        else {
            fprintf(stderr, PROG ": unknown flag %s\n", a);
            usage(stderr);
            return 2;
        }
#undef IS
        if (!ok) return 2;
        i++;
    }
    if (!model) {
        fprintf(stderr, PROG ": -m MODEL is required\n");
        usage(stderr);
        return 2;
    }
    size_t budget;
    if (!sjk_cli_flag_size(PROG, budget_flag, budget_s, &budget)) return 2;
    if (!threads) threads = sjk_cli_threads_default();
    const char *cfgs[MAX_CFGS];
    size_t n_cfgs = 0;
    char list_buf[2048];
    if (kv_list) {
        if (strlen(kv_list) >= sizeof list_buf) {
            fprintf(stderr, PROG ": --kv list too long\n");
            return 2;
        }
        strcpy(list_buf, kv_list);
        for (char *t = strtok(list_buf, ","); t; t = strtok(NULL, ",")) {
            if (n_cfgs == MAX_CFGS) {
                fprintf(stderr, PROG ": at most %d configurations\n", MAX_CFGS);
                return 2;
            }
            if (!sjk_cli_check_kv(PROG, "--kv", t, 0)) return 2;
            cfgs[n_cfgs++] = t;
        }
        if (!n_cfgs) {
            fprintf(stderr, PROG ": --kv needs at least one configuration\n");
            return 2;
        }
    } else {
        for (size_t i = 0; i < sizeof g_default_cfgs / sizeof g_default_cfgs[0]; i++) cfgs[n_cfgs++] = g_default_cfgs[i];
    }

    char path[4096], err[512] = "", key[128];
    if (!sjk_cli_resolve_model(PROG, model, path, sizeof path)) return 2;
    sjk_cli_model_key(model, key, sizeof key);
    sjkh_plan_model *m = calloc(1, sizeof *m);
    row *rows = calloc(n_cfgs, sizeof *rows);
    sjkh_quality_floor *floor = NULL;
    int rc = 1;
    if (!m || !rows) {
        fprintf(stderr, PROG ": out of memory\n");
        goto done;
    }
    if (sjkh_plan_model_open(path, m, err, sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        goto done;
    }
    if (!n_ctx) n_ctx = m->n_ctx_train ? m->n_ctx_train : 4096;
    if (n_ctx > (1u << 30)) n_ctx = 1u << 30;
    sjkh_plan_params p = {n_ctx, batch, threads, sessions, window_type};

    for (size_t i = 0; i < n_cfgs; i++) {
        row *r = &rows[i];
        r->kv = cfgs[i];
        sjkh_plan_params one = p;
        one.n_sessions = 1;
        r->st = sjkh_plan_estimate(m, r->kv, &one, &r->s, r->err, sizeof r->err);
        if (r->st == SJK_ERR_PARAM) {
            fprintf(stderr, "sjkvarn %s\n", r->err); /* r->err starts with "plan: " */
            goto done;
        }
        if (r->st) continue;
        r->sessions = r->s.session_nbytes ? budget / r->s.session_nbytes : 0;
        sjkh_plan_max_ctx(m, r->kv, &p, budget, 1u << 30, &r->max_ctx);
    }

    /* what --kv auto would choose here */
    sjkh_tier_request treq = {"auto", budget, NULL, key, SJK_KV_AUTO_KL_FLOOR};
    if (ka.kl_floor) treq.max_kl = sjk_kv_auto_kl_floor(&ka);
    char fbuf[4096];
    const char *fp = treq.max_kl >= 0 ? sjk_cli_floor_path(&ka, fbuf, sizeof fbuf) : NULL;
    if (fp && sjkh_quality_floor_load(fp, &floor, err, sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        goto done;
    }
    treq.floor = floor;
    sjkh_tier_choice tc;
    sjk_status tst = sjkh_plan_choose_tier(m, &p, &treq, &tc);

    uint32_t n_full = sjkh_plan_model_count(m, SJKH_PLAN_LAYER_FULL);
    uint32_t n_win = sjkh_plan_model_count(m, SJKH_PLAN_LAYER_WINDOW);
    uint32_t n_rec = sjkh_plan_model_count(m, SJKH_PLAN_LAYER_RECURRENT);
    uint32_t kvh = 0;
    for (uint32_t l = 0; l < m->n_layers; l++)
        if (m->n_kv_heads[l] > kvh) kvh = m->n_kv_heads[l];
    if (json) {
        printf("{\"model\": {\"path\": ");
        json_str(stdout, path);
        printf(", \"key\": ");
        json_str(stdout, key);
        printf(", \"arch\": ");
        json_str(stdout, m->arch);
        printf(", \"name\": ");
        json_str(stdout, m->name);
        printf(", \"n_layers\": %u, \"full_layers\": %u, \"window_layers\": %u, \"recurrent_layers\": %u, "
               "\"n_kv_heads_max\": %u, \"head_dim\": %u, \"sliding_window\": %u, \"n_ctx_train\": %u, "
               "\"recurrent_state_bytes\": %llu, \"weights_bytes\": %llu, \"note\": ",
               m->n_layers, n_full, n_win, n_rec, kvh, m->head_dim, m->sliding_window, m->n_ctx_train,
               (unsigned long long)m->recurrent_state_nbytes, (unsigned long long)m->weights_nbytes);
        json_str(stdout, m->note);
        printf("},\n \"ctx\": %u, \"budget_bytes\": %zu, \"sessions\": %u, \"threads\": %u, \"batch\": %u,\n"
               " \"configs\": [",
               n_ctx, budget, sessions, threads, batch);
        for (size_t i = 0; i < n_cfgs; i++) {
            const row *r = &rows[i];
            printf("%s\n  {\"kv\": ", i ? "," : "");
            json_str(stdout, r->kv);
            if (r->st) {
                printf(", \"supported\": false, \"error\": ");
                json_str(stdout, r->err);
                printf("}");
                continue;
            }
            printf(", \"supported\": true, \"bytes_per_token_per_growing_layer\": %.4f",
                   r->s.n_full ? r->s.token_nbytes / r->s.n_full : 0.0);
            printf(", \"bytes_per_token\": %.4f, \"kib_per_token\": %.4f, \"pct_f16\": %.3f, "
                   "\"bits_per_value\": %.4f, \"session_bytes\": %zu, \"growing_bytes\": %zu, \"window_bytes\": %zu, "
                   "\"recurrent_bytes\": %zu, \"total_bytes\": %zu, \"max_ctx\": %u, \"sessions_at_ctx\": %zu, "
                   "\"kv_allocated_bytes\": %zu, \"bits_per_value_allocated\": %.4f}",
                   r->s.token_nbytes, r->s.token_nbytes / 1024.0,
                   r->s.f16_token_nbytes > 0 ? 100.0 * r->s.token_nbytes / r->s.f16_token_nbytes : 0.0,
                   r->s.bits_per_value, r->s.session_nbytes, r->s.growing_nbytes, r->s.window_nbytes,
                   r->s.recurrent_nbytes, r->s.session_nbytes * (size_t)sessions, r->max_ctx, r->sessions,
                   r->s.kv_alloc_nbytes, r->s.bits_per_value_allocated);
        }
        printf("\n ],\n \"auto\": {\"kv\": ");
        json_str(stdout, tc.kv);
        printf(", \"fits\": %s, \"kl_floor\": %g, \"quality_floor\": ", tst == SJK_OK ? "true" : "false", treq.max_kl);
        json_str(stdout, floor ? floor->path : "");
        /* the chosen rung's measured mean KL and the context it was measured at (null:
         * f16, unmeasured or nothing chosen) */
        double kl = -1;
        uint32_t kl_ctx = 0;
        for (size_t i = 1; i < tc.n_rungs; i++)
            if (tc.kv[0] && !strcmp(tc.rungs[i].kv, tc.kv)) {
                kl = tc.rungs[i].mean_kl;
                kl_ctx = tc.rungs[i].kl_context;
            }
        if (kl >= 0) printf(", \"mean_kl\": %.6g, \"kl_context\": %u", kl, kl_ctx);
        else printf(", \"mean_kl\": null, \"kl_context\": null");
        printf(", \"reason\": ");
        json_str(stdout, tc.reason);
        printf("}}\n");
        rc = 0;
        goto done;
    }

    char b1[32], b2[32], b3[32];
    printf("%s: %s (%s)\n", path, m->name[0] ? m->name : key, m->arch);
    printf("  %u layers: %u full attention (grow with the context), %u sliding-window", m->n_layers, n_full, n_win);
    if (n_win) printf(" (window %u)", m->sliding_window);
    printf(", %u recurrent; up to %u KV head(s) of D = %u; trained context %u\n", n_rec, kvh, m->head_dim,
           m->n_ctx_train);
    if (m->note[0]) printf("  note: %s\n", m->note);
    sjkh_format_size(budget, b1, sizeof b1);
    printf("  context %u, %u session(s), budget %s (KV only), threads %u, batch %u, window %s\n\n", n_ctx, sessions, b1,
           threads, batch, sjkh_window_type_name(window_type));
    /* The name column is as wide as the longest configuration string, so that long ones
     * (sj:8/4:tail_min=128:tail_max=256:stage=q8_0) keep the numbers in their columns. */
    int w = 12;
    for (size_t i = 0; i < n_cfgs; i++)
        if (!rows[i].st && (int)strlen(rows[i].kv) > w) w = (int)strlen(rows[i].kv);
    printf("%-*s %9s %7s %8s %12s %12s %14s %12s\n", w, "config", "KiB/tok", "% f16", "bits/val", "fixed/sess",
           "KV @ctx", "max ctx", "sessions");
    printf("%-*s %9s %7s %8s %12s %12s %14s %12s\n", w, "", "", "", "", "", "(1 sess)", "@budget", "@ctx");
    int beyond = 0;
    for (size_t i = 0; i < n_cfgs; i++) {
        const row *r = &rows[i];
        if (r->st) {
            printf("%-12s  n/a: %s\n", r->kv, r->err);
            continue;
        }
        double fixed = (double)r->s.session_nbytes - r->s.token_nbytes * n_ctx;
        sjkh_format_size(fixed > 0 ? (size_t)fixed : 0, b1, sizeof b1);
        sjkh_format_size(r->s.session_nbytes, b2, sizeof b2);
        int over = m->n_ctx_train && r->max_ctx > m->n_ctx_train;
        beyond |= over;
        snprintf(b3, sizeof b3, "%u%s", r->max_ctx, over ? "*" : "");
        printf("%-*s %9.2f %6.1f%% %8.2f %12s %12s %14s %12zu\n", w, r->kv, r->s.token_nbytes / 1024.0,
               r->s.f16_token_nbytes > 0 ? 100.0 * r->s.token_nbytes / r->s.f16_token_nbytes : 0.0,
               r->s.bits_per_value, b1, b2, b3, r->sessions);
    }
    printf("\n");
    if (beyond) printf("  * beyond the model's trained context (%u)\n", m->n_ctx_train);
    printf("  fixed/sess = KV @ctx - KiB/tok x ctx: sink, staging ring, scratch, window caches, states\n");
    printf("  --kv auto (%u session(s), context %u, budget %s, ", sessions, n_ctx, budget_s);
    if (treq.max_kl >= 0) printf("floor mean KL <= %g from %s): ", treq.max_kl, floor ? floor->path : "no table");
    else printf("floor off): ");
    printf("%s\n", tc.reason);
    rc = 0;
done:
    sjkh_quality_floor_free(floor);
    free(rows);
    free(m);
    return rc;
}
