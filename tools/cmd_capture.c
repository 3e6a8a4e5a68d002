/* cmd_capture.c — `sjkvarn capture-tiles`: runs texts through a model with a compressed
 * cache and writes the K and V tiles of every record it seals to a tile capture file
 * (tools/tile_file.h): with --stage balanced (the default) the balanced tiles a trellis
 * body codes, the real data `sjkvarn train-codebook --data tiles:FILE` trains and
 * compares codebooks on; with --stage rotated the tiles as the balancing gets them (any
 * sj or kvarn body), which `sjkvarn bench balance --tiles FILE` balances by each rule.
 *
 *   sjkvarn capture-tiles -m MODEL -f TEXT[,TEXT...] [-c CTX] [--kv sj:4/4t] [-t N]
 *                         [-b N] [--act-quant 0|1] [--stage balanced|rotated] --out FILE
 *
 * Each text is prefilled into a fresh session (its first CTX tokens); the tiles are the
 * records sealed on the way (the sink and the unsealed ring are not tiles). The file is
 * written once, atomically, after the last text, its tiles in a canonical order
 * (sjk_tile_set_sort): the same build, texts and options give the same bytes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_files.h"
#include "cli_parse.h"
#include "codec/record.h"
#include "codec/trellis.h"
#include "models.h"
#include "sjkhost.h"
#include "tile_file.h"

typedef struct capture {
    pthread_mutex_t mu;
    sjk_tile_set set;
    float *buf; /* one tile, materialised */
    size_t buf_cap;
    int failed;
    size_t nk, nv;
} capture;

/* Whether c->buf holds m floats (grown if not; a failure marks the capture failed).
 * Under mu. */
static int buf_fits(capture *c, size_t m)
{
    if (!c->failed && m > c->buf_cap) {
        float *nb = realloc(c->buf, m * sizeof *nb);
        if (nb) {
            c->buf = nb;
            c->buf_cap = m;
        } else {
            c->failed = 1;
        }
    }
    return !c->failed;
}

/* The observer: called from the threads that seal records, so everything under mu. */
static void observe(void *ctx, const sjk_trellis_tile *tt, const sjk_trellis_input *in)
{
    capture *c = ctx;
    const size_t D = tt->D, G = tt->G, m = D * G;
    pthread_mutex_lock(&c->mu);
    if (buf_fits(c, m)) {
        for (size_t t = 0; t < G; t++)
            for (size_t d = 0; d < D; d++) {
                float x = in->x[t * in->st + d * in->sd];
                c->buf[t * D + d] = in->mul ? x * in->mul[in->mul_on_token ? t : d] : x;
            }
        if (!sjk_tile_set_add(&c->set, tt->D, tt->G, tt->rows, SJK_TILE_BALANCED, c->buf)) c->failed = 1;
        else if (tt->rows == SJK_TRELLIS_ROWS_CHANNELS) c->nk++;
        else c->nv++;
    }
    pthread_mutex_unlock(&c->mu);
}

/* The record observer (--stage rotated): a record's K tile channel-major, turned
 * token-major as the file stores every tile, and its V tile as it is. */
static void observe_rotated(void *ctx, const float *kt, const float *vt, size_t D, size_t G)
{
    capture *c = ctx;
    const size_t m = D * G;
    pthread_mutex_lock(&c->mu);
    if (buf_fits(c, m)) {
        for (size_t t = 0; t < G; t++)
            for (size_t d = 0; d < D; d++) c->buf[t * D + d] = kt[d * G + t];
        if (!sjk_tile_set_add(&c->set, (uint32_t)D, (uint32_t)G, 0, SJK_TILE_ROTATED, c->buf) ||
            !sjk_tile_set_add(&c->set, (uint32_t)D, (uint32_t)G, 1, SJK_TILE_ROTATED, vt))
            c->failed = 1;
        else
            c->nk++, c->nv++;
    }
    pthread_mutex_unlock(&c->mu);
}

static void observers(capture *c, int rotated)
{
    sjk_trellis_set_observer(c && !rotated ? observe : NULL, c);
    sjk_record_set_tile_observer(c && rotated ? observe_rotated : NULL, c);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sjkvarn capture-tiles -m MODEL -f TEXT[,TEXT...] --out FILE [options]\n"
               "\n"
               "  -m, --model M      a known model name or a path to a .gguf\n"
               "  -f, --file LIST    texts (comma-separated paths), each prefilled into a fresh session\n"
               "  -c, --ctx-size N   tokens of each text (default 8192, at most the model's context)\n"
               "      --kv CONFIG    the cache whose records are captured (default sj:4/4t); for\n"
               "                     --stage balanced its K and V bodies must be trellis bodies\n"
               "      --stage S      balanced (default): the tiles a trellis body codes; rotated: the\n"
               "                     tiles the balancing gets (any sj or kvarn body)\n"
               "  -t, --threads N    threads (default: online CPUs)\n"
               "  -b, --batch-size N prefill chunk (default 512)\n"
               "  --act-quant 0|1    activations as in `sjkvarn run` (default 1)\n"
               "  --out FILE         the tile capture file (docs/FORMAT.md \"Tile capture files\")\n");
}

int sjk_cmd_capture(int argc, char **argv)
{
    const char *P = "sjkvarn capture-tiles";
    const char *model = NULL, *files = NULL, *kv = "sj:4/4t", *out = NULL, *stage = "balanced";
    uint32_t n_ctx = 8192, n_batch = 512, n_threads = 0, act_quant = 1;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "%s: %s needs a value\n", P, a);
            return 2;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) files = v;
        else if (!strcmp(a, "--kv")) kv = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--stage")) stage = v;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) ok = sjk_cli_flag_u32(P, a, v, 256, 1u << 20, &n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) ok = sjk_cli_flag_u32(P, a, v, 1, 1u << 16, &n_batch);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = sjk_cli_flag_threads(P, a, v, &n_threads);
        else if (!strcmp(a, "--act-quant")) ok = sjk_cli_flag_u32(P, a, v, 0, 1, &act_quant);
        else {
            fprintf(stderr, "%s: unknown option %s\n", P, a);
            usage(stderr);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!model || !files || !out) {
        fprintf(stderr, "%s: -m, -f and --out are required\n", P);
        usage(stderr);
        return 2;
    }
    if (strcmp(stage, "balanced") && strcmp(stage, "rotated")) {
        fprintf(stderr, "%s: --stage %s: balanced or rotated\n", P, stage);
        return 2;
    }
    const int rotated = !strcmp(stage, "rotated");
    if (!sjk_cli_check_kv(P, "--kv", kv, 0)) return 2;
    if (!sjk_cli_check_target(P, "--out", out)) return 1;
    char path[4096], err[1024] = "";
    if (!sjk_cli_resolve_model(P, model, path, sizeof path)) return 1;

    int rc = 1;
    sjkh_model *m = NULL;
    sjkh_tokenizer *tok = NULL;
    capture c = {.mu = PTHREAD_MUTEX_INITIALIZER};
    char list[4096];
    if (snprintf(list, sizeof list, "%s", files) >= (int)sizeof list) {
        fprintf(stderr, "%s: -f list too long\n", P);
        return 2;
    }
    if (sjkh_model_load(path, &m, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", P, err);
        goto done;
    }
    const sjkh_model_info *in = sjkh_model_get_info(m);
    if (n_ctx > in->n_ctx_train) {
        fprintf(stderr, "%s: context %u exceeds the model's %u\n", P, n_ctx, in->n_ctx_train);
        goto done;
    }
    if (sjkh_tokenizer_from_gguf(sjkh_model_gguf(m), &tok, err, sizeof err)) {
        fprintf(stderr, "%s: tokenizer: %s\n", P, err);
        goto done;
    }
    for (char *save = NULL, *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        size_t tlen = 0, n_ids = 0;
        char *text = sjk_cli_read_text(P, f, &tlen);
        if (!text) goto done;
        int32_t *ids = sjk_cli_tokenize(P, f, tok, text, tlen, 0, &n_ids);
        free(text);
        if (!ids) goto done;
        size_t n = n_ids < n_ctx ? n_ids : n_ctx;
        sjkh_session_params sp = sjkh_session_params_default();
        sp.n_ctx = n_ctx;
        sp.n_batch = n_batch;
        sp.n_threads = n_threads ? n_threads : sjk_cli_threads_default();
        sp.act_quant = act_quant;
        sp.kv = kv;
        sjkh_session *s = NULL;
        size_t k0 = c.nk, v0 = c.nv;
        sjk_status st = sjkh_session_create(m, &sp, &s, err, sizeof err);
        /* Observed from the first token on: the cache seals one zero group per layer when
         * it is created (the body probe of sjk_cache_create), which is not the model's. */
        observers(&c, rotated);
        if (!st) st = sjkh_session_feed(s, ids, n, NULL, 0, err, sizeof err);
        observers(NULL, 0);
        sjkh_session_free(s);
        free(ids);
        if (st) {
            fprintf(stderr, "%s: %s: %s\n", P, f, err);
            goto done;
        }
        if (c.failed) {
            fprintf(stderr, "%s: out of memory holding the tiles (or tiles of two shapes)\n", P);
            goto done;
        }
        fprintf(stderr, "%s: %s: %zu tokens, %zu K and %zu V tiles\n", P, f, n, c.nk - k0, c.nv - v0);
    }
    if (c.nk == 0 || c.nv == 0) {
        if (rotated)
            fprintf(stderr, "%s: --kv %s sealed no record: it needs an sj or kvarn cache and texts longer than its "
                    "sink and ring\n", P, kv);
        else
            fprintf(stderr, "%s: --kv %s coded %zu K and %zu V trellis tiles: it needs a trellis body (e.g. sj:4/4t) "
                    "and texts longer than its sink and ring\n", P, kv, c.nk, c.nv);
        goto done;
    }
    if (!sjk_tile_set_sort(&c.set)) {
        fprintf(stderr, "%s: out of memory sorting the tiles\n", P);
        goto done;
    }
    sjk_cli_out o = {out, sjk_tile_set_write, &c.set};
    if (!sjk_cli_write_set(P, &o, 1)) goto done;
    fprintf(stderr, "%s: wrote %zu %s tiles of %u tokens x %u channels to %s\n", P, c.set.n, stage, c.set.G, c.set.D,
            out);
    rc = 0;
done:
    observers(NULL, 0);
    sjk_tile_set_free(&c.set);
    free(c.buf);
    sjkh_tokenizer_free(tok);
    sjkh_model_free(m);
    return rc;
}
