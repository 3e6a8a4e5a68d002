/* record.c — sealing (encode) and decoding of one record: K and V of one 128-token group
 * of one KV head (docs/DESIGN.md §2.3, record format v2 in docs/FORMAT.md, layout in record_layout.h).
 *
 * The seal, for each of the two tiles (K as [D channels][G tokens], V as [G tokens][D
 * channels], "rows" = the axis quantized as one group):
 *   1. sanitize: NaN/Inf -> 0, |x| < FLT_MIN (denormals) -> 0, |x| > 65504 -> +-65504, so
 *      every later product stays finite and no NaN can reach a stored field;
 *   2. balance (balance.c): row and column scales;
 *   3. per row: the body's quantizer (the scalar body: asymmetric RTN) gives codes and the
 *      row's (step, lo); pack the codes; store the absorbed fp16 scales.
 * Nothing allocates; the caller's scratch holds the two tiles and the balancing state.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "codec/balance.h"
#include "codec/codec_kernels.h"
#include "codec/record.h"
#include "codec/trellis_record.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

size_t sjk_record_nbytes(const sjk_record_params *p)
{
    if (sjk_record_params_validate(p, NULL) != SJK_OK) return 0;
    sjk_record_layout L;
    sjk_record_layout_init(&L, p->head_dim, p->bits_k, p->bits_v);
    return L.nbytes;
}

/* Scratch plan (floats unless noted), after aligning the base to 64 bytes:
 *   Ktile [D][G] | Vtile [G][D] | balance scratch 6(D+G) | s_row/s_col/inv_row/inv_col for
 *   K and V: 4(D+G) | brow, step, lo [max(D,G)] each | codes [max(D,G)] bytes */
static size_t scratch_floats(size_t D)
{
    const size_t G = SJK_GROUP;
    const size_t RC = D > G ? D : G;
    return 2 * D * G + sjk_balance_scratch_floats(D, G) + 4 * (D + G) + 3 * RC;
}

/* record.c's own part of the scratch (what sjk_record_encode_body uses). */
static size_t own_nbytes(size_t D) { return 64 + 4 * scratch_floats(D) + (D > SJK_GROUP ? D : SJK_GROUP); }

size_t sjk_record_scratch_nbytes(const sjk_record_params *p)
{
    if (sjk_record_params_validate(p, NULL) != SJK_OK) return 0;
    /* a trellis body's scratch follows record.c's own (trellis_record.h) */
    return own_nbytes(p->head_dim) + (p->body != SJK_BODY_SCALAR ? sjk_trellis_record_scratch_nbytes(p) : 0);
}

/* The seal in scratch: | k, v [2][G][D] floats, later the body's scratch | own |. The
 * first part is the larger of the two, rounded to 64 bytes. */
static size_t seal_head_nbytes(const sjk_record_params *p)
{
    size_t in = 2 * (size_t)SJK_GROUP * p->head_dim * sizeof(float);
    size_t body = p->body != SJK_BODY_SCALAR ? sjk_trellis_record_scratch_nbytes(p) : 0;
    return ((in > body ? in : body) + 63) / 64 * 64;
}

size_t sjk_record_seal_scratch_nbytes(const sjk_record_params *p)
{
    if (sjk_record_params_validate(p, NULL) != SJK_OK) return 0;
    return seal_head_nbytes(p) + own_nbytes(p->head_dim);
}


sjk_status sjk_record_quantize_scalar(const sjk_tile_view *tile, uint8_t *payload,
                                      size_t row_nbytes, float *step, float *lo, void *ctx)
{
    (void)ctx;
    const unsigned qmax = (1u << tile->bits) - 1;
    const size_t C = tile->n_cols;
    for (size_t i = 0; i < tile->n_rows; i++) {
        tile->kern->rtn_row(tile->M + i * C, C, tile->inv_row[i], tile->inv_col, qmax, tile->codes,
                            &lo[i], &step[i]);
        sjk_payload_pack_row(payload + i * row_nbytes, C, tile->bits, tile->codes);
    }
    return SJK_OK;
}

/* Stores the absorbed per-row pair (s_row * step, s_row * lo) of one tile as fp16. */
static void store_row_fields(uint8_t *rec, size_t off_scale, size_t off_zero, size_t R,
                             const float *s_row, const float *step, const float *lo)
{
    for (size_t i = 0; i < R; i++) {
        sjk_wr_u16le(rec + off_scale + 2 * i, sjk_record_f16(s_row[i] * step[i]));
        sjk_wr_u16le(rec + off_zero + 2 * i, sjk_record_f16(s_row[i] * lo[i]));
    }
}

/* The tile observer (sjk_record_set_tile_observer): set before any record is sealed, so
 * plain globals read by the sealing threads. */
static sjk_record_tile_observer g_tile_observer;
static void *g_tile_observer_ctx;

void sjk_record_set_tile_observer(sjk_record_tile_observer fn, void *ctx)
{
    g_tile_observer = fn;
    g_tile_observer_ctx = ctx;
}

/* One tile of a record, K ([D][G], rows = channels) or V ([G][D], rows = tokens), its
 * balancing's scales (scratch) and where its bytes go. */
typedef struct tile_part {
    float *m;
    size_t rows, cols;
    int is_v;
    unsigned bits;
    float *s_row, *s_col, *i_row, *i_col; /* [rows] [cols] [rows] [cols] */
    size_t off_payload, row_nbytes, off_scale, off_zero, off_col;
} tile_part;

/* Balances the tile, writes its body's codes and its absorbed fp16 fields: the row scales
 * and zeros, and the column scales stored as fp16(1 / inv_col), the value every body
 * divides by. */
static sjk_status encode_tile(const tile_part *t, uint8_t *rec, const sjk_balance_rule *rule,
                              const sjk_codec_kernels *kern, float *bal, uint8_t *codes, float *brow, float *step,
                              float *lo, sjk_tile_quantizer quantize, void *ctx)
{
    sjk_balance_run(t->m, t->rows, t->cols, rule, kern, t->s_row, t->s_col, t->i_row, t->i_col, bal, NULL);
    sjk_tile_view tv = {t->m, t->rows, t->cols, t->i_row, t->i_col, t->bits, t->is_v, kern, codes, brow};
    sjk_status st = quantize(&tv, rec + t->off_payload, t->row_nbytes, step, lo, ctx);
    if (st != SJK_OK) return st;
    store_row_fields(rec, t->off_scale, t->off_zero, t->rows, t->s_row, step, lo);
    for (size_t c = 0; c < t->cols; c++) sjk_wr_u16le(rec + t->off_col + 2 * c, sjk_record_f16(1.0f / t->i_col[c]));
    return SJK_OK;
}

/* sjk_record_encode_body for the parts named (SJK_RECORD_PART_K, _V or both): a part
 * writes only its own bytes of the record (its payload and its row and column fields),
 * and K and V never read each other, so two calls, one per part, write the bytes of one
 * call with both (sjk_record_seal_part). */
static sjk_status encode_parts(const sjk_record_params *p, void *dst, size_t dst_cap, const float *k, const float *v,
                               void *scratch, size_t scratch_nbytes, sjk_tile_quantizer quantize, void *ctx,
                               const sjk_codec_kernels *kern, unsigned parts)
{
    if (sjk_record_params_validate(p, NULL) != SJK_OK) return SJK_ERR_PARAM;
    if (!parts || (parts & ~(unsigned)SJK_RECORD_PARTS)) return SJK_ERR_PARAM;
    const int do_k = (parts & SJK_RECORD_PART_K) != 0, do_v = (parts & SJK_RECORD_PART_V) != 0;
    if (!dst || (do_k && !k) || (do_v && !v) || !scratch) return SJK_ERR_PARAM;
    sjk_record_layout L;
    sjk_record_layout_init(&L, p->head_dim, p->bits_k, p->bits_v);
    if (dst_cap < L.nbytes || scratch_nbytes < own_nbytes(p->head_dim)) return SJK_ERR_BUFFER;
    if (!kern) kern = sjk_codec_kernels_get();
    if (!quantize) quantize = sjk_record_quantize_scalar;

    const size_t D = p->head_dim, G = SJK_GROUP, RC = D > G ? D : G;
    const sjk_balance_rule rule = sjk_balance_rule_of((sjk_balance_mode)p->balance);
    uint8_t *rec = dst;

    float *base = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *kt = base;                     /* [D][G] K tile, channel-major */
    float *vt = kt + D * G;               /* [G][D] V tile, token-major */
    float *bal = vt + G * D;              /* balance scratch */
    float *ks_row = bal + sjk_balance_scratch_floats(D, G);                 /* [D] */
    float *ks_col = ks_row + D, *ki_row = ks_col + G, *ki_col = ki_row + D; /* [G] [D] [G] */
    float *vs_row = ki_col + G, *vs_col = vs_row + G, *vi_row = vs_col + D; /* [G] [D] [G] */
    float *vi_col = vi_row + G;           /* [D] */
    float *brow = vi_col + D;             /* [RC] */
    float *step = brow + RC, *lo = step + RC; /* [RC] [RC] */
    uint8_t *codes = (uint8_t *)(lo + RC);    /* [RC] bytes */

    /* 1. sanitize; K is transposed to channel-major in 16 x 16 blocks. Nothing below
     * reads k or v again (sjk_record_seal_in_scratch reuses their memory). */
    kern->load_tiles(kt, vt, do_k ? k : NULL, do_v ? v : NULL, D);
    if (g_tile_observer && do_k && do_v) g_tile_observer(g_tile_observer_ctx, kt, vt, D, G);

    /* 2. balance, 3. the body's codes, then the absorbed fp16 fields (encode_tile) */
    if (do_k) {
        const tile_part pk = {kt, D, G, 0, p->bits_k, ks_row, ks_col, ki_row, ki_col,
                              L.off_k, L.k_row_nbytes, L.off_kscale, L.off_kzero, L.off_ktok};
        sjk_status st = encode_tile(&pk, rec, &rule, kern, bal, codes, brow, step, lo, quantize, ctx);
        if (st != SJK_OK) return st;
    }
    if (do_v) {
        const tile_part pv = {vt, G, D, 1, p->bits_v, vs_row, vs_col, vi_row, vi_col,
                              L.off_v, L.v_row_nbytes, L.off_vscale, L.off_vzero, L.off_vch};
        sjk_status st = encode_tile(&pv, rec, &rule, kern, bal, codes, brow, step, lo, quantize, ctx);
        if (st != SJK_OK) return st;
    }
    return SJK_OK;
}

sjk_status sjk_record_encode_body(const sjk_record_params *p, void *dst, size_t dst_cap,
                                  const float *k, const float *v, void *scratch,
                                  size_t scratch_nbytes, sjk_tile_quantizer quantize, void *ctx,
                                  const sjk_codec_kernels *kern)
{
    return encode_parts(p, dst, dst_cap, k, v, scratch, scratch_nbytes, quantize, ctx, kern, SJK_RECORD_PARTS);
}

/* A trellis record's quantizer: the trellis for tiles of 2..4 bits, the scalar body for
 * a wider tile (docs/FORMAT.md: a trellis body never codes more than 4 bits). */
static sjk_status quantize_trellis_or_scalar(const sjk_tile_view *tile, uint8_t *payload, size_t row_nbytes,
                                             float *step, float *lo, void *ctx)
{
    if (tile->bits > SJK_TRELLIS_MAX_BITS) return sjk_record_quantize_scalar(tile, payload, row_nbytes, step, lo, ctx);
    return sjk_trellis_quantize_tile(tile, payload, row_nbytes, step, lo, ctx);
}

sjk_status sjk_record_encode_on(const sjk_record_params *p, void *dst, size_t dst_cap,
                                const float *k, const float *v, void *scratch,
                                size_t scratch_nbytes, const sjk_codec_kernels *kern)
{
    if (sjk_record_params_validate(p, NULL) != SJK_OK) return SJK_ERR_PARAM;
    if (p->body == SJK_BODY_SCALAR)
        return sjk_record_encode_body(p, dst, dst_cap, k, v, scratch, scratch_nbytes, NULL, NULL, kern);
    /* a trellis body (trellis_record.c), its scratch after our own */
    if (!scratch) return SJK_ERR_PARAM;
    size_t need = sjk_record_scratch_nbytes(p), extra = sjk_trellis_record_scratch_nbytes(p);
    if (scratch_nbytes < need || need < extra) return SJK_ERR_BUFFER;
    sjk_trellis_scratch ts = {(uint8_t *)scratch + (need - extra), extra, p->body};
    return sjk_record_encode_body(p, dst, dst_cap, k, v, scratch, scratch_nbytes,
                                  quantize_trellis_or_scalar, &ts, kern);
}

sjk_status sjk_record_seal_part(const sjk_record_params *p, void *dst, size_t dst_cap, void *scratch,
                                size_t scratch_nbytes, unsigned parts)
{
    if (sjk_record_params_validate(p, NULL) != SJK_OK) return SJK_ERR_PARAM;
    if (!dst || !scratch || (uintptr_t)scratch % sizeof(float)) return SJK_ERR_PARAM;
    if (scratch_nbytes < sjk_record_seal_scratch_nbytes(p)) return SJK_ERR_BUFFER;
    const size_t head = seal_head_nbytes(p), own = scratch_nbytes - head;
    const float *k = scratch, *v = k + (size_t)SJK_GROUP * p->head_dim;
    uint8_t *rest = (uint8_t *)scratch + head;
    if (p->body == SJK_BODY_SCALAR)
        return encode_parts(p, dst, dst_cap, k, v, rest, own, NULL, NULL, NULL, parts);
    /* the body's scratch over k and v, which the seal has loaded before the body runs */
    sjk_trellis_scratch ts = {scratch, head, p->body};
    return encode_parts(p, dst, dst_cap, k, v, rest, own, quantize_trellis_or_scalar, &ts, NULL, parts);
}

sjk_status sjk_record_seal_in_scratch(const sjk_record_params *p, void *dst, size_t dst_cap,
                                      void *scratch, size_t scratch_nbytes)
{
    return sjk_record_seal_part(p, dst, dst_cap, scratch, scratch_nbytes, SJK_RECORD_PARTS);
}

int sjk_record_tile_observer_set(void) { return g_tile_observer != NULL; }

sjk_status sjk_record_encode(const sjk_record_params *p, void *dst, size_t dst_cap,
                             const float *k, const float *v, void *scratch, size_t scratch_nbytes)
{
    return sjk_record_encode_on(p, dst, dst_cap, k, v, scratch, scratch_nbytes, NULL);
}

/* ---- decode ------------------------------------------------------------------------ */

typedef struct scales {
    float kscale[512], kzero[512], ktok[SJK_GROUP], vch[512], vscale[SJK_GROUP], vzero[SJK_GROUP];
} scales;

/* Checks the arguments and loads the fp16 fields; SJK_ERR_CORRUPT if one is NaN or Inf
 * (an encoder never stores those). */
static sjk_status decode_prepare(const sjk_record_params *p, float *k, float *v, const void *src,
                                 size_t src_nbytes, sjk_record_layout *L, scales *S)
{
    if (sjk_record_params_validate(p, NULL) != SJK_OK) return SJK_ERR_PARAM;
    if (!k || !v || !src) return SJK_ERR_PARAM;
    sjk_record_layout_init(L, p->head_dim, p->bits_k, p->bits_v);
    if (src_nbytes < L->nbytes) return SJK_ERR_BUFFER;
    const uint8_t *rec = src;
    const size_t D = p->head_dim, G = SJK_GROUP;
    unsigned bad = 0;
    for (size_t i = L->off_kscale; i < L->nbytes; i += 2) bad |= (sjk_rd_u16le(rec + i) & 0x7C00u) == 0x7C00u;
    if (bad) return SJK_ERR_CORRUPT;
    for (size_t d = 0; d < D; d++) {
        S->kscale[d] = sjk_record_f16_at(rec, L->off_kscale, d);
        S->kzero[d] = sjk_record_f16_at(rec, L->off_kzero, d);
        S->vch[d] = sjk_record_f16_at(rec, L->off_vch, d);
    }
    for (size_t t = 0; t < G; t++) {
        S->ktok[t] = sjk_record_f16_at(rec, L->off_ktok, t);
        S->vscale[t] = sjk_record_f16_at(rec, L->off_vscale, t);
        S->vzero[t] = sjk_record_f16_at(rec, L->off_vzero, t);
    }
    return SJK_OK;
}

/* The scalar reference (ref != 0) and the dispatched kernels share everything but the
 * loop that writes k and v. */
static sjk_status record_decode(const sjk_record_params *p, float *k, float *v, const void *src,
                                size_t src_nbytes, int ref)
{
    /* A trellis record: its trellis tiles first; a tile above 4 bits is scalar (below). */
    int do_k = 1, do_v = 1;
    if (p && p->body != SJK_BODY_SCALAR) {
        sjk_status st = sjk_trellis_record_decode(p, k, v, src, src_nbytes);
        if (st != SJK_OK) return st;
        do_k = p->bits_k > SJK_TRELLIS_MAX_BITS;
        do_v = p->bits_v > SJK_TRELLIS_MAX_BITS;
        if (!do_k && !do_v) return SJK_OK;
    }
    sjk_record_layout L;
    scales S;
    sjk_status st = decode_prepare(p, k, v, src, src_nbytes, &L, &S);
    if (st != SJK_OK) return st;
    const uint8_t *rec = src;
    const size_t D = p->head_dim, G = SJK_GROUP;
    if (ref) {
        for (size_t t = 0; t < G; t++)
            for (size_t d = 0; d < D; d++) {
                float qk = (float)sjk_payload_get(rec + L.off_k + d * L.k_row_nbytes, G, L.bits_k, t);
                float qv = (float)sjk_payload_get(rec + L.off_v + t * L.v_row_nbytes, D, L.bits_v, d);
                if (do_k) k[t * D + d] = (qk * S.kscale[d] + S.kzero[d]) * S.ktok[t];
                if (do_v) v[t * D + d] = (qv * S.vscale[t] + S.vzero[t]) * S.vch[d];
            }
        return SJK_OK;
    }
    const sjk_codec_kernels *kern = sjk_codec_kernels_get();
    for (size_t d0 = 0; do_k && d0 < D; d0 += 16)
        kern->decode_k16(k + d0, D, rec + L.off_k + d0 * L.k_row_nbytes, L.k_row_nbytes, L.bits_k,
                         S.kscale + d0, S.kzero + d0, S.ktok);
    for (size_t t = 0; do_v && t < G; t++)
        kern->decode_v_row(v + t * D, D, rec + L.off_v + t * L.v_row_nbytes, L.bits_v, S.vscale[t],
                           S.vzero[t], S.vch);
    return SJK_OK;
}

sjk_status sjk_record_decode_ref(const sjk_record_params *p, float *k, float *v, const void *src,
                                 size_t src_nbytes)
{
    return record_decode(p, k, v, src, src_nbytes, 1);
}

sjk_status sjk_record_decode(const sjk_record_params *p, float *k, float *v, const void *src,
                             size_t src_nbytes)
{
    return record_decode(p, k, v, src, src_nbytes, 0);
}
