/* cmd_run.c — `sjkvarn run`: generate text with a GGUF model through a chosen KV cache.
 *
 * The prompt and the generated text go to stdout as they are produced; everything else
 * (model summary, speeds, KV memory, errors) goes to stderr. Flags follow llama.cpp's. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_files.h"
#include "cli_parse.h"
#include "kv_auto.h"
#include "prefix_store.h"
#include "sjkhost.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sjkvarn run -m MODEL -p PROMPT [options]\n"
            "\n"
            "  -m, --model M      a known model name (listed below) or a path to a .gguf\n"
            "  -p, --prompt TEXT  the prompt\n"
            "  -f, --file PATH    read the prompt from a file\n"
            "  -n, --n-predict N  tokens to generate (default 64)\n"
            "  -c, --ctx-size N   context positions (default min(4096, the model's))\n"
            "  -b, --batch-size N prefill chunk (default 512)\n"
            "  -t, --threads N    threads, 1..256 (default: online CPUs; the cache runs at most 64).\n"
            "                     Greedy output depends on -t and -b (float summation order), and\n"
            "                     KV memory grows with -t x -b (cache scratch): see `sjkvarn plan`\n"
            "  --act-quant 0|1    1 (default): 8-bit activations as llama.cpp; 0: exact f32\n"
            "                     activations (slower; logits continuous in the KV cache)\n"
            "      --kv CONFIG    KV cache of the growing layers: f16 (default), q8_0, q8_0/q4_0,\n"
            "                     sj:4/4, sj:3/3t, kvarn:4/4, ... or host-f16 (the host's own)\n"
            "      --window T     storage of the sliding-window layers (gemma3): f16 (default) or\n"
            "                     q8_0 (0.53x the window bytes)\n"
            "      --temp T       temperature; 0 = greedy (default 0.8)\n"
            "      --top-k K      (default 40)   --top-p P  (default 0.95)\n"
            "      --seed S       sampling seed (default 1)\n"
            "      --chat         wrap the prompt in the model's chat template as a user turn\n"
            "      --save FILE    at the end, save the session (KV state + the pending token) to FILE\n"
            "                     (atomic; docs/FORMAT.md \"Session files\")\n"
            "      --load FILE    resume a saved session (same model, -c, -b, --kv, --window): feeds -p/-f\n"
            "                     as a continuation, or else the pending token, then generates.\n"
            "                     With --temp 0 the output continues exactly as without the save.\n"
            "      --prefix-store redis://HOST:PORT[,HOST:PORT...][?timeout_ms=N]\n"
            "                     share prompt blocks through Redis (one node or a cluster): import\n"
            "                     the longest stored prefix, prefill the rest, publish what was\n"
            "                     missing (docs/STORE.md); a store that is down only costs time\n"
            "      --prefix-store-ttl S   seconds a published block lives (default 86400)\n"
            "\n"
            "Prompt and generated text go to stdout; speeds and KV memory to stderr.\n");
    fputs(sjk_kv_auto_usage, f);
    sjk_model_usage(f);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU time of the whole process (all threads): on a shared machine, rates per CPU second
 * are steadier than wall-clock rates. */
static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* With --save, an interrupted run (Ctrl-C, SIGTERM, or stdout closed by the reader, as
 * in `sjkvarn run ... --save s | head`) stops generating at the next token and saves the
 * session it has, instead of dying with it. The signal number, or 0. (A process-wide
 * flag: a signal handler can set nothing else; the CLI only, never the libraries.) */
static volatile sig_atomic_t g_stop_signal;
static void on_stop_signal(int sig) { g_stop_signal = sig; }

static void stop_on_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a closed stdout is then EPIPE, seen below */
}

/* 0 if a session save to path could start now, else prints why. */
static int st_check_save(const char *path)
{
    char err[512];
    if (sjkh_session_save_check(path, err, sizeof err) == SJK_OK) return 0;
    fprintf(stderr, "sjkvarn run: --save %s\n", err);
    return 1;
}

static int flag_is(const char *a, const char *s1, const char *s2)
{
    return !strcmp(a, s1) || (s2 && !strcmp(a, s2));
}

int sjk_cmd_run(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *file = NULL, *kv = "f16", *save_path = NULL, *load_path = NULL;
    const char *store_url = NULL;
    uint32_t store_ttl = 86400;
    sjks_store *store = NULL;
    uint32_t act_quant = 1, n_predict = 64, n_ctx = 0, n_batch = 512, n_threads = 0, top_k = 40;
    uint64_t seed = 1;
    double temp = 0.8, top_p = 0.95;
    int chat = 0, ka_r;
    uint32_t window_type = SJKH_WINDOW_F16;
    sjk_kv_auto_opts ka = {NULL, NULL, NULL};
    const char *P = "sjkvarn run";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define IS(s1, s2) flag_is(a, s1, s2)
        if (IS("-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (IS("--chat", NULL)) {
            chat = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "sjkvarn run: %s needs a value (or unknown flag)\n", a);
            usage(stderr);
            return 2;
        }
        int ok = 1;
        if (IS("-m", "--model")) model = v;
        else if (IS("-p", "--prompt")) prompt = v;
        else if (IS("-f", "--file")) file = v;
        else if (IS("--kv", NULL)) ok = sjk_cli_check_kv(P, a, kv = v, 1);
        else if (IS("--save", NULL)) save_path = v;
        else if (IS("--load", NULL)) load_path = v;
        else if (IS("--prefix-store", NULL)) store_url = v;
        else if (IS("--prefix-store-ttl", NULL)) ok = sjk_cli_flag_u32(P, a, v, 1, 4000000000u, &store_ttl);
        else if ((ka_r = sjk_kv_auto_flag(&ka, P, a, v)) != 0) ok = ka_r > 0;
        else if (IS("-n", "--n-predict")) ok = sjk_cli_flag_u32(P, a, v, 0, 10000000, &n_predict);
        else if (IS("-c", "--ctx-size")) ok = sjk_cli_flag_u32(P, a, v, 1, 1u << 24, &n_ctx);
        else if (IS("-b", "--batch-size")) ok = sjk_cli_flag_u32(P, a, v, 1, 65536, &n_batch);
        else if (IS("-t", "--threads")) ok = sjk_cli_flag_threads(P, a, v, &n_threads);
        else if (IS("--act-quant", NULL)) ok = sjk_cli_flag_u32(P, a, v, 0, 1, &act_quant);
        else if (IS("--window", NULL)) ok = sjk_cli_flag_window(P, a, v, &window_type);
        else if (IS("--temp", NULL)) ok = sjk_cli_flag_real(P, a, v, 0, 100, &temp);
        else if (IS("--top-k", NULL)) ok = sjk_cli_flag_u32(P, a, v, 0, 1000000000, &top_k);
        else if (IS("--top-p", NULL)) ok = sjk_cli_flag_real(P, a, v, 0, 1, &top_p);
        else if (IS("--seed", NULL)) ok = sjk_cli_flag_u64(P, a, v, 0, UINT64_MAX, &seed);
        else {
            fprintf(stderr, "sjkvarn run: unknown flag %s\n", a);
            usage(stderr);
            return 2;
        }
#undef IS
        if (!ok) return 2;
        i++;
    }
    if (!model || (!prompt && !file && !load_path)) {
        fprintf(stderr, "sjkvarn run: -m and -p (or -f, or --load) are required\n");
        usage(stderr);
        return 2;
    }

    char path[4096], err[1024] = "";
    if (!sjk_cli_resolve_model("sjkvarn run", model, path, sizeof path)) return 1;
    /* --save's target is checked now, not after the whole generation */
    if (save_path && (st_check_save(save_path) != 0)) return 1;
    char *ptext = NULL;
    size_t plen = 0;
    if (file) {
        if (!(ptext = sjk_cli_read_text(P, file, &plen))) return 1;
    } else {
        if (!prompt) prompt = ""; /* --load alone: continue from the pending token */
        plen = strlen(prompt);
        ptext = malloc(plen + 1);
        if (!ptext) return 1;
        memcpy(ptext, prompt, plen + 1);
    }

    int rc = 1;
    sjkh_model *m = NULL;
    sjkh_tokenizer *tok = NULL;
    sjkh_session *s = NULL;
    sjkh_sampler *smp = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    char *rendered = NULL;

    double t_load = now_s();
    sjk_status st = sjkh_model_load(path, &m, err, sizeof err);
    if (st) {
        fprintf(stderr, "sjkvarn run: %s\n", err);
        goto done;
    }
    const sjkh_model_info *in = sjkh_model_get_info(m);
    if ((st = sjkh_tokenizer_from_gguf(sjkh_model_gguf(m), &tok, err, sizeof err))) {
        fprintf(stderr, "sjkvarn run: tokenizer: %s\n", err);
        goto done;
    }
    if (chat) {
        sjkh_chat_message msg = {"user", ptext};
        size_t need = plen + 4096;
        rendered = malloc(need + 1);
        st = rendered ? sjkh_tokenizer_chat_render(tok, &msg, 1, 1, rendered, need + 1, &need) : SJK_ERR_NOMEM;
        if (st == SJK_ERR_UNSUPPORTED) {
            fprintf(stderr, "sjkvarn run: this model has no chat template\n");
            goto done;
        }
        if (st == SJK_ERR_BUFFER) {
            free(rendered);
            rendered = malloc(need + 1);
            st = rendered ? sjkh_tokenizer_chat_render(tok, &msg, 1, 1, rendered, need + 1, &need) : SJK_ERR_NOMEM;
        }
        if (st) {
            fprintf(stderr, "sjkvarn run: cannot render the chat template\n");
            goto done;
        }
    }
    const char *text = rendered ? rendered : ptext;
    size_t tlen = strlen(text), n_ids = 0;
    unsigned flags = (load_path ? 0 : SJKH_TOKENIZE_ADD_SPECIAL) | (chat ? SJKH_TOKENIZE_PARSE_SPECIAL : 0);
    if (!(ids = sjk_cli_tokenize(P, "the prompt", tok, text, tlen, flags, &n_ids))) goto done;
    if (n_ids == 0 && load_path) { /* room for the pending token */
        free(ids);
        if (!(ids = malloc(sizeof *ids))) goto done;
    }
    if (n_ids == 0 && !load_path) {
        fprintf(stderr, "sjkvarn run: the prompt is empty\n");
        goto done;
    }

    sjkh_session_params sp = sjkh_session_params_default();
    sp.n_ctx = n_ctx > 0 ? n_ctx : (in->n_ctx_train < 4096 ? in->n_ctx_train : 4096);
    sp.n_batch = n_batch;
    sp.act_quant = act_quant;
    sp.window_type = window_type;
    sp.n_threads = n_threads > 0 ? n_threads : sjk_cli_threads_default();
    char kv_chosen[SJKH_KV_STR_MAX + 1];
    if (!sjk_kv_auto_resolve(&ka, "sjkvarn run", path, model, sp.n_ctx, sp.n_batch, sp.n_threads, kv, kv_chosen,
                             sizeof kv_chosen))
        goto done;
    sp.kv = kv = kv_chosen;
    if (sp.n_ctx > in->n_ctx_train) {
        fprintf(stderr, "sjkvarn run: context %u exceeds the model's %u\n", sp.n_ctx, in->n_ctx_train);
        goto done;
    }
    if (n_ids > sp.n_ctx) {
        fprintf(stderr, "sjkvarn run: the prompt has %zu tokens, more than the context of %u (use -c)\n", n_ids,
                sp.n_ctx);
        goto done;
    }
    if ((st = sjkh_session_create(m, &sp, &s, err, sizeof err))) {
        fprintf(stderr, "sjkvarn run: %s\n", err);
        goto done;
    }
    int32_t pending = -1;
    if (load_path) {
        if ((st = sjkh_session_load(s, load_path, &pending, err, sizeof err))) {
            fprintf(stderr, "sjkvarn run: --load: %s (%s)\n", err, sjk_status_str(st));
            goto done;
        }
        fprintf(stderr, "sjkvarn run: resumed %u positions from %s\n", sjkh_session_n_past(s), load_path);
        if (n_ids == 0) {
            if (pending < 0) {
                fprintf(stderr, "sjkvarn run: %s has no pending token; give a prompt to continue with\n", load_path);
                goto done;
            }
            ids[0] = pending;
            n_ids = 1;
        }
        pending = -1;
    }
    sjkh_sampler_params smpp = {(float)temp, (int32_t)top_k, (float)top_p, seed};
    if ((st = sjkh_sampler_create(&smpp, in->n_vocab, &smp))) {
        fprintf(stderr, "sjkvarn run: bad sampling parameters\n");
        goto done;
    }
    logits = malloc((size_t)in->n_vocab * sizeof *logits);
    if (!logits) goto done;
    fprintf(stderr, "sjkvarn run: %s (%s, %u layers, %u growing), %.1f MiB weights, loaded in %.2f s\n", path,
            in->arch_name, in->n_layers, in->n_global_layers, (double)in->weights_nbytes / 1048576.0,
            now_s() - t_load);
    fprintf(stderr, "sjkvarn run: context %u, batch %u, threads %u, kv %s, prompt %zu tokens\n", sp.n_ctx, sp.n_batch,
            sp.n_threads, kv, n_ids);

    if (save_path) stop_on_signals();

    if (store_url && !load_path) {
        if ((st = sjks_store_open(store_url, m, &sp, (uint32_t)store_ttl, &store, err, sizeof err))) {
            fprintf(stderr, "sjkvarn run: --prefix-store: %s\n", err);
            goto done;
        }
    } else if (store_url) {
        fprintf(stderr, "sjkvarn run: --prefix-store is not used with --load (the session is not fresh)\n");
    }

    fwrite(text, 1, tlen, stdout);
    int out_closed = fflush(stdout) != 0 && errno == EPIPE;
    double t0 = now_s(), c0 = cpu_s();
    sjks_prefill_report srep;
    if ((st = sjks_store_prefill(store, s, ids, n_ids, logits, &srep, err, sizeof err))) {
        fprintf(stderr, "\nsjkvarn run: %s\n", err);
        goto done;
    }
    double t1 = now_s(), c1 = cpu_s();
    size_t n_gen = 0, want = n_predict;
    const uint32_t n_past = sjkh_session_n_past(s);
    if (want > sp.n_ctx - n_past) {
        fprintf(stderr, "sjkvarn run: generation limited to %zu tokens by the context\n", (size_t)(sp.n_ctx - n_past));
        want = sp.n_ctx - n_past;
    }
    int stopped = 0, interrupted = 0;
    while (n_gen < want) {
        int32_t id = sjkh_sampler_sample(smp, logits);
        n_gen++;
        if (sjkh_tokenizer_is_eog(tok, id)) {
            stopped = 1;
            break;
        }
        char piece[512];
        size_t pn = 0;
        if (sjkh_tokenizer_token_to_piece(tok, id, 0, piece, sizeof piece, &pn) == SJK_OK) fwrite(piece, 1, pn, stdout);
        if (fflush(stdout) != 0 && errno == EPIPE) out_closed = 1;
        if (n_gen == want || (save_path && (g_stop_signal || out_closed))) {
            pending = id; /* sampled, shown, not yet fed: what --save keeps for --load */
            interrupted = n_gen < want;
            break;
        }
        if ((st = sjkh_session_feed(s, &id, 1, logits, 0, err, sizeof err))) {
            fprintf(stderr, "\nsjkvarn run: %s\n", err);
            goto done;
        }
    }
    double t2 = now_s(), c2 = cpu_s();
    fputc('\n', stdout);
    fflush(stdout);
    sjkh_kv_report r;
    double dec = n_gen > 1 ? (double)(n_gen - 1) / (t2 - t1) : 0;
    fprintf(stderr, "sjkvarn run: prefill %zu tokens in %.3f s = %.1f tok/s; decode %zu tokens in %.3f s = %.1f tok/s%s\n",
            n_ids, t1 - t0, (double)n_ids / (t1 - t0), n_gen, t2 - t1, dec, stopped ? " (end of generation)" : "");
    fprintf(stderr, "sjkvarn run: per CPU second (all threads): prefill %.1f tok/s, decode %.1f tok/s\n",
            (double)n_ids / (c1 - c0), n_gen > 1 ? (double)(n_gen - 1) / (c2 - c1) : 0.0);
    if (sjkh_session_kv_report(s, &r) == SJK_OK)
        fprintf(stderr,
                "sjkvarn run: KV memory %.2f MiB allocated (growing layers %.2f MiB, windows %.2f MiB %s), %.2f "
                "MiB occupied, %.2f bits/value\n",
                (double)r.total_nbytes / 1048576.0, (double)r.growing_nbytes / 1048576.0,
                (double)r.window_nbytes / 1048576.0, sjkh_window_type_name(window_type),
                (double)r.occupied_nbytes / 1048576.0, r.bits_per_value);
    if (interrupted)
        fprintf(stderr, "sjkvarn run: %s after %zu of %zu tokens: stopped generating, saving the session\n",
                g_stop_signal == SIGINT ? "interrupted (SIGINT)" : g_stop_signal ? "terminated (SIGTERM)"
                                                                                 : "stdout closed (EPIPE)",
                n_gen, want);

    if (store)
        fprintf(stderr,
                "sjkvarn run: prefix store: %u of %zu prompt tokens from the store, %u prefilled, %u blocks published "
                "(lookup %.1f ms, fetch+import %.1f ms, publish %.1f ms)\n",
                srep.cached_tokens, n_ids, srep.prefilled_tokens, srep.published_blocks, srep.lookup_s * 1e3,
                srep.fetch_s * 1e3, srep.publish_s * 1e3);
    if (save_path) {
        if ((st = sjkh_session_save(s, save_path, pending, err, sizeof err))) {
            fprintf(stderr, "sjkvarn run: --save: %s (%s)\n", err, sjk_status_str(st));
            goto done;
        }
        fprintf(stderr, "sjkvarn run: saved %u positions to %s\n", sjkh_session_n_past(s), save_path);
    }
    rc = interrupted ? (g_stop_signal ? 128 + g_stop_signal : 1) : 0;
done:
    free(ids);
    free(logits);
    free(rendered);
    free(ptext);
    sjkh_sampler_free(smp);
    sjks_store_close(store);
    sjkh_session_free(s);
    sjkh_tokenizer_free(tok);
    sjkh_model_free(m);
    return rc;
}
