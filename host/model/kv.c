/* kv.c — host fp16 caches (full and sliding-window ring) and the libsjkvarn backend
 * behind the kv.h interface.
 *
 * Host fp16 layer, one per layer, rows in slot = position % cap:
 *
 *   k16 [cap][n_kv][hd] fp16      v16 [cap][n_kv][hd] fp16
 *   cap = n_ctx for a full layer, min(n_ctx, window + max_rows) for a window layer
 *
 * A window layer with window_type q8_0 holds the same slots as ggml q8_0 blocks, written
 * by the library's q8_0 encoder (sjk_format_get(SJK_FMT_Q8_0), llama.cpp's bytes):
 *
 *   k8 [cap][n_kv][hd/32] blocks   v8 likewise       block = | d fp16 | qs[32] int8 |
 *   one slot = n_kv * hd/32 * 34 B; head g starts at g * hd/32 * 34 B of its slot
 *
 * and is read by ops.h scores_q8_0_multi / wsum_q8_0_multi (the query and the weights
 * stay f32, rounded to f16 as for the fp16 rows).
 *
 * Attention (host layers): one task per (query row, query head); two passes over the
 * visible positions: scores into per-thread scratch, then softmax weights times V.
 * Scores and the output accumulate in f32; K and V are read from fp16. The query and the
 * softmax weights are rounded to f16 before their products with f16 K and V, as
 * llama.cpp's (non-flash) attention does with an f16 cache: with that, our logits equal
 * llama.cpp's bit for bit at most positions, until a float summation-order difference
 * flips an activation quantization step (tests/test_model_golden.c: mean KL 2.5e-3 on
 * SmolLM2 and 5e-3 on Gemma 3, while llama.cpp's own flash and non-flash paths differ by
 * 3.6e-3 and 7.2e-3 on the same kind of prompts). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hcommon.h"
#include "kv.h"
#include "kernels/ops.h"

#define SPLIT_MAX 64 /* most position ranges one decode attention is split into */

typedef struct host_layer {
    uint32_t cap;       /* ring slots */
    uint32_t window;    /* 0 = full attention */
    int q8;             /* rows are q8_0 blocks (window layers with window_type q8_0) */
    size_t row_nbytes;  /* bytes of one slot of K (or V): [n_kv][hd] fp16 or q8_0 */
    uint8_t *k, *v;     /* [cap][row_nbytes] */
} host_layer;

struct sjkh_kv {
    sjkh_kv_params p;
    uint32_t *len;        /* [n_layers] positions appended */
    host_layer *host;     /* [n_layers]; k == NULL for layers in the libsjkvarn cache */
    int32_t *cache_layer; /* [n_layers] index in `cache`, -1 = host layer */
    sjk_cache *cache;
    uint32_t n_cache_layers;
    void (*enc_q8)(void *dst, const float *src, size_t n); /* the library's q8_0 encoder */
    float *scratch;       /* [n_threads][max visible][G] scores */
    float *qr;            /* [max_rows][n_q][hd] queries rounded to f16 */
    float *dsc;           /* decode split: [max visible][n_q] scores */
    float *smax;          /* [SPLIT_MAX][n_q] */
    double *ssum;         /* [SPLIT_MAX][n_q] */
    float *po;            /* [SPLIT_MAX][n_q][hd] partial outputs */
    uint32_t scratch_stride;
    uint32_t n_scratch;
    size_t host_full_nbytes, host_window_nbytes;
    struct kv_probe *probe; /* ":exact=" attribution (below), or NULL */
};

/* ---- region attribution (":exact=LIST", the KL study's analysis knob) ----------------
 *
 * A configuration string may end in ":exact=LIST" (LIST: items joined by '+'; an item is
 * sink, body, ring or uniform, optionally with .k or .v, or k, v, all, none). The cache
 * is built from the rest of the string and fed as always, so sealing, the ring and the
 * body evolve exactly as without the option; but attention reads a second, uniform f16
 * cache per growing layer (the "view"), which holds for every position either the row
 * the real cache decodes now (sjk_cache_read_rows) or, for the regions and halves LIST
 * names, the exact row rounded to fp16 as the f16 reference stores it. The view's
 * attention is the reference's own (uniform f16), so "exact=all" reproduces the f16
 * reference bit for bit and "exact=none" is the configuration itself read through f16
 * rows; the KL of "exact=body.k" against "exact=none" is what K of the sealed body
 * costs. The view follows the cache: rows are appended as they arrive and rewritten
 * from the old body end on whenever a seal moves the body end. Analysis only: it keeps
 * an fp16 copy of every row and a second cache, and session files and prefix blocks
 * are refused (sjkh_kv_layer_storage). */
#define PROBE_REGIONS 4 /* sjk_region: sink, body, ring, uniform; bit = 2 * region + (V) */

typedef struct kv_probe {
    unsigned mask;
    sjk_cache **view;      /* [n_cache_layers] one-layer uniform f16 caches */
    uint16_t **ek, **ev;   /* [n_cache_layers] exact rows [n_ctx][n_kv * hd], fp16 */
    uint32_t *n_view, *b_view; /* [n_cache_layers] view length, real body end it mirrors */
    float *bk, *bv;        /* [SJK_GROUP][n_kv * hd] rows on their way into a view */
    float *hk, *hv;        /* [SJK_GROUP][hd] one head's decoded rows */
    uint8_t reg[SJK_GROUP];
    void *scr;
    size_t scr_nbytes;
    uint32_t n;            /* n_cache_layers */
} kv_probe;

static void probe_free(kv_probe *P)
{
    if (!P) return;
    for (uint32_t i = 0; i < P->n; i++) {
        if (P->view) sjk_cache_free(P->view[i]);
        if (P->ek) free(P->ek[i]);
        if (P->ev) free(P->ev[i]);
    }
    free(P->view);
    free(P->ek);
    free(P->ev);
    free(P->n_view);
    free(P->b_view);
    free(P->bk);
    free(P->bv);
    free(P->hk);
    free(P->hv);
    free(P->scr);
    free(P);
}

/* One LIST item into mask bits; 0 if it is not one. */
static int probe_item(const char *it, size_t n, unsigned *mask)
{
    static const char *const reg[PROBE_REGIONS] = {"sink", "body", "ring", "uniform"};
    if (n == 4 && !memcmp(it, "none", 4)) return 1;
    if (n == 3 && !memcmp(it, "all", 3)) { *mask |= 0xffu; return 1; }
    if (n == 1 && (*it == 'k' || *it == 'v')) {
        for (int r = 0; r < PROBE_REGIONS; r++) *mask |= 1u << (2 * r + (*it == 'v'));
        return 1;
    }
    for (int r = 0; r < PROBE_REGIONS; r++) {
        size_t l = strlen(reg[r]);
        if (n < l || memcmp(it, reg[r], l)) continue;
        if (n == l) { *mask |= 3u << (2 * r); return 1; }
        if (n == l + 2 && it[l] == '.' && (it[l + 1] == 'k' || it[l + 1] == 'v')) {
            *mask |= 1u << (2 * r + (it[l + 1] == 'v'));
            return 1;
        }
    }
    return 0;
}

/* Splits ":exact=LIST" off cfg: rest receives the string without it. 1 = found (mask
 * set), 0 = absent, -1 = malformed (err says why). */
int sjkh_kv_parse_exact(const char *cfg, char *rest, size_t rest_cap, unsigned *mask, char *err, size_t err_cap)
{
    *mask = 0;
    const char *o = cfg ? strstr(cfg, ":exact=") : NULL;
    if (!o) return 0;
    const char *list = o + 7, *end = strchr(list, ':');
    size_t nl = end ? (size_t)(end - list) : strlen(list);
    if ((size_t)(o - cfg) + strlen(list + nl) + 1 > rest_cap) {
        sjkh_fail(SJK_ERR_PARAM, err, err_cap, "kv: configuration too long");
        return -1;
    }
    memcpy(rest, cfg, (size_t)(o - cfg));
    strcpy(rest + (o - cfg), list + nl);
    if (strstr(rest, ":exact=")) {
        sjkh_fail(SJK_ERR_PARAM, err, err_cap, "kv: '%s': exact= given twice", cfg);
        return -1;
    }
    for (const char *it = list; it < list + nl;) {
        const char *plus = memchr(it, '+', (size_t)(list + nl - it));
        size_t n = plus ? (size_t)(plus - it) : (size_t)(list + nl - it);
        if (!probe_item(it, n, mask)) {
            sjkh_fail(SJK_ERR_PARAM, err, err_cap,
                      "kv: '%s': exact=%.*s: an item is sink, body, ring or uniform (each optionally "
                      ".k or .v), k, v, all or none, joined by '+'", cfg, (int)nl, list);
            return -1;
        }
        it += n + (plus ? 1 : 0);
        if (plus && it == list + nl) { /* a trailing '+' */
            sjkh_fail(SJK_ERR_PARAM, err, err_cap, "kv: '%s': empty item in exact=", cfg);
            return -1;
        }
    }
    if (nl == 0) {
        sjkh_fail(SJK_ERR_PARAM, err, err_cap, "kv: '%s': exact= needs a list", cfg);
        return -1;
    }
    return 1;
}

static sjk_status probe_create(sjkh_kv *kv, unsigned mask)
{
    kv_probe *P = calloc(1, sizeof *P);
    if (!P) return SJK_ERR_NOMEM;
    kv->probe = P;
    P->mask = mask;
    P->n = kv->n_cache_layers;
    size_t row = (size_t)kv->p.n_kv_heads * kv->p.head_dim, nb;
    P->view = calloc(P->n, sizeof *P->view);
    P->ek = calloc(P->n, sizeof *P->ek);
    P->ev = calloc(P->n, sizeof *P->ev);
    P->n_view = calloc(P->n, sizeof *P->n_view);
    P->b_view = calloc(P->n, sizeof *P->b_view);
    P->bk = malloc(SJK_GROUP * row * sizeof(float));
    P->bv = malloc(SJK_GROUP * row * sizeof(float));
    P->hk = malloc(SJK_GROUP * (size_t)kv->p.head_dim * sizeof(float));
    P->hv = malloc(SJK_GROUP * (size_t)kv->p.head_dim * sizeof(float));
    P->scr_nbytes = sjk_cache_read_scratch_nbytes(kv->cache);
    P->scr = malloc(P->scr_nbytes);
    if (!P->view || !P->ek || !P->ev || !P->n_view || !P->b_view || !P->bk || !P->bv || !P->hk || !P->hv ||
        !P->scr || !sjkh_mul_ok(row * sizeof(uint16_t), kv->p.n_ctx, &nb))
        return SJK_ERR_NOMEM;
    sjk_cache_params cp = sjk_cache_params_default();
    cp.n_layers = 1;
    cp.n_kv_heads = kv->p.n_kv_heads;
    cp.n_q_heads = kv->p.n_q_heads;
    cp.head_dim = kv->p.head_dim;
    cp.max_pos = kv->p.n_ctx;
    cp.n_seqs = 1;
    cp.max_q_rows = kv->p.max_rows;
    cp.n_threads = sjkh_kv_cache_threads(kv->p.n_threads);
    sjk_status st = sjk_cache_config_parse("f16", 1, &cp.layer, NULL, 0);
    for (uint32_t i = 0; !st && i < P->n; i++) {
        P->ek[i] = malloc(nb);
        P->ev[i] = malloc(nb);
        if (!P->ek[i] || !P->ev[i]) return SJK_ERR_NOMEM;
        st = sjk_cache_create(&cp, &P->view[i]);
    }
    return st;
}

/* Drops view rows past keep (after a truncate or reset of the real cache). */
static void probe_cut(sjkh_kv *kv, uint32_t keep)
{
    kv_probe *P = kv->probe;
    if (!P) return;
    for (uint32_t i = 0; i < P->n; i++) {
        if (P->n_view[i] <= keep) continue;
        uint32_t resume;
        sjk_cache_truncate(P->view[i], 0, keep, &resume); /* uniform: exact, never REPROCESS */
        P->n_view[i] = keep;
    }
}

/* Brings cache layer ci's view up to the real cache (see above). */
static sjk_status probe_refresh(sjkh_kv *kv, uint32_t ci)
{
    kv_probe *P = kv->probe;
    const uint32_t H = kv->p.n_kv_heads, D = kv->p.head_dim;
    const size_t row = (size_t)H * D;
    uint32_t n, b;
    sjk_status st = sjk_cache_length(kv->cache, 0, ci, &n, &b);
    if (st) return st;
    uint32_t start = P->n_view[ci];
    if (b != P->b_view[ci]) start = SJKH_MIN(start, SJKH_MIN(b, P->b_view[ci]));
    start = SJKH_MIN(start, n);
    if (start < P->n_view[ci]) {
        uint32_t resume;
        if ((st = sjk_cache_truncate(P->view[ci], 0, start, &resume)) && st != SJK_ERR_REPROCESS) return st;
    }
    for (uint32_t t = start; t < n;) {
        uint32_t m = SJKH_MIN((uint32_t)SJK_GROUP, n - t);
        for (uint32_t h = 0; h < H; h++) {
            st = sjk_cache_read_rows(kv->cache, 0, ci, h, t, m, P->hk, P->hv, P->reg, P->scr, P->scr_nbytes);
            if (st) return st;
            for (uint32_t i = 0; i < m; i++) {
                float *dk = P->bk + i * row + (size_t)h * D, *dv = P->bv + i * row + (size_t)h * D;
                const uint16_t *xk = P->ek[ci] + (size_t)(t + i) * row + (size_t)h * D;
                const uint16_t *xv = P->ev[ci] + (size_t)(t + i) * row + (size_t)h * D;
                unsigned r = P->reg[i];
                if (P->mask >> (2 * r) & 1u)
                    for (uint32_t d = 0; d < D; d++) dk[d] = sjkh_f16_to_f32(xk[d]);
                else
                    memcpy(dk, P->hk + (size_t)i * D, D * sizeof *dk);
                if (P->mask >> (2 * r + 1) & 1u)
                    for (uint32_t d = 0; d < D; d++) dv[d] = sjkh_f16_to_f32(xv[d]);
                else
                    memcpy(dv, P->hv + (size_t)i * D, D * sizeof *dv);
            }
        }
        if ((st = sjk_cache_append(P->view[ci], 0, 0, P->bk, P->bv, m))) return st;
        t += m;
    }
    P->n_view[ci] = n;
    P->b_view[ci] = b;
    return SJK_OK;
}

void sjkh_kv_free(sjkh_kv *kv)
{
    if (!kv) return;
    if (kv->host)
        for (uint32_t l = 0; l < kv->p.n_layers; l++) {
            free(kv->host[l].k);
            free(kv->host[l].v);
        }
    sjk_cache_free(kv->cache);
    probe_free(kv->probe);
    free(kv->host);
    free(kv->len);
    free(kv->cache_layer);
    free(kv->scratch);
    free(kv->qr);
    free(kv->dsc);
    free(kv->smax);
    free(kv->ssum);
    free(kv->po);
    free(kv);
}

/* Rows (slots) of one host-held layer: n_ctx for a full layer (window 0), else
 * min(n_ctx, window + max_rows). */
static uint32_t host_layer_rows(uint32_t n_ctx, uint32_t max_rows, uint32_t window)
{
    if (window && (uint64_t)window + max_rows < n_ctx) return window + max_rows;
    return n_ctx;
}

/* The bytes of one row of K (or V), [n_kv][hd] values: fp16, or q8_0 blocks for a window
 * layer with window_type q8_0 (0 when head_dim is not a multiple of 32 then). */
static size_t host_row_nbytes(uint32_t n_kv_heads, uint32_t head_dim, uint32_t window, uint32_t window_type)
{
    size_t n = (size_t)n_kv_heads * head_dim;
    if (window && window_type == SJKH_WINDOW_Q8_0) return head_dim % 32 ? 0 : sjk_format_row_nbytes(SJK_FMT_Q8_0, n);
    return n * sizeof(uint16_t);
}

size_t sjkh_kv_host_layer_nbytes(uint32_t n_kv_heads, uint32_t head_dim, uint32_t n_ctx, uint32_t max_rows,
                                 uint32_t window, uint32_t window_type)
{
    size_t nb;
    if (!sjkh_mul_ok(host_row_nbytes(n_kv_heads, head_dim, window, window_type),
                     host_layer_rows(n_ctx, max_rows, window), &nb) ||
        !sjkh_mul_ok(nb, 2, &nb))
        return 0;
    return nb;
}

uint32_t sjkh_kv_cache_threads(uint32_t n_threads)
{
    return n_threads == 0 ? 1 : n_threads > SJK_CACHE_MAX_THREADS ? SJK_CACHE_MAX_THREADS : n_threads;
}

const char *sjkh_window_type_name(uint32_t t)
{
    return t == SJKH_WINDOW_F16 ? "f16" : t == SJKH_WINDOW_Q8_0 ? "q8_0" : NULL;
}

sjk_status sjkh_kv_create(const sjkh_kv_params *p, sjkh_kv **out, char *err, size_t err_cap)
{
    *out = NULL;
    if (!p->n_layers || !p->n_kv_heads || !p->head_dim || !p->n_ctx || !p->max_rows ||
        p->n_q_heads % p->n_kv_heads)
        return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "kv: bad cache shape");
    if (!sjkh_window_type_name(p->window_type))
        return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "kv: window_type %u is not f16 (0) or q8_0 (1)",
                         (unsigned)p->window_type);
    if (p->window_type == SJKH_WINDOW_Q8_0 && p->window && p->head_dim % 32)
        return sjkh_fail(SJK_ERR_UNSUPPORTED, err, err_cap,
                         "kv: a q8_0 window needs a head size that is a multiple of 32 (this one is %u)",
                         (unsigned)p->head_dim);
    sjkh_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return sjkh_fail(SJK_ERR_NOMEM, err, err_cap, "kv: out of memory");
    kv->p = *p;
    kv->p.is_global = NULL;
    kv->enc_q8 = sjk_format_get(SJK_FMT_Q8_0)->encode;
    kv->len = calloc(p->n_layers, sizeof *kv->len);
    kv->host = calloc(p->n_layers, sizeof *kv->host);
    kv->cache_layer = calloc(p->n_layers, sizeof *kv->cache_layer);
    if (!kv->len || !kv->host || !kv->cache_layer) goto nomem;

    char cfg_rest[512];
    unsigned exact_mask = 0;
    int exact = sjkh_kv_parse_exact(p->config, cfg_rest, sizeof cfg_rest, &exact_mask, err, err_cap);
    if (exact < 0) {
        sjkh_kv_free(kv);
        return SJK_ERR_PARAM;
    }
    const char *config = exact ? cfg_rest : p->config;
    int use_lib = config && strcmp(config, "host-f16") != 0;
    if (exact && !use_lib) {
        sjkh_kv_free(kv);
        return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "kv: exact= needs a libsjkvarn configuration, not '%s'",
                         config ? config : "(none)");
    }
    uint32_t max_visible = 1;
    for (uint32_t l = 0; l < p->n_layers; l++) {
        int global = p->is_global ? p->is_global[l] : 1;
        kv->cache_layer[l] = -1;
        if (global && use_lib) {
            kv->cache_layer[l] = (int32_t)kv->n_cache_layers++;
            continue;
        }
        host_layer *h = &kv->host[l];
        h->window = global ? 0 : p->window;
        h->cap = host_layer_rows(p->n_ctx, p->max_rows, h->window);
        h->q8 = h->window && p->window_type == SJKH_WINDOW_Q8_0;
        h->row_nbytes = host_row_nbytes(p->n_kv_heads, p->head_dim, h->window, p->window_type);
        size_t nb = sjkh_kv_host_layer_nbytes(p->n_kv_heads, p->head_dim, p->n_ctx, p->max_rows, h->window,
                                              p->window_type) / 2; /* K or V */
        if (!nb) goto nomem;
        h->k = malloc(nb);
        h->v = malloc(nb);
        if (!h->k || !h->v) goto nomem;
        if (h->window) kv->host_window_nbytes += 2 * nb;
        else kv->host_full_nbytes += 2 * nb;
        uint32_t vis = h->window ? SJKH_MIN(h->cap, h->window + p->max_rows) : p->n_ctx;
        if (vis > max_visible) max_visible = vis;
    }
    size_t G = p->n_q_heads / p->n_kv_heads, nq = p->n_q_heads;
    if (G > 16 || nq > 64 || p->head_dim > 1024) {
        sjkh_kv_free(kv);
        return sjkh_fail(SJK_ERR_UNSUPPORTED, err, err_cap, "kv: %u query heads per KV head (at most 16), %u in all",
                         (unsigned)G, p->n_q_heads);
    }
    kv->scratch_stride = (uint32_t)(max_visible * G);
    kv->n_scratch = p->n_threads ? p->n_threads : 1;
    kv->scratch = malloc((size_t)kv->n_scratch * max_visible * G * sizeof(float));
    kv->qr = malloc((size_t)p->max_rows * nq * p->head_dim * sizeof(float));
    kv->dsc = malloc((size_t)max_visible * nq * sizeof(float));
    kv->smax = malloc(SPLIT_MAX * nq * sizeof(float));
    kv->ssum = malloc(SPLIT_MAX * nq * sizeof(double));
    kv->po = malloc(SPLIT_MAX * nq * p->head_dim * sizeof(float));
    if (!kv->scratch || !kv->qr || !kv->dsc || !kv->smax || !kv->ssum || !kv->po) goto nomem;

    if (kv->n_cache_layers) {
        sjk_cache_params cp = sjk_cache_params_default();
        cp.n_layers = kv->n_cache_layers;
        cp.n_kv_heads = p->n_kv_heads;
        cp.n_q_heads = p->n_q_heads;
        cp.head_dim = p->head_dim;
        cp.max_pos = p->n_ctx;
        cp.n_seqs = 1;
        cp.max_q_rows = p->max_rows;
        cp.n_threads = sjkh_kv_cache_threads(p->n_threads);
        /* One parse for all cache layers (edge tiers differ per layer). The cache reads
         * cp.layers; cp.layer holds the first layer's configuration, as the default does. */
        char perr[256] = "";
        sjk_layer_config *lc = calloc(kv->n_cache_layers, sizeof *lc);
        if (!lc) goto nomem;
        sjk_status st = sjk_cache_config_parse(config, kv->n_cache_layers, lc, perr, sizeof perr);
        if (st) {
            free(lc);
            sjkh_kv_free(kv);
            return sjkh_fail(st, err, err_cap, "kv: bad cache configuration '%s': %s", config, perr);
        }
        cp.layer = lc[0];
        cp.layers = lc;
        char bad[64] = "";
        st = sjk_cache_params_check(&cp, bad, sizeof bad);
        if (!st) st = sjk_cache_create(&cp, &kv->cache);
        free(lc);
        if (st) {
            sjkh_kv_free(kv);
            return sjkh_fail(st, err, err_cap, "kv: cannot create the cache '%s' (%s%s%s)", config,
                             sjk_status_str(st), bad[0] ? ": " : "", bad);
        }
        if (exact && (st = probe_create(kv, exact_mask))) {
            sjkh_kv_free(kv);
            return sjkh_fail(st, err, err_cap, "kv: cannot create the exact= view for '%s' (%s)", p->config,
                             sjk_status_str(st));
        }
    }
    *out = kv;
    return SJK_OK;
nomem:
    sjkh_kv_free(kv);
    return sjkh_fail(SJK_ERR_NOMEM, err, err_cap, "kv: out of memory");
}

sjk_status sjkh_kv_append(sjkh_kv *kv, uint32_t layer, const float *k, const float *v, size_t n)
{
    if (layer >= kv->p.n_layers) return SJK_ERR_PARAM;
    if (n > kv->p.max_rows || (uint64_t)kv->len[layer] + n > kv->p.n_ctx) return SJK_ERR_RANGE;
    const sjkh_ops *ops = sjkh_ops_get();
    if (kv->cache_layer[layer] >= 0) {
        uint32_t ci = (uint32_t)kv->cache_layer[layer];
        sjk_status st = sjk_cache_append(kv->cache, 0, ci, k, v, n);
        if (st) return st;
        if (kv->probe) { /* the exact rows, as the f16 reference stores them */
            size_t row = (size_t)kv->p.n_kv_heads * kv->p.head_dim;
            ops->to_f16(k, kv->probe->ek[ci] + (size_t)kv->len[layer] * row, n * row);
            ops->to_f16(v, kv->probe->ev[ci] + (size_t)kv->len[layer] * row, n * row);
        }
        kv->len[layer] += (uint32_t)n;
        return SJK_OK;
    }
    host_layer *h = &kv->host[layer];
    size_t row = (size_t)kv->p.n_kv_heads * kv->p.head_dim;
    for (size_t i = 0; i < n; i++) {
        size_t slot = (kv->len[layer] + i) % h->cap;
        uint8_t *kd = h->k + slot * h->row_nbytes, *vd = h->v + slot * h->row_nbytes;
        if (h->q8) {
            kv->enc_q8(kd, k + i * row, row);
            kv->enc_q8(vd, v + i * row, row);
        } else {
            ops->to_f16(k + i * row, (uint16_t *)(void *)kd, row);
            ops->to_f16(v + i * row, (uint16_t *)(void *)vd, row);
        }
    }
    kv->len[layer] += (uint32_t)n;
    return SJK_OK;
}

/* f16 rounding, as llama.cpp applies to the query (for q.k with f16 K) and to the
 * softmax weights (for the product with f16 V) */
static inline float r16(float x) { return sjkh_f16_to_f32(sjkh_f32_to_f16(x)); }

typedef struct attend_job {
    sjkh_kv *kv;
    const host_layer *h;
    float *out;
    size_t n_rows;
    uint32_t N;
    float scale;
    /* decode split: positions [lo, lo + n_vis) in n_split ranges of split_len */
    uint32_t lo, n_vis, n_split, split_len;
    double *inv;     /* [n_q] 1 / sum over all splits */
    float *gmax;     /* [n_q] max over all splits */
} attend_job;

/* Bytes from the start of a slot to KV head g's values. */
static inline size_t head_off(const host_layer *h, size_t g, size_t hd)
{
    return h->q8 ? g * (hd / 32) * 34 : g * hd * sizeof(uint16_t);
}

/* Scores of n_t consecutive slots (from `slot`) against the G queries of KV head g:
 * out [n_t][G]. */
static void slot_scores(const sjkh_ops *ops, const host_layer *h, size_t slot, size_t n_t, size_t g, const float *q,
                        size_t hd, size_t G, float *out)
{
    const uint8_t *k = h->k + slot * h->row_nbytes + head_off(h, g, hd);
    if (h->q8)
        ops->scores_q8_0_multi(k, h->row_nbytes, n_t, q, hd, G, hd, out);
    else
        ops->scores_f16_multi((const uint16_t *)(const void *)k, h->row_nbytes / 2, n_t, q, hd, G, hd, out);
}

/* o [G][hd] += sum over n_t consecutive slots of w [n_t][w_stride] times V of head g. */
static void slot_wsum(const sjkh_ops *ops, const host_layer *h, size_t slot, size_t n_t, size_t g, const float *w,
                      size_t w_stride, float *o, size_t hd, size_t G)
{
    const uint8_t *v = h->v + slot * h->row_nbytes + head_off(h, g, hd);
    if (h->q8)
        ops->wsum_q8_0_multi(w, w_stride, v, h->row_nbytes, n_t, o, hd, G, hd);
    else
        ops->wsum_f16_multi(w, w_stride, (const uint16_t *)(const void *)v, h->row_nbytes / 2, n_t, o, hd, G, hd);
}

/* One (query row, KV head): the G query heads of the group read each K and V row once;
 * scores and the weighted sum of V rows run over all visible rows per call (ops.h
 * scores_f16_multi, wsum_f16_multi, or their q8_0 twins). */
static void attend_task(void *ctx, uint32_t task, uint32_t thread)
{
    const attend_job *j = ctx;
    sjkh_kv *kv = j->kv;
    const sjkh_kv_params *p = &kv->p;
    const sjkh_ops *ops = sjkh_ops_get();
    size_t hd = p->head_dim, nq = p->n_q_heads, G = nq / p->n_kv_heads;
    size_t i = task / p->n_kv_heads, g = task % p->n_kv_heads;
    uint32_t pos = j->N - (uint32_t)j->n_rows + (uint32_t)i;
    uint32_t lo = (j->h->window && pos + 1 > j->h->window) ? pos + 1 - j->h->window : 0;
    uint32_t cap = j->h->cap, n_vis = pos - lo + 1;
    const float *q = kv->qr + (i * nq + g * G) * hd; /* [G][hd] */
    float *o = j->out + (i * nq + g * G) * hd;      /* [G][hd] */
    float *sc = kv->scratch + (size_t)thread * kv->scratch_stride; /* [n_vis][G] */
    float mx[16];
    double sum[16];
    for (size_t h = 0; h < G; h++) {
        mx[h] = -INFINITY;
        sum[h] = 0;
    }
    /* K and V rows lie in at most two runs of consecutive slots (the ring wraps once) */
    for (uint32_t t = 0; t < n_vis;) {
        size_t slot = (lo + t) % cap, run = SJKH_MIN((size_t)(n_vis - t), cap - slot);
        slot_scores(ops, j->h, slot, run, g, q, hd, G, sc + (size_t)t * G);
        t += (uint32_t)run;
    }
    for (size_t e = 0; e < (size_t)n_vis * G; e++) sc[e] *= j->scale;
    for (uint32_t t = 0; t < n_vis; t++)
        for (size_t h = 0; h < G; h++)
            if (sc[(size_t)t * G + h] > mx[h]) mx[h] = sc[(size_t)t * G + h];
    for (uint32_t t = 0; t < n_vis; t++)
        for (size_t h = 0; h < G; h++) {
            float e = expf(sc[(size_t)t * G + h] - mx[h]);
            sc[(size_t)t * G + h] = e;
            sum[h] += e;
        }
    float inv[16];
    for (size_t h = 0; h < G; h++) inv[h] = (float)(1.0 / sum[h]);
    /* sc [n_vis][G] becomes the f16-rounded normalized weights */
    for (uint32_t t = 0; t < n_vis; t++)
        for (size_t h = 0; h < G; h++) sc[(size_t)t * G + h] *= inv[h];
    ops->round_f16(sc, sc, (size_t)n_vis * G);
    memset(o, 0, G * hd * sizeof *o);
    for (uint32_t t = 0; t < n_vis;) {
        size_t slot = (lo + t) % cap, run = SJKH_MIN((size_t)(n_vis - t), cap - slot);
        slot_wsum(ops, j->h, slot, run, g, sc + (size_t)t * G, G, o, hd, G);
        t += (uint32_t)run;
    }
}

/* Decode over many positions, split so every thread helps (flash-decoding):
 *   phase 0  scores of split s into dsc[t][nq], split maxima into smax[s][nq]
 *   phase 1  exp(score - global max) in place, split sums into ssum[s][nq]
 *   phase 2  partial outputs po[s][nq][hd] with the f16-rounded normalized weights
 * then the caller adds the partial outputs in split order. The split length depends on
 * the number of positions only, so results do not depend on the thread count. */
typedef struct split_job {
    attend_job *a;
    int phase;
} split_job;

static void split_task(void *ctx, uint32_t task, uint32_t thread)
{
    const split_job *sj = ctx;
    const attend_job *j = sj->a;
    sjkh_kv *kv = j->kv;
    const sjkh_kv_params *p = &kv->p;
    const sjkh_ops *ops = sjkh_ops_get();
    size_t hd = p->head_dim, nq = p->n_q_heads, G = nq / p->n_kv_heads;
    size_t s = task / p->n_kv_heads, g = task % p->n_kv_heads;
    uint32_t t0 = (uint32_t)s * j->split_len, t1 = SJKH_MIN(j->n_vis, t0 + j->split_len), cap = j->h->cap;
    float *dsc = kv->dsc; /* [n_vis][nq] */
    if (sj->phase == 0) {
        float *mx = kv->smax + s * nq + g * G;
        for (size_t h = 0; h < G; h++) mx[h] = -INFINITY;
        for (uint32_t t = t0; t < t1; t++) {
            size_t slot = (j->lo + t) % cap;
            float *st = dsc + (size_t)t * nq + g * G;
            if (j->h->q8)
                slot_scores(ops, j->h, slot, 1, g, kv->qr + g * G * hd, hd, G, st);
            else
                ops->dot_f16_multi((const uint16_t *)(const void *)(j->h->k + slot * j->h->row_nbytes) + g * hd,
                                   kv->qr + g * G * hd, hd, G, hd, st);
            for (size_t h = 0; h < G; h++) {
                st[h] *= j->scale;
                if (st[h] > mx[h]) mx[h] = st[h];
            }
        }
    } else if (sj->phase == 1) {
        double *sum = kv->ssum + s * nq + g * G;
        for (size_t h = 0; h < G; h++) sum[h] = 0;
        for (uint32_t t = t0; t < t1; t++)
            for (size_t h = 0; h < G; h++) {
                float *e = dsc + (size_t)t * nq + g * G + h;
                *e = expf(*e - j->gmax[g * G + h]);
                sum[h] += *e;
            }
    } else {
        float *po = kv->po + (s * nq + g * G) * hd, w[16];
        memset(po, 0, G * hd * sizeof *po);
        for (uint32_t t = t0; t < t1; t++) {
            size_t slot = (j->lo + t) % cap;
            for (size_t h = 0; h < G; h++) w[h] = r16((float)(dsc[(size_t)t * nq + g * G + h] * j->inv[g * G + h]));
            if (j->h->q8)
                slot_wsum(ops, j->h, slot, 1, g, w, G, po, hd, G);
            else
                ops->axpy_f16_multi(w, (const uint16_t *)(const void *)(j->h->v + slot * j->h->row_nbytes) + g * hd,
                                    po, hd, G, hd);
        }
    }
}

sjk_status sjkh_kv_attend(sjkh_kv *kv, uint32_t layer, const float *q, size_t n_rows, float scale, float *out,
                          sjk_pool *pool)
{
    if (layer >= kv->p.n_layers) return SJK_ERR_PARAM;
    if (!n_rows || n_rows > kv->len[layer] || n_rows > kv->p.max_rows) return SJK_ERR_RANGE;
    if (kv->cache_layer[layer] >= 0 && kv->probe) {
        uint32_t ci = (uint32_t)kv->cache_layer[layer];
        sjk_status st = probe_refresh(kv, ci);
        return st ? st : sjk_cache_attend(kv->probe->view[ci], 0, 0, q, n_rows, scale, out);
    }
    if (kv->cache_layer[layer] >= 0)
        return sjk_cache_attend(kv->cache, 0, (uint32_t)kv->cache_layer[layer], q, n_rows, scale, out);
    if (sjk_pool_n_threads(pool) > kv->n_scratch) return SJK_ERR_PARAM;
    size_t nq = kv->p.n_q_heads, hd = kv->p.head_dim, nkv = kv->p.n_kv_heads;
    sjkh_ops_get()->round_f16(q, kv->qr, n_rows * nq * hd);
    const host_layer *h = &kv->host[layer];
    attend_job j = {kv, h, out, n_rows, kv->len[layer], scale, 0, 0, 0, 0, NULL, NULL};
    uint32_t pos = j.N - 1;
    j.lo = (h->window && pos + 1 > h->window) ? pos + 1 - h->window : 0;
    j.n_vis = pos - j.lo + 1;
    j.split_len = SJKH_MAX(256u, (j.n_vis + SPLIT_MAX - 1) / SPLIT_MAX);
    j.n_split = (j.n_vis + j.split_len - 1) / j.split_len;
    if (n_rows > 1 || j.n_split < 2 || sjk_pool_n_threads(pool) < 2) {
        sjk_pool_run(pool, attend_task, &j, n_rows * nkv);
        return SJK_OK;
    }
    float gmax[64];
    double inv[64];
    j.gmax = gmax;
    j.inv = inv;
    split_job sj = {&j, 0};
    sjk_pool_run(pool, split_task, &sj, j.n_split * nkv);
    for (size_t hq = 0; hq < nq; hq++) {
        gmax[hq] = -INFINITY;
        for (uint32_t s = 0; s < j.n_split; s++) gmax[hq] = SJKH_MAX(gmax[hq], kv->smax[s * nq + hq]);
    }
    sj.phase = 1;
    sjk_pool_run(pool, split_task, &sj, j.n_split * nkv);
    for (size_t hq = 0; hq < nq; hq++) {
        double sum = 0;
        for (uint32_t s = 0; s < j.n_split; s++) sum += kv->ssum[s * nq + hq];
        inv[hq] = 1.0 / sum;
    }
    sj.phase = 2;
    sjk_pool_run(pool, split_task, &sj, j.n_split * nkv);
    memcpy(out, kv->po, nq * hd * sizeof *out);
    for (uint32_t s = 1; s < j.n_split; s++)
        for (size_t e = 0; e < nq * hd; e++) out[e] += kv->po[s * nq * hd + e];
    return SJK_OK;
}

sjk_status sjkh_kv_reset(sjkh_kv *kv)
{
    memset(kv->len, 0, kv->p.n_layers * sizeof *kv->len);
    probe_cut(kv, 0);
    if (kv->cache) {
        uint32_t resume;
        sjk_status st = sjk_cache_truncate(kv->cache, 0, 0, &resume);
        if (st) return st;
    }
    return SJK_OK;
}

/* A window layer's ring holds the newest cap positions; the position after `keep` sees
 * the window before it, so cutting back from len to keep is possible while those rows
 * are still in the ring (or the ring holds the whole context). */
static int window_can_cut(const sjkh_kv *kv, const host_layer *h, uint32_t len, uint32_t keep)
{
    return !h->window || h->cap >= kv->p.n_ctx || len - keep + h->window <= h->cap;
}

sjk_status sjkh_kv_truncate(sjkh_kv *kv, uint32_t keep, uint32_t *kept)
{
    uint32_t len = 0;
    for (uint32_t l = 0; l < kv->p.n_layers; l++) len = SJKH_MAX(len, kv->len[l]);
    if (keep >= len) {
        *kept = len;
        return SJK_OK;
    }
    uint32_t target = keep;
    if (kv->cache) {
        uint32_t resume = 0;
        sjk_status st = sjk_cache_truncate(kv->cache, 0, keep, &resume);
        if (st == SJK_OK || st == SJK_ERR_REPROCESS) target = SJKH_MIN(keep, resume);
        else target = 0;
    }
    for (uint32_t l = 0; l < kv->p.n_layers && target; l++)
        if (kv->cache_layer[l] < 0 && !window_can_cut(kv, &kv->host[l], kv->len[l], target)) target = 0;
    if (target == 0) {
        *kept = 0;
        return sjkh_kv_reset(kv);
    }
    if (kv->cache && target < keep) { /* cut back to a record boundary: every layer to the same length */
        uint32_t resume = 0;
        sjk_status st = sjk_cache_truncate(kv->cache, 0, target, &resume);
        if ((st != SJK_OK && st != SJK_ERR_REPROCESS) || resume != target) {
            *kept = 0;
            return sjkh_kv_reset(kv);
        }
    }
    for (uint32_t l = 0; l < kv->p.n_layers; l++) kv->len[l] = SJKH_MIN(kv->len[l], target);
    probe_cut(kv, target);
    *kept = target;
    return SJK_OK;
}

sjk_status sjkh_kv_layer_storage(sjkh_kv *kv, uint32_t layer, uint32_t **len, uint8_t **k, uint8_t **v,
                                 size_t *nbytes, size_t *row_nbytes, sjk_cache **cache)
{
    if (!kv || layer >= kv->p.n_layers) return SJK_ERR_PARAM;
    if (kv->probe) return SJK_ERR_UNSUPPORTED; /* exact= (analysis): no files, no blocks */
    const host_layer *h = &kv->host[layer];
    *len = &kv->len[layer];
    *k = h->k;
    *v = h->v;
    *nbytes = h->k ? (size_t)h->cap * h->row_nbytes : 0;
    *row_nbytes = h->k ? h->row_nbytes : 0;
    *cache = kv->cache_layer[layer] >= 0 ? kv->cache : NULL;
    return SJK_OK;
}

uint32_t sjkh_kv_length(const sjkh_kv *kv, uint32_t layer) { return layer < kv->p.n_layers ? kv->len[layer] : 0; }

sjk_cache *sjkh_kv_cache(sjkh_kv *kv) { return kv->cache; }

sjk_status sjkh_kv_get_report(const sjkh_kv *kv, sjkh_kv_report *r)
{
    memset(r, 0, sizeof *r);
    size_t row = (size_t)kv->p.n_kv_heads * kv->p.head_dim;
    r->window_nbytes = kv->host_window_nbytes;
    r->growing_nbytes = kv->host_full_nbytes;
    size_t occ = 0, vals = 0;
    for (uint32_t l = 0; l < kv->p.n_layers; l++) {
        if (kv->cache_layer[l] >= 0 || !kv->host[l].k) continue;
        size_t live = SJKH_MIN(kv->len[l], kv->host[l].cap);
        r->occupied_nbytes += 2 * live * kv->host[l].row_nbytes;
        if (!kv->host[l].window) {
            occ += 2 * live * row * 2;
            vals += 2 * live * row;
        }
    }
    if (kv->cache) {
        sjk_cache_memory m;
        sjk_status st = sjk_cache_memory_report(kv->cache, &m);
        if (st) return st;
        r->growing_nbytes += m.total_nbytes;
        r->occupied_nbytes += m.occupied_nbytes;
        occ += m.occupied_nbytes;
        size_t pos = 0;
        for (uint32_t l = 0; l < kv->p.n_layers; l++)
            if (kv->cache_layer[l] >= 0) pos += kv->len[l];
        vals += 2 * pos * row;
    }
    r->total_nbytes = r->growing_nbytes + r->window_nbytes;
    r->bits_per_value = vals ? 8.0 * (double)occ / (double)vals : 0;
    return SJK_OK;
}
