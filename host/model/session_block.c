/* session_block.c — a session's KV state in 128-token blocks, for a prefix store
 * (sjkh_session_block_*; the store itself is store/, docs/STORE.md).
 *
 * Block i covers positions [128 i, 128 i + 128) of every layer, in two parts:
 *
 *   GROWING  every growing layer in model order: a layer in the libsjkvarn cache gives
 *            its n_kv_heads blocks (sjk_cache_block_export: sink rows, a sealed record
 *            or uniform rows); a "host-f16" layer its 128 K slots then 128 V slots
 *   WINDOW   every sliding-window layer in model order: its 128 K slots then 128 V slots
 *            (fp16 or q8_0 rows as the ring holds them)
 *
 * A growing block is final once the cache cannot change it (sealed, or a row of a layer
 * that never seals). A window block exists only while the ring still holds its rows, so
 * a publisher exports window blocks right after the prefill cut, and a reader needs the
 * window blocks of the last `window - 1` positions before its cut, nothing older.
 */
#include <string.h>

#include "hcommon.h"
#include "kv.h"
#include "model.h"

static int layer_in_part(const sjkh_session *s, uint32_t l, int part)
{
    const sjkh_model_info *in = &s->m->info;
    int global = sjkh_model_layer_is_global(s->m, l) || !in->sliding_window;
    return part == SJKH_BLOCK_GROWING ? global : !global;
}

/* The first layer >= l of the part, n_layers when there is none: the loops over a part
 * read for (l = part_layer(s, part, 0); l < n_layers; l = part_layer(s, part, l + 1)). */
static uint32_t part_layer(const sjkh_session *s, int part, uint32_t l)
{
    while (l < s->m->info.n_layers && !layer_in_part(s, l, part)) l++;
    return l;
}

typedef struct layer_view {
    uint32_t *len;
    uint8_t *k, *v;
    size_t nbytes, row_nbytes;
    sjk_cache *cache;
    uint32_t cache_layer; /* index in cache */
    uint32_t cap;         /* host slots */
} layer_view;

static sjk_status view(const sjkh_session *s, uint32_t l, layer_view *lv)
{
    sjk_status st = sjkh_kv_layer_storage(s->kv, l, &lv->len, &lv->k, &lv->v, &lv->nbytes, &lv->row_nbytes,
                                          &lv->cache);
    if (st != SJK_OK) return st;
    lv->cache_layer = 0;
    for (uint32_t i = 0; i < l; i++) {
        uint32_t *len;
        uint8_t *k, *v;
        size_t nb, rb;
        sjk_cache *c;
        sjkh_kv_layer_storage(s->kv, i, &len, &k, &v, &nb, &rb, &c);
        if (c) lv->cache_layer++;
    }
    lv->cap = lv->row_nbytes ? (uint32_t)(lv->nbytes / lv->row_nbytes) : 0;
    return SJK_OK;
}

/* Bytes of block `block` of one layer; 0 with SJK_ERR_RANGE past the layer. */
static sjk_status layer_block_nbytes(const sjkh_session *s, const layer_view *lv, uint32_t block, size_t *nb)
{
    if (lv->cache) {
        size_t one;
        sjk_status st = sjk_cache_block_nbytes(lv->cache, lv->cache_layer, block, &one);
        if (st != SJK_OK) return st;
        *nb = one * s->m->info.n_head_kv;
        return SJK_OK;
    }
    if (((uint64_t)block + 1) * SJKH_BLOCK_TOKENS > s->p.n_ctx) return SJK_ERR_RANGE;
    *nb = 2 * (size_t)SJKH_BLOCK_TOKENS * lv->row_nbytes;
    return SJK_OK;
}

/* view() of layer l and the bytes of its block `block` (layer_block_nbytes). */
static sjk_status block_view(const sjkh_session *s, uint32_t l, uint32_t block, layer_view *lv, size_t *nb)
{
    sjk_status st = view(s, l, lv);
    return st != SJK_OK ? st : layer_block_nbytes(s, lv, block, nb);
}

sjk_status sjkh_session_block_nbytes(const sjkh_session *s, int part, uint32_t block, size_t *nbytes)
{
    if (!s || !nbytes || (part != SJKH_BLOCK_GROWING && part != SJKH_BLOCK_WINDOW)) return SJK_ERR_PARAM;
    size_t total = 0;
    for (uint32_t l = part_layer(s, part, 0); l < s->m->info.n_layers; l = part_layer(s, part, l + 1)) {
        layer_view lv;
        size_t nb;
        sjk_status st = block_view(s, l, block, &lv, &nb);
        if (st != SJK_OK) return st;
        total += nb;
    }
    *nbytes = total;
    return SJK_OK;
}

/* Host slots of positions [p0, p0 + 128) of a host layer, K then V, to or from buf. */
static void host_rows(const layer_view *lv, uint32_t p0, uint8_t *buf, int to_layer)
{
    size_t rb = lv->row_nbytes;
    for (int kv = 0; kv < 2; kv++)
        for (uint32_t t = 0; t < SJKH_BLOCK_TOKENS; t++) {
            uint8_t *slot = (kv ? lv->v : lv->k) + (size_t)((p0 + t) % lv->cap) * rb;
            uint8_t *b = buf + ((size_t)kv * SJKH_BLOCK_TOKENS + t) * rb;
            if (to_layer) memcpy(slot, b, rb);
            else memcpy(b, slot, rb);
        }
}

sjk_status sjkh_session_block_pieces(const sjkh_session *s, int part, uint32_t block, sjkh_block_piece *out,
                                     size_t cap, size_t *n)
{
    if (!s || !n || (part != SJKH_BLOCK_GROWING && part != SJKH_BLOCK_WINDOW)) return SJK_ERR_PARAM;
    const uint32_t H = s->m->info.n_head_kv;
    size_t k = 0;
    for (uint32_t l = part_layer(s, part, 0); l < s->m->info.n_layers; l = part_layer(s, part, l + 1)) {
        layer_view lv;
        size_t nb;
        sjk_status st = block_view(s, l, block, &lv, &nb);
        if (st != SJK_OK) return st;
        for (uint32_t h = 0; h < (lv.cache ? H : 1); h++, k++)
            if (out && k < cap) {
                out[k].layer = l;
                out[k].head = lv.cache ? h : UINT32_MAX;
                out[k].nbytes = lv.cache ? nb / H : nb;
            }
    }
    *n = k;
    return out && k > cap ? SJK_ERR_BUFFER : SJK_OK;
}

sjk_status sjkh_session_block_export(sjkh_session *s, int part, uint32_t block, void *dst, size_t dst_cap,
                                     size_t *nbytes)
{
    size_t total;
    sjk_status st = sjkh_session_block_nbytes(s, part, block, &total);
    if (st != SJK_OK) return st;
    if (nbytes) *nbytes = total;
    if (!dst) return SJK_OK;
    if (dst_cap < total) return SJK_ERR_BUFFER;
    const uint32_t p0 = block * SJKH_BLOCK_TOKENS, H = s->m->info.n_head_kv;
    uint8_t *out = dst;
    for (uint32_t l = part_layer(s, part, 0); l < s->m->info.n_layers; l = part_layer(s, part, l + 1)) {
        layer_view lv;
        size_t nb;
        if ((st = block_view(s, l, block, &lv, &nb)) != SJK_OK) return st;
        if (lv.cache) {
            for (uint32_t h = 0; h < H; h++)
                if ((st = sjk_cache_block_export(lv.cache, 0, lv.cache_layer, h, block, out + h * (nb / H), nb / H,
                                                 NULL)) != SJK_OK)
                    return st;
        } else {
            /* rows must be written and still held by the ring */
            if (p0 + SJKH_BLOCK_TOKENS > *lv.len || (uint64_t)*lv.len - p0 > lv.cap) return SJK_ERR_RANGE;
            host_rows(&lv, p0, out, 0);
        }
        out += nb;
    }
    return SJK_OK;
}

uint32_t sjkh_session_block_window_first(const sjkh_session *s, uint32_t n_blocks)
{
    uint32_t w = s->m->info.sliding_window;
    uint64_t p = (uint64_t)n_blocks * SJKH_BLOCK_TOKENS;
    if (!w || p < w) return 0;
    return (uint32_t)((p - (w - 1)) / SJKH_BLOCK_TOKENS);
}

sjk_status sjkh_session_block_import(sjkh_session *s, int part, uint32_t block, const void *src, size_t src_nbytes)
{
    size_t total;
    sjk_status st = sjkh_session_block_nbytes(s, part, block, &total);
    if (st != SJK_OK) return st;
    if (src_nbytes != total || !src) return SJK_ERR_BUFFER;
    if (s->n_past != 0) return SJK_ERR_RANGE; /* into a fresh session, before finish */
    const uint32_t p0 = block * SJKH_BLOCK_TOKENS;
    if (part == SJKH_BLOCK_GROWING && block == 0) s->blk_win_lo = s->blk_win_hi = 0;
    if (part == SJKH_BLOCK_WINDOW) {
        /* a window block lands in slots no other imported window block uses */
        uint32_t lo = s->blk_win_hi == block ? s->blk_win_lo : block;
        uint32_t cap = UINT32_MAX;
        for (uint32_t l = 0; l < s->m->info.n_layers; l++) {
            layer_view lv;
            if (layer_in_part(s, l, part) && view(s, l, &lv) == SJK_OK && lv.cap < cap) cap = lv.cap;
        }
        if (cap != UINT32_MAX && (uint64_t)(block + 1 - lo) * SJKH_BLOCK_TOKENS > cap) return SJK_ERR_RANGE;
    }
    /* growing: check every layer is at the block's start, then import layer by layer;
     * the cache validates each layer's block before it copies */
    const uint8_t *in = src;
    for (uint32_t l = part_layer(s, part, 0); l < s->m->info.n_layers; l = part_layer(s, part, l + 1)) {
        layer_view lv;
        if ((st = view(s, l, &lv)) != SJK_OK) return st;
        if (part == SJKH_BLOCK_GROWING && *lv.len != p0) return SJK_ERR_RANGE;
    }
    for (uint32_t l = part_layer(s, part, 0); l < s->m->info.n_layers; l = part_layer(s, part, l + 1)) {
        layer_view lv;
        size_t nb;
        if ((st = block_view(s, l, block, &lv, &nb)) != SJK_OK) return st;
        if (lv.cache) {
            if ((st = sjk_cache_block_import(lv.cache, 0, lv.cache_layer, block, in, nb)) != SJK_OK) {
                sjkh_session_reset(s); /* earlier layers of this block are in: start over */
                return st;
            }
            *lv.len = p0 + SJKH_BLOCK_TOKENS;
        } else {
            host_rows(&lv, p0, (uint8_t *)(uintptr_t)in, 1);
            if (part == SJKH_BLOCK_GROWING) *lv.len = p0 + SJKH_BLOCK_TOKENS;
        }
        in += nb;
    }
    if (part == SJKH_BLOCK_WINDOW) {
        s->blk_win_lo = s->blk_win_hi == block ? s->blk_win_lo : block;
        s->blk_win_hi = block + 1;
    }
    return SJK_OK;
}

sjk_status sjkh_session_block_finish(sjkh_session *s, uint32_t n_blocks)
{
    if (!s || s->n_past != 0) return SJK_ERR_PARAM;
    const uint32_t p = n_blocks * SJKH_BLOCK_TOKENS;
    int has_window = 0;
    for (uint32_t l = 0; l < s->m->info.n_layers; l++) {
        layer_view lv;
        sjk_status st = view(s, l, &lv);
        if (st != SJK_OK) return st;
        if (layer_in_part(s, l, SJKH_BLOCK_GROWING)) {
            if (*lv.len != p) return SJK_ERR_RANGE;
        } else has_window = 1;
    }
    if (has_window && n_blocks &&
        (s->blk_win_hi != n_blocks || s->blk_win_lo > sjkh_session_block_window_first(s, n_blocks)))
        return SJK_ERR_RANGE;
    for (uint32_t l = 0; l < s->m->info.n_layers; l++) {
        layer_view lv;
        view(s, l, &lv);
        *lv.len = p;
    }
    s->n_past = p;
    return SJK_OK;
}

uint32_t sjkh_session_block_cut(const sjkh_session *s, uint32_t n_tokens)
{
    if (!s || n_tokens < 2) return 0;
    uint32_t cut = (n_tokens - 1) / SJKH_BLOCK_TOKENS; /* at least one token left to feed */
    if (!strcmp(s->kv_str, "host-f16")) return cut;
    uint32_t n_growing = 0;
    for (uint32_t l = 0; l < s->m->info.n_layers; l++) n_growing += layer_in_part(s, l, SJKH_BLOCK_GROWING);
    sjk_layer_config lc[256];
    if (!n_growing || n_growing > 256 || sjk_cache_config_parse(s->kv_str, n_growing, lc, NULL, 0) != SJK_OK)
        return 0;
    for (uint32_t i = 0; i < n_growing; i++) {
        if (lc[i].kind == SJK_KIND_UNIFORM) continue;
        /* where an idle seal at n_tokens would end: the newest tail_min stay in the ring */
        uint32_t sink = lc[i].sink, tmin = lc[i].tail_min, end = sink;
        if (sink % SJKH_BLOCK_TOKENS) return 0;
        if (n_tokens >= (uint64_t)sink + tmin)
            end = sink + (n_tokens - tmin - sink) / SJKH_BLOCK_TOKENS * SJKH_BLOCK_TOKENS;
        if (end / SJKH_BLOCK_TOKENS < cut) cut = end / SJKH_BLOCK_TOKENS;
    }
    return cut;
}

sjk_status sjkh_session_seal_to(sjkh_session *s, uint32_t pos)
{
    if (!s) return SJK_ERR_PARAM;
    for (uint32_t l = 0; l < s->m->info.n_layers; l++) {
        layer_view lv;
        sjk_status st = view(s, l, &lv);
        if (st != SJK_OK) return st;
        if (lv.cache) return sjk_cache_seal_to(lv.cache, 0, pos); /* one cache holds them all */
    }
    return SJK_OK;
}
