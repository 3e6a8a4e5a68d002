/* attend.c — sjk_cache_attend: one online-softmax pass over sink + body + ring.
 *
 * Work is cut into units of (KV head, position split). Positions are visited in chunks
 * of 128 aligned to the regions (the sink and every group are 128-aligned), so chunk c
 * covers positions [128c, 128c + 128) and lives wholly in one region:
 *
 *   chunk:   0 .. sink/128 − 1     sink/128 .. B/128 − 1      B/128 .. ceil(N/128) − 1
 *            fp16 sink rows        record (c − sink/128)      ring rows (contiguous slots)
 *
 * Each unit keeps, for all query rows of its head, a partial state (attn_layout.h) in
 * c->part; the caller's thread merges the splits (log-sum-exp weights), divides by the
 * softmax sum and rotates the result back. Queries that share a KV head (GQA) and the
 * rows of a prefill are processed together, so each key is read once per unit.
 *
 * Per chunk, two paths (attn_kernels.h), chosen per call by R = rows x GQA group:
 *
 *   R <  SJK_ATTN_MANY_MIN (decode)   the chunk as stored -> chunk_f16 / chunk_rec (records
 *                                     and trellis read in place; 4-bit K records by
 *                                     chunk_rec_q16, int16 queries per record; scalar V
 *                                     records by chunk_rec_v16, int16 weights) / chunk_tq6_q16
 *                                     (tq6_0 ring keys by int16 dot products) or chunk_tq6 /
 *                                     chunk_qblk (q8_0, q4_0 rows against int8 query pieces
 *                                     made once per unit) / chunk_f32
 *   R >= SJK_ATTN_MANY_MIN (prefill)  the chunk as fp32 K, V [len][D] (fp16 converted,
 *                                     records and ring rows decoded; once per chunk, for
 *                                     all rows) -> chunk_f32_many
 *
 * Ring centering (ring_enter / ring_leave) works on the states and is the same for both.
 */
#include <math.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "cache/attn_layout.h"
#include "cache/cache_internal.h"
#include "codec/format.h"
#include "codec/hadamard.h"
#include "codec/trellis.h"
#include "common/util.h"

#define ROW_BLOCK 64 /* query rows handed to a kernel at once */

typedef struct attn_job {
    const sjk_cache *c;
    const sjk_cache_layer *L;
    const sjk_attn_kernels *k;
    uint32_t seq, n, b, n_rows, n_chunks, splits;
    size_t R; /* query rows per KV head: n_rows * gq */
    uint32_t c_sink, c_body;       /* first record chunk, first ring chunk */
    uint32_t w_sink, w_body, w_ring; /* relative cost of a chunk in each region */
} attn_job;

/* Position splits are cut by estimated cost, not by chunk count: equal chunk counts
 * would leave the thread that gets the ring (the newest positions) working while the
 * others wait. The weights are decode times of one 128-key chunk in microseconds,
 * measured per region with one thread through the public API (bench/bench_split_weights.c;
 * AVX-512 kernels, D = 256, 4 query rows; D = 64 with 3 rows gives the same ratios):
 * fp16 rows 9, a tq6_0 or q8_0 ring chunk 12, a 4/4 scalar record read in place 5, other
 * scalar records and trellis records read in place 13 (one run, rounded: 9.2 / 11.7 /
 * 5.0 / 12.9 / 12.5; the run in docs/benchmarks/attention.md, "Split weights", gave 10.2 / 12.6 /
 * 5.5 / 14.1 / 13.9, the same ratios within 10%). The two without a measurement (tq6_0
 * decoded before use, trellis decoded to fp32: kernel tables without the in-place
 * readers) keep their old ratios to the in-place ones. Any positive weights give a
 * correct result. With the int16 readers of the ring (chunk_tq6_q16, keys and values)
 * and of trellis records (chunk_trellis_q16), on the Zen 4 EPYC at tree 38db29b (the
 * run in docs/benchmarks/attention.md): fp16 7.4, ring 6.5, 4/4 records 5.0, other scalar records
 * 10.6, trellis 10.5 us a chunk: weights 9, 8, 6, 13, 13 (the trellis reader is 1.4x
 * fp16's cost with the rows in cache; at long contexts fp16 waits on memory and the two
 * are about level). With many rows (prefill) the per-row work, the same in every region,
 * dominates: equal weights.
 * The 8/4 records on AVX-512 (K in fp32, V 4-bit in place) keep 13, unmeasured.
 * The AVX2 table measured whole (bench_split_weights 256 4 1 with the configurations
 * named, two or three runs, on the idle Zen 3 EPYC with the AVX2 chunk_tq6_q16; the
 * table in docs/notes/benchmarks.md, stop 42): fp16 8.2-8.4, the tq6_0 ring 14.2-14.6, a
 * q8_0 ring 9.2-9.3, 4/4 records 8.6-8.8, 6/4 9.7-9.8, 6/6 10.5-10.6, 8/8 7.7, trellis
 * records read in place 20.2-25.0, 8/3 (its trellis half decoded) 44.2-44.8 us a chunk:
 * weights 9, 16, 10, 9, 10 (every other scalar record), 23, 48 — the trellis records
 * cost 2.5x fp16 there, not 1.4x; with the AVX2 chunk_rec_q16 the 4/4 records took 7.7
 * against fp16's 8.3 (weight 8). The table is told apart by its name. */
static void split_weights(attn_job *j, const sjk_cache_layer *L, const sjk_seq_layer *sl)
{
    const uint32_t G = SJK_GROUP;
    j->c_sink = j->c_body = j->n_chunks; /* one region, equal weights */
    j->w_sink = j->w_body = j->w_ring = 4;
    if (!L->compressed || j->R > 2 * SJK_ATTN_RB) return;
    j->c_sink = SJK_MIN(j->n_chunks, L->sink / G);
    j->c_body = SJK_MIN(j->n_chunks, SJK_MAX(j->c_sink, sl->b / G));
    j->w_sink = 9;
    const int mixed = L->rl.bits_k > SJK_TRELLIS_MAX_BITS || L->rl.bits_v > SJK_TRELLIS_MAX_BITS;
    if (!strcmp(j->k->name, "avx2")) { /* the AVX2 table's own measurements (above) */
        if (L->rp.body == SJK_BODY_SCALAR) j->w_body = L->rl.bits_k == 4 && L->rl.bits_v == 4 ? 8 : 10;
        else j->w_body = j->k->trellis_inplace && !mixed ? 23 : 48;
        if (L->k_fmt == SJK_FMT_TQ6_0_STAGE) j->w_ring = j->k->chunk_tq6_q16 ? 16 : 20;
        else j->w_ring = L->k_fmt == SJK_FMT_F16 ? 9 : 10;
        return;
    }
    /* scalar records of 5..8 bits take the unpacked path of the other widths (13, not
     * measured separately); a trellis tile beside a wider scalar one is decoded (16) */
    if (L->rp.body == SJK_BODY_SCALAR) j->w_body = L->rl.bits_k == 4 && L->rl.bits_v == 4 ? 6 : 13;
    else j->w_body = j->k->trellis_inplace && !mixed ? 13 : 16;
    if (L->k_fmt == SJK_FMT_TQ6_0_STAGE) j->w_ring = j->k->chunk_tq6_q16 ? 8 : j->k->chunk_tq6 ? 12 : 20;
    else j->w_ring = L->k_fmt == SJK_FMT_F16 ? 9 : 12;
}

/* Cost of chunks [0, c). */
static uint64_t split_cost(const attn_job *j, uint32_t c)
{
    uint32_t a = SJK_MIN(c, j->c_sink), b = SJK_MIN(c, j->c_body);
    return (uint64_t)a * j->w_sink + (uint64_t)(b - a) * j->w_body + (uint64_t)(c - b) * j->w_ring;
}

/* First chunk of split s (s = splits gives n_chunks): the first c whose prefix cost
 * reaches s / splits of the total. */
static uint32_t split_bound(const attn_job *j, uint32_t s)
{
    const uint64_t want = (split_cost(j, j->n_chunks) * s + j->splits - 1) / j->splits;
    uint32_t lo = 0, hi = j->n_chunks;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (split_cost(j, mid) >= want) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* A sealed record as fp32 K, V [128][D]. The decoder refuses a record with non-finite
 * scales (the encoder never writes one and the file loader rejects them); should one
 * appear anyway, its keys and values become NaN, as the in-place kernels would make
 * them, so the corruption shows in the output instead of reusing the last chunk. */
static void record_to_f32(const sjk_cache_layer *L, float *kf, float *vf, const uint8_t *rec, size_t D)
{
    if (sjk_record_decode(&L->rp, kf, vf, rec, L->rec_nbytes) == SJK_OK) return;
    for (size_t i = 0; i < (size_t)SJK_GROUP * D; i++) kf[i] = vf[i] = NAN;
}

/* Bits of a ggml block format that chunk_qblk reads in place (8: q8_0, 4: q4_0), or 0. */
static unsigned qblk_bits(uint8_t fmt)
{
    return fmt == SJK_FMT_Q8_0 ? 8u : fmt == SJK_FMT_Q4_0 ? 4u : 0u;
}

/* nrows payload rows of n codes of a record half (row r at rows + r · row_nbytes) to bytes
 * at codes + r · n: the table's unpack_rows where it has one, else row by row. */
static void unpack_half(const sjk_attn_kernels *k, uint8_t *codes, const uint8_t *rows, size_t row_nbytes,
                        size_t nrows, size_t n, unsigned bits)
{
    if (k->unpack_rows) {
        k->unpack_rows(codes, rows, row_nbytes, nrows, n, bits);
        return;
    }
    for (size_t r = 0; r < nrows; r++) k->unpack_row(codes + r * n, rows + r * row_nbytes, n, bits);
}

/* len rows of the layer's row formats (ring, uniform layer) to fp32 K and V. */
static void rows_to_f32(const sjk_cache_layer *L, float *kf, float *vf, const uint8_t *kr, const uint8_t *vr, size_t n)
{
    sjk_format_get((sjk_format)L->k_fmt)->decode(kf, kr, n);
    sjk_format_get((sjk_format)L->v_fmt)->decode(vf, vr, n);
}

/* A record's six fp16 scale arrays (contiguous from src: Kscale Kzero Ktok Vch Vscale
 * Vzero) as fp32 in sc[3 D + 3 G], pointed at by rec. */
static void rec_scales(const sjk_attn_kernels *k, sjk_attn_rec *rec, float *sc, const uint8_t *src, size_t D)
{
    const size_t G = SJK_GROUP;
    k->f16_to_f32(sc, src, 3 * D + 3 * G);
    rec->kscale = sc;
    rec->kzero = sc + D;
    rec->ktok = sc + 2 * D;
    rec->vch = sc + 2 * D + G;
    rec->vscale = sc + 3 * D + G;
    rec->vzero = sc + 3 * D + 2 * G;
}

static inline float *align_f(uint8_t **p, size_t n_floats)
{
    uintptr_t a = ((uintptr_t)*p + SJK_ATTN_ALIGN - 1) & ~(uintptr_t)(SJK_ATTN_ALIGN - 1);
    float *f = (float *)a;
    *p = (uint8_t *)(f + n_floats);
    return f;
}

/* Ring centering. Ring slots hold row − mu (cache.c), so a ring key scores q·k' and the
 * true score is q·k' + cq with cq = q·mu_K, the same for every ring position of a row.
 * ring_enter re-expresses the state so far in that shifted frame (m −= cq: every term
 * e^(s − m) is unchanged) and remembers (m, l) at the border; the kernels then run on
 * the stored rows unchanged. ring_leave shifts back and adds the ring's share of mu_V:
 * Σ_ring e^(s−m) (v' + mu_V) = acc_ring + l_ring · mu_V, where l_ring is l minus the
 * pre-ring sum carried to the final max. Exact up to fp32 rounding. */
static void ring_enter(size_t R, size_t D, const float *q, const float *mu_k, float *m, const float *l,
                       float *cq, float *lb, float *mb)
{
    for (size_t r = 0; r < R; r++) {
        float s = 0;
        for (size_t d = 0; d < D; d++) s += q[r * D + d] * mu_k[d];
        cq[r] = s;
        if (m[r] != -INFINITY) m[r] -= s;
        mb[r] = m[r];
        lb[r] = l[r];
    }
}

static void ring_leave(size_t R, size_t D, const float *mu_v, float *m, const float *l, const float *cq,
                       const float *lb, const float *mb, float *acc)
{
    for (size_t r = 0; r < R; r++) {
        if (m[r] == -INFINITY) continue;
        float l_ring = l[r] - (mb[r] == -INFINITY ? 0.0f : lb[r] * expf(mb[r] - m[r]));
        if (l_ring > 0)
            for (size_t d = 0; d < D; d++) acc[r * D + d] += l_ring * mu_v[d];
        m[r] += cq[r];
    }
}

/* A record's view, empty but for what every record kind states: the next record to
 * prefetch (pf, or NULL) and the code bits of its K and V tiles. */
static void rec_start(sjk_attn_rec *rec, const uint8_t *pf, size_t rec_nbytes, const sjk_record_layout *RL)
{
    memset(rec, 0, sizeof *rec);
    rec->pf = pf;
    rec->pf_nbytes = pf ? rec_nbytes : 0;
    rec->kbits = RL->bits_k;
    rec->vbits = RL->bits_v;
}

static void unit_run(void *arg, uint32_t u, uint32_t worker)
{
    const attn_job *j = arg;
    const sjk_cache *c = j->c;
    const sjk_cache_layer *L = j->L;
    const sjk_attn_kernels *k = j->k;
    const size_t D = c->D, G = SJK_GROUP, R = j->R, gq = c->gq;
    const uint32_t head = u / j->splits, split = u % j->splits;
    const uint32_t c0 = split_bound(j, split), c1 = split_bound(j, split + 1);

    const sjk_attn_part ps = sjk_attn_part_at(c->part + (size_t)u * SJK_ATTN_PART_FLOATS(R, D), R);
    float *m = ps.m, *l = ps.l, *cq = ps.cq, *l_brd = ps.l_brd, *m_brd = ps.m_brd, *acc = ps.acc;
    int ring_open = 0; /* centered ring: the state is shifted by cq (ring_enter) */
    for (size_t r = 0; r < R; r++) { m[r] = -INFINITY; l[r] = 0; }
    memset(acc, 0, R * D * sizeof *acc);
    const float *q = c->q_rot + (size_t)head * R * D;

    uint8_t *scr = sjk_cache_thread_scratch(c, worker);
    float *kf = align_f(&scr, G * D), *vf = align_f(&scr, G * D);
    uint8_t *kc = (uint8_t *)align_f(&scr, G * D / 4), *vc = (uint8_t *)align_f(&scr, G * D / 4);
    float *sc = align_f(&scr, 3 * D + 3 * G);
    float *work = align_f(&scr, SJK_ATTN_WORK_FLOATS(D));
    void *qbuf = align_f(&scr, SJK_ATTN_QINT_NBYTES(SJK_ATTN_MANY_MIN, D) / sizeof(float) + 1);
    const uint8_t *hb = sjk_cache_head(c, L, j->seq, head);
    const uint32_t first_q = j->n - j->n_rows; /* position of query row 0 */
    /* Kernels that decode inside their loops (trellis records, tq6_0 ring rows) redo the
     * decode for every block of SJK_ATTN_RB rows: right for decode (the GQA rows of one
     * token), wrong for prefill, where one decode to fp32 serves all rows. With many rows
     * every chunk becomes fp32 once and goes to chunk_f32_many (its matrix-product layout
     * pays off from SJK_ATTN_MANY_MIN rows: `sjkvarn bench attn`, docs/benchmarks/attention.md). */
    const int inplace = R <= 2 * SJK_ATTN_RB;
    const int many = k->chunk_f32_many && R >= SJK_ATTN_MANY_MIN;
    /* ggml block rows (q8_0, q4_0) read in place by integer dot products against the
     * queries as int8 pieces, made once for this unit on the first such chunk. */
    const unsigned qkb = qblk_bits(L->k_fmt), qvb = qblk_bits(L->v_fmt);
    const int qblk = k->chunk_qblk && qkb && qvb && !many && R < SJK_ATTN_MANY_MIN && D % 64 == 0;
    sjk_attn_qint qi;
    int qi_ready = 0;
    /* tq6_0 ring rows read in place: keys by integer dot products where the table has it */
    void (*const tq6)(const float *, size_t, size_t, const uint32_t *, const uint8_t *, const uint8_t *, size_t, float *,
                      float *, float *, float *, const uint8_t *, size_t) = k->chunk_tq6_q16 ? k->chunk_tq6_q16 : k->chunk_tq6;

    for (uint32_t ch = c0; ch < c1; ch++) {
        const uint32_t p0 = ch * (uint32_t)G;
        const uint32_t len = SJK_MIN((uint32_t)G, j->n - p0);
        /* What this chunk is, decoded as little as possible. */
        const uint16_t *K16 = NULL, *V16 = NULL;
        const float *K32 = NULL, *V32 = NULL;
        const uint8_t *KT6 = NULL, *VT6 = NULL, *KQ = NULL, *VQ = NULL, *qpf = NULL;
        size_t qpf_n = 0;
        sjk_attn_rec rec;
        int is_rec = 0, rec_q16 = 0, rec_v16 = 0, trel_q16 = 0, trel_q8 = 0;
        const uint8_t *kr = NULL, *vr = NULL; /* rows of the layer's row formats */
        if (!L->compressed) {
            kr = hb + L->off_ring_k + (size_t)p0 * L->k_row_nbytes;
            vr = hb + L->off_ring_v + (size_t)p0 * L->v_row_nbytes;
        } else if (p0 < L->sink) {
            K16 = (const uint16_t *)(const void *)(hb + L->off_sink_k) + (size_t)p0 * D;
            V16 = (const uint16_t *)(const void *)(hb + L->off_sink_v) + (size_t)p0 * D;
        } else if (p0 < j->b && many) {
            /* every body (scalar or trellis): decoded for all rows at once */
            record_to_f32(L, kf, vf, hb + L->off_body + (size_t)((p0 - L->sink) / G) * L->rec_nbytes, D);
            K32 = kf;
            V32 = vf;
        } else if (p0 < j->b) {
            const uint8_t *rp = hb + L->off_body + (size_t)((p0 - L->sink) / G) * L->rec_nbytes;
            /* the next record, for the kernels to prefetch as they go (at long contexts
             * the body streams from memory, crossing pages faster than the hardware
             * prefetchers ramp up) */
            const uint8_t *pf = ch + 1 < c1 && p0 + 2 * G <= j->b ? rp + L->rec_nbytes : NULL;
            const sjk_record_layout *RL = &L->rl;
            const int grid = L->rp.body == SJK_BODY_TRELLIS_I8 || L->rp.body == SJK_BODY_TRELLIS_REAL_I8 ||
                             L->rp.body == SJK_BODY_TRELLIS_S128; /* int8-grid tables (chunk_trellis_q8) */
            if (L->rp.body == SJK_BODY_SCALAR) {
                rec_start(&rec, pf, L->rec_nbytes, RL);
                if (RL->bits_k == 4) {
                    rec.kp = rp + RL->off_k;
                    rec_q16 = k->chunk_rec_q16 != NULL; /* scored by integer dot products */
                } else if (RL->bits_k == 8 && RL->k_row_nbytes == G) {
                    rec.kc = rp + RL->off_k; /* 8-bit rows are the codes [D][G] as unpacked */
                } else {
                    unpack_half(k, kc, rp + RL->off_k, RL->k_row_nbytes, D, G, RL->bits_k);
                    rec.kc = kc;
                }
                if (RL->bits_v == 4) {
                    rec.vp = rp + RL->off_v;
                } else if (RL->bits_v == 8 && RL->v_row_nbytes == D) {
                    rec.vc = rp + RL->off_v; /* the codes [G][D] as unpacked */
                } else {
                    unpack_half(k, vc, rp + RL->off_v, RL->v_row_nbytes, G, D, RL->bits_v);
                    rec.vc = vc;
                }
                rec_v16 = k->chunk_rec_v16 != NULL; /* values by int16 weights (codes in place or unpacked) */
                rec_scales(k, &rec, sc, rp + RL->off_kscale, D);
                is_rec = 1;
            } else if (sjk_body_trellis_token(L->rp.body) && k->trellis_inplace && inplace &&
                       ((RL->bits_k <= SJK_TRELLIS_MAX_BITS && RL->bits_v <= SJK_TRELLIS_MAX_BITS) ||
                        (grid && k->chunk_trellis_q8 && k->trellis_mixed &&
                         (RL->bits_k <= SJK_TRELLIS_MAX_BITS || RL->bits_v <= SJK_TRELLIS_MAX_BITS)))) {
                /* Token-axis trellis bodies: the kernel reads the codes in place; a scalar
                 * tile beside a trellis one (above 4 bits, e.g. sj:5/3t) as unpacked codes,
                 * where the int8-grid reader takes it (trellis_mixed) */
                rec_start(&rec, pf, L->rec_nbytes, RL);
                if (RL->bits_k <= SJK_TRELLIS_MAX_BITS) {
                    rec.kt = rp + RL->off_k;
                    rec.kcb = sjk_trellis_codebook_for(L->rp.body, RL->bits_k, 0);
                } else {
                    unpack_half(k, kc, rp + RL->off_k, RL->k_row_nbytes, D, G, RL->bits_k);
                    rec.kc = kc;
                }
                if (RL->bits_v <= SJK_TRELLIS_MAX_BITS) {
                    rec.vt = rp + RL->off_v;
                    rec.vcb = sjk_trellis_codebook_for(L->rp.body, RL->bits_v, 1);
                } else {
                    unpack_half(k, vc, rp + RL->off_v, RL->v_row_nbytes, G, D, RL->bits_v);
                    rec.vc = vc;
                }
                rec_scales(k, &rec, sc, rp + RL->off_kscale, D);
                is_rec = 1;
                trel_q16 = k->chunk_trellis_q16 != NULL; /* by int16 dot products */
                /* the int8-grid bodies by int8 dot products over their exact table entries */
                trel_q8 = k->chunk_trellis_q8 != NULL && grid;
            } else {
                /* Channel-axis trellis bodies, a trellis tile beside a scalar tile above
                 * 4 bits on the float tables or where the table lacks trellis_mixed (or a
                 * table without in-place trellis): decode the record. */
                record_to_f32(L, kf, vf, rp, D);
                K32 = kf;
                V32 = vf;
            }
        } else {
            if (L->cfg.center && !ring_open) {
                ring_enter(R, D, q, sjk_cache_mu(L, (uint8_t *)(uintptr_t)hb), m, l, cq, l_brd, m_brd);
                ring_open = 1;
            }
            const size_t slot = (size_t)(p0 - L->sink) % L->ring_cap;
            kr = hb + L->off_ring_k + slot * L->k_row_nbytes;
            vr = hb + L->off_ring_v + slot * L->v_row_nbytes;
        }
        if (kr) { /* ring or uniform layer: the row format picks the reader */
            /* the next chunk's K rows (ring or uniform layer alike), for the fp16, tq6_0
             * and ggml block readers to prefetch as they go: at long contexts the rows
             * stream from memory and the hardware prefetchers leave the kernel waiting */
            if (ch + 1 < c1 && p0 + G < j->n) {
                const uint32_t p1 = p0 + (uint32_t)G;
                const size_t len1 = SJK_MIN((uint32_t)G, j->n - p1);
                qpf = !L->compressed ? kr + G * L->k_row_nbytes
                                     : hb + L->off_ring_k + ((size_t)(p1 - L->sink) % L->ring_cap) * L->k_row_nbytes;
                qpf_n = len1 * L->k_row_nbytes;
            }
            if (L->k_fmt == SJK_FMT_F16 && L->v_fmt == SJK_FMT_F16) {
                K16 = (const uint16_t *)(const void *)kr;
                V16 = (const uint16_t *)(const void *)vr;
            } else if (L->k_fmt == SJK_FMT_TQ6_0_STAGE && L->v_fmt == SJK_FMT_TQ6_0_STAGE && tq6 && inplace && !many) {
                KT6 = kr; /* read in place: one pass decodes and multiplies */
                VT6 = vr;
            } else if (qblk) {
                KQ = kr;
                VQ = vr;
            } else {
                rows_to_f32(L, kf, vf, kr, vr, (size_t)len * D);
                K32 = kf;
                V32 = vf;
            }
        }
        if (many && K16) { /* fp16 rows (sink, ring, uncompressed layer): converted once */
            k->f16_to_f32(kf, (const uint8_t *)K16, (size_t)len * D);
            k->f16_to_f32(vf, (const uint8_t *)V16, (size_t)len * D);
            K32 = kf;
            V32 = vf;
            K16 = V16 = NULL;
        }
        for (size_t r0 = 0; r0 < R; r0 += ROW_BLOCK) {
            size_t rn = SJK_MIN((size_t)ROW_BLOCK, R - r0);
            uint32_t nvis[ROW_BLOCK];
            int any = 0;
            for (size_t r = 0; r < rn; r++) {
                uint32_t lim = first_q + (uint32_t)((r0 + r) / gq) + 1; /* visible positions */
                uint32_t nv = lim <= p0 ? 0 : SJK_MIN(len, lim - p0);
                nvis[r] = nv;
                any |= nv != 0;
            }
            if (!any) continue;
            const float *qb = q + r0 * D;
            float *mb = m + r0, *lb = l + r0, *ab = acc + r0 * D;
            if (is_rec && rec_v16) k->chunk_rec_v16(qb, rn, D, nvis, &rec, mb, lb, ab, work);
            else if (is_rec && rec_q16) k->chunk_rec_q16(qb, rn, D, nvis, &rec, mb, lb, ab, work);
            else if (is_rec && trel_q8) k->chunk_trellis_q8(qb, rn, D, nvis, &rec, mb, lb, ab, work);
            else if (is_rec && trel_q16) k->chunk_trellis_q16(qb, rn, D, nvis, &rec, mb, lb, ab, work);
            else if (is_rec) k->chunk_rec(qb, rn, D, nvis, &rec, mb, lb, ab, work);
            else if (K16) k->chunk_f16(qb, rn, D, nvis, K16, V16, len, mb, lb, ab, work, r0 == 0 ? qpf : NULL, r0 == 0 ? qpf_n : 0);
            else if (KT6) tq6(qb, rn, D, nvis, KT6, VT6, len, mb, lb, ab, work, r0 == 0 ? qpf : NULL, r0 == 0 ? qpf_n : 0);
            else if (KQ) {
                if (!qi_ready) {
                    if (k->qint_prep) k->qint_prep(&qi, qbuf, q, R, D);
                    else sjk_attn_qint_prep(&qi, qbuf, q, R, D);
                    qi_ready = 1;
                }
                const sjk_attn_qint qr = sjk_attn_qint_rows(&qi, r0);
                (k->chunk_qblk_q16 ? k->chunk_qblk_q16 : k->chunk_qblk)(&qr, rn, D, nvis, qkb, qvb, KQ, VQ, len, mb, lb, ab, work,
                                                                        r0 == 0 ? qpf : NULL, r0 == 0 ? qpf_n : 0);
            }
            else if (many) k->chunk_f32_many(qb, rn, D, nvis, K32, V32, len, mb, lb, ab, work);
            else k->chunk_f32(qb, rn, D, nvis, K32, V32, len, mb, lb, ab, work);
        }
    }
    if (ring_open) ring_leave(R, D, sjk_cache_mu(L, (uint8_t *)(uintptr_t)hb) + D, m, l, cq, l_brd, m_brd, acc);
}

sjk_status sjk_cache_attend(sjk_cache *c, uint32_t seq, uint32_t layer, const float *q,
                            size_t n_rows, float scale, float *out)
{
    if (!c || seq >= c->p.n_seqs || layer >= c->p.n_layers || !q || !out) return SJK_ERR_PARAM;
    const sjk_cache_layer *L = &c->layers[layer];
    const sjk_seq_layer *sl = sjk_cache_state(c, seq, layer);
    if (n_rows == 0 || n_rows > c->p.max_q_rows || n_rows > sl->n) return SJK_ERR_RANGE;
    const size_t D = c->D, H = c->p.n_kv_heads, Hq = c->p.n_q_heads, gq = c->gq;
    const size_t R = n_rows * gq;

    /* Pack and rotate the queries: q_rot[h][i * gq + j] = H · (scale · q[i][h*gq + j]). */
    for (size_t h = 0; h < H; h++)
        for (size_t i = 0; i < n_rows; i++)
            for (size_t jq = 0; jq < gq; jq++) {
                const float *src = q + (i * Hq + h * gq + jq) * D;
                float *dst = c->q_rot + (h * R + i * gq + jq) * D;
                for (size_t d = 0; d < D; d++) dst[d] = src[d] * scale;
                if (L->rot_k) sjk_hadamard(dst, D, L->rot_k);
            }

    attn_job j;
    j.c = c;
    j.L = L;
    j.k = c->kern ? c->kern : sjk_attn_kernels_get();
    j.seq = seq;
    j.n = sl->n;
    j.b = sl->b;
    j.n_rows = (uint32_t)n_rows;
    j.R = R;
    j.n_chunks = (sl->n + SJK_GROUP - 1) / SJK_GROUP;
    /* Position splits per head that divide the units most evenly among the active threads. */
    uint32_t T = c->active_threads;
    j.splits = SJK_MIN(SJK_MIN(c->n_splits, sjk_attn_splits((uint32_t)H, T)), j.n_chunks);
    if (j.splits == 0) j.splits = 1;
    split_weights(&j, L, sl);
    sjk_pool_run_limited(&c->pool, unit_run, &j, (uint32_t)(H * j.splits), T);

    /* Merge the splits of each head, normalise, rotate back. */
    for (size_t h = 0; h < H; h++)
        for (size_t r = 0; r < R; r++) {
            size_t i = r / gq, jq = r % gq;
            float *dst = out + (i * Hq + h * gq + jq) * D;
            float M = -INFINITY;
            for (uint32_t s = 0; s < j.splits; s++) {
                const sjk_attn_part ps = sjk_attn_part_at(c->part + (h * j.splits + s) * SJK_ATTN_PART_FLOATS(R, D), R);
                if (ps.m[r] > M) M = ps.m[r];
            }
            float lsum = 0;
            for (size_t d = 0; d < D; d++) dst[d] = 0;
            for (uint32_t s = 0; s < j.splits; s++) {
                const sjk_attn_part ps = sjk_attn_part_at(c->part + (h * j.splits + s) * SJK_ATTN_PART_FLOATS(R, D), R);
                if (ps.m[r] == -INFINITY) continue;
                float w = expf(ps.m[r] - M);
                lsum += w * ps.l[r];
                const float *a = ps.acc + r * D;
                for (size_t d = 0; d < D; d++) dst[d] += w * a[d];
            }
            float inv = lsum > 0 ? 1.0f / lsum : 0.0f;
            for (size_t d = 0; d < D; d++) dst[d] *= inv;
            if (L->rot_v) sjk_hadamard(dst, D, L->rot_v);
        }
    return SJK_OK;
}
