/* cache.c — create/free, append, seal policy, truncate, memory report and the invariant
 * checker of the KV cache (include/sjkvarn.h, "Cache"; layout in cache_internal.h).
 *
 * Sizing happens once: plan() walks the same layout for sjk_cache_estimate and
 * sjk_cache_create, so the estimate is the allocation by construction. Append, seal and
 * truncate only move bytes inside that block.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"
#include "codec/format.h"
#include "codec/hadamard.h"
#include "common/fp16.h"
#include "common/util.h"

sjk_cache_params sjk_cache_params_default(void)
{
    sjk_cache_params p;
    memset(&p, 0, sizeof p);
    p.n_layers = 1;
    p.n_kv_heads = 1;
    p.n_q_heads = 1;
    p.head_dim = 256;
    p.max_pos = 32768;
    p.n_seqs = 1;
    p.max_q_rows = 512;
    p.n_threads = 1;
    p.layers = NULL;
    p.layer = sjk_layer_config_default();
    return p;
}

static const sjk_layer_config *layer_cfg(const sjk_cache_params *p, uint32_t l)
{
    return p->layers ? &p->layers[l] : &p->layer;
}

/* Staging format actually used: tq6_0 needs 128-value blocks, so D = 64 stages in q8_0. */
static uint8_t staging_format(const sjk_layer_config *c, uint32_t D)
{
    if (c->staging == SJK_FMT_TQ6_0_STAGE && D % 128) return SJK_FMT_Q8_0;
    return c->staging;
}

/* Rotation block of K (is_v = 0) or V rows. SJ/KVARN: rot_block or the default (D, two
 * 256 halves at D = 512). Uniform with rotation: rot_block, else llama.cpp's choice for
 * the format (sjk_format_rotation_block), else as SJ. */
static uint32_t rot_block_of(const sjk_layer_config *c, uint32_t D, int is_v)
{
    if (c->kind == SJK_KIND_UNIFORM && !c->rotate) return 0;
    if (c->rot_block) return c->rot_block;
    if (c->kind == SJK_KIND_UNIFORM) {
        size_t b = sjk_format_rotation_block((sjk_format)(is_v ? c->v_format : c->k_format), D, is_v);
        if (b) return (uint32_t)b;
    }
    return D > 256 ? 256 : D;
}

static const char *validate_layer(const sjk_layer_config *c, uint32_t D)
{
    if (c->kind > SJK_KIND_KVARN) return "kind";
    if (c->rot_block && (c->rot_block < 2 || !sjk_is_pow2(c->rot_block) || c->rot_block > D))
        return "rot_block";
    if (c->kind == SJK_KIND_UNIFORM) {
        if (c->k_format >= SJK_FMT_COUNT || c->k_format == SJK_FMT_TQ6_0_STAGE ||
            sjk_format_row_nbytes((sjk_format)c->k_format, D) == 0)
            return "k_format";
        if (c->v_format >= SJK_FMT_COUNT || c->v_format == SJK_FMT_TQ6_0_STAGE ||
            sjk_format_row_nbytes((sjk_format)c->v_format, D) == 0)
            return "v_format";
        return NULL;
    }
    sjk_record_params rp = {D, c->bits_k, c->bits_v, c->body, c->balance};
    const char *bad = NULL;
    if (sjk_record_params_validate(&rp, &bad) != SJK_OK) {
        if (bad && !strcmp(bad, "bits_k")) return "bits_k";
        if (bad && !strcmp(bad, "bits_v")) return "bits_v";
        if (bad && !strcmp(bad, "body")) return "body";
        if (bad && !strcmp(bad, "balance")) return "balance";
        return "head_dim";
    }
    if (c->kind == SJK_KIND_KVARN && c->body != SJK_BODY_SCALAR) return "body";
    if (c->staging != SJK_FMT_TQ6_0_STAGE && c->staging != SJK_FMT_Q8_0 && c->staging != SJK_FMT_F16)
        return "staging";
    if (c->center > 1) return "center";
    if (c->sink % SJK_GROUP) return "sink";
    if (c->tail_max && c->tail_max < c->tail_min + (uint64_t)SJK_GROUP) return "tail_max";
    if (c->tail_min > (1u << 30) || c->tail_max > (1u << 30)) return "tail_min";
    return NULL;
}

/* The first bad field of p: a static name ("head_dim", or a layer's own field name such as
 * "tail_max") and, for a layer's field, the layer's index (else UINT32_MAX). NULL if p is
 * valid. */
static const char *params_bad_field(const sjk_cache_params *p, uint32_t *bad_layer)
{
    *bad_layer = UINT32_MAX;
    if (!p) return "params";
    if (p->n_layers == 0 || p->n_layers > 4096) return "n_layers";
    if (p->n_kv_heads == 0 || p->n_kv_heads > 1024) return "n_kv_heads";
    if (p->n_q_heads == 0 || p->n_q_heads % p->n_kv_heads || p->n_q_heads / p->n_kv_heads > 64)
        return "n_q_heads";
    if (p->head_dim != 64 && p->head_dim != 128 && p->head_dim != 256 && p->head_dim != 512)
        return "head_dim";
    if (p->max_pos == 0 || p->max_pos > (1u << 30)) return "max_pos";
    if (p->n_seqs == 0 || p->n_seqs > 65536) return "n_seqs";
    if (p->max_q_rows == 0 || p->max_q_rows > 65536) return "max_q_rows";
    if (p->n_threads == 0 || p->n_threads > SJK_CACHE_MAX_THREADS) return "n_threads";
    for (uint32_t l = 0; l < p->n_layers; l++) {
        const char *lb = validate_layer(layer_cfg(p, l), p->head_dim);
        if (lb) {
            *bad_layer = l;
            return lb;
        }
    }
    return NULL;
}

sjk_status sjk_cache_params_validate(const sjk_cache_params *p, const char **bad_field)
{
    static const char *const layer_names[] = {
        "layers[].kind", "layers[].rot_block", "layers[].k_format", "layers[].v_format",
        "layers[].bits_k", "layers[].bits_v", "layers[].body", "layers[].balance",
        "layers[].staging", "layers[].center", "layers[].sink", "layers[].tail_max", "layers[].tail_min",
        "layers[].head_dim"};
    uint32_t l;
    const char *bad = params_bad_field(p, &l);
    if (bad && l != UINT32_MAX && p->layers) /* a field of p->layers[]: the static "layers[].x" */
        for (size_t i = 0; i < SJK_ARRAY_LEN(layer_names); i++)
            if (!strcmp(layer_names[i] + 9, bad)) bad = layer_names[i];
    if (bad_field) *bad_field = bad;
    return bad ? SJK_ERR_PARAM : SJK_OK;
}

sjk_status sjk_cache_params_check(const sjk_cache_params *p, char *why, size_t why_cap)
{
    uint32_t l;
    const char *bad = params_bad_field(p, &l);
    if (why && why_cap) {
        if (!bad) why[0] = 0;
        else if (l == UINT32_MAX) snprintf(why, why_cap, "%s", bad);
        else if (p->layers) snprintf(why, why_cap, "layers[%u].%s", (unsigned)l, bad);
        else snprintf(why, why_cap, "layer.%s", bad);
    }
    return bad ? SJK_ERR_PARAM : SJK_OK;
}

/* Adds an aligned region of n bytes to the running size; returns its offset. */
static int take(size_t *off, size_t n, size_t *at)
{
    size_t a;
    if (!sjk_align_up_ok(*off, SJK_CACHE_ALIGN, &a)) return 0;
    *at = a;
    return sjk_add_ok(a, n, off);
}

static int mul3(size_t a, size_t b, size_t c, size_t *out)
{
    size_t t;
    return sjk_mul_ok(a, b, &t) && sjk_mul_ok(t, c, out);
}

/* Resolves one layer's geometry (no pointers). 0 on overflow. */
static int plan_layer(const sjk_cache_params *p, uint32_t l, sjk_cache_layer *L)
{
    const sjk_layer_config *c = layer_cfg(p, l);
    const uint32_t D = p->head_dim;
    memset(L, 0, sizeof *L);
    L->cfg = *c;
    L->compressed = c->kind != SJK_KIND_UNIFORM;
    L->rot_k = rot_block_of(c, D, 0);
    L->rot_v = rot_block_of(c, D, 1);
    size_t off = 0;
    if (!L->compressed) {
        L->k_fmt = c->k_format;
        L->v_fmt = c->v_format;
        L->k_row_nbytes = sjk_format_row_nbytes((sjk_format)L->k_fmt, D);
        L->v_row_nbytes = sjk_format_row_nbytes((sjk_format)L->v_fmt, D);
        size_t nk, nv;
        if (!sjk_mul_ok(p->max_pos, L->k_row_nbytes, &nk) || !sjk_mul_ok(p->max_pos, L->v_row_nbytes, &nv))
            return 0;
        if (!take(&off, nk, &L->off_ring_k) || !take(&off, nv, &L->off_ring_v)) return 0;
    } else {
        L->k_fmt = L->v_fmt = staging_format(c, D);
        L->k_row_nbytes = L->v_row_nbytes = sjk_format_row_nbytes((sjk_format)L->k_fmt, D);
        L->rp.head_dim = D;
        L->rp.bits_k = c->bits_k;
        L->rp.bits_v = c->bits_v;
        L->rp.body = c->body;
        L->rp.balance = c->balance;
        sjk_record_layout_init(&L->rl, D, c->bits_k, c->bits_v);
        L->rec_nbytes = L->rl.nbytes;
        L->sink = c->sink < p->max_pos ? c->sink : p->max_pos;
        uint32_t after = p->max_pos - L->sink;
        /* Record slots: a seal (batched or idle) always keeps the newest tail_min
         * positions unsealed and seals whole groups only, so the body never ends past
         * sink + floor((max_pos - sink - tail_min) / 128) * 128 (seal_layers). The ring
         * holds the rest; slots for the positions it covers would never be written. */
        L->n_rec = after > c->tail_min ? (after - c->tail_min) / SJK_GROUP : 0;
        uint64_t cap = ((uint64_t)sjk_seal_trigger(c) + SJK_GROUP - 1) / SJK_GROUP * SJK_GROUP;
        uint64_t cap_max = ((uint64_t)after + SJK_GROUP - 1) / SJK_GROUP * SJK_GROUP;
        L->ring_cap = (uint32_t)(cap < cap_max ? cap : cap_max);
        size_t ns, nr, nrk;
        if (!mul3(L->sink, D, 2, &ns) || !sjk_mul_ok(L->n_rec, L->rec_nbytes, &nr) ||
            !sjk_mul_ok(L->ring_cap, L->k_row_nbytes, &nrk))
            return 0;
        if (!take(&off, ns, &L->off_sink_k) || !take(&off, ns, &L->off_sink_v) ||
            !take(&off, c->center ? (size_t)2 * D * sizeof(float) : 0, &L->off_mu) ||
            !take(&off, nr, &L->off_body) || !take(&off, nrk, &L->off_ring_k) ||
            !take(&off, nrk, &L->off_ring_v))
            return 0;
    }
    return sjk_align_up_ok(off, SJK_CACHE_ALIGN, &L->head_nbytes);
}

/* Walks the whole block. With c == NULL only *total is computed. */
/* What plan() found besides the total, for sjk_cache_estimate_memory. */
typedef struct plan_sizes {
    size_t region[4];   /* sink, body, ring, uniform */
    size_t scr;         /* one thread's scratch */
    int any_compressed;
} plan_sizes;

static sjk_status plan(const sjk_cache_params *p, sjk_cache *c, uint8_t *base, size_t *total,
                       plan_sizes *ps)
{
    const uint32_t D = p->head_dim, T = p->n_threads;
    const size_t gq = p->n_q_heads / p->n_kv_heads;
    size_t off = 0, at, n, n2;
    size_t region[4] = {0, 0, 0, 0};
    if (!take(&off, sizeof(sjk_cache), &at)) return SJK_ERR_NOMEM;
    size_t off_layers, off_state, off_workers, off_scratch, off_q, off_part;
    if (!sjk_mul_ok(p->n_layers, sizeof(sjk_cache_layer), &n) || !take(&off, n, &off_layers))
        return SJK_ERR_NOMEM;
    if (!mul3(p->n_seqs, p->n_layers, sizeof(sjk_seq_layer), &n) || !take(&off, n, &off_state))
        return SJK_ERR_NOMEM;
    if (!sjk_mul_ok(T, sizeof(sjk_pool_worker), &n) || !take(&off, n, &off_workers))
        return SJK_ERR_NOMEM;

    /* Per-thread scratch: the larger of a seal (the group's K and V gathered at its start,
     * sjk_record_seal_in_scratch, the largest over the layers) and an attention chunk;
     * append's two rows and a read fit in either. One per worker thread, shared by every
     * layer: a thread seals one tile at a time. */
    size_t rec_scratch = 0;
    for (uint32_t l = 0; l < p->n_layers; l++) {
        const sjk_layer_config *lc = layer_cfg(p, l);
        if (lc->kind == SJK_KIND_UNIFORM) continue;
        sjk_record_params rp = {D, lc->bits_k, lc->bits_v, lc->body, lc->balance};
        size_t s = sjk_record_seal_scratch_nbytes(&rp);
        if (s > rec_scratch) rec_scratch = s;
    }
    size_t scr = rec_scratch;
    size_t attn = sjk_attn_scratch_nbytes(D);
    if (attn > scr) scr = attn;
    if (!sjk_align_up_ok(scr, SJK_CACHE_ALIGN, &scr)) return SJK_ERR_NOMEM;
    if (!sjk_mul_ok(scr, T, &n) || !take(&off, n, &off_scratch)) return SJK_ERR_NOMEM;

    /* Attention: packed rotated queries, then the per-unit partial states. */
    /* position splits per KV head: the most any thread count up to T will use */
    uint32_t splits = 1;
    for (uint32_t t = 1; t <= T; t++) splits = SJK_MAX(splits, sjk_attn_splits(p->n_kv_heads, t));
    size_t rows = (size_t)p->max_q_rows * gq;
    if (!mul3(p->n_kv_heads, rows, D, &n) || !sjk_mul_ok(n, sizeof(float), &n) || !take(&off, n, &off_q))
        return SJK_ERR_NOMEM;
    if (!mul3(p->n_kv_heads, splits, rows, &n) || !sjk_mul_ok(n, SJK_ATTN_PART_FLOATS(1, D), &n2) ||
        !sjk_mul_ok(n2, sizeof(float), &n2) || !take(&off, n2, &off_part))
        return SJK_ERR_NOMEM;

    for (uint32_t l = 0; l < p->n_layers; l++) {
        sjk_cache_layer L;
        if (!plan_layer(p, l, &L)) return SJK_ERR_NOMEM;
        size_t nb, at_l;
        if (!mul3(p->n_seqs, p->n_kv_heads, L.head_nbytes, &nb) || !take(&off, nb, &at_l))
            return SJK_ERR_NOMEM;
        size_t heads = (size_t)p->n_seqs * p->n_kv_heads;
        if (L.compressed) {
            region[0] += heads * (L.off_body - L.off_sink_k);
            region[1] += heads * (L.off_ring_k - L.off_body);
            region[2] += heads * (L.head_nbytes - L.off_ring_k);
        } else {
            region[3] += nb;
        }
        if (c) {
            L.data = base + at_l;
            c->layers = (sjk_cache_layer *)(void *)(base + off_layers);
            c->layers[l] = L;
        }
    }
    if (!sjk_align_up_ok(off, SJK_CACHE_ALIGN, &off)) return SJK_ERR_NOMEM;
    *total = off;
    if (ps) {
        memcpy(ps->region, region, sizeof region);
        ps->scr = scr;
        ps->any_compressed = 0;
        for (uint32_t l = 0; l < p->n_layers; l++) ps->any_compressed |= layer_cfg(p, l)->kind != SJK_KIND_UNIFORM;
    }
    if (c) {
        c->layers = (sjk_cache_layer *)(void *)(base + off_layers);
        c->state = (sjk_seq_layer *)(void *)(base + off_state);
        c->workers = (sjk_pool_worker *)(void *)(base + off_workers);
        c->scratch = base + off_scratch;
        c->scratch_nbytes = scr;
        c->rec_scratch_nbytes = rec_scratch;
        c->q_rot = (float *)(void *)(base + off_q);
        c->part = (float *)(void *)(base + off_part);
        c->n_splits = splits;
        c->total_nbytes = off;
        memcpy(c->region_nbytes, region, sizeof region);
    }
    return SJK_OK;
}

sjk_status sjk_cache_estimate(const sjk_cache_params *p, size_t *nbytes)
{
    if (!nbytes) return SJK_ERR_PARAM;
    *nbytes = 0;
    sjk_status st = sjk_cache_params_validate(p, NULL);
    if (st != SJK_OK) return st;
    return plan(p, NULL, NULL, nbytes, NULL);
}

sjk_status sjk_cache_create(const sjk_cache_params *p, sjk_cache **out)
{
    if (!out) return SJK_ERR_PARAM;
    *out = NULL;
    sjk_status st = sjk_cache_params_validate(p, NULL);
    if (st != SJK_OK) return st;
    for (uint32_t l = 0; l < p->n_layers; l++) {
        const sjk_layer_config *lc = layer_cfg(p, l);
        if (lc->kind != SJK_KIND_UNIFORM) {
            sjk_record_params rp = {p->head_dim, lc->bits_k, lc->bits_v, lc->body, lc->balance};
            if (sjk_record_nbytes(&rp) == 0) return SJK_ERR_UNSUPPORTED;
        }
    }
    size_t total;
    if ((st = plan(p, NULL, NULL, &total, NULL)) != SJK_OK) return st;
    uint8_t *base = aligned_alloc(SJK_CACHE_ALIGN, total);
    if (!base) return SJK_ERR_NOMEM;
    memset(base, 0, total);
    sjk_cache *c = (sjk_cache *)(void *)base;
    c->p = *p;
    c->p.layers = NULL;
    c->D = p->head_dim;
    c->gq = p->n_q_heads / p->n_kv_heads;
    if ((st = plan(p, c, base, &total, NULL)) != SJK_OK) { free(base); return st; }
    for (uint32_t s = 0; s < p->n_seqs; s++)
        for (uint32_t l = 0; l < p->n_layers; l++) {
            sjk_seq_layer *sl = sjk_cache_state(c, s, l);
            sl->n = 0;
            sl->b = c->layers[l].compressed ? c->layers[l].sink : 0;
        }
    c->active_threads = p->n_threads;
    /* Probe each body once (a zero group sealed into scratch): a body this build cannot
     * encode fails here, not at the first seal. */
    for (uint32_t l = 0; l < p->n_layers; l++) {
        const sjk_cache_layer *L = &c->layers[l];
        if (!L->compressed) continue;
        memset(c->scratch, 0, 2 * (size_t)SJK_GROUP * c->D * sizeof(float)); /* K, V of the group */
        if (L->n_rec == 0) continue;
        uint8_t *rec = sjk_cache_head(c, L, 0, 0) + L->off_body;
        st = sjk_record_seal_in_scratch(&L->rp, rec, L->rec_nbytes, c->scratch, c->rec_scratch_nbytes);
        memset(rec, 0, L->rec_nbytes);
        if (st != SJK_OK) { free(base); return st == SJK_ERR_PARAM ? SJK_ERR_UNSUPPORTED : st; }
    }
    if (sjk_pool_init(&c->pool, p->n_threads, 0, c->workers)) { free(base); return SJK_ERR_NOMEM; }
    *out = c;
    return SJK_OK;
}

void sjk_cache_free(sjk_cache *c)
{
    if (!c) return;
    sjk_pool_destroy(&c->pool);
    free(c);
}

/* ---- rows ---------------------------------------------------------------------- */

/* fp16 for sink and f16 staging rows: NaN -> 0, ±Inf and overflow saturate to ±65504. */
static void store_f16_row(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = sjk_record_f16(src[i]);
}

static void encode_row(uint8_t fmt, void *dst, const float *src, size_t n)
{
    if (fmt == SJK_FMT_F16) { store_f16_row(dst, src, n); return; }
    sjk_format_get((sjk_format)fmt)->encode(dst, src, n);
}

static void decode_row(uint8_t fmt, float *dst, const void *src, size_t n)
{
    sjk_format_get((sjk_format)fmt)->decode(dst, src, n);
}

/* Ring row pointer of position p (p >= sink). */
static inline uint8_t *ring_row(const sjk_cache_layer *L, uint8_t *head, int is_v, uint32_t p)
{
    size_t slot = (size_t)(p - L->sink) % L->ring_cap;
    return head + (is_v ? L->off_ring_v : L->off_ring_k) + slot * L->k_row_nbytes;
}

/* ---- ring centering ------------------------------------------------------------- */

/* mu = mean of the stored (fp16) sink rows 1 .. sink-1, in fp32, summed in position
 * order. Row 0 is left out: it is the BOS token, whose keys are often far from the rest
 * (an attention sink) and would pull the center toward one row. */
void sjk_cache_center_compute(const sjk_cache *c, const sjk_cache_layer *L, uint8_t *head)
{
    if (!L->compressed || !L->cfg.center) return;
    const size_t D = c->D;
    float *mu = sjk_cache_mu(L, head);
    memset(mu, 0, 2 * D * sizeof *mu);
    if (L->sink < 2) return;
    for (int v = 0; v < 2; v++) {
        const uint16_t *rows = (const uint16_t *)(const void *)(head + (v ? L->off_sink_v : L->off_sink_k));
        float *m = mu + (size_t)v * D;
        for (uint32_t p = 1; p < L->sink; p++)
            for (size_t d = 0; d < D; d++) m[d] += sjk_fp16_to_f32(rows[(size_t)p * D + d]);
        const float inv = 1.0f / (float)(L->sink - 1);
        for (size_t d = 0; d < D; d++) m[d] *= inv;
    }
}

/* ---- seal ---------------------------------------------------------------------- */

typedef struct seal_job {
    sjk_cache *c;
    uint32_t seq;
    uint32_t layer_lo, layer_hi;       /* layers [lo, hi) */
    uint32_t g0[64], g1[64];           /* per layer (relative to lo): groups [g0, g1) */
    uint32_t tiles_before[65];         /* prefix sum of tiles per layer */
    uint32_t split;                    /* 2: a tile's K and V are two items (seal_layers) */
    atomic_int status;
} seal_job;

static void seal_tile(void *arg, uint32_t item, uint32_t worker)
{
    seal_job *j = arg;
    sjk_cache *c = j->c;
    const unsigned parts = j->split == 2 ? (item % 2 ? SJK_RECORD_PART_V : SJK_RECORD_PART_K) : SJK_RECORD_PARTS;
    item /= j->split;
    uint32_t li = 0;
    while (item >= j->tiles_before[li + 1]) li++;
    uint32_t rel = item - j->tiles_before[li];
    uint32_t ng = j->g1[li] - j->g0[li];
    uint32_t head = rel / ng, g = j->g0[li] + rel % ng;
    const sjk_cache_layer *L = &c->layers[j->layer_lo + li];
    const uint32_t D = c->D;
    uint8_t *scr = sjk_cache_thread_scratch(c, worker);
    float *k = (float *)(void *)scr, *v = k + (size_t)SJK_GROUP * D;
    uint8_t *hb = sjk_cache_head(c, L, j->seq, head);
    uint32_t p0 = L->sink + g * SJK_GROUP;
    for (uint32_t t = 0; t < SJK_GROUP; t++) {
        if (parts & SJK_RECORD_PART_K) decode_row(L->k_fmt, k + (size_t)t * D, ring_row(L, hb, 0, p0 + t), D);
        if (parts & SJK_RECORD_PART_V) decode_row(L->v_fmt, v + (size_t)t * D, ring_row(L, hb, 1, p0 + t), D);
    }
    if (L->cfg.center) { /* the rows as attention saw them: ring row + mu */
        const float *mu = sjk_cache_mu(L, hb);
        for (uint32_t t = 0; t < SJK_GROUP; t++)
            for (size_t d = 0; d < D; d++) {
                if (parts & SJK_RECORD_PART_K) k[(size_t)t * D + d] += mu[d];
                if (parts & SJK_RECORD_PART_V) v[(size_t)t * D + d] += mu[D + d];
            }
    }
    uint8_t *rec = hb + L->off_body + (size_t)g * L->rec_nbytes;
    sjk_status st = sjk_record_seal_part(&L->rp, rec, L->rec_nbytes, scr, c->rec_scratch_nbytes, parts);
    if (st != SJK_OK) {
        int expect = SJK_OK;
        atomic_compare_exchange_strong(&j->status, &expect, (int)st);
    }
}

/* Seals, for layers [lo, hi) of seq, every full group older than the newest tail_min
 * positions: of the layers whose tail reached the trigger (idle = 0), or of every layer
 * (idle = 1); or (upto != UINT32_MAX) every full group that ends at or before position
 * upto. Layers are processed in batches of 64 to bound the job descriptor. */
static sjk_status seal_layers(sjk_cache *c, uint32_t seq, uint32_t lo, uint32_t hi, int idle, uint32_t upto)
{
    for (uint32_t b0 = lo; b0 < hi; b0 += 64) {
        uint32_t b1 = SJK_MIN(hi, b0 + 64);
        seal_job j;
        j.c = c;
        j.seq = seq;
        j.layer_lo = b0;
        j.layer_hi = b1;
        atomic_init(&j.status, SJK_OK);
        j.tiles_before[0] = 0;
        for (uint32_t l = b0; l < b1; l++) {
            const sjk_cache_layer *L = &c->layers[l];
            sjk_seq_layer *sl = sjk_cache_state(c, seq, l);
            uint32_t i = l - b0, g0 = 0, g1 = 0;
            if (L->compressed && sl->n > sl->b) {
                uint32_t tail = sl->n - sl->b, tmin = L->cfg.tail_min;
                int trigger = idle || tail >= sjk_seal_trigger(&L->cfg);
                if (upto != UINT32_MAX) { /* sjk_cache_seal_to: no tail is kept */
                    trigger = 1;
                    tmin = sl->n - SJK_MIN(sl->n, upto);
                }
                if (trigger && sl->n >= L->sink + tmin) {
                    uint32_t end = L->sink + (sl->n - tmin - L->sink) / SJK_GROUP * SJK_GROUP;
                    end = SJK_MIN(end, L->sink + L->n_rec * SJK_GROUP); /* seal_to past the slots */
                    if (end > sl->b) {
                        g0 = (sl->b - L->sink) / SJK_GROUP;
                        g1 = (end - L->sink) / SJK_GROUP;
                    }
                }
            }
            j.g0[i] = g0;
            j.g1[i] = g1;
            j.tiles_before[i + 1] = j.tiles_before[i] + (g1 - g0) * c->p.n_kv_heads;
        }
        uint32_t n_tiles = j.tiles_before[b1 - b0];
        if (!n_tiles) continue;
        /* Fewer records than threads (a 1,024-position tail seals one group at a time, and
         * Gemma 3 has one KV head): each record's K and V go to two threads, the same bytes
         * (sjk_record_seal_part). An 8K prefill of Gemma 3 with one record per seal took
         * 1.11x the f16 prefill's time on two threads before, 1.05x after (median of five
         * rounds, docs/notes/benchmarks.md "Zen 4 again"). An observer sees whole records. */
        j.split = n_tiles < c->active_threads && !sjk_record_tile_observer_set() ? 2 : 1;
        sjk_pool_run_limited(&c->pool, seal_tile, &j, n_tiles * j.split, c->active_threads);
        sjk_status st = (sjk_status)atomic_load(&j.status);
        if (st != SJK_OK) return st;
        for (uint32_t l = b0; l < b1; l++) {
            uint32_t i = l - b0;
            if (j.g1[i] > j.g0[i]) sjk_cache_state(c, seq, l)->b = c->layers[l].sink + j.g1[i] * SJK_GROUP;
        }
    }
    return SJK_OK;
}

sjk_status sjk_cache_set_threads(sjk_cache *c, uint32_t n)
{
    if (!c || n == 0) return SJK_ERR_PARAM;
    c->active_threads = n < c->p.n_threads ? n : c->p.n_threads;
    return SJK_OK;
}

sjk_status sjk_cache_seal(sjk_cache *c, uint32_t seq)
{
    if (!c || seq >= c->p.n_seqs) return SJK_ERR_PARAM;
    return seal_layers(c, seq, 0, c->p.n_layers, 0, UINT32_MAX);
}

sjk_status sjk_cache_seal_idle(sjk_cache *c, uint32_t seq)
{
    if (!c || seq >= c->p.n_seqs) return SJK_ERR_PARAM;
    return seal_layers(c, seq, 0, c->p.n_layers, 1, UINT32_MAX);
}

sjk_status sjk_cache_seal_to(sjk_cache *c, uint32_t seq, uint32_t pos)
{
    if (!c || seq >= c->p.n_seqs) return SJK_ERR_PARAM;
    return seal_layers(c, seq, 0, c->p.n_layers, 0, pos);
}

/* ---- append -------------------------------------------------------------------- */

sjk_status sjk_cache_append(sjk_cache *c, uint32_t seq, uint32_t layer, const float *k,
                            const float *v, size_t n_pos)
{
    if (!c || seq >= c->p.n_seqs || layer >= c->p.n_layers || (n_pos && (!k || !v)))
        return SJK_ERR_PARAM;
    const sjk_cache_layer *L = &c->layers[layer];
    sjk_seq_layer *sl = sjk_cache_state(c, seq, layer);
    if (n_pos > (size_t)c->p.max_pos - sl->n) return SJK_ERR_RANGE;
    const uint32_t D = c->D, H = c->p.n_kv_heads;
    float *kr = (float *)(void *)sjk_cache_thread_scratch(c, 0), *vr = kr + D;
    for (size_t i = 0; i < n_pos; i++) {
        uint32_t pos = sl->n;
        /* Defensive: the ring holds every unsealed row as long as seals succeed (it is
         * sized for the seal trigger). If a seal failed and the tail reached the ring's
         * size, try the seal again, and refuse the row rather than overwrite one that is
         * not sealed yet. */
        if (L->compressed && pos >= L->sink && pos - sl->b >= L->ring_cap) {
            sjk_status st = seal_layers(c, seq, layer, layer + 1, 0, UINT32_MAX);
            if (st != SJK_OK) return st;
            if (pos - sl->b >= L->ring_cap) return SJK_ERR_RANGE;
        }
        for (uint32_t h = 0; h < H; h++) {
            const float *ks = k + (i * H + h) * D, *vs = v + (i * H + h) * D;
            if (L->rot_k) {
                memcpy(kr, ks, D * sizeof *kr);
                sjk_hadamard(kr, D, L->rot_k);
                ks = kr;
            }
            if (L->rot_v) {
                memcpy(vr, vs, D * sizeof *vr);
                sjk_hadamard(vr, D, L->rot_v);
                vs = vr;
            }
            uint8_t *hb = sjk_cache_head(c, L, seq, h);
            if (!L->compressed) {
                encode_row(L->k_fmt, hb + L->off_ring_k + (size_t)pos * L->k_row_nbytes, ks, D);
                encode_row(L->v_fmt, hb + L->off_ring_v + (size_t)pos * L->v_row_nbytes, vs, D);
            } else if (pos < L->sink) {
                store_f16_row((uint16_t *)(void *)(hb + L->off_sink_k) + (size_t)pos * D, ks, D);
                store_f16_row((uint16_t *)(void *)(hb + L->off_sink_v) + (size_t)pos * D, vs, D);
                if (pos + 1 == L->sink) sjk_cache_center_compute(c, L, hb);
            } else if (L->cfg.center) {
                const float *mu = sjk_cache_mu(L, hb);
                for (size_t d = 0; d < D; d++) {
                    kr[d] = ks[d] - mu[d]; /* in place when ks == kr */
                    vr[d] = vs[d] - mu[D + d];
                }
                encode_row(L->k_fmt, ring_row(L, hb, 0, pos), kr, D);
                encode_row(L->v_fmt, ring_row(L, hb, 1, pos), vr, D);
            } else {
                encode_row(L->k_fmt, ring_row(L, hb, 0, pos), ks, D);
                encode_row(L->v_fmt, ring_row(L, hb, 1, pos), vs, D);
            }
        }
        sl->n = pos + 1;
        if (L->compressed && sl->n > sl->b) {
            if (sl->n - sl->b >= sjk_seal_trigger(&L->cfg)) {
                sjk_status st = seal_layers(c, seq, layer, layer + 1, 0, UINT32_MAX);
                if (st != SJK_OK) return st;
            }
        }
    }
    return SJK_OK;
}

/* ---- truncate ------------------------------------------------------------------ */

sjk_status sjk_cache_truncate(sjk_cache *c, uint32_t seq, uint32_t pos, uint32_t *resume_pos)
{
    if (!c || seq >= c->p.n_seqs) return SJK_ERR_PARAM;
    uint32_t resume = pos, longest = 0;
    for (uint32_t l = 0; l < c->p.n_layers; l++) longest = SJK_MAX(longest, sjk_cache_state(c, seq, l)->n);
    if (resume > longest) resume = longest;
    /* Fixed point: a layer whose body holds `resume` must restart at that group's start,
     * which may in turn reach into another layer's body. */
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t l = 0; l < c->p.n_layers; l++) {
            const sjk_cache_layer *L = &c->layers[l];
            const sjk_seq_layer *sl = sjk_cache_state(c, seq, l);
            if (!L->compressed || resume >= sl->b || resume < L->sink || resume >= sl->n) continue;
            uint32_t start = L->sink + (resume - L->sink) / SJK_GROUP * SJK_GROUP;
            if (start < resume) { resume = start; changed = 1; }
        }
    }
    for (uint32_t l = 0; l < c->p.n_layers; l++) {
        const sjk_cache_layer *L = &c->layers[l];
        sjk_seq_layer *sl = sjk_cache_state(c, seq, l);
        if (sl->n > resume) sl->n = resume;
        if (L->compressed && sl->b > L->sink && sl->b > sl->n) {
            /* resume is a group start of this layer here (fixed point above) */
            sl->b = sl->n < L->sink ? L->sink : L->sink + (sl->n - L->sink) / SJK_GROUP * SJK_GROUP;
        }
    }
    if (resume_pos) *resume_pos = resume;
    return resume < pos && resume < longest ? SJK_ERR_REPROCESS : SJK_OK;
}

sjk_status sjk_cache_length(const sjk_cache *c, uint32_t seq, uint32_t layer, uint32_t *n_pos,
                            uint32_t *body_end)
{
    if (!c || seq >= c->p.n_seqs || layer >= c->p.n_layers) return SJK_ERR_PARAM;
    const sjk_seq_layer *sl = sjk_cache_state(c, seq, layer);
    if (n_pos) *n_pos = sl->n;
    if (body_end) *body_end = sl->b;
    return SJK_OK;
}

/* ---- memory and invariants ----------------------------------------------------- */

/* Per-thread scratch is the larger of attention's and a seal's (plan()); what a seal
 * needs beyond attention, over all threads, is the compressed layers' own cost. */
static size_t seal_scratch_of(size_t scr, uint32_t D, int any_compressed, uint32_t n_threads)
{
    size_t attn_al;
    if (!any_compressed || !sjk_align_up_ok(sjk_attn_scratch_nbytes(D), SJK_CACHE_ALIGN, &attn_al) ||
        scr <= attn_al)
        return 0;
    return (scr - attn_al) * n_threads;
}

sjk_status sjk_cache_estimate_memory(const sjk_cache_params *p, sjk_cache_memory *m)
{
    if (!m) return SJK_ERR_PARAM;
    memset(m, 0, sizeof *m);
    sjk_status st = sjk_cache_params_validate(p, NULL);
    if (st != SJK_OK) return st;
    plan_sizes ps;
    if ((st = plan(p, NULL, NULL, &m->total_nbytes, &ps)) != SJK_OK) return st;
    m->sink_nbytes = ps.region[0];
    m->body_nbytes = ps.region[1];
    m->ring_nbytes = ps.region[2];
    m->uniform_nbytes = ps.region[3];
    size_t kv = m->sink_nbytes + m->body_nbytes + m->ring_nbytes + m->uniform_nbytes;
    m->scratch_nbytes = m->total_nbytes - kv;
    m->seal_scratch_nbytes = seal_scratch_of(ps.scr, p->head_dim, ps.any_compressed, p->n_threads);
    double cap = (double)p->max_pos * p->n_seqs * p->n_layers * (double)p->n_kv_heads * (double)p->head_dim * 2;
    m->allocated_bits_per_value = cap > 0 ? (double)kv * 8 / cap : 0;
    return SJK_OK;
}

sjk_status sjk_cache_memory_report(const sjk_cache *c, sjk_cache_memory *m)
{
    if (!c || !m) return SJK_ERR_PARAM;
    memset(m, 0, sizeof *m);
    m->total_nbytes = c->total_nbytes;
    m->sink_nbytes = c->region_nbytes[0];
    m->body_nbytes = c->region_nbytes[1];
    m->ring_nbytes = c->region_nbytes[2];
    m->uniform_nbytes = c->region_nbytes[3];
    size_t kv = m->sink_nbytes + m->body_nbytes + m->ring_nbytes + m->uniform_nbytes;
    m->scratch_nbytes = c->total_nbytes - kv;
    const size_t H = c->p.n_kv_heads, D = c->D;
    int any_compressed = 0;
    for (uint32_t l = 0; l < c->p.n_layers; l++) any_compressed |= c->layers[l].compressed;
    m->seal_scratch_nbytes = seal_scratch_of(c->scratch_nbytes, c->D, any_compressed, c->p.n_threads);
    double occ = 0, values = 0;
    for (uint32_t s = 0; s < c->p.n_seqs; s++)
        for (uint32_t l = 0; l < c->p.n_layers; l++) {
            const sjk_cache_layer *L = &c->layers[l];
            const sjk_seq_layer *sl = sjk_cache_state(c, s, l);
            double per_head;
            if (!L->compressed) {
                per_head = (double)sl->n * (double)(L->k_row_nbytes + L->v_row_nbytes);
            } else {
                uint32_t ns = SJK_MIN(sl->n, L->sink);
                uint32_t nrec = (sl->b - L->sink) / SJK_GROUP;
                uint32_t nring = sl->n > sl->b ? sl->n - sl->b : 0;
                per_head = (double)ns * D * 4 + (double)nrec * (double)L->rec_nbytes +
                           (double)nring * 2.0 * (double)L->k_row_nbytes;
            }
            occ += per_head * (double)H;
            values += (double)sl->n * (double)H * (double)D * 2;
        }
    m->occupied_nbytes = (size_t)occ;
    m->occupied_bits_per_value = values > 0 ? occ * 8 / values : 0;
    double cap = (double)c->p.max_pos * c->p.n_seqs * c->p.n_layers * (double)H * (double)D * 2;
    m->allocated_bits_per_value = (double)kv * 8 / cap;
    return SJK_OK;
}

/* ---- reading rows back ---------------------------------------------------------- */

size_t sjk_cache_read_scratch_nbytes(const sjk_cache *c)
{
    return c ? (size_t)2 * SJK_GROUP * c->D * sizeof(float) : 0;
}

sjk_status sjk_cache_read_rows(const sjk_cache *c, uint32_t seq, uint32_t layer, uint32_t head,
                               uint32_t pos, uint32_t n_pos, float *k, float *v, uint8_t *region,
                               void *scratch, size_t scratch_nbytes)
{
    if (!c || seq >= c->p.n_seqs || layer >= c->p.n_layers || head >= c->p.n_kv_heads ||
        (n_pos && (!k || !v)))
        return SJK_ERR_PARAM;
    const sjk_cache_layer *L = &c->layers[layer];
    const sjk_seq_layer *sl = sjk_cache_state(c, seq, layer);
    if (pos > sl->n || n_pos > sl->n - pos) return SJK_ERR_RANGE;
    if (!scratch || scratch_nbytes < sjk_cache_read_scratch_nbytes(c)) return SJK_ERR_BUFFER;
    const uint32_t D = c->D;
    uint8_t *hb = sjk_cache_head(c, L, seq, head);
    float *rk = scratch, *rv = rk + (size_t)SJK_GROUP * D; /* one decoded record */
    uint32_t rec_loaded = UINT32_MAX;
    for (uint32_t i = 0; i < n_pos; i++) {
        uint32_t p = pos + i;
        float *ko = k + (size_t)i * D, *vo = v + (size_t)i * D;
        uint8_t r;
        if (!L->compressed) {
            r = SJK_REGION_UNIFORM;
            decode_row(L->k_fmt, ko, hb + L->off_ring_k + (size_t)p * L->k_row_nbytes, D);
            decode_row(L->v_fmt, vo, hb + L->off_ring_v + (size_t)p * L->v_row_nbytes, D);
        } else if (p < L->sink) {
            r = SJK_REGION_SINK;
            const uint16_t *sk = (const uint16_t *)(const void *)(hb + L->off_sink_k) + (size_t)p * D;
            const uint16_t *sv = (const uint16_t *)(const void *)(hb + L->off_sink_v) + (size_t)p * D;
            for (uint32_t d = 0; d < D; d++) {
                ko[d] = sjk_fp16_to_f32(sk[d]);
                vo[d] = sjk_fp16_to_f32(sv[d]);
            }
        } else if (p < sl->b) {
            r = SJK_REGION_BODY;
            uint32_t g = (p - L->sink) / SJK_GROUP, t = (p - L->sink) % SJK_GROUP;
            if (g != rec_loaded) {
                sjk_status st = sjk_record_decode(&L->rp, rk, rv, hb + L->off_body + (size_t)g * L->rec_nbytes,
                                                  L->rec_nbytes);
                if (st != SJK_OK) return st;
                rec_loaded = g;
            }
            memcpy(ko, rk + (size_t)t * D, D * sizeof *ko);
            memcpy(vo, rv + (size_t)t * D, D * sizeof *vo);
        } else {
            r = SJK_REGION_RING;
            decode_row(L->k_fmt, ko, ring_row(L, hb, 0, p), D);
            decode_row(L->v_fmt, vo, ring_row(L, hb, 1, p), D);
            if (L->cfg.center) {
                const float *mu = sjk_cache_mu(L, hb);
                for (uint32_t d = 0; d < D; d++) {
                    ko[d] += mu[d];
                    vo[d] += mu[D + d];
                }
            }
        }
        if (L->rot_k) sjk_hadamard(ko, D, L->rot_k); /* orthonormal: its own inverse */
        if (L->rot_v) sjk_hadamard(vo, D, L->rot_v);
        if (region) region[i] = r;
    }
    return SJK_OK;
}

#define FAIL(...) do { if (msg && msg_cap) snprintf(msg, msg_cap, __VA_ARGS__); return SJK_ERR_CORRUPT; } while (0)

sjk_status sjk_cache_check(const sjk_cache *c, char *msg, size_t msg_cap)
{
    if (msg && msg_cap) msg[0] = 0;
    if (!c) return SJK_ERR_PARAM;
    for (uint32_t s = 0; s < c->p.n_seqs; s++)
        for (uint32_t l = 0; l < c->p.n_layers; l++) {
            const sjk_cache_layer *L = &c->layers[l];
            const sjk_seq_layer *sl = sjk_cache_state(c, s, l);
            if (sl->n > c->p.max_pos) FAIL("seq %u layer %u: length %u > max_pos", s, l, sl->n);
            if (!L->compressed) {
                if (sl->b != 0) FAIL("seq %u layer %u: uniform layer with body end %u", s, l, sl->b);
                continue;
            }
            if (sl->b < L->sink || (sl->b - L->sink) % SJK_GROUP)
                FAIL("seq %u layer %u: body end %u not sink + k*128", s, l, sl->b);
            if (sl->b > L->sink && sl->b > sl->n)
                FAIL("seq %u layer %u: body end %u beyond length %u", s, l, sl->b, sl->n);
            if ((sl->b - L->sink) / SJK_GROUP > L->n_rec)
                FAIL("seq %u layer %u: %u records > %u slots", s, l, (sl->b - L->sink) / SJK_GROUP, L->n_rec);
            uint32_t tail = sl->n > sl->b ? sl->n - sl->b : 0;
            if (tail > L->ring_cap) FAIL("seq %u layer %u: tail %u > ring %u", s, l, tail, L->ring_cap);
            uint32_t trig = sjk_seal_trigger(&L->cfg);
            if (tail >= trig) FAIL("seq %u layer %u: tail %u reached the seal trigger %u unsealed", s, l, tail, trig);
            uint32_t nrec = (sl->b - L->sink) / SJK_GROUP;
            for (uint32_t h = 0; h < c->p.n_kv_heads; h++) {
                const uint8_t *hb = sjk_cache_head(c, L, s, h);
                for (uint32_t g = 0; g < nrec; g++) {
                    const uint8_t *rec = hb + L->off_body + (size_t)g * L->rec_nbytes;
                    for (size_t off = L->rl.off_kscale; off < L->rl.nbytes; off += 2) {
                        uint16_t x = sjk_rd_u16le(rec + off);
                        if ((x & 0x7C00u) == 0x7C00u)
                            FAIL("seq %u layer %u head %u record %u: non-finite scale at byte %zu", s, l, h, g, off);
                    }
                }
            }
        }
    return SJK_OK;
}
