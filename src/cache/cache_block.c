/* cache_block.c — export and import of one final 128-token block of a cache layer
 * (sjk_cache_block_*; include/sjkvarn.h "Blocks").
 *
 * Block i of a layer covers positions [128 i, 128 i + 128). Its bytes for one KV head:
 *
 *   compressed layer, inside the sink:  K rows [128][D] fp16 | V rows [128][D] fp16
 *   compressed layer, in the body:      the sealed record of group (128 i - sink) / 128
 *   uniform layer:                      K rows [128][k_row] | V rows [128][v_row]
 *
 * (the region bytes exactly as the cache holds them; docs/FORMAT.md "## Cache blocks").
 * A block is final once no later append can change it: sink and uniform rows once
 * written, a record once sealed. The staging ring is never exported: its rows are not
 * final (they will be sealed later). Import appends one block to a layer whose every
 * position so far is final (length 128 i, nothing in the ring), validating before it
 * copies, so a rejected block leaves the cache as it was.
 */
#include <string.h>

#include "cache/cache_internal.h"
#include "codec/record.h"
#include "common/util.h"

/* Record formats 2, 3, 4 and 5 only add bodies (above 4 bits; the real-data trellis; the
 * trellis bodies on int8-grid codebooks; the trellis on 128-entry tables); every
 * record of a v1 body keeps its bytes, so a block of a v1 configuration is the same bytes and keeps block version 1
 * (store values from older builds stay valid). Blocks with the new bodies exist only
 * under configurations that name them, and a store keys values by the configuration
 * (bits included), so they never meet an older build's blocks. A format that changed
 * existing bytes would need a new block version. */
_Static_assert(SJK_RECORD_FORMAT_VERSION == 5 && SJK_CACHE_BLOCK_VERSION == 1,
               "a record format that changes v1 bytes is a new block version");

static int fp16_finite(uint16_t x) { return (x & 0x7C00u) != 0x7C00u; }

typedef enum { BLK_SINK, BLK_RECORD, BLK_UNIFORM } blk_kind;

/* Kind and bytes per head of block `block` of layer L; SJK_ERR_RANGE past max_pos,
 * SJK_ERR_UNSUPPORTED for a block that straddles the sink's end (a sink clamped to a
 * max_pos that is not a multiple of 128). */
static sjk_status block_kind(const sjk_cache *c, const sjk_cache_layer *L, uint32_t block, blk_kind *kind,
                             size_t *nbytes)
{
    uint64_t p0 = (uint64_t)block * SJK_GROUP, p1 = p0 + SJK_GROUP;
    if (p1 > c->p.max_pos) return SJK_ERR_RANGE;
    if (!L->compressed) {
        *kind = BLK_UNIFORM;
        *nbytes = (size_t)SJK_GROUP * (L->k_row_nbytes + L->v_row_nbytes);
        return SJK_OK;
    }
    if (p1 <= L->sink) {
        *kind = BLK_SINK;
        *nbytes = (size_t)SJK_GROUP * c->D * 2 * sizeof(uint16_t);
        return SJK_OK;
    }
    if (p0 < L->sink) return SJK_ERR_UNSUPPORTED;
    if ((p0 - L->sink) / SJK_GROUP >= L->n_rec) return SJK_ERR_RANGE;
    *kind = BLK_RECORD;
    *nbytes = L->rec_nbytes;
    return SJK_OK;
}

sjk_status sjk_cache_block_nbytes(const sjk_cache *c, uint32_t layer, uint32_t block, size_t *nbytes)
{
    if (!c || layer >= c->p.n_layers || !nbytes) return SJK_ERR_PARAM;
    blk_kind kind;
    return block_kind(c, &c->layers[layer], block, &kind, nbytes);
}

sjk_status sjk_cache_blocks_final(const sjk_cache *c, uint32_t seq, uint32_t *n_blocks)
{
    if (!c || seq >= c->p.n_seqs || !n_blocks) return SJK_ERR_PARAM;
    uint32_t n = UINT32_MAX;
    for (uint32_t l = 0; l < c->p.n_layers; l++) {
        const sjk_cache_layer *L = &c->layers[l];
        const sjk_seq_layer *sl = sjk_cache_state(c, seq, l);
        uint32_t end = sl->n; /* uniform and sink rows are final once written */
        if (L->compressed && sl->n >= L->sink) end = L->sink % SJK_GROUP ? L->sink / SJK_GROUP * SJK_GROUP : sl->b;
        n = SJK_MIN(n, end / SJK_GROUP);
    }
    *n_blocks = n;
    return SJK_OK;
}

/* Pointers to the K and V parts (sink, uniform) or the record of a block in head block hb. */
static void block_ptrs(const sjk_cache_layer *L, uint8_t *hb, blk_kind kind, uint32_t block, size_t D,
                       uint8_t **k, uint8_t **v, size_t *k_nbytes)
{
    size_t p0 = (size_t)block * SJK_GROUP;
    if (kind == BLK_SINK) {
        *k = hb + L->off_sink_k + p0 * D * 2;
        *v = hb + L->off_sink_v + p0 * D * 2;
        *k_nbytes = (size_t)SJK_GROUP * D * 2;
    } else if (kind == BLK_UNIFORM) {
        *k = hb + L->off_ring_k + p0 * L->k_row_nbytes;
        *v = hb + L->off_ring_v + p0 * L->v_row_nbytes;
        *k_nbytes = (size_t)SJK_GROUP * L->k_row_nbytes;
    } else {
        *k = hb + L->off_body + (p0 - L->sink) / SJK_GROUP * L->rec_nbytes;
        *v = NULL;
        *k_nbytes = L->rec_nbytes;
    }
}

sjk_status sjk_cache_block_export(const sjk_cache *c, uint32_t seq, uint32_t layer, uint32_t head,
                                  uint32_t block, void *dst, size_t dst_cap, size_t *nbytes)
{
    if (!c || seq >= c->p.n_seqs || layer >= c->p.n_layers || head >= c->p.n_kv_heads) return SJK_ERR_PARAM;
    const sjk_cache_layer *L = &c->layers[layer];
    const sjk_seq_layer *sl = sjk_cache_state(c, seq, layer);
    blk_kind kind;
    size_t nb;
    sjk_status st = block_kind(c, L, block, &kind, &nb);
    if (st != SJK_OK) return st;
    if (nbytes) *nbytes = nb;
    uint64_t p1 = ((uint64_t)block + 1) * SJK_GROUP;
    if (kind == BLK_RECORD ? p1 > sl->b : p1 > sl->n) return SJK_ERR_RANGE; /* not final yet */
    if (!dst) return SJK_OK;
    if (dst_cap < nb) return SJK_ERR_BUFFER;
    uint8_t *k, *v;
    size_t kn;
    block_ptrs(L, sjk_cache_head(c, L, seq, head), kind, block, c->D, &k, &v, &kn);
    memcpy(dst, k, kn);
    if (v) memcpy((uint8_t *)dst + kn, v, nb - kn);
    return SJK_OK;
}

/* Rejects bytes the cache itself never stores: non-finite fp16 in sink or f16 rows, a
 * non-finite record scale field. */
static sjk_status block_validate(const sjk_cache_layer *L, blk_kind kind, const uint8_t *p, size_t nb)
{
    size_t from = 0, to = nb;
    if (kind == BLK_RECORD) from = L->rl.off_kscale;
    else if (kind == BLK_UNIFORM) {
        /* f16 rows: both formats f16 -> the whole block; otherwise the row formats' own
         * bytes (quantized blocks; f32 / bf16 store IEEE values as they are) */
        if (L->k_fmt != SJK_FMT_F16 || L->v_fmt != SJK_FMT_F16) return SJK_OK;
    }
    for (size_t i = from; i + 1 < to; i += 2)
        if (!fp16_finite(sjk_rd_u16le(p + i))) return SJK_ERR_CORRUPT;
    return SJK_OK;
}

sjk_status sjk_cache_block_import(sjk_cache *c, uint32_t seq, uint32_t layer, uint32_t block,
                                  const void *src, size_t src_nbytes)
{
    if (!c || seq >= c->p.n_seqs || layer >= c->p.n_layers || !src) return SJK_ERR_PARAM;
    const sjk_cache_layer *L = &c->layers[layer];
    sjk_seq_layer *sl = sjk_cache_state(c, seq, layer);
    blk_kind kind;
    size_t nb;
    sjk_status st = block_kind(c, L, block, &kind, &nb);
    if (st != SJK_OK) return st;
    const uint32_t H = c->p.n_kv_heads, p0 = block * SJK_GROUP;
    if (src_nbytes != nb * H) return SJK_ERR_BUFFER;
    /* the layer must end exactly at the block's start with nothing staged */
    if (sl->n != p0 || (kind == BLK_RECORD && sl->b != p0)) return SJK_ERR_RANGE;
    const uint8_t *s = src;
    for (uint32_t h = 0; h < H; h++)
        if ((st = block_validate(L, kind, s + (size_t)h * nb, nb)) != SJK_OK) return st;
    for (uint32_t h = 0; h < H; h++) {
        uint8_t *hb = sjk_cache_head(c, L, seq, h), *k, *v;
        size_t kn;
        block_ptrs(L, hb, kind, block, c->D, &k, &v, &kn);
        memcpy(k, s + (size_t)h * nb, kn);
        if (v) memcpy(v, s + (size_t)h * nb + kn, nb - kn);
        if (kind == BLK_SINK && p0 + SJK_GROUP == L->sink) sjk_cache_center_compute(c, L, hb);
    }
    sl->n = p0 + SJK_GROUP;
    if (kind == BLK_RECORD) sl->b = sl->n;
    return SJK_OK;
}
