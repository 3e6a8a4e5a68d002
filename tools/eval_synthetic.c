/* eval_synthetic.c — `sjkvarn eval --synthetic`: a stand-in model for checking the study's
 * plumbing without a GGUF file. Tokens are bytes (+4, BOS = 1); logits are a fixed
 * function of the last three tokens; a context's "cache" perturbs them by uniform noise of
 * amplitude 2^-(bits) where bits is the smaller of K and V bits its configuration string
 * gives (f16: no noise). Nothing here measures a cache. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_backends.h"

enum { SYN_V = 260, SYN_BOS = 1 };

typedef struct syn_ctx {
    double noise, bpv;
    size_t n_ctx, n;
    int32_t last[3];
} syn_ctx;

static uint64_t syn_mix(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static sjk_status syn_tokenize(void *user, const char *text, size_t n, int add_bos,
                               int32_t *tokens, size_t cap, size_t *n_out)
{
    (void)user;
    size_t k = 0;
    if (add_bos) { if (k < cap) tokens[k] = SYN_BOS; k++; }
    for (size_t i = 0; i < n; i++, k++)
        if (k < cap) tokens[k] = 4 + (int32_t)(unsigned char)text[i];
    *n_out = k;
    return SJK_OK;
}

static sjk_status syn_create(void *user, const char *kv, size_t n_ctx, void **out)
{
    (void)user;
    sjk_layer_config lc;
    char err[160];
    if (sjk_cache_config_parse(kv, 1, &lc, err, sizeof err) != SJK_OK) return SJK_ERR_PARAM;
    double bits;
    if (lc.kind == SJK_KIND_UNIFORM) {
        const sjk_format_info *k = sjk_format_get((sjk_format)lc.k_format);
        const sjk_format_info *v = sjk_format_get((sjk_format)lc.v_format);
        bits = (k && v) ? (k->bits_per_value < v->bits_per_value ? k->bits_per_value
                                                                  : v->bits_per_value) : 16;
    } else {
        bits = lc.bits_k < lc.bits_v ? lc.bits_k : lc.bits_v;
    }
    syn_ctx *c = calloc(1, sizeof *c);
    if (!c) return SJK_ERR_NOMEM;
    c->noise = bits >= 16 ? 0.0 : 4.0 * pow(2.0, -bits);
    c->bpv = bits;
    c->n_ctx = n_ctx;
    *out = c;
    return SJK_OK;
}

static void syn_free(void *user, void *ctx) { (void)user; free(ctx); }

static sjk_status syn_feed(void *user, void *vctx, const int32_t *tok, size_t n, float *logits)
{
    (void)user;
    syn_ctx *c = vctx;
    if (c->n + n > c->n_ctx) return SJK_ERR_RANGE;
    for (size_t i = 0; i < n; i++) {
        c->last[2] = c->last[1]; c->last[1] = c->last[0]; c->last[0] = tok[i];
        c->n++;
    }
    uint64_t key = syn_mix((uint64_t)c->last[0] * 131 + (uint64_t)c->last[1] * 7 + (uint64_t)c->last[2]);
    for (int v = 0; v < SYN_V; v++) {
        double clean = 6.0 * sin(0.37 * (double)v + (double)(key % 1000));
        uint64_t z = syn_mix(((uint64_t)c->n << 9) ^ (uint64_t)v);
        logits[v] = (float)(clean + c->noise * ((double)(z >> 11) * 0x1.0p-53 - 0.5));
    }
    return SJK_OK;
}

static sjk_status syn_memory(void *user, void *vctx, sjk_eval_mem *m)
{
    (void)user;
    syn_ctx *c = vctx;
    m->bpv_occupied = c->bpv;
    m->bpv_allocated = c->bpv;
    m->kv_bytes = (uint64_t)((double)c->n_ctx * c->bpv / 8.0 * 2.0);
    return SJK_OK;
}

void sjk_eval_synthetic_open(sjk_eval_backend *be)
{
    memset(be, 0, sizeof *be);
    be->n_vocab = SYN_V;
    be->n_ctx_max = 1u << 20;
    be->tokenize = syn_tokenize;
    be->ctx_create = syn_create;
    be->ctx_free = syn_free;
    be->ctx_feed = syn_feed;
    be->ctx_memory = syn_memory;
}
