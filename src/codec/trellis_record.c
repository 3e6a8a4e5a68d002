/* trellis_record.c — the trellis record bodies: glue between the seal in record.c (which
 * sanitizes and balances the two tiles) and the tile layer of trellis.c.
 *
 * Same record, same scale fields as the scalar body (record_layout.h); only the payloads differ
 * (normative order: docs/FORMAT.md, "Trellis record body"):
 *
 *   SJK_BODY_TRELLIS (token axis, default): each payload holds D sequences, one per
 *     channel, each the 128 tokens of that channel, packed 16 channels to a group
 *     (trellis.c). For V the sequences cross V's rows (tokens), whose scales stay per row.
 *   SJK_BODY_TRELLIS_CHANNEL: each payload holds 128 sequences, one per token, each the D
 *     channels of that token, 16 tokens to a group.
 *   SJK_BODY_TRELLIS_REAL: the token axis of SJK_BODY_TRELLIS with other tables: Ck and Cv
 *     are the codebooks trained on real K and V (sjk_trellis_codebook_real).
 *
 *   K[t,d] = (Ck[wK(d,t)] * Kscale[d] + Kzero[d]) * Ktok[t]
 *   V[t,d] = (Cv[wV(d,t)] * Vscale[t] + Vzero[t]) * Vch[d]
 *
 * The trellis ignores the balancing's row scales (each row is normalised by its own mean
 * and standard deviation before the search, which absorbs them) and uses its column
 * scales as the scalar body does: Ktok and Vch are stored the same way, and the tile is
 * divided by their stored fp16 values so decode multiplies back exactly.
 */
#include <string.h>

#include "codec/record_layout.h"
#include "codec/trellis.h"
#include "codec/trellis_record.h"

/* The K rows' peak guard (trellis.c) is the int8-grid bodies' writer; the float-table
 * bodies of record formats 1-3 keep their writer's plain map. */
static int guarded(unsigned body)
{
    return body == SJK_BODY_TRELLIS_I8 || body == SJK_BODY_TRELLIS_REAL_I8 || body == SJK_BODY_TRELLIS_S128;
}

static void tiles_of(const sjk_record_params *p, sjk_trellis_tile *tk, sjk_trellis_tile *tv)
{
    tk->D = tv->D = p->head_dim;
    tk->G = tv->G = SJK_GROUP;
    tk->bits = p->bits_k;
    tv->bits = p->bits_v;
    tk->rows = SJK_TRELLIS_ROWS_CHANNELS;
    tv->rows = SJK_TRELLIS_ROWS_TOKENS;
    tk->axis = tv->axis = p->body == SJK_BODY_TRELLIS_CHANNEL ? SJK_TRELLIS_AXIS_CHANNEL
                                                              : SJK_TRELLIS_AXIS_TOKEN;
    tk->refit = tv->refit = SJK_TRELLIS_REFIT_LSQ;
    tk->peak_guard = guarded(p->body);
    tv->peak_guard = 0;
}

/* The column scale as the record stores it (fp16 of 1/inv_col), inverted: dividing by the
 * stored value makes decode's multiplication by it exact. 0 stays 0. */
static float inv_stored(float inv_col)
{
    float q = sjk_fp16_to_f32(sjk_record_f16(1.0f / inv_col));
    return q > 0 ? 1.0f / q : 0.0f;
}

/* Scratch: the column factors and the two refit maps, 3*max(D,G) floats, then the larger
 * tile scratch. (The tile is read in place, sjk_trellis_tile_encode_in.) */
size_t sjk_trellis_record_scratch_nbytes(const sjk_record_params *p)
{
    if (sjk_record_params_validate(p, NULL) != SJK_OK) return 0;
    sjk_trellis_tile tk, tv;
    tiles_of(p, &tk, &tv);
    size_t a = sjk_trellis_tile_scratch_nbytes(&tk), b = sjk_trellis_tile_scratch_nbytes(&tv);
    size_t D = p->head_dim, RC = SJK_MAX(D, (size_t)SJK_GROUP);
    return 64 + (3 * RC * sizeof(float) + 63) / 64 * 64 + SJK_MAX(a, b);
}

sjk_status sjk_trellis_quantize_tile(const sjk_tile_view *tile, uint8_t *payload,
                                     size_t row_nbytes, float *step, float *lo, void *ctx)
{
    const sjk_trellis_scratch *sc = ctx;
    if (!tile || !payload || !step || !lo || !sc || !sc->scratch) return SJK_ERR_PARAM;
    const int is_v = tile->is_v != 0;
    const size_t D = is_v ? tile->n_cols : tile->n_rows, G = is_v ? tile->n_rows : tile->n_cols;
    const size_t RC = SJK_MAX(D, G);
    sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)tile->bits,
                           is_v ? SJK_TRELLIS_ROWS_TOKENS : SJK_TRELLIS_ROWS_CHANNELS,
                           sc->body == SJK_BODY_TRELLIS_CHANNEL ? SJK_TRELLIS_AXIS_CHANNEL : SJK_TRELLIS_AXIS_TOKEN,
                           SJK_TRELLIS_REFIT_LSQ, (uint8_t)(!is_v && guarded(sc->body))};
    if (G != SJK_GROUP || row_nbytes * (is_v ? G : D) != sjk_trellis_tile_payload_nbytes(&tt))
        return SJK_ERR_PARAM;
    uint8_t *base = (uint8_t *)(((uintptr_t)sc->scratch + 63) & ~(uintptr_t)63);
    size_t head = (3 * RC * sizeof(float) + 63) / 64 * 64;
    if (sc->nbytes < (size_t)(base - (uint8_t *)sc->scratch) + head) return SJK_ERR_BUFFER;
    float *ic = (float *)base;            /* [RC] 1 / stored column scale */
    float *a = ic + RC, *z = a + RC;      /* [RC] each: the refit row maps */
    uint8_t *ts = base + head;
    size_t ts_nbytes = sc->nbytes - (size_t)(ts - (uint8_t *)sc->scratch);

    /* The tile as the trellis codes it, y[t][d] = M * ic (column scale divided out),
     * read in place: V's M is [G][D] (rows = tokens, columns = channels), K's [D][G]. */
    sjk_trellis_input in;
    if (is_v) {
        for (size_t d = 0; d < D; d++) ic[d] = inv_stored(tile->inv_col[d]);
        in = (sjk_trellis_input){tile->M, D, 1, ic, 0};
    } else {
        for (size_t t = 0; t < G; t++) ic[t] = inv_stored(tile->inv_col[t]);
        in = (sjk_trellis_input){tile->M, 1, G, ic, 1};
    }
    const float *cb = sjk_trellis_codebook_for(sc->body, tt.bits, is_v);
    sjk_status st = cb ? sjk_trellis_tile_encode_cb(cb, &tt, payload, a, z, &in, ts, ts_nbytes) : SJK_ERR_UNSUPPORTED;
    if (st != SJK_OK) return st;
    /* The record stores s_row * step and s_row * lo; hand it the refit map in balanced-row
     * units so that product gives back the (fp16-exact) refit values. */
    for (size_t r = 0; r < tile->n_rows; r++) {
        step[r] = a[r] * tile->inv_row[r];
        lo[r] = z[r] * tile->inv_row[r];
    }
    return SJK_OK;
}

sjk_status sjk_trellis_record_decode(const sjk_record_params *p, float *k, float *v,
                                     const void *src, size_t src_nbytes)
{
    if (sjk_record_params_validate(p, NULL) != SJK_OK || !k || !v || !src) return SJK_ERR_PARAM;
    sjk_record_layout L;
    sjk_record_layout_init(&L, p->head_dim, p->bits_k, p->bits_v);
    if (src_nbytes < L.nbytes) return SJK_ERR_BUFFER;
    const uint8_t *rec = src;
    const size_t D = p->head_dim, G = SJK_GROUP;
    unsigned bad = 0;
    for (size_t i = L.off_kscale; i < L.nbytes; i += 2) bad |= (sjk_rd_u16le(rec + i) & 0x7C00u) == 0x7C00u;
    if (bad) return SJK_ERR_CORRUPT;
    float kscale[512], kzero[512], vch[512], ktok[SJK_GROUP], vscale[SJK_GROUP], vzero[SJK_GROUP];
    for (size_t d = 0; d < D; d++) {
        kscale[d] = sjk_record_f16_at(rec, L.off_kscale, d);
        kzero[d] = sjk_record_f16_at(rec, L.off_kzero, d);
        vch[d] = sjk_record_f16_at(rec, L.off_vch, d);
    }
    for (size_t t = 0; t < G; t++) {
        ktok[t] = sjk_record_f16_at(rec, L.off_ktok, t);
        vscale[t] = sjk_record_f16_at(rec, L.off_vscale, t);
        vzero[t] = sjk_record_f16_at(rec, L.off_vzero, t);
    }
    sjk_trellis_tile tk, tv;
    tiles_of(p, &tk, &tv);
    /* a tile above 4 bits has the scalar body: record.c decodes it */
    if (p->bits_k <= SJK_TRELLIS_MAX_BITS) {
        sjk_status st = sjk_trellis_tile_decode_cb(sjk_trellis_codebook_for(p->body, tk.bits, 0), &tk, k, rec + L.off_k,
                                                   kscale, kzero, ktok);
        if (st != SJK_OK) return st;
    }
    if (p->bits_v > SJK_TRELLIS_MAX_BITS) return SJK_OK;
    return sjk_trellis_tile_decode_cb(sjk_trellis_codebook_for(p->body, tv.bits, 1), &tv, v, rec + L.off_v, vscale,
                                      vzero, vch);
}
