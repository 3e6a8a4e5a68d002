/* attn_avx2.c — the AVX2/FMA/F16C attention kernels (attn_kernels.h): the kernels both
 * instruction sets share, from attn_x86.h at 8 lanes, token-axis trellis records read in
 * place (records on the 128-entry tables with integer sums where that pays), ggml block
 * rows (q8_0, q4_0) read in place with integer key scores, the tq6_0 ring read in place
 * by int16 dot products (all below), and the payload unpacking (which attn_avx512.c
 * reuses), and 4-bit record keys by int16 dot products. The ring's fp32 reader and the
 * int16 trellis reader are NULL here (the ring goes to chunk_tq6_q16; trellis records to
 * chunk_trellis_q8 or chunk_rec). Tested against attn_ref.c (tests/test_attention.c).
 */
#include "codec/trellis.h" /* before attn_x86.h, whose short macros (G, W) it would see */

#define SJK_ATTN_W 8
#include "attention/attn_x86.h"

/* ---- int16 forms of fp32 rows ---------------------------------------------------------
 * y[i] = clamp(rne(x[i] / s), ±lim), s = max|x| / lim, 8 lanes at a time (n a multiple of
 * 8), to the values of the references (attn_ref.c; vroundps is nearbyintf's round to
 * nearest even, the same IEEE operations per value): lim 32767 and sum_max 0 is
 * sjk_attn_q16_prep; lim 32767 with sum_max, sjk_attn_q16_prep_l1 (s raised to
 * Σ|x| / (sum_max − sum_max / 64) when that is larger; the sum here in another order);
 * lim 16256, the integers y = 128 hi + lo of sjk_attn_q8_pieces. A row with an infinity
 * or a NaN: s NaN, y = 0. */
static void int16_prep_avx2(int16_t *y16, float *scale, const float *x, size_t n, float lim, uint32_t sum_max)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)), inf = _mm256_set1_ps(INFINITY);
    __m256 mx = _mm256_setzero_ps(), sa = mx, bad = mx;
    for (size_t i = 0; i < n; i += 8) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), absm);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ)); /* an infinity or a NaN */
        mx = _mm256_max_ps(mx, a);
        sa = _mm256_add_ps(sa, a);
    }
    const int finite = _mm256_movemask_ps(bad) == 0;
    float s = finite ? vhmax(mx) / lim : NAN;
    if (sum_max) {
        const float sl = vhsum(sa) / (float)(sum_max - sum_max / 64);
        if (finite && sl > s) s = sl;
    }
    *scale = s;
    if (!finite) { /* (x · 0 would be NaN for an infinite x) */
        memset(y16, 0, n * sizeof *y16);
        return;
    }
    const float inv = s > 0 ? 1.0f / s : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv), hi = _mm256_set1_ps(lim), lo = _mm256_set1_ps(-lim);
    for (size_t i = 0; i < n; i += 8) {
        __m256 y = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        y = _mm256_max_ps(_mm256_min_ps(y, hi), lo);
        const __m256i v = _mm256_cvtps_epi32(y);
        _mm_storeu_si128((__m128i *)(void *)(y16 + i), _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
    }
}

/* *a0 += w0 · (y[0], y[1]) and *a1 += w1 · (y[0], y[1]): per int32 lane the two int16
 * products of a word pair against the pair y broadcast (vpmaddwd), exact. */
static ALWAYS_INLINE void madd_pair2(__m256i *a0, __m256i *a1, __m256i w0, __m256i w1, const int16_t *y)
{
    int32_t v;
    memcpy(&v, y, 4);
    const __m256i b = _mm256_set1_epi32(v);
    *a0 = _mm256_add_epi32(*a0, _mm256_madd_epi16(w0, b));
    *a1 = _mm256_add_epi32(*a1, _mm256_madd_epi16(w1, b));
}

/* ---- 4-bit records, keys by integer dot products: chunk_rec_q16 ----------------------
 * The contract of attn_kernels.h (reference: attn_ref.c's rec_ref with q16): per row the
 * folded query becomes int16 (int16_prep_avx2 as sjk_attn_q16_prep) and the scores
 *   s[t] = Ktok[t] · (scale · (float)Σ_d q16[d] · code[d][t] + cz)
 * with the sum exact in int32 (|Σ| <= 512 · 32767 · 15 < 2^28). Per 16 tokens of a unit
 * (its low nibbles, then its high ones) and two channels c, c+1: the two rows' 16 bytes
 * interleaved (one unpack each way), widened to words (tokens 0..7 and 8..15, each word
 * pair channel c then c+1 of one token) and masked or shifted to the nibble; per row one
 * vpmaddwd against the pair (q16[c], q16[c+1]) broadcast and one add into each of the
 * two accumulators. That is 6 operations shared per 32 values where the fp32 reader
 * spends 12 (vld2_nib, twice), and the same 4 per row. Values as chunk_rec (fp32). */
static ALWAYS_INLINE void rec_scores_q16(float *p, int16_t *q16, const float *qs, const float *cz, const sjk_attn_rec *rc,
                                         size_t D, size_t ntm, size_t rb, size_t pfn, const size_t NR)
{
    float q16s[RBX];
    for (size_t r = 0; r < NR; r++) {
        if (r < rb) int16_prep_avx2(q16 + r * D, &q16s[r], qs + r * D, D, 32767.0f, 0);
        else memset(q16 + r * D, 0, D * sizeof(int16_t)), q16s[r] = 0.0f;
    }
    const __m256i m4 = _mm256_set1_epi16(0x0F);
    const size_t ntm16 = (ntm + 15) & ~(size_t)15;
    for (size_t t0 = 0; t0 < ntm16; t0 += 16) {
        __m256i A[RBX], B[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) A[r] = B[r] = _mm256_setzero_si256();
        const size_t pfo = (t0 / 32) * D * 64, ub = (t0 / 32) * 16;
        const int high = t0 % 32 != 0;
        for (size_t c = 0; c < D; c += 2) {
            const uint8_t *u = rc->kp + c * (G / 2) + ub;
            if (!high && pfo + c * 64 < pfn) {
                _mm_prefetch((const char *)rc->pf + pfo + c * 64, _MM_HINT_T1);
                _mm_prefetch((const char *)rc->pf + pfo + c * 64 + 64, _MM_HINT_T1);
            }
            const __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)u);
            const __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(u + G / 2));
            __m256i w0 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x0, x1)); /* tokens 0..7: (c, c+1) */
            __m256i w1 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(x0, x1)); /* tokens 8..15 */
            if (high) {
                w0 = _mm256_srli_epi16(w0, 4);
                w1 = _mm256_srli_epi16(w1, 4);
            } else {
                w0 = _mm256_and_si256(w0, m4);
                w1 = _mm256_and_si256(w1, m4);
            }
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) madd_pair2(&A[r], &B[r], w0, w1, q16 + r * D + c);
        }
        const __m256 kt0 = _mm256_loadu_ps(rc->ktok + t0), kt1 = _mm256_loadu_ps(rc->ktok + t0 + 8);
        for (size_t r = 0; r < NR; r++) {
            const __m256 sc = _mm256_set1_ps(q16s[r]), cc = _mm256_set1_ps(cz[r]);
            _mm256_storeu_ps(p + r * G + t0, _mm256_mul_ps(kt0, _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(A[r]), cc)));
            _mm256_storeu_ps(p + r * G + t0 + 8, _mm256_mul_ps(kt1, _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(B[r]), cc)));
        }
    }
}

/* Rows as chunk_rec_scalar (ROWS_NR). */
static void chunk_rec_q16_avx2(const float *q, size_t R, size_t D, const uint32_t *nvis, const sjk_attn_rec *rc,
                               float *m, float *l, float *acc, float *work)
{
    if (R <= 3 || R == 5 || R == 6) ROWS_NR(R, chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, NR_, 1, 0));
    else chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, RB, 1, 0);
}

/* ---- ggml block rows (q8_0, q4_0) read in place: chunk_qblk --------------------------
 * Without VNNI and with 16 registers, the keys are scored by vpmaddwd (16 int16 products
 * summed in pairs into 8 int32 lanes) against the query rows as int16 words
 * 128 hi + lo (attn_kernels.h, sjk_attn_qint) in channel order, made once per block of
 * rows (qblk_words; the w16 order of sjk_attn_qint is laid out for AVX-512's lanes):
 *
 *   per block b of a key (32 codes): two vpmovsxbw (q8_0; q4_0: two nibble masks, two
 *   vpmovzxbw and the -8 as one vpsubw each) widen the codes to two ymm of words, shared
 *   by the NR rows; per row two vpmaddwd with the row's words (memory operands), one
 *   vpaddd, one conversion (exact: each lane sums 4 products, below 2^24) and one fp32
 *   multiply-add by the block's scale d_b into the row's 8 fp32 partials; one horizontal
 *   sum per row and key.
 *
 * Values, per 16 channels of a block and key: the codes sign-extended and converted
 * (q8_0; q4_0: the nibble converted, then one multiply-add makes (nib - 8) d), times the
 * block's scale, shared by the NR rows; one broadcast and two FMAs per row, keys in
 * blocks of TB so that the block's values stay in L1 across the channel passes.
 *
 * Rows go NR = 3, 4 or 6 at a time (qblk_nr: the 3 GQA rows of a SmolLM2 head and the 6
 * of a Qwen2.5 head in one block, so that neither pays for zero rows nor decodes a
 * chunk twice). Per 32 codes and row that is 5 operations for the key and 4 for the
 * value against 4 + 4 FMAs for fp16 rows, with 34 bytes read instead of 64. The blocks'
 * fp16 scales are converted once per call, 8 at a time by one gather. */
static void qblk_scales_avx2(float *dst, const uint8_t *base, size_t nblk, size_t bn)
{
    const __m256i step = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)bn));
    /* the low two bytes of each dword, packed into the low 8 bytes of each 128-bit lane */
    const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9, 12,
                                          13, -1, -1, -1, -1, -1, -1, -1, -1);
    size_t i = 0;
    for (; i + 8 <= nblk; i += 8) {
        const __m256i w = _mm256_i32gather_epi32((const int *)(const void *)(base + i * bn), step, 1);
        const __m256i h = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(w, pick), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_castsi256_si128(h)));
    }
    for (; i < nblk; i++) {
        uint16_t u;
        memcpy(&u, base + i * bn, 2);
        dst[i] = _cvtsh_ss(u);
    }
}

#define QNR 6 /* most rows per block (qblk_nr) */

/* Rows per block for R rows: 3 for 3 (or 1..3), 6 for 5 or 6, else 4. */
static inline size_t qblk_nr(size_t R) { return R <= 3 ? 3 : R == 5 || R == 6 ? 6 : 4; }

/* Sum of each of four vectors, as the four lanes of the result. */
static inline __m128 hsum4x8(__m256 a, __m256 b, __m256 c, __m256 d)
{
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* Scores p[r][t] of keys [0, ntm) of K for the NR rows whose words are q16c (qblk_words;
 * zero rows past the block's last) and scales sc[r]. V, vrow: the
 * chunk's V rows to prefetch into L1, a key's worth per key; pf, pfn: the next chunk's K
 * rows into L2 (NULL / 0: none). */
static ALWAYS_INLINE void qblk_scores_avx2(float *p, const uint8_t *K, size_t ntm, size_t D, const float *dkf,
                                           const int16_t *q16c, const float sc[QNR + 2], const unsigned kbits,
                                           const size_t NR, const uint8_t *V, size_t vrow, const uint8_t *pf,
                                           size_t pfn)
{
    const size_t nb = D / 32, bn = kbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES, krow = nb * bn;
    const __m128 sc0 = _mm_loadu_ps(sc), sc1 = _mm_loadu_ps(sc + 4);
    const __m256i m4w = _mm256_set1_epi16(0x0F), eight = _mm256_set1_epi16(8);
    for (size_t t = 0; t < ntm; t++) {
        const uint8_t *row = K + t * krow;
        if (V)
            for (size_t o = (t * vrow) & ~(size_t)63; o < (t + 1) * vrow; o += 64) _mm_prefetch((const char *)V + o, _MM_HINT_T0);
        for (size_t o = (t * krow) & ~(size_t)63; o < (t + 1) * krow && o < pfn; o += 64)
            _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
        __m256 F[QNR];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) F[r] = _mm256_setzero_ps();
        const float *dk = dkf + t * nb;
        _Pragma("GCC unroll 2") /* nb is even (D % 64 == 0) */
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *c = row + b * bn + 2;
            __m256i w0, w1;
            if (kbits == 8) {
                w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)c));
                w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(c + 16)));
            } else { /* q4_0: channels 0..15 the low nibbles, 16..31 the high ones, minus 8
                      * (the bytes widened to words first: the high nibble is a shift) */
                const __m256i x = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)c));
                w0 = _mm256_sub_epi16(_mm256_and_si256(x, m4w), eight);
                w1 = _mm256_sub_epi16(_mm256_srli_epi16(x, 4), eight);
            }
            const __m256 d = _mm256_broadcast_ss(dk + b);
            const int16_t *qw = q16c + 32 * NR * b; /* rows at constant offsets */
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                const __m256i a0 = _mm256_madd_epi16(w0, _mm256_loadu_si256((const __m256i *)(const void *)(qw + 32 * r)));
                const __m256i a1 = _mm256_madd_epi16(w1, _mm256_loadu_si256((const __m256i *)(const void *)(qw + 32 * r + 16)));
                F[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(a0, a1)), d, F[r]);
            }
        }
        float sv[8];
        const __m256 z = _mm256_setzero_ps();
        if (NR == 3) {
            _mm_storeu_ps(sv, _mm_mul_ps(hsum4x8(F[0], F[1], F[2], z), sc0));
        } else {
            _mm_storeu_ps(sv, _mm_mul_ps(hsum4x8(F[0], F[1], F[2], F[3]), sc0));
            if (NR == 6) _mm_storeu_ps(sv + 4, _mm_mul_ps(hsum4x8(F[4 % NR], F[5 % NR], z, z), sc1));
        }
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) p[r * G + t] = sv[r];
    }
}

/* The V blocks' fp16 scales of keys [0, n) into dvT [D/32][G], block-major (the value
 * loop takes a block's scales for consecutive keys), zero from n up to a multiple of 8. */
static void qblk_vscales_avx2(float *dvT, const uint8_t *V, size_t n, size_t nb, size_t bn)
{
    const __m256i step = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)(nb * bn)));
    const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9, 12,
                                          13, -1, -1, -1, -1, -1, -1, -1, -1);
    for (size_t b = 0; b < nb; b++) {
        float *dst = dvT + b * G;
        size_t t = 0;
        for (; t + 8 <= n; t += 8) {
            const __m256i w = _mm256_i32gather_epi32((const int *)(const void *)(V + (t * nb + b) * bn), step, 1);
            const __m256i h = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(w, pick), _MM_SHUFFLE(3, 1, 2, 0));
            _mm256_storeu_ps(dst + t, _mm256_cvtph_ps(_mm256_castsi256_si128(h)));
        }
        for (; t < n; t++) {
            uint16_t u;
            memcpy(&u, V + (t * nb + b) * bn, 2);
            dst[t] = _cvtsh_ss(u);
        }
        for (; t % 8; t++) dst[t] = 0.0f;
    }
}

/* acc[r][d] = acc[r][d] * fct[r] + Σ_t p[r][t] · V[t][d] for the rb live rows of a block
 * of NR (rows past rb: p = 0, not stored), V in q8_0 (vbits 8) or q4_0 block rows, dvT
 * the blocks' scales (qblk_vscales_avx2). Per block of TB keys and block b of channels
 * the weights w[r][t] = p[r][t] · d[t][b] are made first (8 keys a vector), so the loop
 * over keys converts the codes and does one broadcast and two FMAs per row and 16
 * channels; q4_0's -8 becomes one subtraction of 8 Σ_t w[r][t] per block and row. */
static ALWAYS_INLINE void qblk_values_avx2(float *acc, size_t D, const uint32_t *nvis, size_t rb, const size_t NR,
                                           const float *p, const float *fct, size_t ntm, const uint8_t *V,
                                           const float *dvT, const unsigned vbits)
{
    const size_t nb = D / 32, bn = vbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES, vrow = nb * bn;
    const __m256i m4 = _mm256_set1_epi32(0x0F);
    float w[QNR][TB] __attribute__((aligned(32)));
    for (size_t r = 0; r < rb; r++) {
        if (!nvis[r]) continue;
        float *a = acc + r * D;
        const __m256 f = _mm256_set1_ps(fct[r]);
        for (size_t d = 0; d < D; d += 8) _mm256_storeu_ps(a + d, _mm256_mul_ps(_mm256_loadu_ps(a + d), f));
    }
    for (size_t tb = 0; tb < ntm; tb += TB) {
        const size_t te = tb + TB < ntm ? tb + TB : ntm, nt8 = (te - tb + 7) & ~(size_t)7;
        for (size_t b = 0; b < nb; b++) {
            /* weights of the block's keys (p is 0 past each row's nvis, dvT 0 past the
             * chunk's keys up to a multiple of 8, so the vectors past te add nothing) */
            float wsum[QNR];
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                __m256 z = _mm256_setzero_ps();
                for (size_t i = 0; i < nt8; i += 8) {
                    const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(p + r * G + tb + i), _mm256_loadu_ps(dvT + b * G + tb + i));
                    _mm256_store_ps(w[r] + i, x);
                    z = _mm256_add_ps(z, x);
                }
                wsum[r] = vbits == 4 ? vhsum(z) : 0.0f;
            }
            _Pragma("GCC unroll 2") /* h constant in each copy: no branch in the key loop */
            for (size_t h = 0; h < 32; h += 16) {
                __m256 a0[QNR], a1[QNR];
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < NR; r++) a0[r] = a1[r] = _mm256_setzero_ps();
                const uint8_t *c = V + tb * vrow + b * bn + 2 + (vbits == 8 ? h : 0);
                _Pragma("GCC unroll 2")
                for (size_t i = 0; i < te - tb; i++, c += vrow) {
                    __m256 v0, v1;
                    if (vbits == 8) {
                        v0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)c)));
                        v1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(c + 8))));
                    } else { /* channels h..h+15: the low (h = 0) or high nibbles of qs[0..15] */
                        __m256i x0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)c));
                        __m256i x1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(c + 8)));
                        if (h) { /* bytes widened to dwords: the high nibble is a shift */
                            x0 = _mm256_srli_epi32(x0, 4);
                            x1 = _mm256_srli_epi32(x1, 4);
                        } else {
                            x0 = _mm256_and_si256(x0, m4);
                            x1 = _mm256_and_si256(x1, m4);
                        }
                        v0 = _mm256_cvtepi32_ps(x0);
                        v1 = _mm256_cvtepi32_ps(x1);
                    }
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < NR; r++) {
                        const __m256 pw = _mm256_broadcast_ss(w[r] + i);
                        a0[r] = _mm256_fmadd_ps(pw, v0, a0[r]);
                        a1[r] = _mm256_fmadd_ps(pw, v1, a1[r]);
                    }
                }
                _Pragma("GCC unroll 8") /* constant indices: the sums stay in registers */
                for (size_t r = 0; r < NR; r++) {
                    if (r >= rb || !nvis[r]) continue;
                    float *a = acc + r * D + 32 * b + h;
                    const __m256 z8 = _mm256_set1_ps(8.0f * wsum[r]); /* q4_0: the -8 of every code */
                    _mm256_storeu_ps(a, _mm256_add_ps(_mm256_loadu_ps(a), vbits == 4 ? _mm256_sub_ps(a0[r], z8) : a0[r]));
                    _mm256_storeu_ps(a + 8, _mm256_add_ps(_mm256_loadu_ps(a + 8), vbits == 4 ? _mm256_sub_ps(a1[r], z8) : a1[r]));
                }
            }
        }
    }
}

/* The int16 words 128 hi + lo of rows hi/lo [rb][D] into q16c [D/32][NR][32] (block b
 * of row r at 32 (NR b + r): the rows of a block at constant offsets; rows rb..NR-1
 * zero). */
static void qblk_words(int16_t *q16c, const int8_t *hi, const int8_t *lo, size_t rb, size_t NR, size_t D)
{
    for (size_t r = 0; r < NR; r++)
        for (size_t d = 0; d < D; d += 16) {
            __m256i w = _mm256_setzero_si256();
            if (r < rb) {
                const __m256i h = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(hi + r * D + d)));
                const __m256i l = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(lo + r * D + d)));
                w = _mm256_add_epi16(_mm256_slli_epi16(h, 7), l);
            }
            _mm256_storeu_si256((__m256i *)(void *)(q16c + 32 * (NR * (d / 32) + r) + d % 32), w);
        }
}

static ALWAYS_INLINE void chunk_qblk_avx2_nr(const sjk_attn_qint *qi, size_t R, size_t D, const uint32_t *nvis,
                                             unsigned kbits, unsigned vbits, const uint8_t *K, const uint8_t *V,
                                             float *m, float *l, float *acc, float *work, const uint8_t *pf,
                                             size_t pf_nbytes, const size_t NR)
{
    const size_t nb = D / 32, vrow = nb * (vbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES);
    float *p = work;                 /* [RBX][G] scores, then probabilities */
    float *dkf = p + RBX * G;        /* [G * nb + 16] K block scales */
    float *dvf = dkf + G * nb + 16;  /* [nb][G] V block scales, block-major */
    int16_t *q16c = (int16_t *)(void *)(dvf + G * nb + 16); /* [D/32][NR][32] a block's query words */
    size_t nall = 0;
    for (size_t r = 0; r < R; r++) nall = nvis[r] > nall ? nvis[r] : nall;
    if (!nall) return;
    qblk_scales_avx2(dkf, K, nall * nb, kbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES);
    int dv_ready = 0;
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, r0, NR, &ntm);
        if (!ntm) continue;
        float sc[QNR + 2] = {0};
        for (size_t r = 0; r < rb; r++) sc[r] = qi->scale[r0 + r];
        qblk_words(q16c, qi->hi + r0 * D, qi->lo + r0 * D, rb, NR, D);
        /* prefetches on the first block of rows only (later blocks find the lines) */
        const uint8_t *pv = r0 == 0 ? V : NULL, *pk = r0 == 0 ? pf : NULL;
        const size_t pkn = r0 == 0 ? pf_nbytes : 0;
        if (kbits == 8) qblk_scores_avx2(p, K, ntm, D, dkf, q16c, sc, 8, NR, pv, vrow, pk, pkn);
        else qblk_scores_avx2(p, K, ntm, D, dkf, q16c, sc, 4, NR, pv, vrow, pk, pkn);
        if (!dv_ready) { /* after the first scores, which brought the V rows into L1 */
            qblk_vscales_avx2(dvf, V, nall, nb, vbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES);
            dv_ready = 1;
        }
        float fct[RBX];
        softmax_block(p, fct, nvis + r0, rb, NR, m + r0, l + r0);
        if (vbits == 8) qblk_values_avx2(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, ntm, V, dvf, 8);
        else qblk_values_avx2(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, ntm, V, dvf, 4);
    }
}

static void chunk_qblk_avx2(const sjk_attn_qint *qi, size_t R, size_t D, const uint32_t *nvis, unsigned kbits,
                            unsigned vbits, const uint8_t *K, const uint8_t *V, size_t n, float *m, float *l, float *acc,
                            float *work, const uint8_t *pf, size_t pf_nbytes)
{
    (void)n;
    const size_t nr = qblk_nr(R);
    if (nr == 3) chunk_qblk_avx2_nr(qi, R, D, nvis, kbits, vbits, K, V, m, l, acc, work, pf, pf_nbytes, 3);
    else if (nr == 6) chunk_qblk_avx2_nr(qi, R, D, nvis, kbits, vbits, K, V, m, l, acc, work, pf, pf_nbytes, 6);
    else chunk_qblk_avx2_nr(qi, R, D, nvis, kbits, vbits, K, V, m, l, acc, work, pf, pf_nbytes, 4);
}

/* ---- tq6_0 ring rows by integer dot products: chunk_tq6_q16 ---------------------------
 * The staging ring's rows (tq6_0_stage: per 128 values an fp16 norm, 64 bytes of low
 * nibbles, 32 of high bit pairs) read in place, keys and values by vpmaddwd against the
 * centroids as int16 (sjk_attn_tq6_c16: c16 = round(c · 8191 / max|c|)), the contract of
 * attn_kernels.h (reference: attn_ref.c's chunk_tq6_q16_ref). The fp32 way (the caller
 * decodes the rows with the format's decode, then chunk_f32) stores and reloads 8 bytes
 * of fp32 per value; here the codes become int16 centroids in registers:
 *
 *   words   32 values of a block (elements 32 g ..) per step: the 16 qs bytes in both
 *           128-bit lanes, shifted by 0 and 4 and masked (lane 0 the even elements' low
 *           nibbles, lane 1 the odd ones'); the qh bytes spread by a vpshufb and tested
 *           for the code's bits 4 and 5; each centroid byte plane (low, high) looked up by
 *           four vpshufb (one per high-bit pair) and three blends; two byte unpacks make
 *           the words: w0 = elements 0, 2, .., 14 | 1, 3, .., 15 and w1 the same from 16
 *           (25 operations per 32 values, against about 45 and two fp32 stores and
 *           reloads for the decode);
 *   keys    per row two vpmaddwd against the query words in that order (tq6w_qwords),
 *           two groups summed in int32 (at most 8 products a lane: 8 · 32767 · 8191 <
 *           2^31), converted and scaled by the block norm into fp32;
 *   values  per block the weights p · Vnorm as int16 under the sum bound (int16_prep_avx2),
 *           keys in pairs: the words of keys t and t+1 interleaved (one element's pair per
 *           int32 lane) into a buffer of TB keys, then per 8 elements and row one
 *           vpmaddwd and one add per pair against the pair's weights broadcast.
 * Against the decode and chunk_f32 (bench_attn_ab --drop chunk_tq6_q16 sj:4/4, Zen 3, 7
 * rounds): 1.18-1.21x at 4K on Gemma's geometry, where the default ring holds the whole
 * context, 1.07-1.08x on Qwen's; from 16K, where the ring is a quarter of the keys or
 * less, 0.97-1.07x. The lookups keep it below fp16 (0.59-0.67x at 4K, Gemma): a centroid
 * costs about six times the operations of an fp16 conversion. */
typedef struct tq6w {
    __m256i lo[4], hi[4]; /* c16's low and high bytes, entries 16 h .. 16 h + 15 in both lanes */
    __m256i sh, m4, qctl, b0, b1;
} tq6w;

static void tq6w_init(tq6w *c, float *cs)
{
    int16_t c16[64];
    *cs = sjk_attn_tq6_c16(c16);
    for (int h = 0; h < 4; h++) {
        uint8_t lo[16], hi[16];
        for (int j = 0; j < 16; j++) {
            lo[j] = (uint8_t)((uint16_t)c16[16 * h + j] & 0xFF);
            hi[j] = (uint8_t)((uint16_t)c16[16 * h + j] >> 8);
        }
        c->lo[h] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)lo));
        c->hi[h] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)hi));
    }
    uint8_t ctl[32], b0[32], b1[32];
    for (int lane = 0; lane < 2; lane++)
        for (int b = 0; b < 16; b++) {
            /* lane 0 byte b: element 2 b, lane 1: 2 b + 1; its bit pair at 2 (e % 4) of qh byte e / 4 */
            const int e = 2 * b + lane, bit = 2 * (e % 4);
            ctl[16 * lane + b] = (uint8_t)(e / 4);
            b0[16 * lane + b] = (uint8_t)(1u << bit);
            b1[16 * lane + b] = (uint8_t)(2u << bit);
        }
    c->qctl = _mm256_loadu_si256((const __m256i *)(const void *)ctl);
    c->b0 = _mm256_loadu_si256((const __m256i *)(const void *)b0);
    c->b1 = _mm256_loadu_si256((const __m256i *)(const void *)b1);
    c->sh = _mm256_setr_epi64x(0, 0, 4, 4);
    c->m4 = _mm256_set1_epi8(0x0F);
}

/* The int16 centroids of elements 32 g .. 32 g + 31 of the block at blk, in the word
 * order above. */
static ALWAYS_INLINE void tq6w_words(__m256i *w0, __m256i *w1, const uint8_t *blk, size_t g, const tq6w *c)
{
    const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(blk + 2 + 16 * g)));
    const __m256i nib = _mm256_and_si256(_mm256_srlv_epi64(x, c->sh), c->m4);
    const __m256i q = _mm256_shuffle_epi8(_mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(const void *)(blk + 66 + 8 * g))),
                                          c->qctl);
    const __m256i m0 = _mm256_cmpeq_epi8(_mm256_and_si256(q, c->b0), c->b0); /* code bit 4 */
    const __m256i m1 = _mm256_cmpeq_epi8(_mm256_and_si256(q, c->b1), c->b1); /* code bit 5 */
#define TQ6W_PLANE(T)                                                                                     \
    _mm256_blendv_epi8(_mm256_blendv_epi8(_mm256_shuffle_epi8(T[0], nib), _mm256_shuffle_epi8(T[1], nib), m0), \
                       _mm256_blendv_epi8(_mm256_shuffle_epi8(T[2], nib), _mm256_shuffle_epi8(T[3], nib), m0), m1)
    const __m256i lo = TQ6W_PLANE(c->lo), hi = TQ6W_PLANE(c->hi);
#undef TQ6W_PLANE
    *w0 = _mm256_unpacklo_epi8(lo, hi);
    *w1 = _mm256_unpackhi_epi8(lo, hi);
}

/* The query words of a row q16 [D] (element order) in tq6w_words' order: per group of 32,
 * [0, 2, .., 14 | 1, 3, .., 15] then the same from 16. */
static void tq6w_qwords(int16_t *qw, const int16_t *q16, size_t D)
{
    /* in-lane: the even words then the odd ones; then the middle qwords swapped */
    const __m256i ev = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                        0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    for (size_t i = 0; i < D; i += 16) {
        const __m256i x = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(const void *)(q16 + i)), ev);
        _mm256_storeu_si256((__m256i *)(void *)(qw + i), _mm256_permute4x64_epi64(x, _MM_SHUFFLE(3, 1, 2, 0)));
    }
}

#define TQ6W_TB 32 /* keys per value block: their interleaved words, 8 KiB, stay in L1 */

static ALWAYS_INLINE void chunk_tq6w_nr(const float *q, size_t R, size_t D, const uint32_t *nvis, const uint8_t *K,
                                        const uint8_t *V, size_t n, float *m, float *l, float *acc, float *work,
                                        const uint8_t *pf, size_t pfn, const size_t NR)
{
    const size_t nb = D / SJK_TQ_BLOCK, row_nbytes = nb * SJK_TQ6_0_NBYTES;
    float *p = work;                              /* [RBX][G] scores, then probabilities */
    float *kn = p + RBX * G;                      /* [G][nb] K block norms (+ 8) */
    float *vn = kn + G * nb + 8;                  /* [nb][G] V block norms, zero past n */
    float *x = vn + G * nb;                       /* [G] one row's weights p · Vnorm */
    float *va = x + G;                            /* [NR][128] a block's value sums, pair order */
    int32_t *vbuf = (int32_t *)(void *)(va + RBX * SJK_TQ_BLOCK); /* [TB/2][128] interleaved words */
    int16_t *q16 = (int16_t *)(void *)(vbuf + TQ6W_TB / 2 * SJK_TQ_BLOCK); /* [D] */
    int16_t *qw = q16 + D;                        /* [NR][D] query words */
    int16_t *p16 = qw + RBX * D;                  /* [NR][G] int16 weights */
    tq6w c;
    float cs;
    tq6w_init(&c, &cs);
    size_t nall = 0;
    for (size_t r = 0; r < R; r++) nall = nvis[r] > nall ? nvis[r] : nall;
    if (!nall) return;
    /* the K norms now, the V norms after the first keys, which bring the V rows into L1
     * (read first, at long contexts, they waited for memory) */
    qblk_scales_avx2(kn, K, nall * nb, SJK_TQ6_0_NBYTES);
    int vn_ready = 0;
    const __m256i unpair = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    (void)n;
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, r0, NR, &ntm);
        if (!ntm) continue;
        float sc[8] = {0};
        for (size_t r = 0; r < NR; r++) {
            if (r < rb) {
                int16_prep_avx2(q16, &sc[r], q + (r0 + r) * D, D, 32767.0f, 0);
                sc[r] *= cs;
                tq6w_qwords(qw + r * D, q16, D);
            } else {
                memset(qw + r * D, 0, D * sizeof(int16_t));
            }
        }
        /* keys; the first pass brings the chunk's V rows into L1 and the next chunk's K
         * rows (pf) into L2, a row of each per key */
        for (size_t t = 0; t < ntm; t++) {
            const uint8_t *row = K + t * row_nbytes;
            if (!vn_ready) {
                for (size_t o = (t * row_nbytes) & ~(size_t)63; o < (t + 1) * row_nbytes; o += 64)
                    _mm_prefetch((const char *)V + o, _MM_HINT_T0);
                for (size_t o = (t * row_nbytes) & ~(size_t)63; o < (t + 1) * row_nbytes && o < pfn; o += 64)
                    _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
            }
            __m256 S[QNR];
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) S[r] = _mm256_setzero_ps();
            for (size_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * SJK_TQ6_0_NBYTES;
                const __m256 nv = _mm256_broadcast_ss(kn + t * nb + b);
                _Pragma("GCC unroll 2")
                for (size_t hg = 0; hg < 4; hg += 2) { /* two groups: 8 products a lane */
                    __m256i X[QNR];
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < NR; r++) X[r] = _mm256_setzero_si256();
                    _Pragma("GCC unroll 2")
                    for (size_t g = hg; g < hg + 2; g++) {
                        __m256i w0, w1;
                        tq6w_words(&w0, &w1, blk, g, &c);
                        const int16_t *qg = qw + b * SJK_TQ_BLOCK + 32 * g;
                        _Pragma("GCC unroll 8")
                        for (size_t r = 0; r < NR; r++) {
                            const __m256i a0 = _mm256_madd_epi16(w0, _mm256_loadu_si256((const __m256i *)(const void *)(qg + r * D)));
                            const __m256i a1 = _mm256_madd_epi16(w1, _mm256_loadu_si256((const __m256i *)(const void *)(qg + r * D + 16)));
                            X[r] = _mm256_add_epi32(X[r], _mm256_add_epi32(a0, a1));
                        }
                    }
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < NR; r++) S[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(X[r]), nv, S[r]);
                }
            }
            float sv[8];
            const __m256 z = _mm256_setzero_ps();
            if (NR == 3) {
                _mm_storeu_ps(sv, hsum4x8(S[0], S[1], S[2], z));
            } else {
                _mm_storeu_ps(sv, hsum4x8(S[0], S[1], S[2], S[3]));
                if (NR == 6) _mm_storeu_ps(sv + 4, hsum4x8(S[4 % NR], S[5 % NR], z, z));
            }
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) p[r * G + t] = sv[r] * sc[r];
        }
        if (!vn_ready) {
            qblk_vscales_avx2(vn, V, nall, nb, SJK_TQ6_0_NBYTES);
            for (size_t b = 0; b < nb; b++)
                for (size_t t = (nall + 7) & ~(size_t)7; t < G; t++) vn[b * G + t] = 0.0f;
            vn_ready = 1;
        }
        float fct[RBX];
        softmax_block(p, fct, nvis + r0, rb, NR, m + r0, l + r0);
        for (size_t r = 0; r < rb; r++) {
            if (!nvis[r0 + r]) continue;
            float *a = acc + (r0 + r) * D;
            const __m256 f = _mm256_set1_ps(fct[r]);
            for (size_t d = 0; d < D; d += 8) _mm256_storeu_ps(a + d, _mm256_mul_ps(_mm256_loadu_ps(a + d), f));
        }
        /* values, block by block */
        const size_t ntm8 = (ntm + 7) & ~(size_t)7, ntm2 = (ntm + 1) & ~(size_t)1;
        for (size_t b = 0; b < nb; b++) {
            float ps[QNR];
            for (size_t r = 0; r < NR; r++) { /* p is zero past each row's keys, vn past n */
                for (size_t t = 0; t < ntm8; t += 8)
                    _mm256_storeu_ps(x + t, _mm256_mul_ps(_mm256_loadu_ps(p + r * G + t), _mm256_loadu_ps(vn + b * G + t)));
                int16_prep_avx2(p16 + r * G, &ps[r], x, ntm8, 32767.0f, SJK_ATTN_TQ6_SUM_MAX);
                ps[r] *= cs;
            }
            memset(va, 0, NR * SJK_TQ_BLOCK * sizeof(float));
            for (size_t tb = 0; tb < ntm2; tb += TQ6W_TB) {
                const size_t te = tb + TQ6W_TB < ntm2 ? tb + TQ6W_TB : ntm2;
                for (size_t t = tb; t < te; t += 2) {
                    const uint8_t *b0 = V + t * row_nbytes + b * SJK_TQ6_0_NBYTES;
                    const uint8_t *b1 = t + 1 < ntm ? b0 + row_nbytes : b0; /* its weight is zero */
                    int32_t *o = vbuf + (t - tb) / 2 * SJK_TQ_BLOCK;
                    _Pragma("GCC unroll 4")
                    for (size_t g = 0; g < 4; g++) {
                        __m256i x0, x1, y0, y1;
                        tq6w_words(&x0, &x1, b0, g, &c);
                        tq6w_words(&y0, &y1, b1, g, &c);
                        _mm256_storeu_si256((__m256i *)(void *)(o + 32 * g), _mm256_unpacklo_epi16(x0, y0));
                        _mm256_storeu_si256((__m256i *)(void *)(o + 32 * g + 8), _mm256_unpackhi_epi16(x0, y0));
                        _mm256_storeu_si256((__m256i *)(void *)(o + 32 * g + 16), _mm256_unpacklo_epi16(x1, y1));
                        _mm256_storeu_si256((__m256i *)(void *)(o + 32 * g + 24), _mm256_unpackhi_epi16(x1, y1));
                    }
                }
                for (size_t e = 0; e < SJK_TQ_BLOCK; e += 8) {
                    __m256i A[QNR];
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < NR; r++) A[r] = _mm256_setzero_si256();
                    for (size_t t = tb; t < te; t += 2) {
                        const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(vbuf + (t - tb) / 2 * SJK_TQ_BLOCK + e));
                        _Pragma("GCC unroll 8")
                        for (size_t r = 0; r < NR; r++) {
                            int32_t pw;
                            memcpy(&pw, p16 + r * G + t, 4);
                            A[r] = _mm256_add_epi32(A[r], _mm256_madd_epi16(v, _mm256_set1_epi32(pw)));
                        }
                    }
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < NR; r++)
                        _mm256_storeu_ps(va + r * SJK_TQ_BLOCK + e,
                                         _mm256_add_ps(_mm256_loadu_ps(va + r * SJK_TQ_BLOCK + e), _mm256_cvtepi32_ps(A[r])));
                }
            }
            /* va in the pair order: per 8 elements 8 m + [0, 2, 4, 6, 1, 3, 5, 7] */
            for (size_t r = 0; r < rb; r++) {
                if (!nvis[r0 + r]) continue;
                float *ad = acc + (r0 + r) * D + b * SJK_TQ_BLOCK;
                const __m256 s = _mm256_set1_ps(ps[r]);
                for (size_t e = 0; e < SJK_TQ_BLOCK; e += 8) {
                    const __m256 v = _mm256_permutevar8x32_ps(_mm256_loadu_ps(va + r * SJK_TQ_BLOCK + e), unpair);
                    _mm256_storeu_ps(ad + e, _mm256_fmadd_ps(v, s, _mm256_loadu_ps(ad + e)));
                }
            }
        }
    }
}

static void chunk_tq6_q16_avx2(const float *q, size_t R, size_t D, const uint32_t *nvis, const uint8_t *K,
                               const uint8_t *V, size_t n, float *m, float *l, float *acc, float *work,
                               const uint8_t *pf, size_t pf_nbytes)
{
    const size_t nr = qblk_nr(R);
    if (nr == 3) chunk_tq6w_nr(q, R, D, nvis, K, V, n, m, l, acc, work, pf, pf_nbytes, 3);
    else if (nr == 6) chunk_tq6w_nr(q, R, D, nvis, K, V, n, m, l, acc, work, pf, pf_nbytes, 6);
    else chunk_tq6w_nr(q, R, D, nvis, K, V, n, m, l, acc, work, pf, pf_nbytes, 4);
}

/* sjk_attn_qint_prep (attn_ref.c) 8 lanes at a time, to the same bits: the same IEEE
 * operations per value (y = x · inv, h = rne(y / 128) clamped, lo = rne(y - 128 h)
 * clamped; vroundps is the reference's round to nearest even), the group and block sums
 * in int32 (exact), the w16 order (sjk_attn_qint_w16_chan) copied as runs of 8 channels
 * from the words in channel order. */
void sjk_attn_qint_prep_avx2(sjk_attn_qint *qi, void *buf, const float *q, size_t R, size_t D)
{
    uintptr_t a = ((uintptr_t)buf + 63) & ~(uintptr_t)63;
    float *scale = (float *)a, *bsum = scale + R;
    int32_t *corr8 = (int32_t *)(void *)(bsum + R * (D / 32));
    int16_t *w16 = (int16_t *)(void *)(corr8 + R * (D / 4));
    int8_t *hi = (int8_t *)(void *)(w16 + R * D), *lo = hi + R * D;
    int16_t wc[512]; /* one row's words 128 hi + lo in channel order (D <= 512) */
    const __m256 lim = _mm256_set1_ps(127.0f), nlim = _mm256_set1_ps(-127.0f), inv128 = _mm256_set1_ps(1.0f / 128.0f);
    const __m256 c128 = _mm256_set1_ps(128.0f);
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i gperm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (size_t r = 0; r < R; r++) {
        const float *x = q + r * D;
        __m256 mx = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (size_t d = 0; d < D; d += 8) { /* NaN lanes keep the max, as the reference's compare */
            const __m256 xv = _mm256_loadu_ps(x + d);
            mx = _mm256_max_ps(_mm256_and_ps(xv, absm), mx);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(xv, xv, _CMP_UNORD_Q));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        /* a row with a NaN is non-finite, as in the reference */
        const float amax = _mm256_movemask_ps(nan) ? NAN : _mm_cvtss_f32(m4);
        const float s = isfinite(amax) ? amax / (127.0f * 128.0f) : NAN;
        const float inv = s > 0 ? 1.0f / s : 0.0f;
        scale[r] = s;
        const __m256 vinv = _mm256_set1_ps(inv);
        const int fin = isfinite(amax);
        for (size_t d0 = 0; d0 < D; d0 += 32) {
            __m256i wv[4], hv[4], lv[4];
            for (int j = 0; j < 4; j++) {
                const __m256 y = fin ? _mm256_mul_ps(_mm256_loadu_ps(x + d0 + 8 * j), vinv) : _mm256_setzero_ps();
                __m256 h = _mm256_round_ps(_mm256_mul_ps(y, inv128), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                h = _mm256_min_ps(_mm256_max_ps(h, nlim), lim);
                __m256 lw = _mm256_round_ps(_mm256_sub_ps(y, _mm256_mul_ps(c128, h)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                lw = _mm256_min_ps(_mm256_max_ps(lw, nlim), lim);
                hv[j] = _mm256_cvtps_epi32(h);
                lv[j] = _mm256_cvtps_epi32(lw);
                wv[j] = _mm256_add_epi32(_mm256_slli_epi32(hv[j], 7), lv[j]);
            }
            /* bytes: pack 32 int32 to 32 int8 (in-lane packs, then the qword order back) */
            const __m256i h16a = _mm256_packs_epi32(hv[0], hv[1]), h16b = _mm256_packs_epi32(hv[2], hv[3]);
            const __m256i l16a = _mm256_packs_epi32(lv[0], lv[1]), l16b = _mm256_packs_epi32(lv[2], lv[3]);
            const __m256i fix = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
            _mm256_storeu_si256((__m256i *)(void *)(hi + r * D + d0), _mm256_permutevar8x32_epi32(_mm256_packs_epi16(h16a, h16b), fix));
            _mm256_storeu_si256((__m256i *)(void *)(lo + r * D + d0), _mm256_permutevar8x32_epi32(_mm256_packs_epi16(l16a, l16b), fix));
            const __m256i w16a = _mm256_packs_epi32(wv[0], wv[1]), w16b = _mm256_packs_epi32(wv[2], wv[3]);
            _mm256_storeu_si256((__m256i *)(void *)(wc + d0), _mm256_permute4x64_epi64(w16a, _MM_SHUFFLE(3, 1, 2, 0)));
            _mm256_storeu_si256((__m256i *)(void *)(wc + d0 + 16), _mm256_permute4x64_epi64(w16b, _MM_SHUFFLE(3, 1, 2, 0)));
            /* group sums of 4 channels: hadd twice leaves groups 0 2 4 6 | 1 3 5 7 */
            const __m256i g = _mm256_permutevar8x32_epi32(
                _mm256_hadd_epi32(_mm256_hadd_epi32(wv[0], wv[1]), _mm256_hadd_epi32(wv[2], wv[3])), gperm);
            _mm256_storeu_si256((__m256i *)(void *)(corr8 + r * (D / 4) + d0 / 4), _mm256_sub_epi32(_mm256_setzero_si256(), g));
            __m128i b4 = _mm_add_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1));
            b4 = _mm_add_epi32(b4, _mm_shuffle_epi32(b4, _MM_SHUFFLE(1, 0, 3, 2)));
            b4 = _mm_add_epi32(b4, _mm_shuffle_epi32(b4, _MM_SHUFFLE(2, 3, 0, 1)));
            bsum[r * (D / 32) + d0 / 32] = (float)_mm_cvtsi128_si32(b4);
        }
        /* w16: runs of 8 consecutive channels (attn_kernels.h) */
        int16_t *dst = w16 + r * D;
        const size_t nq = D / 128 * 128;
        for (size_t p = 0; p < nq; p += 128)
            for (size_t v = 0; v < 4; v++)
                for (size_t b = 0; b < 4; b++, dst += 8) memcpy(dst, wc + p + 32 * b + 8 * v, 16);
        for (size_t p = nq; p < D; p += 64)
            for (size_t h = 0; h < 2; h++)
                for (size_t L = 0; L < 4; L++, dst += 8) memcpy(dst, wc + p + 32 * (L / 2) + 16 * (L % 2) + 8 * h, 16);
    }
    qi->hi = hi;
    qi->lo = lo;
    qi->corr8 = corr8;
    qi->bsum = bsum;
    qi->scale = scale;
    qi->w16 = w16;
    qi->D = D;
}

/* ---- trellis records, read in place -------------------------------------------------
 * The AVX2 form of attn_avx512.c's reader (same payload walk, same pair tables; the
 * codes are docs/FORMAT.md's token-axis trellis). A payload group is 16 channels; step t
 * holds their symbols in 2k bytes, half h (channels 8h..8h+7 of the group) in bits
 * 8kh..8kh+8k-1, so one broadcast load and one variable shift put the 8 symbols of a
 * half in the 8 lanes (trel8_sym; every load lies inside its step). Tokens go in pairs:
 * the pair index
 *
 *     idx = s(t+1) << (6 + k) | s(t) << 6 | w(t-1) >> k,   next state idx >> 2k
 *
 * looks up (C[w(t)], C[w(t+1)]) of each channel in the codec's pair table
 * (sjk_trellis_pair_table), eight 64-bit loads (trel8_lookup): lo holds channels 0..3
 * and hi channels 4..7 of the half, lane 2i token t and lane 2i+1 token t+1 of its
 * channel. The lookups are what this kernel spends its time on (Zen 3: an 8-element
 * gather of fp32 costs about as much as two 4-element gathers of pairs, and those 1.6x
 * the loads by hand). At k = 4 too: its 128 KiB table lives in L2, and the hand loads
 * from it beat two 8-element gathers from the 4 KiB codebook (1.22x, sj:4/4t at 32K); a
 * codebook other than the committed one takes those two gathers per pair.
 *
 *   scores: per token pair, all halves: s[r] += qd_lo[r] * lo + qd_hi[r] * hi (queries
 *           duplicated into the lane order, the rows' sums in registers, each half's
 *           state carried in wst), then the even and odd lanes are summed:
 *           p[r][t] = Ktok[t] * (Σ even + cz[r]), p[r][t+1] likewise with the odd lanes;
 *   values: per half, all token pairs: al[r] += (p[r][t], p[r][t+1]) * lo, ah[r] likewise
 *           (p already times Vscale), even and odd lanes summed per channel at the end.
 * No K or V value is materialised (the decoded path wrote and reread 256 KiB of fp32 per
 * record at D = 256). */
typedef struct trel8 {
    __m256i sh[2]; /* per half: the shifts that bring lane l's symbol to bit 0 */
    __m256i mk;    /* (1 << k) - 1 */
} trel8;

static ALWAYS_INLINE trel8 trel8_init(const unsigned k)
{
    trel8 c;
    for (int h = 0; h < 2; h++) {
        int32_t s[8];
        /* k = 3: half 1 is read as the 4 bytes from byte 2 of the step, its bits from 8 */
        for (int l = 0; l < 8; l++) s[l] = (int32_t)((unsigned)l * k + (k == 3 ? 8u * (unsigned)h : 0u));
        c.sh[h] = _mm256_loadu_si256((const __m256i *)(const void *)s);
    }
    c.mk = _mm256_set1_epi32((int)((1u << k) - 1));
    return c;
}

/* The symbols of half h at one step, at bit 0 of each lane: k = 2 a 16-bit broadcast
 * (both halves of a lane hold the field; the shifts stay below 16), k = 3 the 4 bytes
 * from byte 2h, k = 4 from byte 4h; then a shift and a mask. */
static ALWAYS_INLINE __m256i trel8_sym(const uint8_t *step, const unsigned k, size_t h, const trel8 *c)
{
    __m256i b;
    if (k == 2) {
        uint16_t x;
        memcpy(&x, step + 2 * h, 2);
        b = _mm256_set1_epi16((short)x);
    } else {
        uint32_t x;
        memcpy(&x, step + (k == 3 ? 2 : 4) * h, 4);
        b = _mm256_set1_epi32((int)x);
    }
    return _mm256_and_si256(_mm256_srlv_epi32(b, c->sh[h]), c->mk);
}

/* The window before token 0 of half h of group g (tail-biting: built from the last steps
 * of the sequence), as the carried state: w(-1) >> k for the pair path, w(-1) else. */
static ALWAYS_INLINE __m256i trel8_start(const uint8_t *g, const unsigned k, size_t h, const trel8 *c, const int pairs)
{
    const size_t lead = (SJK_TRELLIS_STATE_BITS + k - 1) / k;
    __m256i w = _mm256_setzero_si256();
    for (size_t t = G - lead; t < G; t++)
        w = _mm256_or_si256(_mm256_slli_epi32(trel8_sym(g + t * 2 * k, k, h, c), 6), _mm256_srli_epi32(w, (int)k));
    return pairs ? _mm256_srli_epi32(w, (int)k) : w;
}

/* The pair-table entries of the 8 indices idx: lo = P[idx 0..3], hi = P[idx 4..7]. Done
 * by hand (two 64-bit moves out of each 128-bit half, a 64-bit load per entry, paired
 * by movhpd and a 128-bit insert): on Zen 3 this takes 0.6x the time of two vpgatherdq
 * (a loop of lookups alone, 8 and 32 KiB tables). */
static ALWAYS_INLINE void trel8_lookup(__m256 *lo, __m256 *hi, const uint64_t *P, __m256i idx)
{
    const __m128i a = _mm256_castsi256_si128(idx), b = _mm256_extracti128_si256(idx, 1);
    const uint64_t e0 = (uint64_t)_mm_cvtsi128_si64(a), e1 = (uint64_t)_mm_extract_epi64(a, 1);
    const uint64_t e2 = (uint64_t)_mm_cvtsi128_si64(b), e3 = (uint64_t)_mm_extract_epi64(b, 1);
#define TREL8_LD2(e) _mm_loadh_pd(_mm_load_sd((const double *)(const void *)(P + (uint32_t)(e))), \
                                  (const double *)(const void *)(P + ((e) >> 32)))
    const __m128d x0 = TREL8_LD2(e0), x1 = TREL8_LD2(e1), x2 = TREL8_LD2(e2), x3 = TREL8_LD2(e3);
#undef TREL8_LD2
    *lo = _mm256_castpd_ps(_mm256_insertf128_pd(_mm256_castpd128_pd256(x0), x1, 1));
    *hi = _mm256_castpd_ps(_mm256_insertf128_pd(_mm256_castpd128_pd256(x2), x3, 1));
}

/* One of trel8_lookup's outputs: P[idx 0..3] (part 0) or P[idx 4..7] (part 1). */
static ALWAYS_INLINE __m256 trel8_lookup4(const uint64_t *P, __m256i idx, const int part)
{
    const __m128i a = part ? _mm256_extracti128_si256(idx, 1) : _mm256_castsi256_si128(idx);
    const uint64_t e0 = (uint64_t)_mm_cvtsi128_si64(a), e1 = (uint64_t)_mm_extract_epi64(a, 1);
    const __m128d x0 = _mm_loadh_pd(_mm_load_sd((const double *)(const void *)(P + (uint32_t)e0)),
                                    (const double *)(const void *)(P + (e0 >> 32)));
    const __m128d x1 = _mm_loadh_pd(_mm_load_sd((const double *)(const void *)(P + (uint32_t)e1)),
                                    (const double *)(const void *)(P + (e1 >> 32)));
    return _mm256_castpd_ps(_mm256_insertf128_pd(_mm256_castpd128_pd256(x0), x1, 1));
}

/* Values of tokens t, t+1 (steps st, st + 2k) of half h, in the pair layout (lo: channels
 * 0..3, hi: 4..7, lane 2i token t, 2i+1 token t+1); advances the state *w. P: the pair
 * table (pairs = 1), else cb with two one-value gathers. */
static ALWAYS_INLINE void trel8_pair(__m256 *lo, __m256 *hi, __m256i *w, const uint8_t *st, const unsigned k, size_t h,
                                     const trel8 *c, const float *cb, const uint64_t *P, const int pairs, const int part)
{
    const __m256i x = trel8_sym(st, k, h, c), y = trel8_sym(st + 2 * k, k, h, c);
    if (pairs) {
        const __m256i idx = _mm256_or_si256(_mm256_or_si256(*w, _mm256_slli_epi32(x, 6)), _mm256_slli_epi32(y, (int)(6 + k)));
        *w = _mm256_srli_epi32(idx, (int)(2 * k));
        if (part == 2) trel8_lookup(lo, hi, P, idx);
        else if (part == 0) *lo = trel8_lookup4(P, idx, 0);
        else *hi = trel8_lookup4(P, idx, 1);
        return;
    }
    const __m256i w0 = _mm256_or_si256(_mm256_slli_epi32(x, 6), _mm256_srli_epi32(*w, (int)k));
    const __m256i w1 = _mm256_or_si256(_mm256_slli_epi32(y, 6), _mm256_srli_epi32(w0, (int)k));
    *w = w1;
    const __m256 c0 = _mm256_i32gather_ps(cb, w0, 4), c1 = _mm256_i32gather_ps(cb, w1, 4);
    const __m256 u = _mm256_unpacklo_ps(c0, c1), v = _mm256_unpackhi_ps(c0, c1); /* channels 0,1,4,5 | 2,3,6,7 */
    *lo = _mm256_permute2f128_ps(u, v, 0x20);
    *hi = _mm256_permute2f128_ps(u, v, 0x31);
}

/* Scores of the RB rows for tokens t < ntm2 (even): p[r][t] = Ktok[t] * (Σ_d qs[r][d] *
 * C[w(d, t)] + cz[r]). qd: [D/8][RB][16] the queries of half hh duplicated into the pair
 * layout (lo 8, hi 8). wst: [D/8] carried states. pfn bytes of the next record (pf) are
 * prefetched, a line per (token pair, group). */
static ALWAYS_INLINE void trel8_scores(float *p, __m256i *wst, const float *qd, size_t D, size_t ntm2, const float *ktok,
                                       const float *cz, const uint8_t *payload, const float *cb, const uint64_t *P,
                                       const unsigned k, const int pairs, const uint8_t *pf, size_t pfn, const size_t NR)
{
    const trel8 c = trel8_init(k);
    const size_t nh = D / 8, gbytes = G * 2 * k;
    for (size_t hh = 0; hh < nh; hh++) wst[hh] = trel8_start(payload + hh / 2 * gbytes, k, hh % 2, &c, pairs);
    for (size_t t = 0; t < ntm2; t += 2) {
        __m256 s[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) s[r] = _mm256_setzero_ps();
        const uint8_t *st = payload + t * 2 * k;
        for (size_t hh = 0; hh < nh; hh += 2, st += gbytes) { /* a group: its two halves */
            const size_t o = (t / 2 * nh / 2 + hh / 2) * 64;
            if (o < pfn) _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
            _Pragma("GCC unroll 2")
            for (size_t h = 0; h < 2; h++) {
                __m256 lo, hi;
                trel8_pair(&lo, &hi, wst + hh + h, st, k, h, &c, cb, P, pairs, 2);
                const float *qh = qd + (hh + h) * NR * 16;
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < NR; r++) {
                    s[r] = _mm256_fmadd_ps(_mm256_loadu_ps(qh + 16 * r), lo, s[r]);
                    s[r] = _mm256_fmadd_ps(_mm256_loadu_ps(qh + 16 * r + 8), hi, s[r]);
                }
            }
        }
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) { /* lanes e o e o ...: (Σ even, Σ odd) to p[r][t], p[r][t+1] */
            __m128 x = _mm_add_ps(_mm256_castps256_ps128(s[r]), _mm256_extractf128_ps(s[r], 1));
            x = _mm_add_ps(x, _mm_movehl_ps(x, x));
            _mm_storel_pi((__m64 *)(void *)(p + r * G + t), x);
        }
    }
    const size_t ntw = (ntm2 + 7) & ~(size_t)7;
    for (size_t r = 0; r < NR; r++) {
        const vf cr = vset1(cz[r]);
        for (size_t t = 0; t < ntw; t += 8) vstore(p + r * G + t, vmul(vload(ktok + t), vadd(vload(p + r * G + t), cr)));
    }
}

/* a[r] (the 8 channels of half h of group g, NR rows) = Σ_{t < ntm2} p[r][t] * C[w(t)]
 * (p is zero past each row's visible keys and up to G). 8 rows would need 16
 * accumulators: then each half takes two passes, channels 0..3 and 4..7 (the states are
 * walked twice, each entry is looked up once). */
static ALWAYS_INLINE void trel8_values_part(__m256 a[RBX], const float *p, size_t ntm2, const uint8_t *g, size_t h,
                                            const float *cb, const uint64_t *P, const unsigned k, const int pairs,
                                            const size_t NR, const int part)
{
    const trel8 c = trel8_init(k);
    __m256i w = trel8_start(g, k, h, &c, pairs);
    __m256 al[RBX], ah[RBX];
    _Pragma("GCC unroll 8")
    for (size_t r = 0; r < NR; r++) { al[r] = _mm256_setzero_ps(); ah[r] = _mm256_setzero_ps(); }
    for (size_t t = 0; t < ntm2; t += 2) {
        __m256 lo = _mm256_setzero_ps(), hi = lo;
        trel8_pair(&lo, &hi, &w, g + t * 2 * k, k, h, &c, cb, P, pairs, pairs ? part : 2);
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) {
            const __m256 pw = _mm256_castpd_ps(_mm256_broadcast_sd((const double *)(const void *)(p + r * G + t)));
            if (part != 1) al[r] = _mm256_fmadd_ps(pw, lo, al[r]);
            if (part != 0) ah[r] = _mm256_fmadd_ps(pw, hi, ah[r]);
        }
    }
    /* hadd: channels 0 1 4 5 | 2 3 6 7 as pairs of lanes; the qword permute puts them in
     * order (a pass of one part leaves the other part's channels zero, the caller adds) */
    _Pragma("GCC unroll 8")
    for (size_t r = 0; r < NR; r++)
        a[r] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_hadd_ps(al[r], ah[r])), 0xD8));
}

static ALWAYS_INLINE void trel8_values(__m256 a[RBX], const float *p, size_t ntm2, const uint8_t *g, size_t h,
                                       const float *cb, const uint64_t *P, const unsigned k, const int pairs,
                                       const size_t NR)
{
    if (NR <= 6) {
        trel8_values_part(a, p, ntm2, g, h, cb, P, k, pairs, NR, 2);
        return;
    }
    __m256 b[RBX];
    trel8_values_part(a, p, ntm2, g, h, cb, P, k, pairs, NR, 0);
    trel8_values_part(b, p, ntm2, g, h, cb, P, k, pairs, NR, 1);
    for (size_t r = 0; r < NR; r++) a[r] = _mm256_add_ps(a[r], b[r]);
}

static ALWAYS_INLINE void trel8_scores_k(float *p, __m256i *wst, const float *qd, size_t D, size_t ntm2,
                                         const sjk_attn_rec *rc, const float *cz, const unsigned k, size_t pfn,
                                         const size_t NR)
{
    const uint64_t *P = sjk_trellis_pair_table_of(rc->kcb, k);
    if (P) trel8_scores(p, wst, qd, D, ntm2, rc->ktok, cz, rc->kt, rc->kcb, P, k, 1, rc->pf, pfn, NR);
    else trel8_scores(p, wst, qd, D, ntm2, rc->ktok, cz, rc->kt, rc->kcb, NULL, k, 0, rc->pf, pfn, NR);
}

static ALWAYS_INLINE void trel8_values_k(__m256 a[RBX], const float *p, size_t ntm2, const sjk_attn_rec *rc, size_t hh,
                                         const unsigned k, const size_t NR)
{
    const uint64_t *P = sjk_trellis_pair_table_of(rc->vcb, k);
    const uint8_t *g = rc->vt + hh / 2 * (G * 2 * k);
    if (P) trel8_values(a, p, ntm2, g, hh % 2, rc->vcb, P, k, 1, NR);
    else trel8_values(a, p, ntm2, g, hh % 2, rc->vcb, NULL, k, 0, NR);
}

/* ---- trellis records on the 128-entry tables by integer dot products: chunk_trellis_q8
 * A body on the 128-entry tables (SJK_BODY_TRELLIS_S128, record format 5) codes against
 * C[w] = step · A_k[(w + o_k (w >> 7)) mod 128] (codec/trellis.h), 128 int8 entries: on
 * AVX2 eight vpshufb over 16-byte pieces of A_k and seven byte blends on bits 4, 5, 6
 * of the entry index look 32 windows up in registers, where the 64 << k-entry tables take
 * a load per token pair and channel (the pair tables above). The values stay the exact
 * int8 entries; the queries and the weights are sjk_attn_q8_pieces' integers
 * y = 128 hi + lo (|y| <= 16256) as int16 words, so vpmaddwd sums y · c8 exactly in int32
 * and the results are those of the reference chunk_trellis_q8 (attn_ref.c) up to the
 * fp32 operations around the sums.
 *
 *   windows  one group of 16 channels in 16 word lanes, one step at a time (the recurrence
 *            w(t) = s(t) << 6 | w(t-1) >> k): the step's 2k bytes broadcast, a vpshufb
 *            puts the two bytes holding channel c's symbol in word c, a vpmullw by
 *            2^(8 - ck % 8) and a shift bring it to bits 6..6+k-1;
 *   index    (w + ((w >> k) & (7 << (7 - k)))) & 127 per word, two steps (t, t+1) packed
 *            into bytes: 128-bit lane 0 holds channels 0..7 of t then of t+1, lane 1
 *            channels 8..15;
 *   keys     the 32 values widened to words, per row two vpmaddwd against the group's
 *            query words (channels 0..7 twice, 8..15 twice) into 8 int32 lanes: lanes
 *            0..3 token t, 4..7 token t+1, summed over the groups;
 *   values   the bytes of t and t+1 interleaved per channel, widened, per row two vpmaddwd
 *            against the pair of weights (y[t], y[t+1]) broadcast: 16 channels' sums.
 * Per 32 values that is about 40 vector operations shared by the rows and 4 per row;
 * the pair tables spend about as many (20 vector and scalar operations and 8 loads per
 * 16 values) and 4 FMAs per row, so the two cost the same where the pair table stays in
 * L1 (k = 2: 8 KiB, k = 3: 32 KiB) and the registers win where it does not (k = 4:
 * 128 KiB, from L2). So 4-bit halves go by integers (bench_attn_ab --drop
 * chunk_trellis_q8, Zen 3: sj:4/4ts 1.13-1.54x, sj:4/3ts 1.03-1.25x), the keys of 2- and
 * 3-bit records too (0.96-1.04x: the scores, and with them the running maxima, stay the
 * integer reference's), their values by the pair tables (chunk_trellis8_nr). The
 * 64 << k-entry grid tables (bodies sj:B/Bt, B/Btr) have no register lookup here and go
 * to chunk_rec (the pair tables, fp32). */
typedef struct trs8 {
    __m256i tab[8];    /* A_k's bytes 16 i .. 16 i + 15 in both 128-bit lanes */
    __m256i ctl, mul;  /* word c <- bytes ck / 8, ck / 8 + 1 of the step; times 2^(8 - ck % 8) */
    __m256i msym, mo, m127;
} trs8;

static ALWAYS_INLINE trs8 trs8_init(const unsigned k)
{
    trs8 c;
    const int8_t *a = sjk_trellis_s128_table(k, NULL);
    for (int i = 0; i < 8; i++) c.tab[i] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(a + 16 * i)));
    uint8_t ctl[32];
    int16_t mul[16];
    for (unsigned ch = 0; ch < 16; ch++) {
        const unsigned b = ch * k / 8, lane = ch / 8, wi = ch % 8;
        ctl[16 * lane + 2 * wi] = (uint8_t)b;
        ctl[16 * lane + 2 * wi + 1] = (uint8_t)(b + 1);
        mul[ch] = (int16_t)(1 << (8 - ch * k % 8));
    }
    c.ctl = _mm256_loadu_si256((const __m256i *)(const void *)ctl);
    c.mul = _mm256_loadu_si256((const __m256i *)(const void *)mul);
    c.msym = _mm256_set1_epi16((short)(((1u << k) - 1) << 6));
    c.mo = _mm256_set1_epi16((short)(7u << (7 - k)));
    c.m127 = _mm256_set1_epi16(127);
    return c;
}

/* The windows of one group after step st (its 2k bytes; exact: the payload's last step,
 * so that only its bytes are read) from the windows before it. */
static ALWAYS_INLINE __m256i trs8_step(__m256i w, const uint8_t *st, const unsigned k, const int exact, const trs8 *c)
{
    long long x = 0;
    memcpy(&x, st, exact ? 2 * k : 8);
    const __m256i b = _mm256_set1_epi64x(x);
    const __m256i s = _mm256_mullo_epi16(_mm256_shuffle_epi8(b, c->ctl), c->mul);
    return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(s, 2), c->msym), _mm256_srli_epi16(w, (int)k));
}

/* The window before token 0 (tail-biting: the group's last steps walked from zero). */
static ALWAYS_INLINE __m256i trs8_start(const uint8_t *g, const unsigned k, const int lastg, const trs8 *c)
{
    const size_t lead = (SJK_TRELLIS_STATE_BITS + k - 1) / k;
    __m256i w = _mm256_setzero_si256();
    for (size_t t = G - lead; t < G; t++) w = trs8_step(w, g + t * 2 * k, k, lastg && t == G - 1, c);
    return w;
}

/* The entry indices of windows wa (step t) and wb (t+1) as bytes (lane 0: channels 0..7
 * of t, then of t+1; lane 1: 8..15), then A_k of them: eight vpshufb (the index's low
 * nibble; bit 7 is clear) and a tree of blends on bits 4, 5, 6 (shifted to bit 7 of each
 * byte: a word shift moves no other byte's bit into bit 7). */
static ALWAYS_INLINE __m256i trs8_lookup(__m256i wa, __m256i wb, const unsigned k, const trs8 *c)
{
    const __m256i ia = _mm256_and_si256(_mm256_add_epi16(wa, _mm256_and_si256(_mm256_srli_epi16(wa, (int)k), c->mo)), c->m127);
    const __m256i ib = _mm256_and_si256(_mm256_add_epi16(wb, _mm256_and_si256(_mm256_srli_epi16(wb, (int)k), c->mo)), c->m127);
    const __m256i i = _mm256_packus_epi16(ia, ib);
    const __m256i m4 = _mm256_slli_epi16(i, 3), m5 = _mm256_slli_epi16(i, 2), m6 = _mm256_slli_epi16(i, 1);
#define TRS8_PAIR(a) _mm256_blendv_epi8(_mm256_shuffle_epi8(c->tab[a], i), _mm256_shuffle_epi8(c->tab[(a) + 1], i), m4)
    const __m256i x0 = TRS8_PAIR(0), x1 = TRS8_PAIR(2), x2 = TRS8_PAIR(4), x3 = TRS8_PAIR(6);
#undef TRS8_PAIR
    return _mm256_blendv_epi8(_mm256_blendv_epi8(x0, x1, m5), _mm256_blendv_epi8(x2, x3, m5), m6);
}

/* Sums of the 8 int32 lanes of four rows' accumulators: lanes 0..3 (token t) and 4..7
 * (t+1) of each, as [row 0..3 of t | row 0..3 of t+1] in fp32. */
static ALWAYS_INLINE __m256 trs8_hsum4(__m256i a, __m256i b, __m256i c, __m256i d)
{
    return _mm256_cvtepi32_ps(_mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d)));
}

/* Scores of the NR rows for tokens t < ntm2 (even): dt[t / 2][8] the dot products of the
 * rows (blocks of 4: [rows 4i..4i+3 of t | of t+1], i = 0, 1) from the query words qw
 * [D/16][NR][2][16] (trs8_words). */
static ALWAYS_INLINE void trs8_scores(float *dt, __m256i *wst, const int16_t *qw, const uint8_t *payload, size_t D,
                                      size_t ntm2, const uint8_t *pf, size_t pfn, const unsigned k, const size_t NR)
{
    const trs8 c = trs8_init(k);
    const size_t ng = D / 16, gbytes = G * 2 * k;
    for (size_t j = 0; j < ng; j++) wst[j] = trs8_start(payload + j * gbytes, k, j == ng - 1, &c);
    for (size_t t = 0; t < ntm2; t += 2) {
        __m256i S[8];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < 8; r++) S[r] = _mm256_setzero_si256();
        for (size_t j = 0; j < ng; j++) {
            const uint8_t *g = payload + j * gbytes;
            const size_t o = (t / 2 * ng + j) * 64; /* the next record (rc->pf), a line per group step */
            if (o < pfn) _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
            const __m256i wa = trs8_step(wst[j], g + t * 2 * k, k, 0, &c);
            const __m256i wb = trs8_step(wa, g + (t + 1) * 2 * k, k, j == ng - 1 && t + 1 == G - 1, &c);
            wst[j] = wb;
            const __m256i u = trs8_lookup(wa, wb, k, &c);
            const __m256i lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(u));
            const __m256i hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(u, 1));
            const int16_t *qj = qw + j * NR * 32;
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                const __m256i a = _mm256_madd_epi16(lo, _mm256_loadu_si256((const __m256i *)(const void *)(qj + 32 * r)));
                const __m256i b = _mm256_madd_epi16(hi, _mm256_loadu_si256((const __m256i *)(const void *)(qj + 32 * r + 16)));
                S[r] = _mm256_add_epi32(S[r], _mm256_add_epi32(a, b));
            }
        }
        _mm256_storeu_ps(dt + t / 2 * 16, trs8_hsum4(S[0], S[1], S[2], S[3]));
        if (NR > 4) _mm256_storeu_ps(dt + t / 2 * 16 + 8, trs8_hsum4(S[4 % NR], S[5 % NR], S[6 % NR], S[7 % NR]));
    }
}

/* a0[r], a1[r] (channels 0..7, 8..15 of group g, int32) = Σ_{t < ntm2} y[r][t] · c8[w(t)],
 * y the weights' integers p16 [NR][G] (zero past each row's keys). */
static ALWAYS_INLINE void trs8_values(__m256i a0[8], __m256i a1[8], const int16_t *p16, size_t ntm2, const uint8_t *g,
                                      const int lastg, const unsigned k, const trs8 *cp, const size_t NR)
{
    const trs8 c = *cp;
    __m256i w = trs8_start(g, k, lastg, &c);
    _Pragma("GCC unroll 8")
    for (size_t r = 0; r < NR; r++) a0[r] = a1[r] = _mm256_setzero_si256();
    for (size_t t = 0; t < ntm2; t += 2) {
        const __m256i wa = trs8_step(w, g + t * 2 * k, k, 0, &c);
        const __m256i wb = trs8_step(wa, g + (t + 1) * 2 * k, k, lastg && t + 1 == G - 1, &c);
        w = wb;
        const __m256i u = trs8_lookup(wa, wb, k, &c);
        const __m256i x = _mm256_unpacklo_epi8(u, _mm256_srli_si256(u, 8)); /* (t, t+1) of each channel */
        const __m256i vlo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(x));
        const __m256i vhi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(x, 1));
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) madd_pair2(&a0[r], &a1[r], vlo, vhi, p16 + r * G + t);
    }
}

/* The query words of rows y16 [NR][D]: qw[j][r] = channels 16 j .. 16 j + 7 twice, then
 * 16 j + 8 .. 16 j + 15 twice (the order of a group's looked-up words in trs8_scores). */
static void trs8_words(int16_t *qw, const int16_t *y16, size_t NR, size_t D)
{
    for (size_t j = 0; j < D / 16; j++)
        for (size_t r = 0; r < NR; r++) {
            const int16_t *y = y16 + r * D + 16 * j;
            int16_t *o = qw + (j * NR + r) * 32;
            _mm256_storeu_si256((__m256i *)(void *)o, _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)y)));
            _mm256_storeu_si256((__m256i *)(void *)(o + 16),
                                _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(y + 8))));
        }
}

/* Rows go NR at a time: RB (4); 6 for 5 or 6 rows (the 6 GQA rows of a Qwen2.5 head: 12
 * value accumulators, one walk of each half's states, no zero rows); RBX (8) for more,
 * so that a record's codes are walked once per call instead of once per 4 rows; the
 * padding rows are zero queries. s128: the record is on the 128-entry tables, whose
 * 4-bit halves go by integer dot products over register lookups (trs8_scores,
 * trs8_values; the 2- and 3-bit halves keep the pair tables, which fit L1 and cost as
 * much). */
static ALWAYS_INLINE void chunk_trellis8_nr(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                            const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work,
                                            const size_t NR, const int s128)
{
    float *p = work;            /* [RBX][G] scores, then probabilities */
    float *qs = work + RBX * G; /* [RBX][D] folded queries */
    __m256i *wst = (__m256i *)(void *)(((uintptr_t)(work + RBX * (2 * D + 4 * G + 8)) + 31) & ~(uintptr_t)31); /* [D/8] */
    float *qd = (float *)(void *)(wst + D / 8); /* [D/8][NR][16] queries in the pair layout */
    /* the integer halves' arrays, over the pair layout's (a phase uses one or the other) */
    float *dt = (float *)(void *)(wst + D / 16);         /* [G/2][16] dot products */
    int16_t *y16 = (int16_t *)(void *)(dt + G / 2 * 16); /* [RBX][D] query integers */
    int16_t *qw = y16 + RBX * D;                         /* [D/16][NR][32] query words */
    int16_t *p16 = qw + RBX * 2 * D;                     /* [RBX][G] weight integers */
    const __m256i dlo = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), dhi = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
    const unsigned kb = rc->kbits, vb = rc->vbits;
    const int kint = s128, vint = s128 && vb == 4;
    float ck = 0.0f, cv = 0.0f;
    if (kint) sjk_trellis_s128_table(kb, &ck);
    if (vint) sjk_trellis_s128_table(vb, &cv);
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, r0, NR, &ntm);
        if (!ntm) continue;
        float cz[RBX], zz[RBX], fct[RBX], fk[RBX], fv[RBX];
        rec_fold(qs, cz, q + r0 * D, rb, NR, D, rc);
        const size_t ntm2 = (ntm + 1) & ~(size_t)1; /* pairs of tokens; the extra score is unused */
        const size_t pfn = r0 == 0 ? rc->pf_nbytes : 0;
        if (!rc->kt) { /* a scalar K tile (trellis_mixed): its unpacked codes in fp32 */
            rec_scores(p, qs, cz, rc, D, ntm, pfn, NR);
        } else if (kint) {
            for (size_t r = 0; r < NR; r++) { /* rows past rb: zero queries, zero scale */
                float sq;
                int16_prep_avx2(y16 + r * D, &sq, qs + r * D, D, 16256.0f, 0);
                fk[r] = sq * ck;
            }
            trs8_words(qw, y16, NR, D);
            if (kb == 2) trs8_scores(dt, wst, qw, rc->kt, D, ntm2, rc->pf, pfn, 2, NR);
            else if (kb == 3) trs8_scores(dt, wst, qw, rc->kt, D, ntm2, rc->pf, pfn, 3, NR);
            else trs8_scores(dt, wst, qw, rc->kt, D, ntm2, rc->pf, pfn, 4, NR);
            for (size_t r = 0; r < NR; r++) /* dt: [rows 0..3 of t | of t+1], then rows 4..7 */
                for (size_t t = 0; t < ntm2; t += 2) {
                    const float *d = dt + t / 2 * 16 + (r / 4) * 8 + r % 4;
                    p[r * G + t] = rc->ktok[t] * (fk[r] * d[0] + cz[r]);
                    p[r * G + t + 1] = rc->ktok[t + 1] * (fk[r] * d[4] + cz[r]);
                }
        } else {
            for (size_t hh = 0; hh < D / 8; hh++)
                for (size_t r = 0; r < NR; r++) {
                    const __m256 x = _mm256_loadu_ps(qs + r * D + 8 * hh);
                    _mm256_storeu_ps(qd + (hh * NR + r) * 16, _mm256_permutevar8x32_ps(x, dlo));
                    _mm256_storeu_ps(qd + (hh * NR + r) * 16 + 8, _mm256_permutevar8x32_ps(x, dhi));
                }
            if (kb == 2) trel8_scores_k(p, wst, qd, D, ntm2, rc, cz, 2, pfn, NR);
            else if (kb == 3) trel8_scores_k(p, wst, qd, D, ntm2, rc, cz, 3, pfn, NR);
            else trel8_scores_k(p, wst, qd, D, ntm2, rc, cz, 4, pfn, NR);
        }
        rec_probs(p, fct, zz, nvis + r0, rb, NR, m + r0, l + r0, rc);
        if (!rc->vt) { /* a scalar V tile (trellis_mixed): its unpacked codes in fp32 */
            v_accum(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, ntm, TB, VL_U8, rc->vc, NULL, 1, rc->vch, zz);
            continue;
        }
        if (vint) {
            for (size_t r = 0; r < NR; r++) { /* p is zero past each row's keys */
                float sp;
                int16_prep_avx2(p16 + r * G, &sp, p + r * G, G, 16256.0f, 0);
                fv[r] = sp * cv;
            }
            const trs8 c4 = trs8_init(4); /* the tables once per block of rows, not per group */
            for (size_t j = 0; j < D / 16; j++) {
                __m256i a0[RBX], a1[RBX];
                trs8_values(a0, a1, p16, ntm2, rc->vt + j * (G * 2 * 4), j == D / 16 - 1, 4, &c4, NR);
                const __m256 vc0 = _mm256_loadu_ps(rc->vch + 16 * j), vc1 = _mm256_loadu_ps(rc->vch + 16 * j + 8);
                for (size_t r = 0; r < rb; r++) {
                    if (!nvis[r0 + r]) continue;
                    float *ad = acc + (r0 + r) * D + 16 * j;
                    const __m256 f = _mm256_set1_ps(fct[r]), z = _mm256_set1_ps(zz[r]), sc = _mm256_set1_ps(fv[r]);
                    const __m256 x0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a0[r]), sc, z);
                    const __m256 x1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a1[r]), sc, z);
                    _mm256_storeu_ps(ad, _mm256_fmadd_ps(_mm256_loadu_ps(ad), f, _mm256_mul_ps(vc0, x0)));
                    _mm256_storeu_ps(ad + 8, _mm256_fmadd_ps(_mm256_loadu_ps(ad + 8), f, _mm256_mul_ps(vc1, x1)));
                }
            }
            continue;
        }
        for (size_t hh = 0; hh < D / 8; hh++) {
            __m256 a[RBX];
            if (vb == 2) trel8_values_k(a, p, ntm2, rc, hh, 2, NR);
            else if (vb == 3) trel8_values_k(a, p, ntm2, rc, hh, 3, NR);
            else trel8_values_k(a, p, ntm2, rc, hh, 4, NR);
            const __m256 vch = _mm256_loadu_ps(rc->vch + 8 * hh);
            for (size_t r = 0; r < rb; r++) {
                if (!nvis[r0 + r]) continue;
                float *ad = acc + (r0 + r) * D + 8 * hh;
                const __m256 x = _mm256_fmadd_ps(_mm256_loadu_ps(ad), _mm256_set1_ps(fct[r]), _mm256_mul_ps(vch, _mm256_set1_ps(zz[r])));
                _mm256_storeu_ps(ad, _mm256_add_ps(x, _mm256_mul_ps(vch, a[r])));
            }
        }
    }
}

static void chunk_trellis_avx2(const float *q, size_t R, size_t D, const uint32_t *nvis, const sjk_attn_rec *rc,
                               float *m, float *l, float *acc, float *work, const int s128)
{
    if (R == 5 || R == 6) chunk_trellis8_nr(q, R, D, nvis, rc, m, l, acc, work, 6, s128);
    else if (R > RB) chunk_trellis8_nr(q, R, D, nvis, rc, m, l, acc, work, RBX, s128);
    else chunk_trellis8_nr(q, R, D, nvis, rc, m, l, acc, work, RB, s128);
}

/* Records: trellis read in place (chunk_trellis_avx2, also a trellis tile beside a scalar
 * one), scalar ones by chunk_rec_scalar. */
static void chunk_rec_avx2(const float *q, size_t R, size_t D, const uint32_t *nvis, const sjk_attn_rec *rc,
                           float *m, float *l, float *acc, float *work)
{
    if (rc->kt || rc->vt) chunk_trellis_avx2(q, R, D, nvis, rc, m, l, acc, work, 0);
    else chunk_rec_scalar(q, R, D, nvis, rc, m, l, acc, work);
}

/* chunk_trellis_q8: a record on the 128-entry tables by chunk_trellis8_nr's integer
 * halves where they are 4-bit; every other record as chunk_rec (the pair tables, fp32,
 * within the contract's tolerance of the integer reference). */
static void chunk_trellis_q8_avx2(const float *q, size_t R, size_t D, const uint32_t *nvis, const sjk_attn_rec *rc,
                                  float *m, float *l, float *acc, float *work)
{
    const int s128 = rc->kt && rc->vt && sjk_trellis_codebook_set(rc->kcb, rc->kbits) == SJK_TRELLIS_CB_SET_S128 &&
                     sjk_trellis_codebook_set(rc->vcb, rc->vbits) == SJK_TRELLIS_CB_SET_S128;
    if (s128) chunk_trellis_avx2(q, R, D, nvis, rc, m, l, acc, work, 1);
    else chunk_rec_avx2(q, R, D, nvis, rc, m, l, acc, work);
}

/* Rows of 5..7 bits (record format v2: the low nibbles as a 4-bit row, then the high
 * b - 4 bits as a 1-bit (b = 5), 2-bit (6) or 2-bit then 1-bit (7) row; record_layout.h),
 * 32 codes per step made in registers, n a multiple of 64. A 4-bit unit of 32 codes is
 * 16 bytes whose low nibbles are codes 0..15 and high nibbles 16..31: the bytes in both
 * 128-bit lanes, shifted by 0 and 4. A 2-bit unit of 64 codes is 16 bytes whose bits
 * 2s, 2s+1 are codes 16s..16s+15: the 32 codes of half j of a unit are the fields
 * s = 2j, 2j+1, the bytes shifted by 4j and 4j + 2 in the two lanes. A 1-bit field of 32
 * codes is 4 bytes: byte k / 8 spread to byte k, its bit k % 8 tested. */
static void unpack_row_hi_avx2(uint8_t *codes, const uint8_t *rows, size_t row_nbytes, size_t nrows, size_t n,
                               unsigned bits)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    const __m256i sh4 = _mm256_setr_epi64x(0, 0, 4, 4);
    const __m256i sh2[2] = {_mm256_setr_epi64x(0, 0, 2, 2), _mm256_setr_epi64x(4, 4, 6, 6)};
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                            3, 3, 3, 3, 3, 3, 3);
    const __m256i bitsel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i top = _mm256_set1_epi8(bits == 7 ? 0x40 : 0x10);
    for (size_t j = 0; j < nrows; j++, codes += n) {
        const uint8_t *row = rows + j * row_nbytes;
        const uint8_t *hi = row + n / 2;                 /* the 2-bit field (6, 7) or the 1-bit one (5) */
        const uint8_t *b1 = bits == 7 ? hi + n / 4 : hi; /* the 1-bit field (5, 7) */
        for (size_t i = 0; i < n; i += 32) {
            const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(row + i / 2)));
            __m256i c = _mm256_and_si256(_mm256_srlv_epi64(x, sh4), m4);
            if (bits >= 6) {
                const __m256i h =
                    _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(hi + i / 64 * 16)));
                c = _mm256_or_si256(c, _mm256_slli_epi16(_mm256_and_si256(_mm256_srlv_epi64(h, sh2[(i / 32) & 1]), m2), 4));
            }
            if (bits != 6) {
                uint32_t w;
                memcpy(&w, b1 + i / 8, 4);
                const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)w), spread);
                const __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(b, bitsel), bitsel);
                c = _mm256_or_si256(c, _mm256_and_si256(on, top));
            }
            _mm256_storeu_si256((__m256i *)(void *)(codes + i), c);
        }
    }
}

/* unpack_rows (attn_kernels.h): 5..7-bit rows in one loop, other widths row by row. */
static void unpack_rows_avx2(uint8_t *codes, const uint8_t *rows, size_t row_nbytes, size_t nrows, size_t n,
                             unsigned bits)
{
    if (bits > 4 && bits < 8 && n % 64 == 0) {
        unpack_row_hi_avx2(codes, rows, row_nbytes, nrows, n, bits);
        return;
    }
    for (size_t j = 0; j < nrows; j++) sjk_attn_unpack_row_avx2(codes + j * n, rows + j * row_nbytes, n, bits);
}

void sjk_attn_unpack_row_avx2(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits)
{
    const __m128i m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(0x03);
    if (bits == 8) {
        memcpy(codes, row, n);
        return;
    }
    if (bits > 4 && bits < 8 && n % 64 == 0) { /* record format v2 in registers (unpack_row_hi_avx2) */
        unpack_row_hi_avx2(codes, row, 0, 1, n, bits);
        return;
    }
    if (bits > 4) { /* record format v2: a 4-bit row of low nibbles, then the high bits */
        uint8_t hi[512]; /* n <= max(D, G) = 512 */
        if (n > sizeof hi) return;
        if (bits == 5) {
            for (size_t i = 0; i < n; i++) hi[i] = (uint8_t)((row[n / 2 + i / 8] >> (i % 8)) & 1u);
        } else {
            sjk_attn_unpack_row_avx2(hi, row + n / 2, n, bits - 4);
        }
        sjk_attn_unpack_row_avx2(codes, row, n, 4);
        for (size_t i = 0; i < n; i += 16) {
            __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(codes + i));
            __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(hi + i));
            _mm_storeu_si128((__m128i *)(void *)(codes + i), _mm_or_si128(c, _mm_and_si128(_mm_slli_epi16(h, 4), _mm_set1_epi8((char)0xF0))));
        }
        return;
    }
    if (bits == 4) {
        for (size_t u = 0; u < n; u += 32) {
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(row + u / 2));
            _mm_storeu_si128((__m128i *)(void *)(codes + u), _mm_and_si128(x, m4));
            _mm_storeu_si128((__m128i *)(void *)(codes + u + 16), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
        }
        return;
    }
    for (size_t u = 0; u < n; u += 64) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(row + u / 4));
        _mm_storeu_si128((__m128i *)(void *)(codes + u), _mm_and_si128(x, m2));
        _mm_storeu_si128((__m128i *)(void *)(codes + u + 16), _mm_and_si128(_mm_srli_epi16(x, 2), m2));
        _mm_storeu_si128((__m128i *)(void *)(codes + u + 32), _mm_and_si128(_mm_srli_epi16(x, 4), m2));
        _mm_storeu_si128((__m128i *)(void *)(codes + u + 48), _mm_and_si128(_mm_srli_epi16(x, 6), m2));
    }
    if (bits == 3) {
        const uint8_t *hi = row + n / 4;
        const __m128i bitsel = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, (char)128, 1, 2, 4, 8, 16, 32, 64, (char)128);
        const __m128i spread = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        const __m128i four = _mm_set1_epi8(4);
        for (size_t i = 0; i < n; i += 16) {
            uint16_t two;
            memcpy(&two, hi + i / 8, 2);
            __m128i b = _mm_shuffle_epi8(_mm_cvtsi32_si128(two), spread);
            __m128i on = _mm_cmpeq_epi8(_mm_and_si128(b, bitsel), bitsel);
            __m128i cv = _mm_loadu_si128((const __m128i *)(const void *)(codes + i));
            _mm_storeu_si128((__m128i *)(void *)(codes + i), _mm_or_si128(cv, _mm_and_si128(on, four)));
        }
    }
}

const sjk_attn_kernels sjk_attn_kernels_table_avx2 = {
    "avx2", chunk_f32_x, chunk_f32_many_x, chunk_f16_x, NULL /* tq6_0 rows in fp32: chunk_tq6_q16 reads them */, chunk_rec_avx2,
    sjk_attn_unpack_row_avx2, f16_to_f32_x, 1 /* token-axis trellis records read in place */,
    chunk_qblk_avx2,
    chunk_rec_q16_avx2,
    chunk_tq6_q16_avx2, sjk_attn_qint_prep_avx2,
    NULL /* trellis records by integer dot products: chunk_rec (pair tables, fp32) */,
    NULL /* block-row values by int16 weights: chunk_qblk (fp32 values) */,
    chunk_trellis_q8_avx2 /* 128-entry tables; other grids: chunk_rec */, unpack_rows_avx2,
    NULL /* 4-bit V records by int16 weights: chunk_rec_q16 / chunk_rec (fp32 values; without VNNI an
          * int16 pair costs a multiply-add and an add, as two FMAs do) */,
    1 /* chunk_trellis_q8 reads records with one scalar tile (in fp32, as chunk_rec) */,
};
