/* mm_k_avx512.c — the prefill matmul of quantized weights against 8-bit activations with
 * AVX512-VNNI (quants.h sjkh_mm_many_fn): many tokens at once, integer products, for the
 * K-quants Q4_K and Q6_K (against Q8_K rows) and the legacy Q8_0 and Q5_0 (against Q8_0
 * rows as sjkh_dotn_prepare leaves them: values + 128, unsigned, then the f32 scales).
 *
 * Before, a prefill chunk expanded the activations back to f32 and multiplied them with
 * dequantized f32 weights (ops_avx512.c mm_f32_panel): 16 products per FMA. Here the
 * weights stay bytes and vpdpbusd takes 64 u8 x s8 products per instruction, so a panel
 * of 16 weight rows is unpacked once and then met by every token of the chunk. One zmm
 * of weights (16 rows x 4 inputs) times a broadcast dword of a token's values adds 4
 * products to each of the 16 rows.
 *
 * K-quants, per super-block b (256 inputs), sjkh_mmk_blk:
 *     q     [64][16] u32   dword s of every row: its unsigned values 4s .. 4s + 3
 *                          (Q4_K: q in 0..15; Q6_K: q + 32 in 0..63)
 *     scale [16][16] f32   [sub-block][row]: Q4_K sc_j (8 of 32 inputs), Q6_K scales[i]
 *                          (16 of 16 inputs), integers held as floats
 *     pair  [8][16]  u32   [p][row]: two int16 that vpdpwssd multiplies with the
 *                          activation's bsums[2p], bsums[2p + 1] (Q4_K: m_p, m_p; Q6_K:
 *                          scales[2p], scales[2p + 1])
 *     d, dmin [16]   f32   the row's fp16 super-block scales
 * The terms are those of vec_dot (quants.c): per sub-block the integer sum of products
 * (exact in int32), times its scale, summed over the sub-blocks in f32 (exact while the
 * partial sums stay below 2^24 in magnitude, which real activation rows never come near:
 * the products of a Q4_K sub-block sum to at most 61,440, times a scale of at most 63);
 * the mins (Q4_K) and the offset of 32 (Q6_K) come from the activation's block sums in
 * exact int32 (vpdpwssd); the super-block terms are combined as vec_dot_ref combines them
 * (no FMA there).
 *
 * Q8_0 and Q5_0, per block b (32 inputs), sjkh_mml_blk:
 *     q     [8][16]  u32   dword s of every row: its signed values 4s .. 4s + 3
 *                          (Q8_0: qs; Q5_0: q - 16)
 *     corr  [16]     i32   128 * the sum of the row's values (the activations carry + 128)
 *     d     [16]     f32   the row's fp16 block scale
 * and (sum - corr) * d_w * d_x is vec_dot_ref's block term, in its order.
 *
 * So every output is bit-identical to the scalar reference, vec_dot_ref of that weight
 * row and token (tests/test_host_quants.c), and a prefill chunk computes what a decode
 * step computes. Tokens go 8 at a time. */
#include <immintrin.h>
#include <string.h>

#include "hcommon.h"
#include "quants.h"
#include "tr16_avx512.h"

#define MMK_ROWS 16 /* weight rows per panel: one zmm */
#define MMK_NT 8    /* tokens per register block */

typedef struct sjkh_mmk_blk {
    uint32_t q[64][MMK_ROWS];
    float scale[16][MMK_ROWS];
    uint32_t pair[8][MMK_ROWS];
    float d[MMK_ROWS], dmin[MMK_ROWS];
} sjkh_mmk_blk;
typedef struct sjkh_mml_blk {
    uint32_t q[8][MMK_ROWS];
    int32_t corr[MMK_ROWS];
    float d[MMK_ROWS];
} sjkh_mml_blk;
/* quants.h sjkh_mm_many_scratch_nbytes: SJKH_MM_MANY_NBYTES_PER_32 per 32 inputs */
_Static_assert(sizeof(sjkh_mmk_blk) == 8 * SJKH_MM_MANY_NBYTES_PER_32, "K-quant panel block in the scratch");
_Static_assert(sizeof(sjkh_mml_blk) <= SJKH_MM_MANY_NBYTES_PER_32, "legacy panel block in the scratch");
_Static_assert(sizeof(sjkh_mmk_blk) % 64 == 0 && sizeof(sjkh_mml_blk) % 64 == 0, "panel blocks stay 64-byte aligned");

/* Offsets inside a Q8_K block (quants.h blk_q8_K: float d, int8 qs[256], int16 bsums[16]) */
#define Q8K_QS 4
#define Q8K_BSUMS 260

static inline int32_t ld32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline float ldf(const uint8_t *p)
{
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The unsigned values of super-block b of a Q4_K row, in input order: e[256]. */
static void unpack_q4_K(const blk_q4_K *blk, uint8_t *e)
{
    const __m256i lo = _mm256_set1_epi8(0x0F);
    for (int j = 0; j < 4; j++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(blk->qs + 32 * j));
        _mm256_storeu_si256((__m256i *)(e + 64 * j), _mm256_and_si256(v, lo));
        _mm256_storeu_si256((__m256i *)(e + 64 * j + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), lo));
    }
}

/* The same for Q6_K: q + 32 (0..63), as quants.c vec_dot_q6_K_ref assembles them. */
static void unpack_q6_K(const blk_q6_K *blk, uint8_t *e)
{
    const __m256i lo = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h));
        __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h + 32));
        __m256i qh = _mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h));
        __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, three), 4);
        __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), three), 4);
        __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), three), 4);
        __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), three), 4);
        uint8_t *o = e + 128 * h;
        _mm256_storeu_si256((__m256i *)(o + 0), _mm256_or_si256(_mm256_and_si256(l0, lo), h0));
        _mm256_storeu_si256((__m256i *)(o + 32), _mm256_or_si256(_mm256_and_si256(l1, lo), h1));
        _mm256_storeu_si256((__m256i *)(o + 64), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), lo), h2));
        _mm256_storeu_si256((__m256i *)(o + 96), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), lo), h3));
    }
}

/* rows e[16][256] -> p->q[64][16] (four 16 x 16 dword transposes) */
static void pack_q(const uint8_t (*e)[QK_K], sjkh_mmk_blk *p)
{
    for (int c = 0; c < 4; c++) {
        __m512 r[16];
        for (int j = 0; j < 16; j++) r[j] = _mm512_castsi512_ps(_mm512_loadu_si512(e[j] + 64 * c));
        sjkh_tr16(r);
        for (int i = 0; i < 16; i++) _mm512_store_si512(p->q[16 * c + i], _mm512_castps_si512(r[i]));
    }
}

/* Packs rows [0, nr) (nr <= 16; the rest zero) of K-quant type `type` into nb panel blocks. */
static void pack_panel(uint32_t type, const uint8_t *w, size_t ws, size_t nr, size_t nb, sjkh_mmk_blk *pan)
{
    uint8_t e[MMK_ROWS][QK_K];
    for (size_t b = 0; b < nb; b++) {
        sjkh_mmk_blk *p = pan + b;
        memset(p->scale, 0, sizeof p->scale);
        for (size_t r = 0; r < MMK_ROWS; r++) {
            if (r >= nr) {
                memset(e[r], 0, QK_K);
                for (int k = 0; k < 8; k++) p->pair[k][r] = 0;
                p->d[r] = p->dmin[r] = 0.0f;
                continue;
            }
            if (type == SJKH_TYPE_Q4_K) {
                const blk_q4_K *blk = (const blk_q4_K *)(w + r * ws) + b;
                unpack_q4_K(blk, e[r]);
                for (int j = 0; j < 8; j++) {
                    uint8_t sc, mn;
                    sjkh_k_scale_min(j, blk->scales, &sc, &mn);
                    p->scale[j][r] = (float)sc;
                    p->pair[j][r] = (uint32_t)mn | (uint32_t)mn << 16;
                }
                p->d[r] = sjkh_f16_to_f32(blk->d);
                p->dmin[r] = sjkh_f16_to_f32(blk->dmin);
            } else {
                const blk_q6_K *blk = (const blk_q6_K *)(w + r * ws) + b;
                unpack_q6_K(blk, e[r]);
                for (int i = 0; i < 16; i++) p->scale[i][r] = (float)blk->scales[i];
                for (int k = 0; k < 8; k++)
                    p->pair[k][r] = (uint32_t)(uint16_t)blk->scales[2 * k] | (uint32_t)(uint16_t)blk->scales[2 * k + 1] << 16;
                p->d[r] = sjkh_f16_to_f32(blk->d);
                p->dmin[r] = 0.0f;
            }
        }
        pack_q((const uint8_t(*)[QK_K])e, p);
    }
}

/* T tokens (a constant after inlining) against one packed panel: y[t*ys + r] for the rows
 * of mask m. SUB: inputs per sub-block (32 for Q4_K, 16 for Q6_K). */
static inline __attribute__((always_inline)) void panel_tokens(const sjkh_mmk_blk *pan, size_t nb, const uint8_t *x,
                                                               size_t xs, int T, int q6, float *y, size_t ys,
                                                               __mmask16 m)
{
    const int n_sub = q6 ? 16 : 8, steps = 64 / n_sub;
    const uint8_t *xt[MMK_NT];
    __m512 acc[MMK_NT], fs[MMK_NT];
    __m512i ia[MMK_NT];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        xt[t] = x + (size_t)t * xs;
        acc[t] = _mm512_setzero_ps();
    }
    for (size_t b = 0; b < nb; b++) {
        const sjkh_mmk_blk *p = pan + b;
        const size_t xo = b * sizeof(blk_q8_K);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) fs[t] = _mm512_setzero_ps();
        for (int j = 0; j < n_sub; j++) {
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) ia[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int k = 0; k < steps; k++) {
                const __m512i w = _mm512_load_si512(p->q[j * steps + k]);
                const size_t o = xo + Q8K_QS + (size_t)(j * steps + k) * 4;
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) ia[t] = _mm512_dpbusd_epi32(ia[t], w, _mm512_set1_epi32(ld32(xt[t] + o)));
            }
            const __m512 sc = _mm512_load_ps(p->scale[j]);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) fs[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[t]), sc, fs[t]);
        }
        /* Q4_K: summ = sum_j m_j (bsums[2j] + bsums[2j + 1]); Q6_K: sum_i scales[i] bsums[i] */
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) ia[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const __m512i pv = _mm512_load_si512(p->pair[k]);
            const size_t o = xo + Q8K_BSUMS + (size_t)k * 4;
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) ia[t] = _mm512_dpwssd_epi32(ia[t], pv, _mm512_set1_epi32(ld32(xt[t] + o)));
        }
        const __m512 dw = _mm512_load_ps(p->d), dm = _mm512_load_ps(p->dmin);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const __m512 dx = _mm512_set1_ps(ldf(xt[t] + xo));
            __m512 term;
            if (q6) { /* d_x d_w (sum - 32 sum_i scales[i] bsums[i]) */
                __m512 sumi = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ia[t]), _mm512_set1_ps(32.0f), fs[t]);
                term = _mm512_mul_ps(_mm512_mul_ps(dx, dw), sumi);
            } else { /* d_x d_w sumi - d_x dmin_w summ */
                term = _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(dx, dw), fs[t]),
                                     _mm512_mul_ps(_mm512_mul_ps(dx, dm), _mm512_cvtepi32_ps(ia[t])));
            }
            acc[t] = _mm512_add_ps(acc[t], term);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + (size_t)t * ys, m, acc[t]);
}

/* ---- Q8_0 and Q5_0 ------------------------------------------------------------------ */

/* The signed values of block b of a Q8_0 or Q5_0 row, in input order: e[32]. */
static void unpack_legacy(uint32_t type, const uint8_t *blk, int8_t *e)
{
    if (type == SJKH_TYPE_Q8_0) {
        memcpy(e, ((const blk_q8_0 *)(const void *)blk)->qs, QK);
        return;
    }
    const blk_q5_0 *b5 = (const blk_q5_0 *)(const void *)blk;
    uint32_t qh;
    memcpy(&qh, b5->qh, sizeof qh);
    __m128i qs = _mm_loadu_si128((const __m128i *)b5->qs), lo = _mm_set1_epi8(0x0F);
    __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), lo), _mm_and_si128(qs, lo));
    __m256i hi = _mm256_and_si256(_mm256_movm_epi8(qh), _mm256_set1_epi8(0x10));
    _mm256_storeu_si256((__m256i *)e, _mm256_sub_epi8(_mm256_or_si256(nib, hi), _mm256_set1_epi8(16)));
}

/* Packs rows [0, nr) (the rest zero) of a Q8_0 or Q5_0 matrix into nb panel blocks: two
 * blocks per 16 x 16 dword transpose. */
static void pack_panel_legacy(uint32_t type, const uint8_t *w, size_t ws, size_t nr, size_t nb, sjkh_mml_blk *pan)
{
    const size_t bb = type == SJKH_TYPE_Q8_0 ? sizeof(blk_q8_0) : sizeof(blk_q5_0);
    int8_t e[MMK_ROWS][2 * QK];
    for (size_t b = 0; b < nb; b += 2) {
        const size_t nbb = nb - b < 2 ? 1 : 2;
        for (size_t h = 0; h < 2; h++)
            for (size_t r = 0; r < MMK_ROWS; r++) {
                sjkh_mml_blk *p = pan + b + h;
                if (h >= nbb || r >= nr) {
                    memset(e[r] + h * QK, 0, QK);
                    if (h < nbb) p->corr[r] = 0, p->d[r] = 0.0f;
                    continue;
                }
                const uint8_t *blk = w + r * ws + (b + h) * bb;
                unpack_legacy(type, blk, e[r] + h * QK);
                int32_t sum = 0;
                for (int i = 0; i < QK; i++) sum += e[r][h * QK + (size_t)i];
                p->corr[r] = 128 * sum;
                p->d[r] = sjkh_f16_to_f32(sjkh_rd_u16(blk));
            }
        __m512 v[16];
        for (int j = 0; j < 16; j++) v[j] = _mm512_castsi512_ps(_mm512_loadu_si512(e[j]));
        sjkh_tr16(v);
        for (size_t h = 0; h < nbb; h++)
            for (int k = 0; k < 8; k++) _mm512_store_si512(pan[b + h].q[k], _mm512_castps_si512(v[8 * h + (size_t)k]));
    }
}

/* T tokens against one packed legacy panel; x: prepared rows (n values + 128, then n / 32
 * f32 scales). */
static inline __attribute__((always_inline)) void panel_tokens_legacy(const sjkh_mml_blk *pan, size_t nb,
                                                                      const uint8_t *x, size_t xs, int T, float *y,
                                                                      size_t ys, __mmask16 m)
{
    const uint8_t *xt[MMK_NT];
    __m512 acc[MMK_NT];
    __m512i ia[MMK_NT];
    const size_t n = nb * QK;
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        xt[t] = x + (size_t)t * xs;
        acc[t] = _mm512_setzero_ps();
    }
    for (size_t b = 0; b < nb; b++) {
        const sjkh_mml_blk *p = pan + b;
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) ia[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const __m512i w = _mm512_load_si512(p->q[k]);
            const size_t o = b * QK + (size_t)k * 4;
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) ia[t] = _mm512_dpbusd_epi32(ia[t], _mm512_set1_epi32(ld32(xt[t] + o)), w);
        }
        const __m512i corr = _mm512_load_si512(p->corr);
        const __m512 dw = _mm512_load_ps(p->d);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const __m512 dx = _mm512_set1_ps(ldf(xt[t] + n + b * sizeof(float)));
            __m512 sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(ia[t], corr));
            acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_mul_ps(sum, dw), dx));
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + (size_t)t * ys, m, acc[t]);
}

/* ---- the entry points ---------------------------------------------------------------- */

/* Every 16-row panel of rows [0, nr): pack it once into the scratch, then every token (8
 * at a time, the tail one by one). */
static void mm_many(uint32_t type, size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt,
                    float *y, size_t ys, void *scratch)
{
    const int legacy = type == SJKH_TYPE_Q8_0 || type == SJKH_TYPE_Q5_0, q6 = type == SJKH_TYPE_Q6_K;
    const size_t nb = n / (legacy ? QK : QK_K);
    void *pan = (void *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    const uint8_t *xb = x;
    for (size_t r0 = 0; r0 < nr; r0 += MMK_ROWS) {
        size_t rows = nr - r0 < MMK_ROWS ? nr - r0 : MMK_ROWS;
        if (legacy) pack_panel_legacy(type, (const uint8_t *)w + r0 * ws, ws, rows, nb, pan);
        else pack_panel(type, (const uint8_t *)w + r0 * ws, ws, rows, nb, pan);
        __mmask16 m = (__mmask16)(rows >= 16 ? 0xFFFF : (1u << rows) - 1);
        for (size_t t = 0; t < nt;) {
            const int T = nt - t >= MMK_NT ? MMK_NT : 1;
            float *yt = y + t * ys + r0;
            if (legacy && T == MMK_NT) panel_tokens_legacy(pan, nb, xb + t * xs, xs, MMK_NT, yt, ys, m);
            else if (legacy) panel_tokens_legacy(pan, nb, xb + t * xs, xs, 1, yt, ys, m);
            else if (T == MMK_NT && q6) panel_tokens(pan, nb, xb + t * xs, xs, MMK_NT, 1, yt, ys, m);
            else if (T == MMK_NT) panel_tokens(pan, nb, xb + t * xs, xs, MMK_NT, 0, yt, ys, m);
            else if (q6) panel_tokens(pan, nb, xb + t * xs, xs, 1, 1, yt, ys, m);
            else panel_tokens(pan, nb, xb + t * xs, xs, 1, 0, yt, ys, m);
            t += (size_t)T;
        }
    }
}

#define MM_MANY_ENTRY(sfx, type)                                                                                  \
    void sjkh_mm_##sfx##_avx512(size_t n, const void *w, size_t ws, size_t nr, const void *x, size_t xs, size_t nt, \
                                float *y, size_t ys, void *scratch)                                               \
    {                                                                                                             \
        mm_many(type, n, w, ws, nr, x, xs, nt, y, ys, scratch);                                                   \
    }
MM_MANY_ENTRY(q4_K, SJKH_TYPE_Q4_K)
MM_MANY_ENTRY(q6_K, SJKH_TYPE_Q6_K)
MM_MANY_ENTRY(q8_0, SJKH_TYPE_Q8_0)
MM_MANY_ENTRY(q5_0, SJKH_TYPE_Q5_0)
