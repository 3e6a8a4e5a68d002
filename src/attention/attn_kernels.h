/* attn_kernels.h — the inner loops of attention: one chunk of at most 128 keys against R
 * query rows of one KV head, folded into running online-softmax states.
 *
 * State of query row r (fp32):  m[r] running max score, l[r] running sum of exp(s − m),
 * acc[r][D] running sum of exp(s − m) · v (rotated basis). Queries arrive pre-multiplied
 * by the softmax scale. nvis[r] (0..n) is how many keys of the chunk row r may see
 * (causal mask); rows with nvis 0 are untouched.
 *
 * Record chunks fold the scales (docs/DESIGN.md §2.6) instead of materialising K/V:
 *   s[t]   = Ktok[t] · (Σ_d (q[d]·Kscale[d]) · qK[d][t] + Σ_d q[d]·Kzero[d])
 *   acc[d] = acc[d]·f + Vch[d] · (Σ_t (p[t]·Vscale[t]) · qV[t][d] + Σ_t p[t]·Vzero[t])
 * Every SIMD table is checked against the scalar reference (tests: 1e-5 relative to the
 * output's magnitude; the paths differ only in summation order and FMA contraction).
 *
 * Two shapes of work (attend.c picks one per call by the rows per KV head, R):
 *   decode (R < SJK_ATTN_MANY_MIN, e.g. the GQA rows of one token): the chunk_* kernels
 *     read each chunk as stored (fp16, records, tq6_0 rows) and take the rows
 *     SJK_ATTN_RB at a time, a dot product per (key, row) pair;
 *   prefill (R >= SJK_ATTN_MANY_MIN): the caller materialises each chunk's K and V as
 *     fp32 once (fp16 convert, record / ring decode) and chunk_f32_many folds it into all
 *     rows as two register-blocked matrix products (scores: rows x keys; values: rows x
 *     channels): the decode is paid once per chunk instead of once per SJK_ATTN_RB rows,
 *     and no (key, row) pair ends in a horizontal sum.
 */
#ifndef SJK_ATTN_KERNELS_H
#define SJK_ATTN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cache/attn_layout.h" /* the sizes the cache reserves: rows per block, work, qint */
#include "codec/record_layout.h"

#define SJK_ATTN_RB 4 /* query rows per block: GQA heads share each key load */

/* A record as the kernels read it: scales as fp32 (in the worker's scratch), codes either
 * unpacked to bytes (kc / vc) or, for 4-bit payloads, read in place from the record
 * (kc / vc NULL: kp / vp, record_layout.h's nibble order).
 *
 * Trellis records (token axis, docs/FORMAT.md) are read in place too: kt and vt (both set
 * or both NULL; when set they take precedence over kc/kp/vc/vp) point at the K and V
 * payloads, and the code "value" of channel d, token t is kcb[wK(d, t)] (vcb for V), the
 * window recomputed from the packed symbols; the scales fold exactly as for codes. Only
 * tables with trellis_inplace set accept them. */
typedef struct sjk_attn_rec {
    const uint8_t *kc;   /* [D][128] K codes, channel-major (as stored), or NULL */
    const uint8_t *vc;   /* [128][D] V codes, token-major, or NULL */
    const uint8_t *kp;   /* 4-bit K payload rows (D rows of 64 bytes) when kc is NULL */
    const uint8_t *vp;   /* 4-bit V payload rows (128 rows of D/2 bytes) when vc is NULL */
    const float *kscale, *kzero, *ktok, *vch, *vscale, *vzero; /* [D] [D] [128] [D] [128] [128] */
    const uint8_t *kt, *vt;  /* trellis K / V payloads (D/16 groups of 128 steps), or NULL */
    const float *kcb, *vcb;  /* codebooks C_bK [64 << bK], C_bV [64 << bV] */
    unsigned kbits, vbits;   /* trellis symbol bits (2..4); a scalar record's code bits
                                (2..8; 0: not stated, as the tests' hand-made records) */
    const uint8_t *pf;       /* the next record's bytes, or NULL: a hint only (kernels may */
    size_t pf_nbytes;        /* prefetch it while they work; results never depend on it) */
} sjk_attn_rec;

/* Query rows as int8 pieces, for integer dot products with ggml block keys (q8_0, q4_0
 * rows: one fp16 scale d and 32 codes per block of 32 channels). Made once per unit of
 * work (attend.c; sjk_attn_qint_prep) from the scaled, rotated fp32 rows:
 *
 *   q[r][i] ≈ scale[r] · (128 · hi[r][i] + lo[r][i]),   hi = round(q / (128 scale)),
 *   lo = round(q / scale − 128 hi),   scale = max_i |q[r][i]| / (127 · 128),
 *
 * so |hi| <= 127, |lo| <= 64 and the error of a query value is at most scale / 2 =
 * max|q[r]| / 32512 (about 15 bits; one int8 piece would give 8). A key's score is then
 *   s = scale · Σ_b d_b · Σ_{i in b} code_i · (128 hi_i + lo_i)   (code: q8_0 qs, q4_0 nib − 8)
 * with the inner sums exact in int32 (|.| < 2^24) and fp32 only for the d_b scaling.
 * The SIMD kernels score with vpdpbusd (unsigned bytes × signed bytes): for q8_0 the key
 * byte is offset by 128 (u = code + 128) and corr8 removes the offset exactly; for q4_0
 * the nibble is the unsigned byte and 8 · bsum is subtracted per block in fp32. */
typedef struct sjk_attn_qint {
    const int8_t *hi, *lo;   /* [R][D] */
    const int32_t *corr8;    /* [R][D/4]: −128 Σ hi − Σ lo over each group of 4 channels */
    const float *bsum;       /* [R][D/32]: Σ (128 hi + lo) over each block of 32 channels */
    const float *scale;      /* [R] */
    /* [R][D]: 128 hi + lo as int16, in the order of the SIMD kernels' widened codes
     * (sjk_attn_qint_w16_chan): per quad of blocks (128 channels from 128 p), four runs
     * of 32 words v = 0..3, word 8 b + i channel 128 p + 32 b + 8 v + i (b = 0..3, the
     * block of the quad: 128-bit lane b); channels past the last whole quad (D % 128 = 64)
     * per pair of blocks, two runs of 32 words h = 0, 1, word 8 L + i (L = 0..3) channel
     * 64 p + 32 (L / 2) + 16 (L % 2) + 8 h + i */
    const int16_t *w16;
    size_t D;
} sjk_attn_qint;

/* Channel held by word k (0..D-1) of a row of sjk_attn_qint.w16 (rows of D channels). */
static inline size_t sjk_attn_qint_w16_chan(size_t k, size_t D)
{
    const size_t nq = D / 128 * 128; /* channels in whole quads of blocks */
    if (k < nq) {
        const size_t v = (k % 128) / 32, b = (k % 32) / 8, i = k % 8;
        return k / 128 * 128 + 32 * b + 8 * v + i;
    }
    const size_t k2 = k - nq, h = (k2 % 64) / 32, L = (k2 % 32) / 8, i = k2 % 8;
    return nq + k2 / 64 * 64 + 32 * (L / 2) + 16 * (L % 2) + 8 * h + i;
}

/* Quantizes R rows q[R][D] (D a multiple of 32) into buf (SJK_ATTN_QINT_NBYTES(R, D)
 * bytes, cache/attn_layout.h) and points *qi at them. A row with an infinity or a NaN
 * gets scale NaN and zero pieces (its scores are NaN, as the fp32 kernels make them). */
void sjk_attn_qint_prep(sjk_attn_qint *qi, void *buf, const float *q, size_t R, size_t D);
/* The view of rows r0.. of qi. */
sjk_attn_qint sjk_attn_qint_rows(const sjk_attn_qint *qi, size_t r0);

/* A chunk of fp32 keys/values K, V [n][D] against R query rows (chunk_f32, chunk_f32_many). */
typedef void sjk_attn_f32_fn(const float *q, size_t R, size_t D, const uint32_t *nvis, const float *K, const float *V,
                             size_t n, float *m, float *l, float *acc, float *work);

typedef struct sjk_attn_kernels {
    const char *name; /* "ref", "avx2", "avx512" */
    /* fp32 keys/values: K, V [n][D] */
    sjk_attn_f32_fn *chunk_f32;
    /* fp32 keys/values, many rows (prefill): the same contract and result as chunk_f32
     * up to summation order, laid out for R >> SJK_ATTN_RB (attend.c uses it from
     * SJK_ATTN_MANY_MIN rows). NULL: the caller keeps to the decode kernels. */
    sjk_attn_f32_fn *chunk_f32_many;
    /* fp16 keys/values: K, V [n][D]; pf, pf_nbytes: the next chunk's K rows, or NULL / 0,
     * a prefetch hint as for chunk_qblk */
    void (*chunk_f16)(const float *q, size_t R, size_t D, const uint32_t *nvis,
                      const uint16_t *K, const uint16_t *V, size_t n,
                      float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes);
    /* tq6_0_stage rows (the staging ring): K, V [n][D/128 blocks of 98 bytes], decoded
     * on the fly (value = centroid * block norm, as the format's decode) and used at
     * once; pf, pf_nbytes: the next chunk's K rows, or NULL / 0, a prefetch hint as for
     * chunk_qblk. NULL: the caller decodes the rows and uses chunk_f32. */
    void (*chunk_tq6)(const float *q, size_t R, size_t D, const uint32_t *nvis,
                      const uint8_t *K, const uint8_t *V, size_t n,
                      float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes);
    /* One unpacked record (n = 128 keys). */
    void (*chunk_rec)(const float *q, size_t R, size_t D, const uint32_t *nvis,
                      const sjk_attn_rec *rec, float *m, float *l, float *acc, float *work);
    /* Unpacks a payload row of n codes (n a multiple of 64) into bytes. */
    void (*unpack_row)(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits);
    /* n little-endian fp16 values (a record's scale fields) to fp32. */
    void (*f16_to_f32)(float *dst, const uint8_t *src, size_t n);
    /* 1 if chunk_rec reads trellis payloads in place (rec.kt / rec.vt); else the caller
     * decodes trellis records to fp32 and uses chunk_f32. */
    int trellis_inplace;
    /* ggml block rows read in place (decode): K [n][D/32 blocks] in q8_0 (kbits 8) or
     * q4_0 (kbits 4), V likewise (vbits), D a multiple of 64; queries as int8 pieces
     * (sjk_attn_qint), scores by integer dot products, V dequantized inside the
     * accumulation. pf, pf_nbytes: the next chunk's K rows, or NULL / 0: a hint only (a
     * kernel may prefetch them while it works; results never depend on it). NULL: the
     * caller decodes the rows and uses chunk_f32. */
    void (*chunk_qblk)(const sjk_attn_qint *qi, size_t R, size_t D, const uint32_t *nvis,
                       unsigned kbits, unsigned vbits, const uint8_t *K, const uint8_t *V, size_t n,
                       float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes);
    /* One scalar record whose K codes are 4-bit and read in place (rec.kp set, rec.kc and
     * rec.kt NULL), scored by integer dot products: per record and row the folded query
     * qs[d] = q[d]·Kscale[d] becomes int16 (sjk_attn_q16_prep), and
     *   s[t] = Ktok[t] · (scale · (float)Σ_d q16[d]·code[d][t] + Σ_d q[d]·Kzero[d])
     * with the sum exact in int32; values as chunk_rec (dequantized inside the
     * accumulation). NULL: the caller uses chunk_rec. */
    void (*chunk_rec_q16)(const float *q, size_t R, size_t D, const uint32_t *nvis,
                          const sjk_attn_rec *rec, float *m, float *l, float *acc, float *work);
    /* tq6_0_stage rows as chunk_tq6, keys and values by integer dot products: per call and
     * row the query becomes int16 (sjk_attn_q16_prep), the 6-bit codes their int16
     * centroids (sjk_attn_tq6_c16), and
     *   s[t] = scale_q · scale_c · Σ_b norm[t][b] · (float)Σ_{i in b} q16[i] · c16[code[t][i]]
     * with the inner sums exact in integers; per row and block b the weights
     * p[t]·Vnorm[t][b] become int16 under the sum bound SJK_ATTN_TQ6_SUM_MAX
     * (sjk_attn_q16_prep_l1, scale_p[b]) and
     *   acc[i] = acc[i]·f + scale_p[b] · scale_c · (float)Σ_t p16[b][t] · c16[code[t][i]]
     * (i in block b), exact in int32; pf, pf_nbytes as chunk_tq6's. NULL: the caller
     * uses chunk_tq6. */
    void (*chunk_tq6_q16)(const float *q, size_t R, size_t D, const uint32_t *nvis,
                          const uint8_t *K, const uint8_t *V, size_t n,
                          float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes);
    /* sjk_attn_qint_prep with SIMD, to the same bits in every field for rows of finite
     * values and rows with an infinity or a NaN (tests/test_attention.c); NULL: attend.c calls
     * sjk_attn_qint_prep. (A table that lists no entry here gets NULL.) */
    void (*qint_prep)(sjk_attn_qint *qi, void *buf, const float *q, size_t R, size_t D);
    /* One trellis record read in place (rec.kt / rec.vt set, the committed codebooks),
     * keys and values by int16 dot products: the codebooks as int16
     * (sjk_attn_trellis_c16), per record and row the folded query qs[d] = q[d]·Kscale[d]
     * and, after the softmax, the weights p[t]·Vscale[t] as int16 under a sum bound
     * (sjk_attn_q16_prep_l1, SJK_ATTN_TRQ_SUM_MAX), and
     *   s[t]   = Ktok[t] · (scale_q · scale_c · (float)Σ_d q16[d] · c16[wK(d, t)] + Σ_d q·Kzero)
     *   acc[d] = acc[d]·f + Vch[d] · (scale_p · scale_c · (float)Σ_t p16[t] · c16[wV(d, t)] + Σ_t p·Vzero)
     * with both sums exact in int32. A record with another codebook takes chunk_rec.
     * NULL: the caller uses chunk_rec (fp32 code values). */
    void (*chunk_trellis_q16)(const float *q, size_t R, size_t D, const uint32_t *nvis,
                              const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work);
    /* chunk_qblk with the values by int16 dot products: per row and block b of 32
     * channels the weights p[t]·d_V[t][b] become int16 (sjk_attn_q16_prep, scale w_b) and
     *   acc[i] = acc[i]·f + w_b · (float)Σ_t w16[t] · code[t][i]   (i in block b)
     * exact in int32 (q8_0: |code| <= 128; q4_0: code = nib − 8, summed as Σ w16 · nib
     * − 8 Σ w16). NULL: the caller uses chunk_qblk. */
    void (*chunk_qblk_q16)(const sjk_attn_qint *qi, size_t R, size_t D, const uint32_t *nvis,
                           unsigned kbits, unsigned vbits, const uint8_t *K, const uint8_t *V, size_t n,
                           float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes);
    /* One trellis record of a body on the int8-grid codebooks (SJK_BODY_TRELLIS_I8,
     * _REAL_I8: rec.kcb / rec.vcb grid tables, sjk_trellis_codebook_i8) read in place, keys
     * and values by int8 dot products over the tables' exact int8 entries c8 (value =
     * step · c8): per record and row the folded query qs[d] = q[d]·Kscale[d] and, after the
     * softmax, the weights p[t]·Vscale[t] become two int8 pieces y = 128 hi + lo
     * (sjk_attn_q8_pieces), and
     *   s[t]   = Ktok[t] · (scale_q · step_K · (float)Σ_d y_q[d] · c8[wK(d, t)] + Σ_d q·Kzero)
     *   acc[d] = acc[d]·f + Vch[d] · (scale_p · step_V · (float)Σ_t y_p[t] · c8[wV(d, t)] + Σ_t p·Vzero)
     * with both sums exact in int32 (|Σ| <= 512 · 16256 · 127 < 2^31). The codebook values
     * are exact, so the only rounding is the pieces' (half a step of max|x| / 16256). A
     * record with other tables takes chunk_trellis_q16. A table may read a record's
     * values in fp32 where its integer reader is no faster (AVX2: values of 2 and 3 bits,
     * by the pair tables; the keys, which set the running maxima, always by integers),
     * and a table without chunk_trellis_q16 reads records on the 64 << k-entry grids as
     * its chunk_rec (AVX2: no register lookup of tables that large). NULL: the caller
     * uses chunk_trellis_q16. */
    void (*chunk_trellis_q8)(const float *q, size_t R, size_t D, const uint32_t *nvis,
                             const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work);
    /* unpack_row over nrows payload rows (row r at rows + r · row_nbytes, its codes to
     * codes + r · n), the same bytes as nrows calls of unpack_row: one call per record
     * half instead of one per row (a row of 128 codes is a few vector steps, less than
     * the call). NULL: the caller calls unpack_row per row. */
    void (*unpack_rows)(uint8_t *codes, const uint8_t *rows, size_t row_nbytes, size_t nrows, size_t n,
                        unsigned bits);
    /* A scalar record whose V codes are 4-bit (rc->vp) or unpacked bytes of 5 to 8 bits
     * (rc->vc), the values by int16 weights: per row the weights p[t]·Vscale[t] become
     * int16 (sjk_attn_q16_prep over the chunk's keys, scale w) and
     *   acc[d] = acc[d]·f + Vch[d] · (w · (float)Σ_t w16[t] · code[t][d] + Σ_t p·Vzero)
     * with the sum exact in int32 (|.| <= 128 · 32767 · 255 < 2^31); the keys as
     * chunk_rec_q16 scores them when they are 4-bit (rc->kp), unpacked codes of at most
     * 7 bits (rc->kc, rc->kbits 2..7) against the folded query as int16
     * (sjk_attn_q16_prep; exact int32 sums, |.| <= 512 · 32767 · 127 < 2^31), else (8
     * bits, or kbits 0) as chunk_rec. NULL: the caller uses chunk_rec_q16 / chunk_rec. */
    void (*chunk_rec_v16)(const float *q, size_t R, size_t D, const uint32_t *nvis,
                          const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work);
    /* 1: chunk_trellis_q8 also reads an int8-grid record whose K or V tile is scalar
     * (above 4 bits, docs/DESIGN.md §2.4: rc->kt NULL and the K codes unpacked in rc->kc,
     * scored against the query as int16 (sjk_attn_q16_prep; exact int32 sums; 8-bit
     * codes in fp32); or rc->vt NULL and rc->vc, summed in fp32 as chunk_rec sums them),
     * the other tile in place. 0: attend.c decodes such a record. */
    int trellis_mixed;
} sjk_attn_kernels;

/* The tq6_0 centroids as int16 for chunk_tq6_q16: c16[j] = round(c[j] · 8191 / max|c|)
 * (|c16| <= 8191); returns their scale max|c| / 8191 (c[j] ≈ scale · c16[j], within
 * scale / 2 = 2.0e-5). */
float sjk_attn_tq6_c16(int16_t c16[64]);
/* The weights' sum bound of chunk_tq6_q16's values: floor((2^31 − 1) / 8191). */
#define SJK_ATTN_TQ6_SUM_MAX 262176u

/* The int16 form of one row x[D] for chunk_rec_q16: *scale = max_i |x[i]| / 32767 and
 * q16[i] = round-to-nearest-even(x[i] · (1 / *scale)) (|q16| <= 32767), so each value is
 * within *scale / 2 = max|x| / 65534 of scale · q16 (plus fp32 rounding); an all-zero row
 * gives scale 0 and zeros, a row with a non-finite value scale NaN and zeros (its scores
 * are NaN, as the fp32 kernels would make them). The SIMD kernels compute the same bits. */
void sjk_attn_q16_prep(int16_t *q16, float *scale, const float *x, size_t D);

/* The int16 trellis codebooks of chunk_trellis_q16. c16[w] = round(C_k[w] · CMAX /
 * max|C_k|) for the committed codebook C_k (sjk_trellis_codebook, k = 2..4 bits: 64 << k
 * entries), so |c16| <= CMAX and C_k[w] is within scale / 2 = max|C_k| / 4094 of
 * scale · c16[w] (about 1/1000 of a standard deviation of the data the codebook
 * quantizes, next to a trellis error of 1/10 to 1/3 of one). CMAX is 11 bits so that a
 * sum of products with int16 weights fits int32 when the weights' absolute sum is at most
 * SUM_MAX = floor((2^31 − 1) / CMAX). Returns c16 (immutable, built once) and *scale, or
 * NULL for another k. */
#define SJK_ATTN_TRQ_CMAX 2047
#define SJK_ATTN_TRQ_SUM_MAX 1049088u
const int16_t *sjk_attn_trellis_c16(unsigned k, float *scale);
/* The same for any known table cb (sjk_trellis_codebook_set: the committed and the
 * real-data codebooks); NULL for another table or k. */
const int16_t *sjk_attn_trellis_c16_of(const float *cb, unsigned k, float *scale);

/* The two int8 pieces of a row x[n] for chunk_trellis_q8: *scale = max_i |x[i]| / 16256
 * (127 · 128), y[i] = round-to-nearest-even(x[i] · (1 / *scale)) (|y| <= 16256), hi[i] =
 * round-to-nearest-even(y[i] / 128) (|hi| <= 127) and lo[i] = y[i] − 128 hi[i] (|lo| <=
 * 64), so x[i] is within *scale / 2 of *scale · (128 hi[i] + lo[i]) (plus fp32 rounding);
 * *ysum = Σ_i y[i]. An all-zero row gives scale 0 and zeros, a row with a non-finite
 * value scale NaN and zeros. The SIMD kernels compute the same bits. */
void sjk_attn_q8_pieces(int8_t *hi, int8_t *lo, float *scale, int32_t *ysum, const float *x, size_t n);

/* sjk_attn_q16_prep under a sum bound: the scale is the larger of max|x| / 32767 and
 * Σ|x| / (sum_max − sum_max / 64), and q16 = round-to-nearest-even(x · (1 / scale)),
 * so Σ|q16| <= sum_max (the rounding adds at most n / 2 to the sum, and fp32 summation
 * error far less, both inside the margin of sum_max / 64; n <= 512). The precision of a
 * value is scale / 2 = max(max|x| / 65534, about Σ|x| / (2 sum_max)). Where the bound
 * does not bind, the bits of sjk_attn_q16_prep; the SIMD kernels sum Σ|x| in another
 * order, so their scale may differ in the last bit (covered by the kernels' tolerance). */
void sjk_attn_q16_prep_l1(int16_t *q16, float *scale, const float *x, size_t n, uint32_t sum_max);

/* The chunk kernels' `work`: SJK_ATTN_WORK_FLOATS(D) floats (cache/attn_layout.h). */

const sjk_attn_kernels *sjk_attn_kernels_get(void);  /* fastest allowed, chosen once */
const sjk_attn_kernels *sjk_attn_kernels_ref(void);
const sjk_attn_kernels *sjk_attn_kernels_avx2(void);   /* NULL if the CPU lacks it */
const sjk_attn_kernels *sjk_attn_kernels_avx512(void); /* NULL if the CPU lacks it */

extern const sjk_attn_kernels sjk_attn_kernels_table_ref;
extern const sjk_attn_kernels sjk_attn_kernels_table_avx2;
extern const sjk_attn_kernels sjk_attn_kernels_table_avx512;

/* AVX2 entries that the AVX-512 table shares (attn_avx2.c; call only where the CPU has
 * AVX2): a row unpack for the widths the AVX-512 one does not take, and the query
 * pieces, whose cost per unit of work is small beside the chunks (about 0.6 us for 4
 * rows of D = 256 on the Zen 4 EPYC against 5 us for sjk_attn_qint_prep), so an
 * AVX-512 form would save little. */
void sjk_attn_unpack_row_avx2(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits);
void sjk_attn_qint_prep_avx2(sjk_attn_qint *qi, void *buf, const float *q, size_t R, size_t D);

/* Reference unpack (also used by the SIMD tables for 3-bit rows). */
void sjk_attn_unpack_row_ref(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits);

#endif
