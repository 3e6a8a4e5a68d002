/* cmd_serve.c — `sjkvarn serve`: flags, the model, the cache configuration for all
 * sessions (--kv auto under --mem-budget, through tools/kv_auto.c), then server/serve.c.
 * docs/SERVER.md describes the server. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_parse.h"
#include "kv_auto.h"
#include "sjkhost.h"
#include "sjkplan.h"

#ifdef SJK_HAVE_SERVER
#include "server.h"
#endif

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sjkvarn serve -m MODEL [options]\n"
            "\n"
            "An OpenAI-compatible HTTP server (docs/SERVER.md): POST /v1/chat/completions,\n"
            "/v1/completions (plain and streamed), GET /health, /v1/models, /metrics, /slots, /props,\n"
            "POST /slots/{id}?action=save|restore|erase.\n"
            "\n"
            "  -m, --model M        gemma3-270m | smollm2-135m (the fetch cache) or a .gguf path\n"
            "      --kv CFG|auto    cache of the growing layers for every session (default f16);\n"
            "                       auto: the least compression whose caches for --parallel sessions\n"
            "                       at --ctx fit --mem-budget, never below the quality floor\n"
            "      --mem-budget SIZE  KV memory for all sessions together (512M, 2G, ...); the start\n"
            "                       is refused, saying what fits, when the sessions do not fit\n"
            "  -c, --ctx N          positions per session (default min(4096, the model's))\n"
            "  -np, --parallel N    sessions (default 1); decoding sessions share one forward pass\n"
            "  -b, --batch-size N   prefill chunk (default 512; at least --parallel)\n"
            "  -t, --threads N      threads of the forward pass (default: online CPUs)\n"
            "      --host ADDR      IPv4 address to listen on (default 127.0.0.1)\n"
            "      --port N         port (default 8080; 0: any free port, printed)\n"
            "      --api-key KEY    require Authorization: Bearer KEY on every route but /health\n"
            "      --idle-seal S    seal a session back to tail_min after S idle seconds (default off)\n"
            "      --slot-dir DIR   where /slots save and restore session files (default: off)\n"
            "      --alias NAME     the model id in /v1/models (default: the file name)\n"
            "      --window T       gemma3 sliding-window layers: f16 (default) or q8_0\n"
            "      --max-body N     largest request body in bytes (default 1048576; larger: 413)\n"
            "      --max-tokens N   max_tokens of a request that gives none (default 256)\n"
            "      --kl-floor X|off the quality floor of --kv auto (default 0.02)\n"
            "      --prefix-store redis://HOST:PORT[,HOST:PORT...][?timeout_ms=N]\n"
            "                       share prompt blocks between servers through Redis (one node or\n"
            "                       a cluster, docs/STORE.md): a prompt that no session holds\n"
            "                       imports its longest stored prefix and prefills the rest; new\n"
            "                       blocks are published; a store that is down only costs time\n"
            "      --prefix-store-ttl S   seconds a published block lives (default 86400)\n"
            "\n"
            "Logs go to stderr; one line on stdout gives the address once the server listens.\n"
            "SIGINT or SIGTERM stops it cleanly (exit 0).\n");
}

#ifdef SJK_HAVE_SERVER
static int flag_is(const char *a, const char *s1, const char *s2)
{
    return !strcmp(a, s1) || (s2 && !strcmp(a, s2));
}
#endif

int sjk_cmd_serve(int argc, char **argv)
{
#ifndef SJK_HAVE_SERVER
    (void)argc;
    (void)argv;
    fprintf(stderr, "sjkvarn serve: this build has no server: it needs libmicrohttpd and jansson\n"
                    "  (Debian: apt-get install libmicrohttpd-dev libjansson-dev), then rebuild with make\n\n");
    usage(stderr);
    return 3;
#else
    srv_opts o = srv_opts_default();
    const char *model = NULL, *P = "sjkvarn serve";
    uint32_t ctx = 0, par = 1, batch = 512, thr = sjk_cli_threads_default(), port = 8080, maxt = 256;
    uint64_t maxb = 1 << 20;
    double idle = 0;
    sjk_kv_auto_opts ka = {NULL, NULL, NULL};
    for (int i = 1; i < argc; i += 2) { /* every flag but --help takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "sjkvarn serve: %s needs a value (or unknown flag)\n", a);
            usage(stderr);
            return 2;
        }
        int ok = 1, r;
#define IS(s1, s2) flag_is(a, s1, s2)
        if (IS("-m", "--model")) model = v;
        else if (IS("--kv", NULL)) ok = sjk_cli_check_kv(P, a, v, 1), o.kv = v;
        else if ((r = sjk_kv_auto_flag(&ka, P, a, v)) != 0) ok = r > 0;
        else if (IS("-c", "--ctx") || IS("--ctx-size", NULL)) ok = sjk_cli_flag_u32(P, a, v, 1, 1u << 24, &ctx);
        else if (IS("-np", "--parallel")) ok = sjk_cli_flag_u32(P, a, v, 1, 256, &par);
        else if (IS("-b", "--batch-size")) ok = sjk_cli_flag_u32(P, a, v, 1, 65536, &batch);
        else if (IS("-t", "--threads")) ok = sjk_cli_flag_threads(P, a, v, &thr);
        else if (IS("--host", NULL)) o.host = v;
        else if (IS("--port", NULL)) ok = sjk_cli_flag_u32(P, a, v, 0, 65535, &port);
        else if (IS("--api-key", NULL)) o.api_key = v;
        else if (IS("--idle-seal", NULL)) ok = sjk_cli_flag_real(P, a, v, 0, 1e9, &idle);
        else if (IS("--slot-dir", NULL)) o.slot_dir = v;
        else if (IS("--alias", NULL)) o.alias = v;
        else if (IS("--max-body", NULL)) ok = sjk_cli_flag_u64(P, a, v, 64, 1u << 30, &maxb);
        else if (IS("--max-tokens", NULL)) ok = sjk_cli_flag_u32(P, a, v, 1, 1u << 24, &maxt);
        else if (IS("--window", NULL)) ok = sjk_cli_flag_window(P, a, v, &o.window_type);
        else if (IS("--prefix-store", NULL)) o.prefix_store = v;
        else if (IS("--prefix-store-ttl", NULL)) ok = sjk_cli_flag_u32(P, a, v, 1, 4000000000u, &o.prefix_store_ttl);
        else {
            fprintf(stderr, "sjkvarn serve: unknown flag %s\n", a);
            usage(stderr);
            return 2;
        }
#undef IS
        if (!ok) return 2;
    }
    if (!model) {
        fprintf(stderr, "sjkvarn serve: -m MODEL is required\n");
        usage(stderr);
        return 2;
    }
    char path[4096];
    if (!sjk_cli_resolve_model("sjkvarn serve", model, path, sizeof path)) return 1;
    if (o.slot_dir && access(o.slot_dir, W_OK)) {
        fprintf(stderr, "sjkvarn serve: --slot-dir %s: %s\n", o.slot_dir, strerror(errno));
        return 1;
    }
    sjkh_plan_model *pm = calloc(1, sizeof *pm);
    char err[512] = "";
    if (!pm || sjkh_plan_model_open(path, pm, err, sizeof err)) {
        fprintf(stderr, "sjkvarn serve: %s\n", pm ? err : "out of memory");
        free(pm);
        return 1;
    }
    uint32_t n_ctx_train = pm->n_ctx_train;
    o.n_ctx = ctx > 0 ? ctx : (n_ctx_train && n_ctx_train < 4096 ? n_ctx_train : 4096);
    o.parallel = par;
    o.n_batch = batch;
    o.n_threads = thr;
    o.port = port;
    o.idle_seal_s = idle;
    o.max_body_nbytes = (size_t)maxb;
    o.max_tokens_default = maxt;
    o.mem_budget = ka.budget;
    if (ka.budget) sjk_cli_parse_size(ka.budget, &o.mem_budget_nbytes);
    if (o.n_batch < o.parallel) {
        fprintf(stderr, "sjkvarn serve: --batch-size %u is below --parallel %u (a decode step carries one row per "
                "session)\n", o.n_batch, o.parallel);
        free(pm);
        return 2;
    }
    sjk_kv_auto_result res;
    if (!sjk_kv_auto_resolve_sessions(&ka, "sjkvarn serve", path, model, o.n_ctx, o.n_batch, o.n_threads, o.parallel,
                                      o.kv, &res)) {
        fprintf(stderr, "sjkvarn serve: refusing to start\n");
        free(pm);
        return 1;
    }
    /* An explicit --kv over the budget is not refused on the plan: the server creates the
     * sessions, measures what their caches allocate and refuses then, saying how many fit
     * (server/serve.c), so capacity is measured, not computed. */
    if (!res.fits) fprintf(stderr, "sjkvarn serve: the plan says this does not fit; measuring the real allocation\n");
    free(pm);
    o.kv = res.kv;
    return srv_main(&o, path, res.reason, res.planned_nbytes);
#endif
}
