/* attn_avx512.c — the AVX-512 attention kernels (attn_kernels.h): the kernels both
 * instruction sets share, from attn_x86.h at 16 lanes, and the families that need
 * AVX-512's byte permutes, masks and VNNI (VBMI, VNNI): the tq6_0 staging ring read in
 * place (keys in fp32, or by int16 dot products), trellis records read in place, q8_0 / q4_0
 * block rows scored by integer dot products against int8 query pieces and their values
 * summed by int16 weights, and 4-bit records scored by int16 dot products.
 * Every kernel is tested against attn_ref.c (tests/test_attention.c).
 */
#include <pthread.h>

#include "codec/format.h"
#include "codec/trellis.h"

#define SJK_ATTN_W 16
#include "attention/attn_x86.h"

/* sjk_attn_q16_prep (attn_ref.c) 16 lanes at a time, to the same bits: the row x[D] as
 * int16 q16[D] and its scale. */
/* max |x[i]| over n values (a multiple of 16), NaN if one is NaN or infinite. */
static inline float absmax16(const float *x, size_t n)
{
    __m512 mx = _mm512_setzero_ps();
    __mmask16 bad = 0;
    for (size_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        bad |= _mm512_fpclass_ps_mask(v, 0x99); /* NaN, +inf, -inf */
        mx = _mm512_max_ps(mx, _mm512_abs_ps(v));
    }
    return bad ? NAN : _mm512_reduce_max_ps(mx);
}

static void q16_prep(int16_t *q16, float *scale, const float *x, size_t D)
{
    const float amax = absmax16(x, D);
    const float s = isfinite(amax) ? amax / 32767.0f : NAN;
    const float inv = s > 0 ? 1.0f / s : 0.0f;
    *scale = s;
    const __m512 vinv = _mm512_set1_ps(isfinite(amax) ? inv : 0.0f), lim = _mm512_set1_ps(32767.0f);
    for (size_t d = 0; d < D; d += 16) {
        __m512 y = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + d), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        y = _mm512_max_ps(_mm512_min_ps(y, lim), _mm512_sub_ps(_mm512_setzero_ps(), lim));
        _mm256_storeu_si256((__m256i *)(void *)(q16 + d), _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(y)));
    }
}

/* Per row r of a block: the int16 pair at w + r · stride broadcast to every lane, then
 * a[r] += lo · pair and b[r] += hi · pair by vpdpwssd (two keys' or two channels' words in
 * each int32 lane of lo and hi). The step of the int16 dot-product readers. */
static ALWAYS_INLINE void dpw_rows(__m512i *a, __m512i *b, __m512i lo, __m512i hi, const int16_t *w, size_t stride,
                                   const size_t NR)
{
    _Pragma("GCC unroll 8")
    for (size_t r = 0; r < NR; r++) {
        int32_t pw;
        memcpy(&pw, w + r * stride, 4);
        const __m512i pp = _mm512_set1_epi32(pw);
        a[r] = _mm512_dpwssd_epi32(a[r], lo, pp);
        b[r] = _mm512_dpwssd_epi32(b[r], hi, pp);
    }
}

/* sjk_attn_q16_prep_l1 (attn_ref.c) 16 lanes at a time: one pass for max|x| and Σ|x|,
 * one to round (n: a multiple of 16). */
static void q16_prep_l1(int16_t *q16, float *scale, const float *x, size_t n, uint32_t sum_max)
{
    __m512 mx = _mm512_setzero_ps(), sa = _mm512_setzero_ps();
    __mmask16 bad = 0;
    for (size_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        bad |= _mm512_fpclass_ps_mask(v, 0x99); /* NaN, +inf, -inf */
        mx = _mm512_max_ps(mx, _mm512_abs_ps(v));
        sa = _mm512_add_ps(sa, _mm512_abs_ps(v));
    }
    const float amax = bad ? NAN : _mm512_reduce_max_ps(mx);
    float s = isfinite(amax) ? amax / 32767.0f : NAN;
    const float sl = _mm512_reduce_add_ps(sa) / (float)(sum_max - sum_max / 64);
    if (isfinite(amax) && sl > s) s = sl;
    const float inv = s > 0 ? 1.0f / s : 0.0f;
    *scale = s;
    const __m512 vinv = _mm512_set1_ps(isfinite(amax) ? inv : 0.0f), lim = _mm512_set1_ps(32767.0f);
    for (size_t i = 0; i < n; i += 16) {
        __m512 y = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        y = _mm512_max_ps(_mm512_min_ps(y, lim), _mm512_sub_ps(_mm512_setzero_ps(), lim));
        _mm256_storeu_si256((__m256i *)(void *)(q16 + i), _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(y)));
    }
}

/* tq6_0_stage rows (the staging ring), decoded 64 values at a time by byte lookups and
 * used by all RB rows at once. Block layout (docs/FORMAT.md): fp16 norm, qs[64] (byte b:
 * element 2b in the low nibble, 2b+1 in the high one), qh[32] (element e's high 2 bits
 * at bit 2e of the 256-bit string).
 *
 * Decode of one parity (the 64 even or the 64 odd elements of a block), 16 instructions
 * for 64 values:
 *   codes  byte b = element 2b + par: the nibble from qs (shifted by 4 for odd), the two
 *          high bits from qh, brought to bits 4..5 of byte b by one qword permute (qh
 *          qword b/16 to result qword b/8) and one vpmultishiftqb (control byte b: bit
 *          offset 4 (b mod 16) − 4 + 2 par, mod 64), merged by one ternary logic; bits
 *          6..7 stay garbage, which vpermb ignores;
 *   values the fp32 centroid of a code is its four bytes, each looked up by one vpermb
 *          in a 64-byte plane of the table (byte i of every centroid), and put back
 *          together by two rounds of byte and word unpacks. The unpacks work inside
 *          128-bit lanes, so vector k (0..3) of the parity holds in position 4l + i the
 *          element 2 (16 l + 4 k + i) + par (l: 128-bit lane, i: 0..3).
 * Scores use the queries gathered into that order (once per chunk); values accumulate
 * in it and are put back in element order once per (block, row) per chunk. Values are
 * centroid * norm as in the format's decode; the norm is applied per (key, block)
 * outside the lanes: to the block's partial dot product for scores, to the probability
 * for values. Compared with one two-table vpermt2ps per 16 values (the previous
 * kernel), this halves the shuffle work per value; `bench_split_weights` (ring) shows it. */
typedef struct tq6_lut { __m512i p0, p1, p2, p3, ctl[2], qperm, m4; } tq6_lut;

static inline tq6_lut tq6_lut_init(void)
{
    uint8_t pl[4][64], c[2][64];
    for (int j = 0; j < 64; j++) {
        uint32_t u;
        memcpy(&u, sjk_tq6_centroids + j, 4);
        for (int i = 0; i < 4; i++) pl[i][j] = (uint8_t)(u >> (8 * i));
        for (int par = 0; par < 2; par++) c[par][j] = (uint8_t)((4 * (j % 16) + 64 - 4 + 2 * par) & 63);
    }
    tq6_lut t;
    t.p0 = _mm512_loadu_si512(pl[0]);
    t.p1 = _mm512_loadu_si512(pl[1]);
    t.p2 = _mm512_loadu_si512(pl[2]);
    t.p3 = _mm512_loadu_si512(pl[3]);
    t.ctl[0] = _mm512_loadu_si512(c[0]);
    t.ctl[1] = _mm512_loadu_si512(c[1]);
    t.qperm = _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3);
    t.m4 = _mm512_set1_epi8(0x0F);
    return t;
}

/* The 64 codes of parity par of a block (byte b: element 2b + par, bits 0..5). */
static inline __m512i tq6_codes64(const tq6_lut *t, const uint8_t *blk, int par)
{
    __m512i qs = _mm512_loadu_si512((const void *)(blk + 2));
    if (par) qs = _mm512_srli_epi16(qs, 4);
    const __m512i qh = _mm512_permutexvar_epi64(t->qperm, _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 66))));
    const __m512i hb = _mm512_multishift_epi64_epi8(t->ctl[par], qh);
    return _mm512_ternarylogic_epi32(qs, hb, t->m4, 0xE4); /* m4 ? qs : hb */
}

/* The centroids of 64 codes: f[k] position 4l + i <- code byte 16 l + 4 k + i. */
static inline void tq6_values64(const tq6_lut *t, __m512i code, __m512 f[4])
{
    const __m512i b0 = _mm512_permutexvar_epi8(code, t->p0), b1 = _mm512_permutexvar_epi8(code, t->p1);
    const __m512i b2 = _mm512_permutexvar_epi8(code, t->p2), b3 = _mm512_permutexvar_epi8(code, t->p3);
    const __m512i l01 = _mm512_unpacklo_epi8(b0, b1), h01 = _mm512_unpackhi_epi8(b0, b1);
    const __m512i l23 = _mm512_unpacklo_epi8(b2, b3), h23 = _mm512_unpackhi_epi8(b2, b3);
    f[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(l01, l23));
    f[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(l01, l23));
    f[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(h01, h23));
    f[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(h01, h23));
}

/* Elements 16 o .. 16 o + 15 of a block from its values v[128] in decode order (tq6_elem):
 * element 16 o + m is parity m % 2, vector 2 (o % 2) + m / 8, lane 4 (o / 2) + (m / 2) % 4;
 * two two-source permutes (one per parity, over its vector pair) and a blend. idx[h]
 * lane m: (m / 8) 16 + 4 h + (m / 2) % 4 (tq6_elem16_idx). */
static inline __m512 tq6_elem16(const float *v, size_t o, const __m512i idx[4])
{
    const size_t k0 = 2 * (o % 2);
    const __m512 x = _mm512_permutex2var_ps(vload(v + 16 * k0), idx[o / 2], vload(v + 16 * (k0 + 1)));
    const __m512 y = _mm512_permutex2var_ps(vload(v + 64 + 16 * k0), idx[o / 2], vload(v + 64 + 16 * (k0 + 1)));
    return _mm512_mask_blend_ps((__mmask16)0xAAAA, x, y);
}

static inline void tq6_elem16_idx(__m512i idx[4])
{
    for (int h = 0; h < 4; h++) {
        int32_t x[16];
        for (int m = 0; m < 16; m++) x[m] = (m / 8) * 16 + 4 * h + (m / 2) % 4;
        idx[h] = _mm512_loadu_si512(x);
    }
}

/* Element of a block held by position p (0..127) of the decode order: parity p / 64,
 * vector k = (p / 16) % 4, position 4 l + i = p % 16. */
static inline size_t tq6_elem(size_t p)
{
    const size_t par = p / 64, k = (p / 16) % 4, l = (p % 16) / 4, i = p % 4;
    return 2 * (16 * l + 4 * k + i) + par;
}

/* dst[i] = the fp16 at base + i * stride, i < n (16 per gather; the bytes after the
 * last one are never read: each gather element is masked to i < n, and reads 4 bytes
 * of which 2 lie inside the block). */
static void tq6_norms(float *dst, const uint8_t *base, size_t n, size_t stride)
{
    const __m512i step = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)stride));
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, step, (const void *)(base + i * stride), 1);
        _mm512_mask_storeu_ps(dst + i, k, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w)));
    }
}

/* Sums of the 16 lanes of each of a, b, c, d: lanes 0, 1, 2, 3 of the result. */
_Static_assert(RB == 4, "hsum4x16 reduces one block of RB rows");
static inline __m128 hsum4x16(__m512 a, __m512 b, __m512 c, __m512 d)
{
    const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i hi = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    __m512 ab = _mm512_add_ps(_mm512_permutex2var_ps(a, lo, b), _mm512_permutex2var_ps(a, hi, b));
    __m512 cd = _mm512_add_ps(_mm512_permutex2var_ps(c, lo, d), _mm512_permutex2var_ps(c, hi, d));
    /* ab: a's 8 partial sums in lanes 0..7, b's in 8..15; cd likewise */
    const __m512i lo2 = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const __m512i hi2 = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    __m512 x = _mm512_add_ps(_mm512_permutex2var_ps(ab, lo2, cd), _mm512_permutex2var_ps(ab, hi2, cd));
    /* x: 4 partial sums each of a, b, c, d in lanes 4j..4j+3; finish inside 128-bit lanes */
    x = _mm512_add_ps(x, _mm512_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)));
    x = _mm512_add_ps(x, _mm512_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), x));
}

/* One block's partial scores (16 lanes per row, before the block norm) of rows qp / qi at
 * block b, in fp32 (q16 = 0: the centroids decoded by tq6_values64 against the fp32
 * queries in decode order) or in int16 (q16 = 1, chunk_tq6_q16: qi [D] per row, the
 * row's queries as int16 in the order of the words below, qw_elem). In int16 a parity's
 * 64 codes become their int16 centroids by two vpermb (low and high byte planes) and two
 * byte unpacks (w0: code bytes 16 l + 0..7 of each 128-bit lane l, w1: 16 l + 8..15);
 * four vpdpwssd per row add the block's 128 products code x query into 16 int32 lanes,
 * exact (|q16| <= 32767, |c16| <= 8191, eight products a lane: < 2^31), converted once. */
static ALWAYS_INLINE void tq6_block(__m512 e[RBX], const uint8_t *blk, size_t b, const float *qp, const int16_t *qi,
                                    size_t D, const tq6_lut *tt, const __m512i c16lo, const __m512i c16hi,
                                    const size_t NR, const int q16)
{
    if (q16) {
        __m512i a[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) a[r] = _mm512_setzero_si512();
        _Pragma("GCC unroll 2")
        for (int par = 0; par < 2; par++) {
            const __m512i code = tq6_codes64(tt, blk, par);
            const __m512i lo = _mm512_permutexvar_epi8(code, c16lo), hi = _mm512_permutexvar_epi8(code, c16hi);
            const __m512i w0 = _mm512_unpacklo_epi8(lo, hi), w1 = _mm512_unpackhi_epi8(lo, hi);
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                const int16_t *qr = qi + r * D + b * SJK_TQ_BLOCK + 64 * par;
                a[r] = _mm512_dpwssd_epi32(a[r], w0, _mm512_loadu_si512((const void *)qr));
                a[r] = _mm512_dpwssd_epi32(a[r], w1, _mm512_loadu_si512((const void *)(qr + 32)));
            }
        }
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) e[r] = _mm512_cvtepi32_ps(a[r]);
        return;
    }
    __m512 h[2][RBX];
    _Pragma("GCC unroll 2")
    for (int par = 0; par < 2; par++) {
        __m512 f[4];
        tq6_values64(tt, tq6_codes64(tt, blk, par), f);
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) {
            const float *qr = qp + r * D + b * SJK_TQ_BLOCK + 64 * par;
            __m512 x = _mm512_mul_ps(_mm512_loadu_ps(qr), f[0]);
            x = _mm512_fmadd_ps(_mm512_loadu_ps(qr + 16), f[1], x);
            x = _mm512_fmadd_ps(_mm512_loadu_ps(qr + 32), f[2], x);
            h[par][r] = _mm512_fmadd_ps(_mm512_loadu_ps(qr + 48), f[3], x);
        }
    }
    _Pragma("GCC unroll 8")
    for (size_t r = 0; r < NR; r++) e[r] = _mm512_add_ps(h[0][r], h[1][r]);
}

/* Scores p[r][t] of keys [0, ntm): per key, per block the rows' lane partials (tq6_block)
 * scaled by the block norm, summed over the blocks, reduced, times sc[r] (1, or for int16
 * the row's q16 scale times the centroids'); V: the chunk's V rows, prefetched a row per
 * key into L1 (ring rows at long contexts come from L3: 1.01-1.05x, docs/notes/benchmarks.md
 * "Attention"); pf: pfn bytes of the next chunk's K rows, a row's worth per key into L2
 * (both NULL: none). */
static ALWAYS_INLINE void tq6_scores(float *p, const uint8_t *K, size_t ntm, size_t nb, const float *kn, const float *qp,
                                     const int16_t *qi, size_t D, const float *sc, const tq6_lut *tt,
                                     const __m512i c16lo, const __m512i c16hi, const size_t NR, const int q16,
                                     const uint8_t *V, const uint8_t *pf, size_t pfn)
{
    const size_t row_nbytes = nb * SJK_TQ6_0_NBYTES;
    for (size_t t = 0; t < ntm; t++) {
        const uint8_t *row = K + t * row_nbytes;
        if (V)
            for (size_t o = (t * row_nbytes) & ~(size_t)63; o < (t + 1) * row_nbytes; o += 64)
                _mm_prefetch((const char *)V + o, _MM_HINT_T0);
        for (size_t o = (t * row_nbytes) & ~(size_t)63; o < (t + 1) * row_nbytes && o < pfn; o += 64)
            _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
        __m512 s[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < (NR + 3) / 4 * 4; r++) s[r] = vzero(); /* NR = 6: two zero partials */
        for (size_t b = 0; b < nb; b++) {
            __m512 e[RBX];
            tq6_block(e, row + b * SJK_TQ6_0_NBYTES, b, qp, qi, D, tt, c16lo, c16hi, NR, q16);
            const __m512 nv = vset1(kn[t * nb + b]);
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) s[r] = vfmadd(e[r], nv, s[r]);
        }
        float sv[RBX];
        for (size_t r = 0; r < NR; r += 4) _mm_storeu_ps(sv + r, hsum4x16(s[r], s[r + 1], s[r + 2], s[r + 3]));
        for (size_t r = 0; r < NR; r++) p[r * G + t] = sv[r] * sc[r];
    }
}

/* Element of a block whose query goes to position i (0..127) of tq6_scores_q16's order:
 * parity i / 64, word vector k = (i / 32) % 2, lane l = (i % 32) / 8, word j = i % 8. */
static inline size_t qw_elem(size_t i)
{
    const size_t par = i / 64, k = (i / 32) % 2, l = (i % 32) / 8, j = i % 8;
    return 2 * (16 * l + 8 * k + j) + par;
}

/* Values of the ring rows by int16 dot products (chunk_tq6_q16): per block and row the
 * weights pn = p · Vnorm become int16 (q16_prep_l1 under SJK_ATTN_TQ6_SUM_MAX), two keys
 * go at a time: each key's 64 codes of a parity become int16 centroids (two vpermb and
 * two byte unpacks, as the keys' scores), and two word unpacks interleave the two keys
 * so that int32 lane 4l + i of vector k holds one element's (key t, key t+1) pair, the
 * element of tq6_values64's order (code byte 16 l + 4 k + i); one vpdpwssd per row and
 * 32 values against the pair's weights broadcast adds them exactly in int32. One
 * conversion and scale per block and row, then tq6_elem16 puts the values back in
 * element order, as the fp32 path does. Against the fp32 path (four vpermb and eight
 * unpacks per 64 values, four FMAs per row) this is six vpermb / unpacks and two
 * vpdpwssd per row per 64 values. */
static ALWAYS_INLINE void tq6_values_q16(float *acc, float *va, int16_t *p16, const float *pn, const uint8_t *V,
                                         size_t ntm, size_t nb, size_t D, const uint32_t *nvis, size_t rb, float csc,
                                         const tq6_lut *tt, const __m512i c16lo, const __m512i c16hi,
                                         const __m512i eidx[4], const size_t NR)
{
    const size_t row_nbytes = nb * SJK_TQ6_0_NBYTES, ntm2 = (ntm + 1) & ~(size_t)1;
    const size_t ntm16 = (ntm + 15) & ~(size_t)15;
    float ps[4][RBX];
    for (size_t b = 0; b < nb; b++)
        for (size_t r = 0; r < NR; r++) {
            q16_prep_l1(p16 + (b * RBX + r) * G, &ps[b][r], pn + (b * RBX + r) * G, ntm16, SJK_ATTN_TQ6_SUM_MAX);
            ps[b][r] *= csc;
        }
    for (size_t b = 0; b < nb; b++) {
        const int16_t *pb = p16 + b * RBX * G;
        /* more than 4 rows: two passes over the keys per parity, each with half the
         * accumulators (6 rows x 4 vectors and the lookups do not fit the registers) */
        const int nh = NR > 4 ? 2 : 1;
        for (int par = 0; par < 2; par++)
            for (int h = 0; h < nh; h++) {
                const int kn = 4 / nh;
                __m512i a[RBX][4];
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < NR; r++)
                    _Pragma("GCC unroll 8")
                    for (int k = 0; k < 4; k++) a[r][k] = _mm512_setzero_si512();
                for (size_t t = 0; t < ntm2; t += 2) {
                    const uint8_t *b0 = V + t * row_nbytes + b * SJK_TQ6_0_NBYTES;
                    const uint8_t *b1 = t + 1 < ntm ? b0 + row_nbytes : b0; /* its weight is zero */
                    const __m512i c0 = tq6_codes64(tt, b0, par), c1 = tq6_codes64(tt, b1, par);
                    const __m512i l0 = _mm512_permutexvar_epi8(c0, c16lo), h0 = _mm512_permutexvar_epi8(c0, c16hi);
                    const __m512i l1 = _mm512_permutexvar_epi8(c1, c16lo), h1 = _mm512_permutexvar_epi8(c1, c16hi);
                    __m512i d[4];
                    if (nh == 1 || h == 0) {
                        const __m512i x0 = _mm512_unpacklo_epi8(l0, h0), x1 = _mm512_unpacklo_epi8(l1, h1);
                        d[0] = _mm512_unpacklo_epi16(x0, x1);
                        d[1] = _mm512_unpackhi_epi16(x0, x1);
                    }
                    if (nh == 1 || h == 1) {
                        const __m512i y0 = _mm512_unpackhi_epi8(l0, h0), y1 = _mm512_unpackhi_epi8(l1, h1);
                        d[nh == 1 ? 2 : 0] = _mm512_unpacklo_epi16(y0, y1);
                        d[nh == 1 ? 3 : 1] = _mm512_unpackhi_epi16(y0, y1);
                    }
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < NR; r++) {
                        int32_t pw;
                        memcpy(&pw, pb + r * G + t, 4);
                        const __m512i pp = _mm512_set1_epi32(pw);
                        _Pragma("GCC unroll 8")
                        for (int k = 0; k < kn; k++) a[r][k] = _mm512_dpwssd_epi32(a[r][k], d[k], pp);
                    }
                }
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < NR; r++) {
                    const __m512 sc = _mm512_set1_ps(ps[b][r]);
                    _Pragma("GCC unroll 8")
                    for (int k = 0; k < kn; k++)
                        _mm512_storeu_ps(va + r * SJK_TQ_BLOCK + 64 * par + 16 * (k + kn * h),
                                         _mm512_mul_ps(sc, _mm512_cvtepi32_ps(a[r][k])));
                }
            }
        for (size_t r = 0; r < rb; r++) {
            if (!nvis[r]) continue;
            float *ad = acc + r * D + b * SJK_TQ_BLOCK;
            const float *vr = va + r * SJK_TQ_BLOCK;
            for (size_t o = 0; o < SJK_TQ_BLOCK / 16; o++)
                vstore(ad + 16 * o, vadd(vload(ad + 16 * o), tq6_elem16(vr, o, eidx)));
        }
    }
}

static inline __attribute__((always_inline)) void chunk_tq6_nr(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                                                const uint8_t *K, const uint8_t *V, size_t n,
                                                                float *m, float *l, float *acc, float *work,
                                                                const uint8_t *pf, size_t pfn, const size_t NR,
                                                                const int q16)
{
    const size_t nb = D / SJK_TQ_BLOCK, row_nbytes = nb * SJK_TQ6_0_NBYTES;
    const tq6_lut tt = tq6_lut_init();
    float *p = work;                                   /* [RBX][G] scores, probabilities */
    float *qp = work + RBX * G;                         /* [RBX][D] queries, decode order */
    float *kn = work + RBX * (2 * D + 4 * G + 8);       /* [n][nb] K block norms */
    float *vn = kn + G * nb;                           /* [nb][G] V block norms (0 past n) */
    float *pn = vn + G * nb;                           /* [nb][RBX][G] p * V norm */
    float *va = pn + nb * RBX * G;                      /* [RBX][128] a block's values, decode order */
    int16_t *qi = (int16_t *)(void *)(qp + RBX * D);    /* [RBX][D] int16 queries (q16) */
    int16_t *p16 = (int16_t *)(void *)(va + RBX * SJK_TQ_BLOCK); /* [nb][RBX][G] int16 weights (q16) */
    int32_t qelem[SJK_TQ_BLOCK];
    for (size_t i = 0; i < SJK_TQ_BLOCK; i++) qelem[i] = (int32_t)(q16 ? qw_elem(i) : tq6_elem(i));
    __m512i eidx[4];
    tq6_elem16_idx(eidx);
    __m512i c16lo = _mm512_setzero_si512(), c16hi = c16lo;
    float csc = 0.0f;
    if (q16) {
        int16_t c16[64];
        uint8_t lo[64], hi[64];
        csc = sjk_attn_tq6_c16(c16);
        for (int j = 0; j < 64; j++) {
            lo[j] = (uint8_t)((uint16_t)c16[j] & 0xFF);
            hi[j] = (uint8_t)((uint16_t)c16[j] >> 8);
        }
        c16lo = _mm512_loadu_si512(lo);
        c16hi = _mm512_loadu_si512(hi);
    }
    /* the fp16 norms, 16 at a time by one gather: K's in key order now, V's per block
     * after the first scores, which bring the V rows into L1 (the gather touches every
     * row: at long contexts, before the scores, it waited for memory) */
    tq6_norms(kn, K, n * nb, SJK_TQ6_0_NBYTES);
    int vn_ready = 0;
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, r0, NR, &ntm);
        if (!ntm) continue;
        for (size_t r = 0; r < NR; r++)
            for (size_t b = 0; b < nb; b++)
                for (size_t i = 0; i < SJK_TQ_BLOCK; i += 16)
                    _mm512_storeu_ps(qp + r * D + b * SJK_TQ_BLOCK + i,
                                     r < rb ? _mm512_i32gather_ps(_mm512_loadu_si512((const void *)(qelem + i)),
                                                                  q + (r0 + r) * D + b * SJK_TQ_BLOCK, 4)
                                            : _mm512_setzero_ps());
        float sc[RBX];
        for (size_t r = 0; r < NR; r++) {
            sc[r] = 1.0f;
            if (q16) {
                q16_prep(qi + r * D, &sc[r], qp + r * D, D);
                sc[r] *= csc;
            }
        }
        tq6_scores(p, K, ntm, nb, kn, qp, qi, D, sc, &tt, c16lo, c16hi, NR, q16, vn_ready ? NULL : V,
                   vn_ready ? NULL : pf, vn_ready ? 0 : pfn);
        if (!vn_ready) {
            for (size_t b = 0; b < nb; b++) {
                tq6_norms(vn + b * G, V + b * SJK_TQ6_0_NBYTES, n, row_nbytes);
                for (size_t t = n; t < ((n + 15) & ~(size_t)15); t++) vn[b * G + t] = 0.0f;
            }
            vn_ready = 1;
        }
        float fct[RBX];
        softmax_block(p, fct, nvis + r0, rb, NR, m + r0, l + r0);
        /* values: probabilities times the keys' V block norms */
        const size_t ntm16 = (ntm + 15) & ~(size_t)15;
        for (size_t b = 0; b < nb; b++)
            for (size_t r = 0; r < NR; r++)
                for (size_t t = 0; t < ntm16; t += 16)
                    _mm512_storeu_ps(pn + (b * RBX + r) * G + t,
                                     _mm512_mul_ps(_mm512_loadu_ps(p + r * G + t), _mm512_loadu_ps(vn + b * G + t)));
        for (size_t r = 0; r < rb; r++) {
            if (!nvis[r0 + r]) continue;
            float *a = acc + (r0 + r) * D;
            const vf f = vset1(fct[r]);
            for (size_t d = 0; d < D; d += 16) vstore(a + d, vmul(vload(a + d), f));
        }
        if (q16) {
            tq6_values_q16(acc + r0 * D, va, p16, pn, V, ntm, nb, D, nvis + r0, rb, csc, &tt, c16lo, c16hi, eidx, NR);
            continue;
        }
        for (size_t b = 0; b < nb; b++) {
            const float *pb = pn + b * RBX * G;
            for (int par = 0; par < 2; par++) {
                __m512 a[RBX][4];
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < NR; r++)
                    _Pragma("GCC unroll 8")
                    for (size_t k = 0; k < 4; k++) a[r][k] = _mm512_setzero_ps();
                for (size_t t = 0; t < ntm; t++) {
                    const uint8_t *blk = V + t * row_nbytes + b * SJK_TQ6_0_NBYTES;
                    __m512 f[4];
                    tq6_values64(&tt, tq6_codes64(&tt, blk, par), f);
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < NR; r++) {
                        const __m512 pw = _mm512_set1_ps(pb[r * G + t]);
                        _Pragma("GCC unroll 8")
                        for (size_t k = 0; k < 4; k++) a[r][k] = _mm512_fmadd_ps(pw, f[k], a[r][k]);
                    }
                }
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < NR; r++)
                    _Pragma("GCC unroll 8")
                    for (size_t k = 0; k < 4; k++) _mm512_storeu_ps(va + r * SJK_TQ_BLOCK + 64 * par + 16 * k, a[r][k]);
            }
            for (size_t r = 0; r < rb; r++) {
                if (!nvis[r0 + r]) continue;
                float *ad = acc + (r0 + r) * D + b * SJK_TQ_BLOCK;
                const float *vr = va + r * SJK_TQ_BLOCK;
                for (size_t o = 0; o < SJK_TQ_BLOCK / 16; o++)
                    vstore(ad + 16 * o, vadd(vload(ad + 16 * o), tq6_elem16(vr, o, eidx)));
            }
        }
    }
}

/* Rows by blocks of 4, 6 or 8 (ROWS_NR16, attn_x86.h). */
static void chunk_tq6_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                             const uint8_t *K, const uint8_t *V, size_t n,
                             float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes)
{
    ROWS_NR16(R, chunk_tq6_nr(q, R, D, nvis, K, V, n, m, l, acc, work, pf, pf_nbytes, NR_, 0));
}

static void chunk_tq6_q16_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                 const uint8_t *K, const uint8_t *V, size_t n,
                                 float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes)
{
    ROWS_NR16(R, chunk_tq6_nr(q, R, D, nvis, K, V, n, m, l, acc, work, pf, pf_nbytes, NR_, 1));
}

/* ---- trellis records, read in place -------------------------------------------------
 * A payload group is 16 channels d0..d0+15 (docs/FORMAT.md); step t holds their 16
 * symbols in 2k bytes, so the 16 windows of token t live in one vector and advance as
 * w = (sym << 6) | (w >> k) (the tile decoder's recurrence, trellis_avx512.c); the code
 * values come from the pair tables (next paragraph), not from a gather.
 *
 * Tokens go in pairs: one pair-table entry per channel gives the values of tokens t
 * and t+1 (trel_pair, 64-bit loads by hand: trel_lookup16), and the pair's index is built from the two steps'
 * symbols (each rotated straight to its bits: two rotates and a blend) and the carried
 * state with two ternary-logic merges and one shift.
 *
 *   scores: for each group, sacc[t/2][r][16] += qd[r] * C[w(t), w(t+1)]  (FMA per lane,
 *           lanes interleaving t and t+1 against duplicated queries), then s[r][t] =
 *           Ktok[t] * (Σ_{even or odd lanes} sacc[t/2][r] + Σ_d q·Kzero)
 *   values: for each group, a[r][16] = Σ_t (p[r][t]·Vscale[t]) * C[w(t)], then
 *           acc[r][d0..] = acc·f + Vch·z[r] + Vch·a[r]
 * No K or V value is ever materialised; nothing is written but sacc (tokens in blocks of
 * TRB = 32: 4 KiB, L1-resident), the duplicated queries and the carried windows. */
typedef struct trel_rot { __m512i a, y, m6, mt; } trel_rot;

/* vpmultishiftqb control that puts lane i's symbol (bits ik.. of the step word) at bits
 * `at`.. of dword lane i: byte b of the lane takes the 8 bits from (ik - at + 8b) mod 64
 * of its qword (every qword holds the whole broadcast word). */
static inline __m512i trel_shift_ctrl(unsigned k, unsigned at)
{
    uint8_t c[64];
    for (unsigned j = 0; j < 64; j++) {
        const unsigned lane = j / 4, b = j % 4;
        c[j] = (uint8_t)((lane * k + 64 - at + 8 * b) & 63);
    }
    return _mm512_loadu_si512(c);
}

static inline __attribute__((always_inline)) trel_rot trel_rot_init(const unsigned k)
{
    trel_rot r;
    r.a = trel_shift_ctrl(k, 6);     /* symbols at bits 6.. (trel_step) */
    r.y = trel_shift_ctrl(k, 6 + k); /* at bits 6 + k.. (trel_pair's second token) */
    r.m6 = _mm512_set1_epi32((int)(((1u << k) - 1) << 6));
    r.mt = _mm512_set1_epi32((int)(((1u << (2 * k)) - 1) << 6));
    return r;
}

/* The 16 symbols of step t of group g, each at bits 6.. of its lane (ctrl: rt->a) or
 * 6 + k.. (rt->y), other bits garbage: one broadcast and one vpmultishiftqb. exact: the
 * step is the last of the payload, so only its 2k bytes are read (elsewhere an 8-byte
 * load stays inside). */
static inline __attribute__((always_inline)) __m512i trel_sym(const uint8_t *g, size_t t, const unsigned k, int exact,
                                                              __m512i ctrl)
{
    const uint8_t *p = g + t * 2 * k;
    long long q;
    if (k == 4 || !exact) {
        memcpy(&q, p, 8);
    } else {
        uint32_t lo;
        uint16_t hi = 0;
        memcpy(&lo, p, 4);
        if (k == 3) memcpy(&hi, p + 4, 2);
        q = (long long)(lo | ((uint64_t)hi << 32));
    }
    return _mm512_multishift_epi64_epi8(ctrl, _mm512_set1_epi64(q));
}

/* Advances the 16 windows by step t of group g (exact: as for trel_sym). */
static inline __attribute__((always_inline)) __m512i trel_step(__m512i w, const uint8_t *g, size_t t,
                                                               const unsigned k, int exact, const trel_rot *rt)
{
    const __m512i x = trel_sym(g, t, k, exact, rt->a);
    return _mm512_ternarylogic_epi32(x, rt->m6, _mm512_srli_epi32(w, (int)k), 0xEA);
}

/* Windows before token 0 (tail-biting: the sequence's last 6 bits). */
static inline __attribute__((always_inline)) __m512i trel_start(const uint8_t *g, const unsigned k, int last_group,
                                                                const trel_rot *rt)
{
    const size_t lead = (6 + k - 1) / k;
    __m512i w = _mm512_setzero_si512();
    for (size_t t = G - lead; t < G; t++) w = trel_step(w, g, t, k, last_group && t == G - 1, rt);
    return w;
}

/* Pair tables (sjk_trellis_pair_table, trellis.c): for k = 2, 3 and 4 bits, P_k[w | sym' <<
 * (6 + k)] = (C[w], C[w']) with w' = (sym' << 6) | (w >> k), the window that follows w
 * when the next symbol is sym'. One 64-bit entry then yields the values of two
 * consecutive tokens, which halves the lookups (the bottleneck of this kernel). 8, 32
 * and 128 KiB, built once per process for each known table (the committed codebooks
 * and the real-data ones, sjk_trellis_codebook_set); a record with another codebook (a
 * test's) takes the one-value path (two gathers from cb per pair). At k = 4 the table lives in L2, and its hand loads still beat the two gathers
 * from the 4 KiB codebook on the Zen 4 EPYC: 1.22-1.36x sj:4/4t, 1.07-1.24x sj:4/3t
 * (bench_attn_ab, Gemma and Qwen, 16K), as the AVX2 reader found on Zen 3. */
static const uint64_t *pair_table(const float *cb, unsigned k)
{
    return sjk_trellis_pair_table_of(cb, k);
}

/* The pair-table entries of the 16 indices idx: lo = P[idx 0..7], hi = P[idx 8..15], by
 * plain 64-bit loads (the AVX2 reader's trel8_lookup at 512 bits): the indices leave the
 * vector two at a time (vmovq / vpextrq of each 128-bit lane), each entry is one load,
 * pairs are joined by movhpd and the four 128-bit pieces of each result by inserts.
 * On the Zen 4 EPYC this beats the two vpgatherdq zmm it replaces by 1.05-1.24x over
 * the whole call (bench_attn_ab, sj:3/3t and 3/2t, Gemma and Qwen, 16K and 32K), and
 * four vpgatherdq ymm were no better than the zmm ones (0.88-1.03x); storing idx and
 * reading the indices back as 32-bit loads lost 0.78x (store-forwarding stalls). */
static inline __attribute__((always_inline)) __m128d trel_ld2(const uint64_t *P, uint64_t e)
{
    return _mm_loadh_pd(_mm_load_sd((const double *)(const void *)(P + (uint32_t)e)),
                        (const double *)(const void *)(P + (e >> 32)));
}

static inline __attribute__((always_inline)) __m512d trel_ld8(const uint64_t *P, __m128i a, __m128i b)
{
    const __m128d x0 = trel_ld2(P, (uint64_t)_mm_cvtsi128_si64(a)), x1 = trel_ld2(P, (uint64_t)_mm_extract_epi64(a, 1));
    const __m128d x2 = trel_ld2(P, (uint64_t)_mm_cvtsi128_si64(b)), x3 = trel_ld2(P, (uint64_t)_mm_extract_epi64(b, 1));
    const __m256d y0 = _mm256_insertf128_pd(_mm256_castpd128_pd256(x0), x1, 1);
    const __m256d y1 = _mm256_insertf128_pd(_mm256_castpd128_pd256(x2), x3, 1);
    return _mm512_insertf64x4(_mm512_castpd256_pd512(y0), y1, 1);
}

static inline __attribute__((always_inline)) void trel_lookup16(__m512 *lo, __m512 *hi, const uint64_t *P, __m512i idx)
{
    *lo = _mm512_castpd_ps(trel_ld8(P, _mm512_castsi512_si128(idx), _mm512_extracti32x4_epi32(idx, 1)));
    *hi = _mm512_castpd_ps(trel_ld8(P, _mm512_extracti32x4_epi32(idx, 2), _mm512_extracti32x4_epi32(idx, 3)));
}

/* Values of tokens t and t+1 of the 16 channels of group g, interleaved: lo holds
 * channels 0..7 and hi channels 8..15, lane 2i token t and lane 2i+1 token t+1 of its
 * channel (the order in which the pair-table lookups deliver them; the callers weight
 * them with duplicated queries or with the probability pair of (t, t+1), so no lane
 * shuffle is needed per pair). Advances the state *w (trel_state) from token t-1 to
 * t+1. P: pair table, or NULL (two one-value gathers from cb, interleaved here). */
static inline __attribute__((always_inline)) void trel_pair(__m512 *lo, __m512 *hi, __m512i *w, const uint8_t *g,
                                                            size_t t, int lastg, const float *cb,
                                                            const uint64_t *P, const unsigned k, const trel_rot *rt)
{
    if (!P) {
        *w = trel_step(*w, g, t, k, 0, rt);
        const __m512 c0 = _mm512_i32gather_ps(*w, cb, 4);
        *w = trel_step(*w, g, t + 1, k, lastg && t + 1 == G - 1, rt);
        const __m512 c1 = _mm512_i32gather_ps(*w, cb, 4);
        const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const __m512i ih = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        *lo = _mm512_permutex2var_ps(c0, il, c1);
        *hi = _mm512_permutex2var_ps(c0, ih, c1);
        return;
    }
    /* pair index = s(t+1) << (6 + k) | s(t) << 6 | w(t-1) >> k, where *w holds w(t-1) >> k
     * on this path (trel_state); then w(t+1) >> k = index >> 2k */
    const __m512i x = trel_sym(g, t, k, 0, rt->a);
    const __m512i y = trel_sym(g, t + 1, k, lastg && t + 1 == G - 1, rt->y);
    const __m512i xy = _mm512_ternarylogic_epi32(x, y, rt->m6, 0xE4);    /* m6 ? x : y */
    const __m512i idx = _mm512_ternarylogic_epi32(xy, *w, rt->mt, 0xE4); /* mt ? xy : w */
    *w = _mm512_srli_epi32(idx, (int)(2 * k));
    trel_lookup16(lo, hi, P, idx);
}

/* trel_pair's carried state from the window w(t-1): the window itself on the one-value
 * path, w(t-1) >> k on the pair-table path. */
static inline __attribute__((always_inline)) __m512i trel_state(__m512i w, const uint64_t *P, const unsigned k)
{
    return !P ? w : _mm512_srli_epi32(w, (int)k);
}

/* Sums of the even and of the odd lanes of v. */
static inline void hsum_even_odd(__m512 v, float *even, float *odd)
{
    const __m512 x = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m256 y = _mm256_add_ps(_mm512_castps512_ps256(x), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    const __m128 z = _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
    *even = _mm_cvtss_f32(z);
    *odd = _mm_cvtss_f32(_mm_movehdup_ps(z));
}

#define TRB 32 /* tokens per score block: the block's partials stay in L1 (4 KiB) */

/* Scores of the RB rows for tokens t < ntm into p[r][t] = Ktok[t] * (Σ_d qs[r][d] *
 * C[w(d, t)] + cz[r]). qd: the queries duplicated into trel_pair's lane order, [RB][D/16]
 * [lo 16, hi 16]. Tokens go in blocks of TRB; inside a block every group adds its lanes
 * into sacc[t/2][r][16] (even lanes token t, odd lanes t+1; each group's window carried
 * in wst between blocks), then the lanes are summed. ntm is rounded up to even (the
 * extra token's score is unused). */
static inline __attribute__((always_inline)) void trel_scores(float *p, float *sacc, __m512i *wst, const float *qd,
                                                              size_t D, size_t ntm, const float *ktok,
                                                              const float *cz, const uint8_t *payload,
                                                              const float *cb, const unsigned k,
                                                              const uint8_t *pf, size_t pfn, const size_t NR)
{
    const trel_rot rt = trel_rot_init(k);
    const uint64_t *P = pair_table(cb, k);
    const size_t ng = D / 16, gbytes = G * 2 * k;
    for (size_t j = 0; j < ng; j++) wst[j] = trel_state(trel_start(payload + j * gbytes, k, j == ng - 1, &rt), P, k);
    for (size_t tb = 0; tb < ntm; tb += TRB) {
        const size_t te = tb + TRB < ntm ? tb + TRB : ntm;
        for (size_t j = 0; j < ng; j++) {
            const uint8_t *g = payload + j * gbytes;
            const int lastg = j == ng - 1;
            __m512 ql[RBX], qh[RBX];
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                ql[r] = _mm512_loadu_ps(qd + (r * ng + j) * 32);
                qh[r] = _mm512_loadu_ps(qd + (r * ng + j) * 32 + 16);
            }
            __m512i w = wst[j];
            for (size_t t = tb; t < te; t += 2) {
                __m512 lo, hi;
                /* the next record (rc->pf), a line per token pair */
                const size_t o = (((tb / TRB) * ng + j) * (TRB / 2) + (t - tb) / 2) * 64;
                if (o < pfn) _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
                trel_pair(&lo, &hi, &w, g, t, lastg, cb, P, k, &rt);
                float *sa = sacc + (t - tb) / 2 * (RBX * 16);
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < NR; r++) {
                    const __m512 x = j ? _mm512_fmadd_ps(qh[r], hi, _mm512_load_ps(sa + 16 * r)) : _mm512_mul_ps(qh[r], hi);
                    _mm512_store_ps(sa + 16 * r, _mm512_fmadd_ps(ql[r], lo, x));
                }
            }
            wst[j] = w;
        }
        for (size_t t = tb; t < te; t += 2)
            for (size_t r = 0; r < NR; r++) {
                float se, so;
                hsum_even_odd(_mm512_load_ps(sacc + (t - tb) / 2 * (RBX * 16) + r * 16), &se, &so);
                p[r * G + t] = ktok[t] * (se + cz[r]);
                p[r * G + t + 1] = ktok[t + 1] * (so + cz[r]);
            }
    }
}

/* a[r] (16 channels of group g, 4 rows) = Σ_{t < ntm} p[r][t] * C[w(t)] (p is zero past
 * each row's visible keys and up to G): the pair (p[t], p[t+1]) broadcast against the
 * interleaved values, even and odd tokens summed per channel at the end. */
static inline __attribute__((always_inline)) void trel_values(__m512 a[RBX], const float *p, size_t ntm,
                                                              const uint8_t *g, int lastg, const float *cb,
                                                              const unsigned k, const size_t NR)
{
    const trel_rot rt = trel_rot_init(k);
    const uint64_t *P = pair_table(cb, k);
    __m512i w = trel_state(trel_start(g, k, lastg, &rt), P, k);
    __m512 al[RBX], ah[RBX];
    for (size_t r = 0; r < NR; r++) { al[r] = _mm512_setzero_ps(); ah[r] = _mm512_setzero_ps(); }
    for (size_t t = 0; t < ntm; t += 2) {
        __m512 lo, hi;
        trel_pair(&lo, &hi, &w, g, t, lastg, cb, P, k, &rt);
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) {
            double pp;
            memcpy(&pp, p + r * G + t, 8);
            const __m512 pw = _mm512_castpd_ps(_mm512_set1_pd(pp)); /* p[t], p[t+1], ... */
            al[r] = _mm512_fmadd_ps(pw, lo, al[r]);
            ah[r] = _mm512_fmadd_ps(pw, hi, ah[r]);
        }
    }
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (size_t r = 0; r < NR; r++)
        a[r] = _mm512_add_ps(_mm512_permutex2var_ps(al[r], ev, ah[r]), _mm512_permutex2var_ps(al[r], od, ah[r]));
}

static inline __attribute__((always_inline)) void chunk_trellis_nr(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                                                    const sjk_attn_rec *rc, float *m, float *l, float *acc,
                                                                    float *work, const size_t NR)
{
    float *p = work;                                 /* [RBX][G] */
    float *qs = work + RBX * G;                       /* [RBX][D] */
    float *sacc = work + RBX * (2 * D + 4 * G + 8);   /* [TRB/2][RBX][16], 64-byte aligned below */
    sacc = (float *)(((uintptr_t)sacc + 63) & ~(uintptr_t)63);
    __m512i *wst = (__m512i *)(void *)(sacc + TRB / 2 * RBX * 16); /* [D/16] carried windows */
    float *qd = (float *)(void *)(wst + D / 16);     /* [RBX][D/16][32] queries, trel_pair's lane order */
    const __m512i dup_lo = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i dup_hi = _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    const unsigned kb = rc->kbits, vb = rc->vbits;
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, r0, NR, &ntm);
        if (!ntm) continue;
        float cz[RBX] = {0}, zz[RBX] = {0}, fct[RBX] = {1, 1, 1, 1, 1, 1, 1, 1};
        rec_fold(qs, cz, q + r0 * D, rb, NR, D, rc);
        for (size_t r = 0; r < NR; r++)
            for (size_t d = 0; d < D; d += 16) {
                const __m512 x = _mm512_loadu_ps(qs + r * D + d);
                _mm512_storeu_ps(qd + r * 2 * D + 2 * d, _mm512_permutexvar_ps(dup_lo, x));
                _mm512_storeu_ps(qd + r * 2 * D + 2 * d + 16, _mm512_permutexvar_ps(dup_hi, x));
            }
        const size_t ntm2 = (ntm + 1) & ~(size_t)1; /* pairs of tokens */
        const size_t pfn = r0 == 0 ? rc->pf_nbytes : 0;
        if (kb == 2) trel_scores(p, sacc, wst, qd, D, ntm2, rc->ktok, cz, rc->kt, rc->kcb, 2, rc->pf, pfn, NR);
        else if (kb == 3) trel_scores(p, sacc, wst, qd, D, ntm2, rc->ktok, cz, rc->kt, rc->kcb, 3, rc->pf, pfn, NR);
        else trel_scores(p, sacc, wst, qd, D, ntm2, rc->ktok, cz, rc->kt, rc->kcb, 4, rc->pf, pfn, NR);
        rec_probs(p, fct, zz, nvis + r0, rb, NR, m + r0, l + r0, rc);
        const size_t ng = D / 16, gbytes = G * 2 * vb;
        for (size_t j = 0; j < ng; j++) {
            __m512 a[RBX];
            const uint8_t *g = rc->vt + j * gbytes;
            if (vb == 2) trel_values(a, p, ntm2, g, j == ng - 1, rc->vcb, 2, NR);
            else if (vb == 3) trel_values(a, p, ntm2, g, j == ng - 1, rc->vcb, 3, NR);
            else trel_values(a, p, ntm2, g, j == ng - 1, rc->vcb, 4, NR);
            __m512 vch = _mm512_loadu_ps(rc->vch + 16 * j);
            for (size_t r = 0; r < rb; r++) {
                if (!nvis[r0 + r]) continue;
                float *ad = acc + (r0 + r) * D + 16 * j;
                __m512 x = _mm512_fmadd_ps(_mm512_loadu_ps(ad), _mm512_set1_ps(fct[r]),
                                           _mm512_mul_ps(vch, _mm512_set1_ps(zz[r])));
                _mm512_storeu_ps(ad, _mm512_add_ps(x, _mm512_mul_ps(vch, a[r])));
            }
        }
    }
}

/* The folded queries qs of a record block as int16 (q16_prep; rows past rb zero, scale
 * 0), for rec_scores_q16 and rec_scores_c16. */
static ALWAYS_INLINE void rec_q16_rows(int16_t *q16, float *q16s, const float *qs, size_t D, size_t rb, const size_t NR)
{
    for (size_t r = 0; r < NR; r++) {
        if (r < rb) q16_prep(q16 + r * D, &q16s[r], qs + r * D, D);
        else memset(q16 + r * D, 0, D * sizeof(int16_t)), q16s[r] = 0.0f;
    }
}

/* Scores of tokens t0..t0+31 from their int32 sums (A0: t0..t0+15, A1: the next 16):
 * p[r][t] = Ktok[t] · (scale[r] · sum + cz[r]). */
static ALWAYS_INLINE void rec_q16_store(float *p, const __m512i *A0, const __m512i *A1, const float *q16s, const float *cz,
                                        const float *ktok, size_t t0, const size_t NR)
{
    const __m512 kt0 = _mm512_loadu_ps(ktok + t0), kt1 = _mm512_loadu_ps(ktok + t0 + 16);
    for (size_t r = 0; r < NR; r++) {
        const __m512 sc = _mm512_set1_ps(q16s[r]), c = _mm512_set1_ps(cz[r]);
        _mm512_storeu_ps(p + r * G + t0, _mm512_mul_ps(kt0, _mm512_add_ps(_mm512_mul_ps(sc, _mm512_cvtepi32_ps(A0[r])), c)));
        _mm512_storeu_ps(p + r * G + t0 + 16, _mm512_mul_ps(kt1, _mm512_add_ps(_mm512_mul_ps(sc, _mm512_cvtepi32_ps(A1[r])), c)));
    }
}

/* Record chunk: scores by channel rows of codes (16 tokens x 4 rows in registers),
 * values by token rows of codes; scales folded as in attn_kernels.h.
 *
 * Q16 (chunk_rec_q16, 4-bit K read in place): the folded queries become int16 per record
 * (q16_prep) and a channel quad's 32 tokens (one 16-byte unit of each of 4 channel rows,
 * put in one zmm) are spread by two vpermb into int16 pairs (channel 4c, 4c+1 | 4c+2,
 * 4c+3) of each token, the low nibbles (tokens t0..t0+15) and high nibbles (t0+16..31)
 * masked out of them; each vpdpwssd then adds 32 products code x q16 per row, exact in
 * int32, and the scale turns the sums into scores once per 16 tokens. Against the fp32
 * path (per channel: one zero-extend, two vpermps, 2 NR FMAs for 32 tokens) that is 4
 * NR vpdpwssd and about 10 shuffles / logic ops per 4 channels. */
/* The int16 scores of a record block whose K codes are 4-bit (chunk_rec_q16; called by
 * attn_x86.h's chunk_rec_nr): per row the folded queries qs become int16 (q16_prep) and
 *   p[r][t] = Ktok[t] · (scale · Σ_d q16[r][d] · code[d][t] + cz[r]),  t < ntm rounded up to 32. */
static ALWAYS_INLINE void rec_scores_q16(float *p, int16_t *q16, const float *qs, const float *cz, const sjk_attn_rec *rc,
                                         size_t D, size_t ntm, size_t rb, size_t pfn, const size_t NR)
{
    float q16s[RBX];
    const size_t ntm16 = (ntm + 31) & ~(size_t)31;
    rec_q16_rows(q16, q16s, qs, D, rb, NR);
    /* vpermb controls: dword j <- (byte j of lane 2i, byte j of lane 2i + 1) as
     * two 16-bit words (high bytes junk, masked) */
    uint8_t ix[2][64];
    for (int j = 0; j < 16; j++)
        for (int h = 0; h < 2; h++) {
            ix[h][4 * j] = ix[h][4 * j + 1] = (uint8_t)(32 * h + j);
            ix[h][4 * j + 2] = ix[h][4 * j + 3] = (uint8_t)(32 * h + 16 + j);
        }
    const __m512i i01 = _mm512_loadu_si512(ix[0]), i23 = _mm512_loadu_si512(ix[1]);
    const __m512i m4 = _mm512_set1_epi32(0x000F000F);
    for (size_t t0 = 0; t0 < ntm16; t0 += 32) {
        __m512i A0[RBX], A1[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) { A0[r] = _mm512_setzero_si512(); A1[r] = _mm512_setzero_si512(); }
        const size_t pfo = (t0 / 32) * D * 64;
        for (size_t c = 0; c < D; c += 4) {
            const uint8_t *u = rc->kp + c * (G / 2) + t0 / 2;
            if (pfo + c * 64 < pfn) _mm_prefetch((const char *)rc->pf + pfo + c * 64, _MM_HINT_T1);
            __m512i x = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)u));
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(const void *)(u + G / 2)), 1);
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(const void *)(u + G)), 2);
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(const void *)(u + 3 * G / 2)), 3);
            const __m512i p01 = _mm512_permutexvar_epi8(i01, x), p23 = _mm512_permutexvar_epi8(i23, x);
            const __m512i l01 = _mm512_and_si512(p01, m4), h01 = _mm512_and_si512(_mm512_srli_epi16(p01, 4), m4);
            const __m512i l23 = _mm512_and_si512(p23, m4), h23 = _mm512_and_si512(_mm512_srli_epi16(p23, 4), m4);
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                int32_t wa, wb;
                memcpy(&wa, q16 + r * D + c, 4);
                memcpy(&wb, q16 + r * D + c + 2, 4);
                const __m512i qa = _mm512_set1_epi32(wa), qb = _mm512_set1_epi32(wb);
                A0[r] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(A0[r], l01, qa), l23, qb);
                A1[r] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(A1[r], h01, qa), h23, qb);
            }
        }
        rec_q16_store(p, A0, A1, q16s, cz, rc->ktok, t0, NR);
    }
}

/* The vpermb controls of the int16 readers of unpacked bytes: x holds two rows of 32
 * code bytes (bytes 0..31 and 32..63); dword j of the masked (even bytes) permute by lo is
 * (x[j], x[32 + j]) as two zero-extended words, by hi (x[16 + j], x[48 + j]). */
static inline void c16_pair_controls(__m512i *lo, __m512i *hi)
{
    uint8_t ix[2][64] = {{0}};
    for (int j = 0; j < 16; j++)
        for (int h = 0; h < 2; h++) {
            ix[h][4 * j] = (uint8_t)(16 * h + j);
            ix[h][4 * j + 2] = (uint8_t)(32 + 16 * h + j);
        }
    *lo = _mm512_loadu_si512((const void *)ix[0]);
    *hi = _mm512_loadu_si512((const void *)ix[1]);
}

/* The values of a record block by int16 weights (chunk_rec_v16; called by attn_x86.h's
 * chunk_rec_nr after rec_probs): per row the weights p[r][t] (Vscale folded in) become
 * int16 (q16_prep, scale ws[r]) and
 *   acc[r][d] = acc[r][d] · f[r] + Vch[d] · (zz[r] + ws[r] · (float)Σ_t w16[r][t] · code[t][d]),
 * the sum exact in int32 (|.| <= 128 · 32767 · 255 < 2^31). The codes:
 *   bytes = 0  4-bit payload rows read in place (rc->vp). A row keeps channels 32u + j and
 *              32u + 16 + j in the low and high nibble of byte 16u + j (the q4_0 layout), so
 *              two tokens' 16 bytes of unit u become zero-extended word pairs by one masked
 *              vpermb (qblk_values_q16's), low nibbles channels 32u..32u+15 and high
 *              nibbles 32u+16..32u+31 in channel order;
 *   bytes = 1  unpacked bytes rc->vc [G][D] (codes of 5 to 8 bits, or 2 and 3 for the
 *              sj:B/Bs bodies): two tokens' 32 bytes of unit u go into one zmm and two
 *              masked vpermb (c16_pair_controls) make the word pairs of channels
 *              32u..32u+15 and 32u+16..32u+31, where the fp32 path spends per token four
 *              widenings, four conversions and two FMAs per row on those 32 channels;
 * then one vpdpwssd per row and 16 channels adds both tokens. A chunk's V rows (16 KiB
 * at D = 256 in 4 bits) stay in L1 across the D / 32 units. */
static ALWAYS_INLINE void rec_values_w16(float *acc, size_t D, const uint32_t *nvis, size_t rb, const size_t NR,
                                         const float *p, const float *fct, const float *zz, size_t ntm,
                                         const sjk_attn_rec *rc, int16_t *w16, const int bytes)
{
    const size_t ntm16 = (ntm + 15) & ~(size_t)15, ntm2 = (ntm + 1) & ~(size_t)1, vrow = D / 2;
    const __m512i ilv = _mm512_set_epi32(0x001F000F, 0x001E000E, 0x001D000D, 0x001C000C, 0x001B000B, 0x001A000A,
                                         0x00190009, 0x00180008, 0x00170007, 0x00160006, 0x00150005, 0x00140004,
                                         0x00130003, 0x00120002, 0x00110001, 0x00100000);
    const __m512i m15 = _mm512_set1_epi16(15);
    __m512i ilo, ihi;
    c16_pair_controls(&ilo, &ihi);
    const __mmask64 even = (__mmask64)0x5555555555555555ull;
    float ws[RBX];
    for (size_t r = 0; r < NR; r++) q16_prep(w16 + r * G, &ws[r], p + r * G, ntm16); /* zero rows: zero weights */
    for (size_t r = 0; r < rb; r++) {
        if (!nvis[r]) continue;
        float *a = acc + r * D;
        const __m512 f = _mm512_set1_ps(fct[r]), z = _mm512_set1_ps(zz[r]);
        for (size_t d = 0; d < D; d += 16)
            _mm512_storeu_ps(a + d, _mm512_fmadd_ps(_mm512_loadu_ps(a + d), f, _mm512_mul_ps(_mm512_loadu_ps(rc->vch + d), z)));
    }
    for (size_t u = 0; u < D / 32; u++) {
        __m512i alo[RBX], ahi[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) { alo[r] = _mm512_setzero_si512(); ahi[r] = _mm512_setzero_si512(); }
        if (bytes) {
            const uint8_t *base = rc->vc + 32 * u;
            for (size_t t = 0; t < ntm2; t += 2) { /* as below */
                const uint8_t *c0 = base + t * D;
                const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)c0)),
                                                     _mm256_loadu_si256((const __m256i *)(const void *)(c0 + D)), 1);
                dpw_rows(alo, ahi, _mm512_maskz_permutexvar_epi8(even, ilo, x), _mm512_maskz_permutexvar_epi8(even, ihi, x),
                         w16 + t, G, NR);
            }
        } else {
            const uint8_t *base = rc->vp + 16 * u;
            for (size_t t = 0; t < ntm2; t += 2) { /* token t + 1 < G exists in the record; past nvis its weight is 0 */
                const uint8_t *c0 = base + t * vrow;
                const __m256i y = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)c0)),
                                                          _mm_loadu_si128((const __m128i *)(const void *)(c0 + vrow)), 1);
                const __m512i w = _mm512_maskz_permutexvar_epi8(even, ilv, _mm512_castsi256_si512(y));
                dpw_rows(alo, ahi, _mm512_and_si512(w, m15), _mm512_srli_epi16(w, 4), w16 + t, G, NR);
            }
        }
        const __m512 vl = _mm512_loadu_ps(rc->vch + 32 * u), vh = _mm512_loadu_ps(rc->vch + 32 * u + 16);
        for (size_t r = 0; r < rb; r++) {
            if (!nvis[r]) continue;
            float *a = acc + r * D + 32 * u;
            const __m512 sc = _mm512_set1_ps(ws[r]);
            _mm512_storeu_ps(a, _mm512_fmadd_ps(vl, _mm512_mul_ps(sc, _mm512_cvtepi32_ps(alo[r])), _mm512_loadu_ps(a)));
            _mm512_storeu_ps(a + 16, _mm512_fmadd_ps(vh, _mm512_mul_ps(sc, _mm512_cvtepi32_ps(ahi[r])), _mm512_loadu_ps(a + 16)));
        }
    }
}

/* rec_values_w16 for the record's codes (4-bit in place, or unpacked). */
static ALWAYS_INLINE void rec_values_q16(float *acc, size_t D, const uint32_t *nvis, size_t rb, const size_t NR,
                                         const float *p, const float *fct, const float *zz, size_t ntm,
                                         const sjk_attn_rec *rc, int16_t *w16)
{
    if (rc->vc) rec_values_w16(acc, D, nvis, rb, NR, p, fct, zz, ntm, rc, w16, 1);
    else rec_values_w16(acc, D, nvis, rb, NR, p, fct, zz, ntm, rc, w16, 0);
}
/* Rows by blocks of 4, 6 or 8 (ROWS_NR16, attn_x86.h). For trellis records the block
 * of 6 measured 1.09-1.17x the block of 8 with two zero rows (bench_attn_ab, sj:3/3t and
 * 3/2t, Qwen, 16K and 32K): the reader's per-row work is FMAs only. */
static void chunk_rec_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                             const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    if (rc->kt) ROWS_NR16(R, chunk_trellis_nr(q, R, D, nvis, rc, m, l, acc, work, NR_));
    else chunk_rec_scalar(q, R, D, nvis, rc, m, l, acc, work);
}

static void chunk_rec_q16_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                 const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    ROWS_NR16(R, chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, NR_, 1, 0));
}

/* chunk_rec_v16 (attn_kernels.h): V codes by int16 weights (rec_values_q16), the keys as
 * chunk_rec_q16 scores them (4-bit), by rec_scores_c16 (unpacked, up to 7 bits) or in
 * fp32 (8 bits: int16 measured 0.92-1.00x there, docs/notes/benchmarks.md). */
static void chunk_rec_v16_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                 const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    if (rc->kp) ROWS_NR16(R, chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, NR_, 1, 1));
    else if (rc->kc && rc->kbits && rc->kbits <= 7) ROWS_NR16(R, chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, NR_, 2, 1));
    else ROWS_NR16(R, chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, NR_, 0, 1));
}

/* ---- trellis records by int16 dot products: chunk_trellis_q16 -----------------------
 * The pair-table reader above spends most of its time moving pair-table entries through
 * general registers (16 scalar loads, 8 extracts and 6 inserts per 32 values: the
 * profile's hottest instructions). This one looks the code values up inside the vector
 * unit, 64 at a time, from the int16 codebooks (sjk_attn_trellis_c16) split into a low
 * and a high byte plane:
 *   windows  the record's two halves at once, in 32 word lanes (trq_step2: tokens t
 *            and t + 64 of a group's 16 channels per step, the recurrence of trel_step
 *            on 16 bits); two steps (t, t+1, t+64, t+65) make 64 windows;
 *   indices  one vpermt2b puts the windows' low bytes into 64 byte lanes in the order
 *            the dot products want (trq_build: kperm for keys, vperm for values); bit 7
 *            of a window is the byte's sign (vpmovb2m), bits 8 and 9 come from a second
 *            vpermt2b of the high bytes (vptestmb);
 *   lookup   per byte plane one vpermi2b per 128 entries (bits 0..6), merged by the
 *            masks: 2, 4 or 8 vpermi2b for k = 2, 3, 4, then two byte unpacks give 64
 *            int16 values in two zmm;
 *   keys     one vpdpwssd per row and 32 values against the row's int16 folded query
 *            (lanes: a token's channel pair; the group's query words 0..7 or 8..15
 *            broadcast to the four 128-bit lanes, one per token), summed over the groups
 *            in one int32 register per row, the windows carried in memory between
 *            steps; 4 tokens' sums per step;
 *            (bench_attn_ab, Zen 4 EPYC, Gemma 32K, 1 thread, against the pair tables:
 *            1.56x sj:3/3t, 1.91x 3/2t, 1.44x 4/4t; the halves in word lanes were
 *            1.3x the first version, which ran tokens t..t+3 in dword lanes and packed
 *            them with two vpackusdw);
 *   values   one vpdpwssd per row and 32 values against the row's int16 weights (lanes:
 *            a channel's token pair; the pair's weights broadcast), per group over the
 *            record's tokens, then one conversion and one multiply-add into acc.
 * Both sums are exact in int32 (the sum bound of sjk_attn_q16_prep_l1). */
typedef struct trq_lut {
    /* byte planes of c16 [table set (sjk_trellis_codebook_set)][k = 2..4] */
    _Alignas(64) uint8_t lo[SJK_TRELLIS_CB_SETS][3][64 << SJK_TRELLIS_MAX_BITS];
    _Alignas(64) uint8_t hi[SJK_TRELLIS_CB_SETS][3][64 << SJK_TRELLIS_MAX_BITS];
    _Alignas(64) uint8_t kperm[64];    /* vpermt2b control, keys: the low bytes in word order */
    _Alignas(64) uint8_t vperm[2][64]; /* values */
} trq_lut;
static trq_lut g_trq;
static pthread_once_t g_trq_once = PTHREAD_ONCE_INIT;

/* Byte of (token tau, channel c 0..15) in the windows Wa || Wb of one step (trq_step2:
 * word lanes; Wa holds tokens t (lanes 0..15) and t+64 (16..31), Wb tokens t+1 and
 * t+65; tau 0..3 = t, t+1, t+64, t+65). */
static unsigned trq_src(unsigned tau, unsigned c)
{
    return (tau & 1 ? 64u : 0u) + 2 * (c + (tau & 2 ? 16u : 0u));
}

/* The planes and the controls. Byte 16 j + u of the index vector becomes word u % 8 of
 * lane j of the low (u < 8) or the high (u >= 8) byte unpack, so
 *   keys:   byte b is word b of wa || wb (so lane j holds one token, t, t+64, t+1, t+65
 *           for j = 0..3, channels 0..7 in the low unpack and 8..15 in the high one, and
 *           the masks of bits 8, 9 are the words' own); dword i holds channels 2i, 2i + 1
 *           (+ 8 in the high unpack);
 *   values: (tau, c) = ((u < 8 ? 0 : 2) + u % 2, 4 j + (u % 8) / 2): dword lane 4j + i
 *           holds channel 4j + i of two consecutive tokens. */
static void trq_build(void)
{
    for (unsigned set = 0; set < SJK_TRELLIS_CB_SETS; set++)
        for (unsigned k = 2; k <= 4; k++) {
            float sc;
            const float *cb = sjk_trellis_codebook_of_set(set, k);
            const int16_t *c16 = sjk_attn_trellis_c16_of(cb, k, &sc);
            for (size_t w = 0; w < ((size_t)64 << k); w++) {
                g_trq.lo[set][k - 2][w] = (uint8_t)((uint16_t)c16[w] & 0xFF);
                g_trq.hi[set][k - 2][w] = (uint8_t)((uint16_t)c16[w] >> 8);
            }
        }
    for (unsigned b = 0; b < 64; b++) {
        const unsigned j = b / 16, u = b % 16, half = u < 8 ? 0 : 2;
        const unsigned ks = b < 32 ? 2 * b : 64 + 2 * (b - 32); /* word b of wa || wb */
        const unsigned vs = trq_src(half + u % 2, 4 * j + (u % 8) / 2);
        g_trq.kperm[b] = (uint8_t)ks;
        g_trq.vperm[0][b] = (uint8_t)vs;
        g_trq.vperm[1][b] = (uint8_t)(vs + 1);
    }
}

/* 64 bytes of one plane: entries X & 127 of the 128-entry table T. */
static inline __attribute__((always_inline)) __m512i trq_tab(const uint8_t *T, __m512i X)
{
    return _mm512_permutex2var_epi8(_mm512_load_si512((const void *)T), X, _mm512_load_si512((const void *)(T + 64)));
}

/* Plane T (64 << k entries) at the windows: table w >> 7, chosen by the masks of bits 7,
 * 8 and 9. */
static inline __attribute__((always_inline)) __m512i trq_plane(const uint8_t *T, __m512i X, __mmask64 m7, __mmask64 m8,
                                                               __mmask64 m9, const unsigned k)
{
    const __m512i y = _mm512_mask_blend_epi8(m7, trq_tab(T, X), trq_tab(T + 128, X));
    if (k == 2) return y;
    const __m512i y8 = _mm512_mask_blend_epi8(m8, y, _mm512_mask_blend_epi8(m7, trq_tab(T + 256, X), trq_tab(T + 384, X)));
    if (k == 3) return y8;
    const __m512i z = _mm512_mask_blend_epi8(m7, trq_tab(T + 512, X), trq_tab(T + 640, X));
    const __m512i z8 = _mm512_mask_blend_epi8(m8, z, _mm512_mask_blend_epi8(m7, trq_tab(T + 768, X), trq_tab(T + 896, X)));
    return _mm512_mask_blend_epi8(m9, y8, z8);
}

/* The int16 values of the windows wa, wb (one step, trq_step2) in the order of the
 * controls pl / ph (kperm or vperm): u0 the low byte unpack (tokens t, t+1), u1 the high
 * one (t+64, t+65). */
static inline __attribute__((always_inline)) void trq_lookup(__m512i *u0, __m512i *u1, __m512i wa, __m512i wb,
                                                             __m512i pl, __m512i ph, const unsigned k, const int nat,
                                                             const unsigned set)
{
    const __m512i X = _mm512_permutex2var_epi8(wa, pl, wb);
    const __mmask64 m7 = _mm512_movepi8_mask(X);
    __mmask64 m8 = 0, m9 = 0;
    if (nat) { /* byte b: word b of wa || wb, so the masks of bits 8, 9 are the words' */
        if (k >= 3)
            m8 = _mm512_kunpackd(_mm512_test_epi16_mask(wb, _mm512_set1_epi16(0x100)),
                                 _mm512_test_epi16_mask(wa, _mm512_set1_epi16(0x100)));
        if (k == 4)
            m9 = _mm512_kunpackd(_mm512_test_epi16_mask(wb, _mm512_set1_epi16(0x200)),
                                 _mm512_test_epi16_mask(wa, _mm512_set1_epi16(0x200)));
    } else if (k >= 3) {
        const __m512i XH = _mm512_permutex2var_epi8(wa, ph, wb);
        m8 = _mm512_test_epi8_mask(XH, _mm512_set1_epi8(1));
        if (k == 4) m9 = _mm512_test_epi8_mask(XH, _mm512_set1_epi8(2));
    }
    const __m512i L = trq_plane(g_trq.lo[set][k - 2], X, m7, m8, m9, k);
    const __m512i H = trq_plane(g_trq.hi[set][k - 2], X, m7, m8, m9, k);
    *u0 = _mm512_unpacklo_epi8(L, H);
    *u1 = _mm512_unpackhi_epi8(L, H);
}

/* The windows of a group in 32 word lanes, two runs of the record at once: lanes 0..15
 * channel i at token t, lanes 16..31 at token t + 64 (the recurrence of trel_step in
 * 16-bit lanes: one vpmultishiftqb brings both steps' symbols to bit 6, control byte b
 * of lane i taking the 8 bits from (ik − 6 + 8b) mod 64 of its qword, which holds the
 * step's 2k bytes: qwords 0..3 step ta, 4..7 step tb). */
typedef struct trq_rot { __m512i ctl, m6; } trq_rot;

static inline __attribute__((always_inline)) trq_rot trq_rot_init(const unsigned k)
{
    uint8_t c[64];
    for (unsigned j = 0; j < 64; j++) c[j] = (uint8_t)(((j / 2) % 16 * k + 64 - 6 + 8 * (j % 2)) & 63);
    trq_rot r;
    r.ctl = _mm512_loadu_si512(c);
    r.m6 = _mm512_set1_epi16((short)(((1u << k) - 1) << 6));
    return r;
}

/* The 2k bytes of step t of group g in a qword (exact: the step is the payload's last,
 * so only its bytes are read). */
static inline __attribute__((always_inline)) long long trq_word(const uint8_t *g, size_t t, const unsigned k, int exact)
{
    const uint8_t *p = g + t * 2 * k;
    long long q;
    if (k == 4 || !exact) {
        memcpy(&q, p, 8);
    } else {
        uint32_t lo;
        uint16_t hi = 0;
        memcpy(&lo, p, 4);
        if (k == 3) memcpy(&hi, p + 4, 2);
        q = (long long)(lo | ((uint64_t)hi << 32));
    }
    return q;
}

/* The windows after steps ta (lanes 0..15) and tb (16..31) from the windows before them. */
static inline __attribute__((always_inline)) __m512i trq_step2(__m512i w, const uint8_t *g, size_t ta, size_t tb,
                                                               const unsigned k, int exact_a, int exact_b,
                                                               const trq_rot *rt)
{
    /* two broadcasts, the second merged into qwords 4..7: from memory these are load-port
     * operations (the earlier broadcast-from-register and insert took three shuffle-port
     * uops per step, as many as the table lookup of 2-bit codes) */
    const __m512i sym = _mm512_mask_set1_epi64(_mm512_set1_epi64(trq_word(g, ta, k, exact_a)), 0xF0,
                                               trq_word(g, tb, k, exact_b));
    const __m512i x = _mm512_multishift_epi64_epi8(rt->ctl, sym);
    return _mm512_ternarylogic_epi32(x, rt->m6, _mm512_srli_epi16(w, (int)k), 0xEA);
}

/* The windows before tokens 0 (tail-biting: the record's last symbols) and 64. */
static inline __attribute__((always_inline)) __m512i trq_start(const uint8_t *g, const unsigned k, int lastg,
                                                               const trq_rot *rt)
{
    const size_t lead = (6 + k - 1) / k;
    __m512i w = _mm512_setzero_si512();
    for (size_t i = 0; i < lead; i++)
        w = trq_step2(w, g, G - lead + i, G / 2 - lead + i, k, lastg && i == lead - 1, 0, rt);
    return w;
}

/* acc += u · s by byte quads (u unsigned, s signed; vpdpbusd), the accumulator named in
 * place. GCC 12 compiles the intrinsic with a copy of the accumulator into a scratch
 * register and back (two vmovdqa64 per dot product in trq8_scores' group steps); the
 * assembly form keeps the accumulator where it is. */
#define TRQ_DPBUSD(acc, u, s) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s))

/* Scores of the NR rows for all G tokens: p[r][t] = Ktok[t] * (fk[r] * Σ_d q16[r][d] *
 * c16[w(d, t)] + cz[r]). Tokens go by steps (t, t+1, t+64, t+65), t = 0, 2, .., 62. */
static inline __attribute__((always_inline)) void trq_scores(float *p, __m512i *wst, const int16_t *q16, const float *fk,
                                                             const float *cz, const float *ktok, const uint8_t *payload,
                                                             size_t D, const uint8_t *pf, size_t pfn, const unsigned k,
                                                             const unsigned set, const size_t NR)
{
    const trq_rot rt = trq_rot_init(k);
    const __m512i pl = _mm512_load_si512((const void *)g_trq.kperm), ph = pl; /* ph: unused by the word order */
    const __m512i lane0 = _mm512_setr_epi32(0, 8, 4, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0); /* t, t+1, t+64, t+65 */
    const size_t ng = D / 16, gbytes = G * 2 * k;
    for (size_t j = 0; j < ng; j++) wst[j] = trq_start(payload + j * gbytes, k, j == ng - 1, &rt);
    for (size_t t = 0; t < G / 2; t += 2) {
        __m512i s0[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) s0[r] = _mm512_setzero_si512();
        for (size_t j = 0; j < ng; j++) {
            const uint8_t *g = payload + j * gbytes;
            const int lastg = j == ng - 1;
            const size_t o = (t / 2 * ng + j) * 64; /* the next record (rc->pf), a line per group step */
            if (o < pfn) _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
            const __m512i wa = trq_step2(wst[j], g, t, t + G / 2, k, 0, 0, &rt);
            const __m512i wb = trq_step2(wa, g, t + 1, t + 1 + G / 2, k, 0, lastg && t + 1 + G / 2 == G - 1, &rt);
            wst[j] = wb;
            __m512i u0, u1;
            trq_lookup(&u0, &u1, wa, wb, pl, ph, k, 1, set);
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                const int16_t *qr = q16 + r * D + 16 * j;
                const __m512i ql = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)qr));
                const __m512i qh = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)(qr + 8)));
                s0[r] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(s0[r], u0, ql), u1, qh);
            }
        }
        /* s0: 128-bit lane 0 token t, 1 t+64, 2 t+1, 3 t+65 (4 channel-pair partials each) */
        const __m128 kt = _mm_loadh_pi(_mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)(const void *)(ktok + t)),
                                       (const __m64 *)(const void *)(ktok + t + G / 2));
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) {
            const __m512i y = _mm512_add_epi32(s0[r], _mm512_shuffle_epi32(s0[r], _MM_SHUFFLE(1, 0, 3, 2)));
            const __m512i z = _mm512_add_epi32(y, _mm512_shuffle_epi32(y, _MM_SHUFFLE(2, 3, 0, 1)));
            const __m128 sv = _mm_cvtepi32_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(lane0, z)));
            const __m128 ps = _mm_mul_ps(kt, _mm_fmadd_ps(_mm_set1_ps(fk[r]), sv, _mm_set1_ps(cz[r])));
            _mm_storel_pi((__m64 *)(void *)(p + r * G + t), ps);
            _mm_storeh_pi((__m64 *)(void *)(p + r * G + t + G / 2), ps);
        }
    }
}

/* a[r] (16 channels of group g, int32) = Σ_t p16[r][t] * c16[w(t)] over all G tokens
 * (p16 is zero past each row's keys). */
static inline __attribute__((always_inline)) void trq_values(__m512i a[RBX], const int16_t *p16, const uint8_t *g,
                                                             int lastg, const unsigned k, const unsigned set,
                                                             const size_t NR)
{
    const trq_rot rt = trq_rot_init(k);
    const __m512i pl = _mm512_load_si512((const void *)g_trq.vperm[0]), ph = _mm512_load_si512((const void *)g_trq.vperm[1]);
    __m512i w = trq_start(g, k, lastg, &rt);
    _Pragma("GCC unroll 8")
    for (size_t r = 0; r < NR; r++) a[r] = _mm512_setzero_si512();
    for (size_t t = 0; t < G / 2; t += 2) {
        const __m512i wa = trq_step2(w, g, t, t + G / 2, k, 0, 0, &rt);
        const __m512i wb = trq_step2(wa, g, t + 1, t + 1 + G / 2, k, 0, lastg && t + 1 + G / 2 == G - 1, &rt);
        w = wb;
        __m512i u0, u1;
        trq_lookup(&u0, &u1, wa, wb, pl, ph, k, 0, set);
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) {
            int32_t pa, pb;
            memcpy(&pa, p16 + r * G + t, 4);
            memcpy(&pb, p16 + r * G + t + G / 2, 4);
            a[r] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(a[r], u0, _mm512_set1_epi32(pa)), u1, _mm512_set1_epi32(pb));
        }
    }
}

/* The rows' int32 sums a[r] of 16 channels (one group) into their accumulators ad[r * D]:
 * ad = ad·fct + Vch · (fv · (float)a + zz) (rows without keys keep theirs). */
static inline __attribute__((always_inline)) void trq_acc_group(float *ad0, size_t D, const float *vch16,
                                                                const uint32_t *nvis, size_t rb, const float *fct,
                                                                const float *zz, const float *fv, const __m512i *a)
{
    const __m512 vch = _mm512_loadu_ps(vch16);
    for (size_t r = 0; r < rb; r++) {
        if (!nvis[r]) continue;
        float *ad = ad0 + r * D;
        const __m512 x = _mm512_fmadd_ps(_mm512_loadu_ps(ad), _mm512_set1_ps(fct[r]), _mm512_mul_ps(vch, _mm512_set1_ps(zz[r])));
        const __m512 av = _mm512_mul_ps(_mm512_set1_ps(fv[r]), _mm512_cvtepi32_ps(a[r]));
        _mm512_storeu_ps(ad, _mm512_fmadd_ps(vch, av, x));
    }
}

static inline __attribute__((always_inline)) void chunk_trq_nr(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                                                const sjk_attn_rec *rc, float *m, float *l, float *acc,
                                                                float *work, const size_t NR)
{
    float *p = work;                                    /* [RBX][G] */
    float *qs = p + RBX * G;                            /* [RBX][D] */
    __m512i *wst = (__m512i *)(((uintptr_t)(qs + RBX * D) + 63) & ~(uintptr_t)63); /* [D/16] */
    int16_t *q16 = (int16_t *)(void *)(wst + D / 16);   /* [RBX][D] */
    int16_t *p16 = q16 + RBX * D;                       /* [RBX][G] */
    const unsigned kb = rc->kbits, vb = rc->vbits;
    float ck, cv;
    sjk_attn_trellis_c16_of(rc->kcb, kb, &ck);
    sjk_attn_trellis_c16_of(rc->vcb, vb, &cv);
    const unsigned ks = (unsigned)sjk_trellis_codebook_set(rc->kcb, kb), vs = (unsigned)sjk_trellis_codebook_set(rc->vcb, vb);
    const size_t ng = D / 16, gbytes = G * 2 * vb;
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, r0, NR, &ntm);
        if (!ntm) continue;
        float cz[RBX] = {0}, zz[RBX] = {0}, fct[RBX] = {1, 1, 1, 1, 1, 1, 1, 1}, fk[RBX], fv[RBX];
        rec_fold(qs, cz, q + r0 * D, rb, NR, D, rc);
        for (size_t r = 0; r < NR; r++) { /* rows past rb: zero queries, zero scale */
            float sq;
            q16_prep_l1(q16 + r * D, &sq, qs + r * D, D, SJK_ATTN_TRQ_SUM_MAX);
            fk[r] = sq * ck;
        }
        const size_t pfn = r0 == 0 ? rc->pf_nbytes : 0;
        if (kb == 2) trq_scores(p, wst, q16, fk, cz, rc->ktok, rc->kt, D, rc->pf, pfn, 2, ks, NR);
        else if (kb == 3) trq_scores(p, wst, q16, fk, cz, rc->ktok, rc->kt, D, rc->pf, pfn, 3, ks, NR);
        else trq_scores(p, wst, q16, fk, cz, rc->ktok, rc->kt, D, rc->pf, pfn, 4, ks, NR);
        rec_probs(p, fct, zz, nvis + r0, rb, NR, m + r0, l + r0, rc);
        for (size_t r = 0; r < NR; r++) { /* p is zero past each row's keys */
            float sp;
            q16_prep_l1(p16 + r * G, &sp, p + r * G, G, SJK_ATTN_TRQ_SUM_MAX);
            fv[r] = sp * cv;
        }
        for (size_t j = 0; j < ng; j++) {
            __m512i a[RBX];
            const uint8_t *g = rc->vt + j * gbytes;
            if (vb == 2) trq_values(a, p16, g, j == ng - 1, 2, vs, NR);
            else if (vb == 3) trq_values(a, p16, g, j == ng - 1, 3, vs, NR);
            else trq_values(a, p16, g, j == ng - 1, 4, vs, NR);
            trq_acc_group(acc + r0 * D + 16 * j, D, rc->vch + 16 * j, nvis + r0, rb, fct, zz, fv, a);
        }
    }
}

/* Rows by blocks of 4, 6 or 8 (ROWS_NR16); a record with a codebook outside the known
 * tables (a test's) takes chunk_rec. */
static void chunk_trellis_q16_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                     const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    float s;
    if (!rc->kt || !sjk_attn_trellis_c16_of(rc->kcb, rc->kbits, &s) || !sjk_attn_trellis_c16_of(rc->vcb, rc->vbits, &s)) {
        chunk_rec_avx512(q, R, D, nvis, rc, m, l, acc, work);
        return;
    }
    pthread_once(&g_trq_once, trq_build);
    ROWS_NR16(R, chunk_trq_nr(q, R, D, nvis, rc, m, l, acc, work, NR_));
}

/* ---- trellis records on the int8-grid codebooks: chunk_trellis_q8 --------------------
 * The bodies SJK_BODY_TRELLIS_I8, _REAL_I8 and _S128 code against tables whose entries are
 * exactly step · c8 (int8, sjk_trellis_codebook_i8), so one byte plane holds a table and
 * one lookup (trq_plane) gives 64 values as bytes: half the vpermi2b of chunk_trellis_q16's
 * two planes, and no unpacks. The plane holds c8 + 128 (unsigned, as vpdpbusd's first
 * operand wants); the queries and the weights are two int8 pieces y = 128 hi + lo
 * (sjk_attn_q8_pieces), so per row and 64 values two vpdpbusd, and the +128 comes back
 * out as 128 Σ y per row (the sums wrap in int32 and the result, |Σ y c8| < 2^31, is
 * exact).
 *   keys    the windows' natural order (g_trq.kperm): 128-bit lane j holds one token's 16
 *           channels (t, t+64, t+1, t+65), dword i channels 4i..4i+3, against the row's
 *           16 query bytes of the group broadcast to the four lanes;
 *   values  byte 4i + m of the index vector is channel i of token m (t, t+1, t+64, t+65;
 *           trq8_build), so dword i sums channel i over the step's four tokens against
 *           the row's four weight bytes of the step, broadcast (stored in that order,
 *           trq8_weights). */
typedef struct trq8_lut {
    _Alignas(64) uint8_t u[SJK_TRELLIS_CB_GRID_SETS][3][64 << SJK_TRELLIS_MAX_BITS]; /* c8 + 128 of grid set 3 + i */
    _Alignas(64) uint8_t a[3][SJK_TRELLIS_S128_ENTRIES]; /* A_k + 128 of the 128-entry tables (trq8_lookup_s128) */
    _Alignas(64) uint8_t vperm[64];    /* values: the windows' low bytes in channel-major order */
    _Alignas(64) uint8_t pperm[64];    /* weights, steps 0..15: byte 4s + m = token (t, t+1, t+64, t+65)[m], t = 2s */
} trq8_lut;
static trq8_lut g_trq8;
static pthread_once_t g_trq8_once = PTHREAD_ONCE_INIT;

static void trq8_build(void)
{
    for (unsigned set = 0; set < SJK_TRELLIS_CB_GRID_SETS; set++)
        for (unsigned k = 2; k <= SJK_TRELLIS_MAX_BITS; k++) {
            const int8_t *c8 = sjk_trellis_codebook_i8(sjk_trellis_codebook_of_set(SJK_TRELLIS_CB_FLOAT_SETS + set, k), k, NULL);
            for (size_t w = 0; w < ((size_t)64 << k); w++) g_trq8.u[set][k - 2][w] = (uint8_t)(c8[w] + 128);
        }
    for (unsigned k = 2; k <= SJK_TRELLIS_MAX_BITS; k++) {
        const int8_t *a = sjk_trellis_s128_table(k, NULL);
        for (unsigned e = 0; e < SJK_TRELLIS_S128_ENTRIES; e++) g_trq8.a[k - 2][e] = (uint8_t)(a[e] + 128);
    }
    for (unsigned b = 0; b < 64; b++) {
        const unsigned i = b / 4, m = b % 4;
        const unsigned src = (m & 1 ? 64u : 0u) + 2 * (i + (m & 2 ? 16u : 0u)); /* trq_src's byte of (m, i) */
        g_trq8.vperm[b] = (uint8_t)src;
        g_trq8.pperm[b] = (uint8_t)((m & 2 ? 64u : 0u) + 2 * i + (m & 1));
    }
}

/* sjk_attn_q8_pieces (attn_ref.c) 16 lanes at a time, to the same bits (n: a multiple of 16). */
static void q8_pieces(int8_t *hi, int8_t *lo, float *scale, int32_t *ysum, const float *x, size_t n)
{
    const float amax = absmax16(x, n);
    const float s = isfinite(amax) ? amax / 16256.0f : NAN;
    const float inv = s > 0 ? 1.0f / s : 0.0f;
    *scale = s;
    const __m512 vinv = _mm512_set1_ps(isfinite(amax) ? inv : 0.0f), lim = _mm512_set1_ps(16256.0f);
    const __m512 hlf = _mm512_set1_ps(1.0f / 128.0f), c128 = _mm512_set1_ps(128.0f);
    __m512i sum = _mm512_setzero_si512();
    for (size_t i = 0; i < n; i += 16) {
        __m512 y = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        y = _mm512_max_ps(_mm512_min_ps(y, lim), _mm512_sub_ps(_mm512_setzero_ps(), lim));
        const __m512 h = _mm512_roundscale_ps(_mm512_mul_ps(y, hlf), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512 l = _mm512_fnmadd_ps(c128, h, y); /* exact: y - 128 h */
        _mm_storeu_si128((__m128i *)(void *)(hi + i), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(h)));
        _mm_storeu_si128((__m128i *)(void *)(lo + i), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(l)));
        sum = _mm512_add_epi32(sum, _mm512_cvtps_epi32(y));
    }
    *ysum = _mm512_reduce_add_epi32(sum);
}

/* The 64 table bytes of one step's windows wa, wb, in the order of the index control pl
 * (which picks the windows' low bytes): bit 7 of each picked byte selects the table half
 * (vpmovb2m). Bits 8 and 9: for keys (nat: byte b is word b of wa || wb) the words'
 * own bits, two word tests joined (measured 1.02-1.05x the permute below on Gemma's
 * geometry at 32K, bench_attn_ab against the linked table); for values the same
 * permute of the windows shifted right by 1 and 2, whose picked bytes then carry bit 8
 * (9) in bit 7. */
static inline __attribute__((always_inline)) __m512i trq8_lookup(__m512i wa, __m512i wb, __m512i pl, const unsigned k,
                                                                 const int nat, const uint8_t *T)
{
    const __m512i X = _mm512_permutex2var_epi8(wa, pl, wb);
    const __mmask64 m7 = _mm512_movepi8_mask(X);
    __mmask64 m8 = 0, m9 = 0;
    if (nat) { /* keys: byte b is word b of wa || wb, so the masks of bits 8, 9 are the words' */
        if (k >= 3)
            m8 = _mm512_kunpackd(_mm512_test_epi16_mask(wb, _mm512_set1_epi16(0x100)),
                                 _mm512_test_epi16_mask(wa, _mm512_set1_epi16(0x100)));
        if (k == 4)
            m9 = _mm512_kunpackd(_mm512_test_epi16_mask(wb, _mm512_set1_epi16(0x200)),
                                 _mm512_test_epi16_mask(wa, _mm512_set1_epi16(0x200)));
    } else {
        if (k >= 3)
            m8 = _mm512_movepi8_mask(_mm512_permutex2var_epi8(_mm512_srli_epi16(wa, 1), pl, _mm512_srli_epi16(wb, 1)));
        if (k == 4)
            m9 = _mm512_movepi8_mask(_mm512_permutex2var_epi8(_mm512_srli_epi16(wa, 2), pl, _mm512_srli_epi16(wb, 2)));
    }
    return trq_plane(T, X, m7, m8, m9, k);
}

/* The same 64 bytes for a 128-entry table (SJK_BODY_TRELLIS_S128): the entry index
 * (w + o_k (w >> 7)) mod 128 (sjk_trellis_s128_index, o_k = 32 >> (k - 2)) is formed on
 * the windows' words, whose low bytes the control pl then picks, and one two-register
 * permute of A (A: the table's 128 bytes) reads them: two permutes in all for any k,
 * against 4, 6 and 14 (with merges) for the 64 << k-entry planes. */
static inline __attribute__((always_inline)) __m512i trq8_lookup_s128(__m512i wa, __m512i wb, __m512i pl,
                                                                      const unsigned k, const uint8_t *A)
{
    /* o_k (w >> 7) = (w >> 7) << (7 - k) = (w >> k) & (7 << (7 - k)) (w has 6 + k bits);
     * w >> k is the shift trq_step2 makes of wa for wb, so the compiler shares it */
    const __m512i mo = _mm512_set1_epi16((short)(7u << (7 - k)));
    const __m512i ia = _mm512_add_epi16(wa, _mm512_and_si512(_mm512_srli_epi16(wa, (int)k), mo));
    const __m512i ib = _mm512_add_epi16(wb, _mm512_and_si512(_mm512_srli_epi16(wb, (int)k), mo));
    const __m512i X = _mm512_permutex2var_epi8(ia, pl, ib);
    return _mm512_permutex2var_epi8(_mm512_load_si512((const void *)A), X, _mm512_load_si512((const void *)(A + 64)));
}

/* Scores of the NR rows for all G tokens: p[r][t] = Ktok[t] * (fk[r] * (Σ_d y[r][d] *
 * c8[w(d, t)]) + cz[r]), y = 128 qh + ql; ycorr[r] = 128 Σ_d y[r][d] (the +128 of the
 * plane). Tokens go by steps (t, t+1, t+64, t+65), t = 0, 2, .., 62. */
static inline __attribute__((always_inline)) void trq8_scores(float *p, __m512i *wst, const int8_t *qh, const int8_t *ql,
                                                              const int32_t *ycorr, const float *fk, const float *cz,
                                                              const float *ktok, const uint8_t *payload, size_t D,
                                                              const uint8_t *pf, size_t pfn, const unsigned k,
                                                              const uint8_t *T, const int s128, const size_t NR)
{
    const trq_rot rt = trq_rot_init(k);
    const __m512i pl = _mm512_load_si512((const void *)g_trq.kperm);
    const __m512i lane0 = _mm512_setr_epi32(0, 8, 4, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0); /* t, t+1, t+64, t+65 */
    const size_t ng = D / 16, gbytes = G * 2 * k;
    for (size_t j = 0; j < ng; j++) wst[j] = trq_start(payload + j * gbytes, k, j == ng - 1, &rt);
    for (size_t t = 0; t < G / 2; t += 2) {
        __m512i sh[RBX], sl[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) sh[r] = sl[r] = _mm512_setzero_si512();
        for (size_t j = 0; j < ng; j++) {
            const uint8_t *g = payload + j * gbytes;
            const int lastg = j == ng - 1;
            const size_t o = (t / 2 * ng + j) * 64; /* the next record (rc->pf), a line per group step */
            if (o < pfn) _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
            const __m512i wa = trq_step2(wst[j], g, t, t + G / 2, k, 0, 0, &rt);
            const __m512i wb = trq_step2(wa, g, t + 1, t + 1 + G / 2, k, 0, lastg && t + 1 + G / 2 == G - 1, &rt);
            wst[j] = wb;
            const __m512i u = s128 ? trq8_lookup_s128(wa, wb, pl, k, T) : trq8_lookup(wa, wb, pl, k, 1, T);
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                const __m512i qhb = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)(qh + r * D + 16 * j)));
                const __m512i qlb = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)(ql + r * D + 16 * j)));
                TRQ_DPBUSD(sh[r], u, qhb);
                TRQ_DPBUSD(sl[r], u, qlb);
            }
        }
        /* 128-bit lane 0 token t, 1 t+64, 2 t+1, 3 t+65 (4 channel-quad partials each) */
        const __m128 kt = _mm_loadh_pi(_mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)(const void *)(ktok + t)),
                                       (const __m64 *)(const void *)(ktok + t + G / 2));
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) {
            const __m512i s = _mm512_add_epi32(_mm512_slli_epi32(sh[r], 7), sl[r]);
            const __m512i y = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
            const __m512i z = _mm512_add_epi32(y, _mm512_shuffle_epi32(y, _MM_SHUFFLE(2, 3, 0, 1)));
            const __m128i dot = _mm_sub_epi32(_mm512_castsi512_si128(_mm512_permutexvar_epi32(lane0, z)), _mm_set1_epi32(ycorr[r]));
            const __m128 ps = _mm_mul_ps(kt, _mm_fmadd_ps(_mm_set1_ps(fk[r]), _mm_cvtepi32_ps(dot), _mm_set1_ps(cz[r])));
            _mm_storel_pi((__m64 *)(void *)(p + r * G + t), ps);
            _mm_storeh_pi((__m64 *)(void *)(p + r * G + t + G / 2), ps);
        }
    }
}

/* a[r] (16 channels of group g, int32) = Σ_t y[r][t] * c8[w(t)] over all G tokens (the
 * weights' pieces p4h / p4l in step order, trq8_weights; zero past each row's keys),
 * ycorr[r] = 128 Σ_t y[r][t]. */
static inline __attribute__((always_inline)) void trq8_values(__m512i a[RBX], const int8_t *p4h, const int8_t *p4l,
                                                              const int32_t *ycorr, const uint8_t *g, int lastg,
                                                              const unsigned k, const uint8_t *T, const int s128,
                                                              const size_t NR)
{
    const trq_rot rt = trq_rot_init(k);
    const __m512i pl = _mm512_load_si512((const void *)g_trq8.vperm);
    __m512i w = trq_start(g, k, lastg, &rt);
    __m512i ah[RBX], al[RBX];
    _Pragma("GCC unroll 8")
    for (size_t r = 0; r < NR; r++) ah[r] = al[r] = _mm512_setzero_si512();
    for (size_t t = 0; t < G / 2; t += 2) {
        const __m512i wa = trq_step2(w, g, t, t + G / 2, k, 0, 0, &rt);
        const __m512i wb = trq_step2(wa, g, t + 1, t + 1 + G / 2, k, 0, lastg && t + 1 + G / 2 == G - 1, &rt);
        w = wb;
        const __m512i u = s128 ? trq8_lookup_s128(wa, wb, pl, k, T) : trq8_lookup(wa, wb, pl, k, 0, T);
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) {
            int32_t bh, bl;
            memcpy(&bh, p4h + r * G + 2 * t, 4);
            memcpy(&bl, p4l + r * G + 2 * t, 4);
            TRQ_DPBUSD(ah[r], u, _mm512_set1_epi32(bh));
            TRQ_DPBUSD(al[r], u, _mm512_set1_epi32(bl));
        }
    }
    _Pragma("GCC unroll 8")
    for (size_t r = 0; r < NR; r++)
        a[r] = _mm512_sub_epi32(_mm512_add_epi32(_mm512_slli_epi32(ah[r], 7), al[r]), _mm512_set1_epi32(ycorr[r]));
}

/* The weights' pieces of one row (G values, zero past its keys) in step order: byte 4s + m
 * of the result is the piece of token (t, t+1, t+64, t+65)[m], t = 2s. */
static inline void trq8_weights(int8_t *p4h, int8_t *p4l, float *scale, int32_t *ycorr, const float *p)
{
    _Alignas(64) int8_t h[G], l[G];
    int32_t ys;
    q8_pieces(h, l, scale, &ys, p, G);
    *ycorr = 128 * ys;
    /* steps 0..15 from the control, 16..31 from it + 32 (tokens 32.. and 96..) */
    const __m512i i0 = _mm512_load_si512((const void *)g_trq8.pperm), i1 = _mm512_add_epi8(i0, _mm512_set1_epi8(32));
    const __m512i h0 = _mm512_load_si512((const void *)h), h1 = _mm512_load_si512((const void *)(h + 64));
    const __m512i l0 = _mm512_load_si512((const void *)l), l1 = _mm512_load_si512((const void *)(l + 64));
    _mm512_storeu_si512((void *)p4h, _mm512_permutex2var_epi8(h0, i0, h1));
    _mm512_storeu_si512((void *)(p4h + 64), _mm512_permutex2var_epi8(h0, i1, h1));
    _mm512_storeu_si512((void *)p4l, _mm512_permutex2var_epi8(l0, i0, l1));
    _mm512_storeu_si512((void *)(p4l + 64), _mm512_permutex2var_epi8(l0, i1, l1));
}

/* CALL(k, s128) with k and the table kind as constants, so each of the six kernels is
 * compiled for its width and lookup. */
#define TRQ8_BY_K(K, S128, CALL)                                                                            \
    do {                                                                                                   \
        if (S128) {                                                                                        \
            if ((K) == 2) CALL(2, 1);                                                                      \
            else if ((K) == 3) CALL(3, 1);                                                                 \
            else CALL(4, 1);                                                                               \
        } else {                                                                                           \
            if ((K) == 2) CALL(2, 0);                                                                      \
            else if ((K) == 3) CALL(3, 0);                                                                 \
            else CALL(4, 0);                                                                               \
        }                                                                                                  \
    } while (0)

/* Scores of a scalar K tile of unpacked codes rc->kc [D][G] of up to 7 bits (a trellis
 * record's tile above 4 bits, chunk_trq8_nr's kmix; a scalar record's keys of 2, 3 and 5
 * to 7 bits, chunk_rec_v16) by int16 dot products: per row the
 * folded queries qs become int16 (q16_prep) and
 *   p[r][t] = Ktok[t] · (scale · Σ_d q16[r][d] · code[d][t] + cz[r]),  t < ntm rounded up to 32,
 * exact in int32 (|.| <= 512 · 32767 · 127 < 2^31). Per pair of channels and 32 tokens
 * the two rows' 32 bytes go into one zmm and two masked vpermb make the word pairs
 * (channel c, c + 1) of tokens 0..15 and 16..31, zero-extended; one vpdpwssd per row and
 * 16 tokens adds both channels (the fp32 path: four widenings and two FMAs per row and
 * channel). */
static ALWAYS_INLINE void rec_scores_c16(float *p, int16_t *q16, const float *qs, const float *cz, const sjk_attn_rec *rc,
                                         size_t D, size_t ntm, size_t rb, size_t pfn, const size_t NR)
{
    float q16s[RBX];
    const size_t ntm32 = (ntm + 31) & ~(size_t)31;
    rec_q16_rows(q16, q16s, qs, D, rb, NR);
    __m512i ilo, ihi; /* dword j: token j of channels c and c + 1 (ihi: token 16 + j) */
    c16_pair_controls(&ilo, &ihi);
    const __mmask64 even = (__mmask64)0x5555555555555555ull;
    for (size_t t0 = 0; t0 < ntm32; t0 += 32) {
        __m512i A0[RBX], A1[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) { A0[r] = _mm512_setzero_si512(); A1[r] = _mm512_setzero_si512(); }
        const size_t pfo = (t0 / 32) * D * 64;
        for (size_t c = 0; c < D; c += 2) {
            const uint8_t *u = rc->kc + c * G + t0;
            /* a line per channel, as rec_scores: the whole of a record up to 8/8 bits */
            if (pfo + c * 64 < pfn) _mm_prefetch((const char *)rc->pf + pfo + c * 64, _MM_HINT_T1);
            if (pfo + c * 64 + 64 < pfn) _mm_prefetch((const char *)rc->pf + pfo + c * 64 + 64, _MM_HINT_T1);
            const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)u)),
                                                 _mm256_loadu_si256((const __m256i *)(const void *)(u + G)), 1);
            dpw_rows(A0, A1, _mm512_maskz_permutexvar_epi8(even, ilo, x), _mm512_maskz_permutexvar_epi8(even, ihi, x), q16 + c,
                     D, NR);
        }
        rec_q16_store(p, A0, A1, q16s, cz, rc->ktok, t0, NR);
    }
}

/* A record of the int8-grid bodies. With kmix its K tile is scalar (above 4 bits: the
 * codes unpacked in rc->kc, scored by rec_scores_c16, or by rec_scores in fp32 at 8 bits:
 * int16 there measured 0.92-1.00x the fp32 scores, docs/notes/benchmarks.md),
 * with vmix its V tile (rc->vc, summed in fp32 by v_accum); the other tile is trellis,
 * read in place as below. */
static inline __attribute__((always_inline)) void chunk_trq8_nr(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                                                 const sjk_attn_rec *rc, float *m, float *l, float *acc,
                                                                 float *work, const size_t NR, const int kmix,
                                                                 const int vmix)
{
    float *p = work;                                    /* [RBX][G] */
    float *qs = p + RBX * G;                            /* [RBX][D] */
    __m512i *wst = (__m512i *)(((uintptr_t)(qs + RBX * D) + 63) & ~(uintptr_t)63); /* [D/16] */
    int8_t *qh = (int8_t *)(void *)(wst + D / 16);      /* [RBX][D] */
    int8_t *ql = qh + RBX * D;                          /* [RBX][D] */
    int8_t *p4h = ql + RBX * D, *p4l = p4h + RBX * G;   /* [RBX][G] each, in step order (trq8_weights) */
    const unsigned kb = rc->kbits, vb = rc->vbits;
    float ck = 0, cv = 0;
    if (!kmix) sjk_trellis_codebook_i8(rc->kcb, kb, &ck);
    if (!vmix) sjk_trellis_codebook_i8(rc->vcb, vb, &cv);
    const unsigned ks = kmix ? 0 : (unsigned)sjk_trellis_codebook_set(rc->kcb, kb) - SJK_TRELLIS_CB_FLOAT_SETS;
    const unsigned vs = vmix ? 0 : (unsigned)sjk_trellis_codebook_set(rc->vcb, vb) - SJK_TRELLIS_CB_FLOAT_SETS;
    /* a 128-entry table (set 6) is read by trq8_lookup_s128 from its 128 bytes */
    const unsigned s6 = SJK_TRELLIS_CB_SET_S128 - SJK_TRELLIS_CB_FLOAT_SETS;
    const int k128 = !kmix && ks == s6, v128 = !vmix && vs == s6;
    const uint8_t *TK = kmix ? NULL : k128 ? g_trq8.a[kb - 2] : g_trq8.u[ks][kb - 2];
    const uint8_t *TV = vmix ? NULL : v128 ? g_trq8.a[vb - 2] : g_trq8.u[vs][vb - 2];
    const size_t ng = D / 16, gbytes = G * 2 * vb;
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, r0, NR, &ntm);
        if (!ntm) continue;
        float cz[RBX] = {0}, zz[RBX] = {0}, fct[RBX] = {1, 1, 1, 1, 1, 1, 1, 1}, fk[RBX], fv[RBX];
        int32_t kcorr[RBX], vcorr[RBX];
        rec_fold(qs, cz, q + r0 * D, rb, NR, D, rc);
        const size_t pfn = r0 == 0 ? rc->pf_nbytes : 0;
        if (kmix) {
            if (kb <= 7) rec_scores_c16(p, (int16_t *)(void *)qh, qs, cz, rc, D, ntm, rb, pfn, NR); /* qh, ql: [RBX][D] int16 */
            else rec_scores(p, qs, cz, rc, D, ntm, pfn, NR);
        } else {
            for (size_t r = 0; r < NR; r++) { /* rows past rb: zero queries, zero scale */
                float sq;
                int32_t ys;
                q8_pieces(qh + r * D, ql + r * D, &sq, &ys, qs + r * D, D);
                kcorr[r] = 128 * ys;
                fk[r] = sq * ck;
            }
#define TRQ8_SCORES(K_, S_) trq8_scores(p, wst, qh, ql, kcorr, fk, cz, rc->ktok, rc->kt, D, rc->pf, pfn, K_, TK, S_, NR)
            TRQ8_BY_K(kb, k128, TRQ8_SCORES);
#undef TRQ8_SCORES
        }
        rec_probs(p, fct, zz, nvis + r0, rb, NR, m + r0, l + r0, rc);
        if (vmix) {
            v_accum(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, ntm, TB, VL_U8, rc->vc, NULL, 1, rc->vch, zz);
            continue;
        }
        for (size_t r = 0; r < NR; r++) { /* p is zero past each row's keys */
            float sp;
            trq8_weights(p4h + r * G, p4l + r * G, &sp, &vcorr[r], p + r * G);
            fv[r] = sp * cv;
        }
        for (size_t j = 0; j < ng; j++) {
            __m512i a[RBX];
            const uint8_t *g = rc->vt + j * gbytes;
#define TRQ8_VALUES(K_, S_) trq8_values(a, p4h, p4l, vcorr, g, j == ng - 1, K_, TV, S_, NR)
            TRQ8_BY_K(vb, v128, TRQ8_VALUES);
#undef TRQ8_VALUES
            trq_acc_group(acc + r0 * D + 16 * j, D, rc->vch + 16 * j, nvis + r0, rb, fct, zz, fv, a);
        }
    }
}

/* Rows by blocks of 4, 6 or 8 (ROWS_NR16); a record with tables off the int8 grid takes
 * chunk_trellis_q16. */
static void chunk_trellis_q8_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                    const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    const int kmix = !rc->kt && rc->kc, vmix = !rc->vt && rc->vc; /* a scalar tile (attn_kernels.h) */
    if (kmix && vmix) {
        chunk_rec_scalar(q, R, D, nvis, rc, m, l, acc, work);
        return;
    }
    if ((!kmix && (!rc->kt || !sjk_trellis_codebook_i8(rc->kcb, rc->kbits, NULL))) ||
        (!vmix && (!rc->vt || !sjk_trellis_codebook_i8(rc->vcb, rc->vbits, NULL)))) {
        chunk_trellis_q16_avx512(q, R, D, nvis, rc, m, l, acc, work);
        return;
    }
    pthread_once(&g_trq_once, trq_build); /* kperm */
    pthread_once(&g_trq8_once, trq8_build);
    if (kmix) ROWS_NR16(R, chunk_trq8_nr(q, R, D, nvis, rc, m, l, acc, work, NR_, 1, 0));
    else if (vmix) ROWS_NR16(R, chunk_trq8_nr(q, R, D, nvis, rc, m, l, acc, work, NR_, 0, 1));
    else ROWS_NR16(R, chunk_trq8_nr(q, R, D, nvis, rc, m, l, acc, work, NR_, 0, 0));
}


/* ---- ggml block rows (q8_0, q4_0) read in place: chunk_qblk --------------------------
 * Scores by integer dot products against the query as int16 words 128 hi + lo
 * (attn_kernels.h, sjk_attn_qint.w16). A quad of blocks (128 codes) goes into 128-bit
 * lanes, lane b block j + b (q4_0: its 16 qs bytes, split into the low and the high
 * nibbles; q8_0: bytes 0..15 and 16..31 of each block in two zmm), and the in-lane byte
 * unpacks widen it to four zmm of words (q8_0 sign-extended) in which int32 lanes 4b..4b+3
 * always belong to block j + b. Per query row four vpdpwssd against the words in the
 * same order leave in each lane the exact Σ code · (128 hi + lo) over 8 channels (below
 * 2^24, so its conversion is exact), and one conversion and one fp32 multiply-add by
 * the blocks' scales (d_j+b in lanes 4b..4b+3) fold the quad into the row's 16 fp32
 * partials: per row and block 1 vpdpwssd and half an op besides (a pair of blocks per
 * zmm, the previous layout, took one op per row and block besides). A last pair of
 * blocks (D % 128 = 64) takes two vpdpwssd, lanes 0..7 the first block and 8..15 the
 * second. q4_0's −8 offset is one more multiply-add per key (Σ_b d_b · 8 · bsum_b). One
 * 4-row horizontal sum per key.
 * Values: V_ACCUM with the codes dequantized as they are loaded (q8_0: sign-extend and
 * convert; q4_0: the vpermps table of nib − 8), times the block's scale. The blocks'
 * fp16 scales of the chunk are converted once per call, 16 at a time by one gather. */
static void qblk_scales(float *dst, const uint8_t *base, size_t nblk, size_t bn)
{
    const __m512i step = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)bn));
    for (size_t i = 0; i < nblk; i += 16) {
        const __mmask16 k = nblk - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nblk - i)) - 1);
        const __m512i idx = _mm512_add_epi32(step, _mm512_set1_epi32((int)(i * bn)));
        const __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, idx, (const void *)base, 1);
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w)));
    }
}

/* Scores of keys [0, ntm) for the RB rows whose pieces are hi[r], lo[r], corr[r]. */
static inline __attribute__((always_inline)) void qblk_scores(float *p, const uint8_t *K, size_t ntm, size_t D,
                                                              const float *dkf, const int16_t *const w16[RBX],
                                                              const float bs[RBX][16], const float sc[RBX],
                                                              const unsigned kbits, const size_t NR,
                                                              const uint8_t *V, size_t vrow, const uint8_t *pf,
                                                              size_t pfn)
{
    const size_t nb = D / 32, bn = kbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES, krow = nb * bn;
    const __mmask16 mnb = (__mmask16)((1u << nb) - 1);
    const __m512i half = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512 bsv[RBX];
    for (size_t r = 0; r < NR; r++) bsv[r] = _mm512_mul_ps(_mm512_loadu_ps(bs[r]), _mm512_set1_ps(8.0f));
    for (size_t t = 0; t < ntm; t++) {
        const uint8_t *row = K + t * krow;
        /* the chunk's V rows into L1 for the values that follow, the next chunk's K rows
         * into L2, a key's worth of each per key */
        if (V)
            for (size_t o = (t * vrow) & ~(size_t)63; o < (t + 1) * vrow; o += 64) _mm_prefetch((const char *)V + o, _MM_HINT_T0);
        for (size_t o = (t * krow) & ~(size_t)63; o < (t + 1) * krow && o < pfn; o += 64)
            _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
        const __m512 dkz = _mm512_maskz_loadu_ps(mnb, dkf + t * nb);
        __m512 F[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < (NR + 3) / 4 * 4; r++) F[r] = _mm512_setzero_ps(); /* NR = 6: two zero partials */
        size_t j = 0;
        for (; j + 4 <= nb; j += 4) { /* a quad of blocks: 128-bit lane b holds block j + b */
            const uint8_t *b0 = row + j * bn + 2;
            __m512i w[4];
            if (kbits == 8) {
                /* blocks j, j+1 and j+2, j+3 as 32 bytes each, then lanes regrouped:
                 * x lane b bytes 0..15 of block j + b, y lane b bytes 16..31 */
                const __m512i u0 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)b0)),
                                                      _mm256_loadu_si256((const __m256i *)(const void *)(b0 + bn)), 1);
                const __m512i u1 = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(b0 + 2 * bn))),
                    _mm256_loadu_si256((const __m256i *)(const void *)(b0 + 3 * bn)), 1);
                const __m512i x = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(2, 0, 2, 0));
                const __m512i y = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 1, 3, 1));
                w[0] = _mm512_srai_epi16(_mm512_unpacklo_epi8(x, x), 8); /* sign-extended codes */
                w[1] = _mm512_srai_epi16(_mm512_unpackhi_epi8(x, x), 8);
                w[2] = _mm512_srai_epi16(_mm512_unpacklo_epi8(y, y), 8);
                w[3] = _mm512_srai_epi16(_mm512_unpackhi_epi8(y, y), 8);
            } else {
                __m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)b0));
                z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(const void *)(b0 + bn)), 1);
                z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(const void *)(b0 + 2 * bn)), 2);
                z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(const void *)(b0 + 3 * bn)), 3);
                const __m512i m4 = _mm512_set1_epi8(0x0F);
                const __m512i ul = _mm512_and_si512(z, m4), uh = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
                w[0] = _mm512_unpacklo_epi8(ul, _mm512_setzero_si512());
                w[1] = _mm512_unpackhi_epi8(ul, _mm512_setzero_si512());
                w[2] = _mm512_unpacklo_epi8(uh, _mm512_setzero_si512());
                w[3] = _mm512_unpackhi_epi8(uh, _mm512_setzero_si512());
            }
            const __m512 dk = _mm512_permutexvar_ps(_mm512_add_epi32(quad, _mm512_set1_epi32((int)j)), dkz);
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                const int16_t *qw = w16[r] + j * 32;
                __m512i a = _mm512_dpwssd_epi32(_mm512_setzero_si512(), w[0], _mm512_loadu_si512((const void *)qw));
                a = _mm512_dpwssd_epi32(a, w[1], _mm512_loadu_si512((const void *)(qw + 32)));
                a = _mm512_dpwssd_epi32(a, w[2], _mm512_loadu_si512((const void *)(qw + 64)));
                a = _mm512_dpwssd_epi32(a, w[3], _mm512_loadu_si512((const void *)(qw + 96)));
                F[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), dk, F[r]);
            }
        }
        for (; j < nb; j += 2) { /* the last pair (D % 128 = 64) */
            __m512i u;
            const uint8_t *b0 = row + j * bn + 2;
            __m512i w0, w1;
            if (kbits == 8) {
                u = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)b0)),
                                       _mm256_loadu_si256((const __m256i *)(const void *)(b0 + bn)), 1);
                w0 = _mm512_srai_epi16(_mm512_unpacklo_epi8(u, u), 8); /* sign-extended codes */
                w1 = _mm512_srai_epi16(_mm512_unpackhi_epi8(u, u), 8);
            } else {
                __m512i z = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)b0));
                z = _mm512_mask_broadcast_i32x4(z, (__mmask16)0xFF00, _mm_loadu_si128((const __m128i *)(const void *)(b0 + bn)));
                z = _mm512_mask_srli_epi16(z, (__mmask32)0xFF00FF00u, z, 4);
                u = _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
                w0 = _mm512_unpacklo_epi8(u, _mm512_setzero_si512());
                w1 = _mm512_unpackhi_epi8(u, _mm512_setzero_si512());
            }
            const __m512 dk = _mm512_permutexvar_ps(_mm512_add_epi32(half, _mm512_set1_epi32((int)j)), dkz);
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                const int16_t *qw = w16[r] + j * 32;
                __m512i a = _mm512_dpwssd_epi32(_mm512_setzero_si512(), w0, _mm512_loadu_si512((const void *)qw));
                a = _mm512_dpwssd_epi32(a, w1, _mm512_loadu_si512((const void *)(qw + 32)));
                F[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), dk, F[r]);
            }
        }
        if (kbits == 4) {
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) F[r] = _mm512_fnmadd_ps(dkz, bsv[r], F[r]);
        }
        float sv[RBX];
        for (size_t r = 0; r < NR; r += 4) _mm_storeu_ps(sv + r, hsum4x16(F[r], F[r + 1], F[r + 2], F[r + 3]));
        for (size_t r = 0; r < NR; r++) p[r * G + t] = sv[r] * sc[r];
    }
}

/* The V block scales of keys t < n transposed, dvt[b][t] (b < D / 32; 16 keys per
 * gather, zero up to the next multiple of 16; row: bytes per key). */
static void qblk_scales_t(float *dvt, const uint8_t *V, size_t n, size_t nb, size_t blk, size_t row)
{
    const __m512i step = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)row));
    for (size_t b = 0; b < nb; b++)
        for (size_t t = 0; t < n; t += 16) {
            const __mmask16 k = n - t >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - t)) - 1);
            const __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, step, (const void *)(V + t * row + b * blk), 1);
            _mm512_storeu_ps(dvt + b * G + t, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w)));
        }
}

/* Values of block rows by int16 weights (chunk_qblk_q16): per block of 32 channels and
 * row the weights p · d (d: the keys' V block scales, dvt) become int16 (q16_prep, the
 * bits of sjk_attn_q16_prep), and two keys go at a time, so that one vpdpwssd per row and
 * 16 channels adds both keys' codes times their weights exactly in int32:
 *   q8_0: the two keys' 32 codes sign-extended to words and interleaved by two word
 *         unpacks: int32 lane 4L + i of the low unpack holds channel 8L + i of both keys,
 *         the high one channel 8L + 4 + i; one two-source permute per row and block puts
 *         the sums back in channel order.
 *   q4_0: the two keys' 16 qs bytes interleaved into zero-extended words by one masked
 *         vpermb (word 2j byte j of the first key, word 2j + 1 byte j of the second), so
 *         int32 lane j holds byte j of both keys; the low nibbles (word & 15) are channel
 *         j, the high ones (word >> 4, the byte being zero-extended) channel 16 + j, both
 *         already in channel order. The codes are nib − 8, so per row and block
 *         8 Σ_t w16[t] (exact) comes off the int32 sums.
 * Per row and block one conversion and one scale. Against V_ACCUM's fp32 path (per key
 * and 32 values: two widenings, two conversions or table lookups and two scalings of
 * the codes, then two FMAs per row) that is per two keys two widenings (q4_0: one vpermb,
 * an and and a shift) and two vpdpwssd per row. */
static ALWAYS_INLINE void qblk_values_q16(float *acc, size_t D, const uint32_t *nvis, size_t rb, const size_t NR,
                                          const float *p, const float *fct, size_t ntm, const uint8_t *V,
                                          const float *dvt, float *x, int16_t *w16, int32_t *ia, const unsigned vbits)
{
    const size_t nb = D / 32, blk = vbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES, vrow = nb * blk;
    const size_t ntm16 = (ntm + 15) & ~(size_t)15, ntm2 = (ntm + 1) & ~(size_t)1;
    const __m512i i0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i i1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    /* q4_0: output byte 4j from byte j (first key), 4j + 2 from byte 16 + j (second key),
     * odd bytes zero (the mask) */
    const __m512i ilv = _mm512_set_epi32(0x001F000F, 0x001E000E, 0x001D000D, 0x001C000C, 0x001B000B, 0x001A000A,
                                         0x00190009, 0x00180008, 0x00170007, 0x00160006, 0x00150005, 0x00140004,
                                         0x00130003, 0x00120002, 0x00110001, 0x00100000);
    const __m512i m15 = _mm512_set1_epi16(15);
    for (size_t r = 0; r < rb; r++) {
        if (!nvis[r]) continue;
        float *a = acc + r * D;
        const __m512 f = _mm512_set1_ps(fct[r]);
        for (size_t d = 0; d < D; d += 16) _mm512_storeu_ps(a + d, _mm512_mul_ps(_mm512_loadu_ps(a + d), f));
    }
    float ws[16][RBX];   /* nb <= 16 */
    int32_t wz[16][RBX]; /* q4_0: 8 Σ_t w16[t] of (block, row) */
    for (size_t b = 0; b < nb; b++)
        for (size_t r = 0; r < NR; r++) {
            for (size_t t = 0; t < ntm16; t += 16)
                _mm512_storeu_ps(x + t, _mm512_mul_ps(_mm512_loadu_ps(p + r * G + t), _mm512_loadu_ps(dvt + b * G + t)));
            int16_t *wr = w16 + (b * RBX + r) * G;
            q16_prep(wr, &ws[b][r], x, ntm16);
            if (vbits == 4) {
                __m512i sum = _mm512_setzero_si512();
                for (size_t t = 0; t < ntm16; t += 16)
                    sum = _mm512_add_epi32(sum, _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(wr + t))));
                wz[b][r] = 8 * _mm512_reduce_add_epi32(sum); /* |.| <= 8 * 128 * 32767 < 2^25 */
            }
        }
    /* keys in blocks of TB, so that a block's V rows stay in L1 across the channel blocks;
     * the int32 partials of (row, block) wait in ia between key blocks */
    for (size_t tb = 0; tb < ntm2; tb += TB) {
        const size_t te = tb + TB < ntm2 ? tb + TB : ntm2;
        for (size_t b = 0; b < nb; b++) {
            const int16_t *wb = w16 + b * RBX * G;
            __m512i alo[RBX], ahi[RBX];
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                int32_t *pa = ia + (r * nb + b) * 32;
                alo[r] = tb ? _mm512_loadu_si512((const void *)pa) : _mm512_setzero_si512();
                ahi[r] = tb ? _mm512_loadu_si512((const void *)(pa + 16)) : _mm512_setzero_si512();
            }
            for (size_t t = tb; t < te; t += 2) {
                const uint8_t *c0 = V + t * vrow + b * blk + 2;
                const uint8_t *c1 = t + 1 < ntm ? c0 + vrow : c0; /* its weight is zero */
                __m512i dl, dh;
                if (vbits == 8) {
                    const __m512i x0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)c0));
                    const __m512i x1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)c1));
                    dl = _mm512_unpacklo_epi16(x0, x1);
                    dh = _mm512_unpackhi_epi16(x0, x1);
                } else {
                    const __m256i y = _mm256_inserti128_si256(
                        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)c0)),
                        _mm_loadu_si128((const __m128i *)(const void *)c1), 1);
                    const __m512i w = _mm512_maskz_permutexvar_epi8((__mmask64)0x5555555555555555ull, ilv,
                                                                    _mm512_castsi256_si512(y));
                    dl = _mm512_and_si512(w, m15);
                    dh = _mm512_srli_epi16(w, 4);
                }
                dpw_rows(alo, ahi, dl, dh, wb + t, G, NR);
            }
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                int32_t *pa = ia + (r * nb + b) * 32;
                _mm512_storeu_si512((void *)pa, alo[r]);
                _mm512_storeu_si512((void *)(pa + 16), ahi[r]);
            }
        }
    }
    for (size_t r = 0; r < rb; r++) {
        if (!nvis[r]) continue;
        for (size_t b = 0; b < nb; b++) {
            const int32_t *pa = ia + (r * nb + b) * 32;
            const __m512 sc = _mm512_set1_ps(ws[b][r]);
            __m512i lo = _mm512_loadu_si512((const void *)pa), hi = _mm512_loadu_si512((const void *)(pa + 16));
            float *a = acc + r * D + 32 * b;
            if (vbits == 4) { /* channel order already; the codes' −8 */
                const __m512i z = _mm512_set1_epi32(wz[b][r]);
                lo = _mm512_sub_epi32(lo, z);
                hi = _mm512_sub_epi32(hi, z);
                _mm512_storeu_ps(a, _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(lo), _mm512_loadu_ps(a)));
                _mm512_storeu_ps(a + 16, _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(hi), _mm512_loadu_ps(a + 16)));
                continue;
            }
            const __m512 fl = _mm512_mul_ps(sc, _mm512_cvtepi32_ps(lo)), fh = _mm512_mul_ps(sc, _mm512_cvtepi32_ps(hi));
            _mm512_storeu_ps(a, _mm512_add_ps(_mm512_loadu_ps(a), _mm512_permutex2var_ps(fl, i0, fh)));
            _mm512_storeu_ps(a + 16, _mm512_add_ps(_mm512_loadu_ps(a + 16), _mm512_permutex2var_ps(fl, i1, fh)));
        }
    }
}

/* chunk_qblk_nr's work at the largest head dim (D = 512, 16 blocks): probabilities
 * [RBX][G], K and V block scales [G * 16 + 16] each, 2 D zero bytes, then for int16
 * values the weights before rounding [G], the int16 weights [16][RBX][G] and the int32
 * partials [RBX][16][32]; it must fit the work the cache reserves. */
_Static_assert(RBX * G + 2 * (G * 16 + 16) + 2 * 512 / 4 + G + 16 * RBX * G / 2 + RBX * 16 * 32 <=
                   SJK_ATTN_DECODE_WORK_FLOATS(512),
               "chunk_qblk_q16's work exceeds SJK_ATTN_WORK_FLOATS");

static ALWAYS_INLINE void chunk_qblk_nr(const sjk_attn_qint *qi, size_t R, size_t D, const uint32_t *nvis,
                                        unsigned kbits, unsigned vbits, const uint8_t *K, const uint8_t *V, size_t n,
                                        float *m, float *l, float *acc, float *work, const uint8_t *pf,
                                        size_t pf_nbytes, const size_t NR, const int v16)
{
    const size_t nb = D / 32, vrow = nb * (vbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES);
    float *p = work;                /* [RBX][G] scores, then probabilities */
    float *dkf = p + RBX * G;       /* [n * nb + 16] K block scales */
    float *dvf = dkf + G * nb + 16; /* [n * nb + 16] V block scales */
    int8_t *zero8 = (int8_t *)(void *)(dvf + G * nb + 16); /* [2 D] zero bytes: pieces of absent rows */
    float *vx = (float *)(void *)(zero8 + 2 * D);           /* [G] (v16) weights before rounding */
    int16_t *w16v = (int16_t *)(void *)(vx + G);            /* [nb][RBX][G] (v16) int16 weights */
    int32_t *iav = (int32_t *)(void *)(w16v + nb * RBX * G); /* [RBX][nb][32] (v16) int32 partials */
    memset(zero8, 0, 2 * D);
    size_t nall = 0;
    for (size_t r = 0; r < R; r++) nall = nvis[r] > nall ? nvis[r] : nall;
    if (!nall) return;
    (void)n;
    qblk_scales(dkf, K, nall * nb, kbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES);
    int dv_ready = 0;
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, r0, NR, &ntm);
        if (!ntm) continue;
        const int16_t *w16[RBX];
        float bs[RBX][16], sc[RBX];
        for (size_t r = 0; r < NR; r++) {
            const int live = r < rb;
            w16[r] = live ? qi->w16 + (r0 + r) * D : (const int16_t *)(const void *)zero8;
            sc[r] = live ? qi->scale[r0 + r] : 0.0f;
            for (size_t b = 0; b < 16; b++) bs[r][b] = live && b < nb ? qi->bsum[(r0 + r) * nb + b] : 0.0f;
        }
        /* prefetches on the first block of rows only (later blocks find the lines) */
        const uint8_t *pv = r0 == 0 ? V : NULL, *pk = r0 == 0 ? pf : NULL;
        const size_t pkn = r0 == 0 ? pf_nbytes : 0;
        if (kbits == 8) qblk_scores(p, K, ntm, D, dkf, w16, bs, sc, 8, NR, pv, vrow, pk, pkn);
        else qblk_scores(p, K, ntm, D, dkf, w16, bs, sc, 4, NR, pv, vrow, pk, pkn);
        /* the V block scales once, after the first scores, whose loop brought the chunk's V
         * rows into L1 (pv), as chunk_qblk_avx2_nr does: gathered before it, every gather
         * waited on memory (q8_0 read 0.85-1.03x f16 at 32K on the Zen 4 EPYC, 1.21-1.44x
         * after; docs/notes/benchmarks.md) */
        if (!dv_ready) {
            dv_ready = 1;
            if (v16) qblk_scales_t(dvf, V, nall, nb, vbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES, vrow); /* [b][t] */
            else qblk_scales(dvf, V, nall * nb, vbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES);
        }
        float fct[RBX];
        softmax_block(p, fct, nvis + r0, rb, NR, m + r0, l + r0);
        if (v16 && vbits == 8) qblk_values_q16(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, ntm, V, dvf, vx, w16v, iav, 8);
        else if (v16) qblk_values_q16(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, ntm, V, dvf, vx, w16v, iav, 4);
        else if (vbits == 8) v_accum(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, ntm, TB, VL_Q8, V, dvf, 0, NULL, NULL);
        else v_accum(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, ntm, TB, VL_Q4, V, dvf, 0, NULL, NULL);
    }
}

/* Rows by blocks of 4, 6 or 8 (ROWS_NR16, attn_x86.h). */
static void chunk_qblk_avx512(const sjk_attn_qint *qi, size_t R, size_t D, const uint32_t *nvis,
                              unsigned kbits, unsigned vbits, const uint8_t *K, const uint8_t *V, size_t n,
                              float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes)
{
    ROWS_NR16(R, chunk_qblk_nr(qi, R, D, nvis, kbits, vbits, K, V, n, m, l, acc, work, pf, pf_nbytes, NR_, 0));
}

static void chunk_qblk_q16_avx512(const sjk_attn_qint *qi, size_t R, size_t D, const uint32_t *nvis,
                                  unsigned kbits, unsigned vbits, const uint8_t *K, const uint8_t *V, size_t n,
                                  float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes)
{
    ROWS_NR16(R, chunk_qblk_nr(qi, R, D, nvis, kbits, vbits, K, V, n, m, l, acc, work, pf, pf_nbytes, NR_, 1));
}

/* Rows of 5..7-bit codes (record format v2, record_layout.h sjk_payload_get: n/2 bytes of
 * low nibbles in the 4-bit layout, then the high bits: 1 bit per value for 5, the 2-bit
 * layout for 6, the 2-bit layout and then 1 bit per value for 7) unpacked 64 values at a
 * time in registers. In both layouts value 16 L + j of a 64-value run sits in 128-bit
 * lane L of a vector whose lanes are copies of one 16-byte group, shifted by a per-lane
 * count; a 1-bit field of 64 values is a 64-bit mask (vpmovm2b). The AVX2 version made
 * three passes through memory for these widths (nibbles, high field, merge); at 6 bits
 * it was half of a 32K decode call with 6-bit values (docs/notes/benchmarks.md). Other
 * widths (and n not a multiple of 64) take the AVX2 version. */
static void unpack_row_avx512(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits)
{
    if (bits < 5 || bits > 7 || n % 64) {
        sjk_attn_unpack_row_avx2(codes, row, n, bits);
        return;
    }
    /* 16-bit shift counts per 128-bit lane: nibbles (0, 4, 0, 4), 2-bit fields (0, 2, 4, 6) */
    const __m512i sh4 = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                          0x0004000400040004);
    const __m512i sh2 = _mm512_setr_epi64(0, 0, 0x0002000200020002, 0x0002000200020002, 0x0004000400040004,
                                          0x0004000400040004, 0x0006000600060006, 0x0006000600060006);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
    const uint8_t *hi = row + n / 2;
    for (size_t i = 0; i < n; i += 64) {
        const __m512i y = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(row + i / 2)));
        __m512i c = _mm512_and_si512(_mm512_srlv_epi16(_mm512_shuffle_i64x2(y, y, _MM_SHUFFLE(1, 1, 0, 0)), sh4), m4);
        if (bits >= 6) { /* the 2-bit field: 16 bytes per 64 values */
            const __m512i h = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)(hi + i / 4)));
            c = _mm512_or_si512(c, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, sh2), m2), 4));
        }
        if (bits != 6) { /* the 1-bit field (5: the high bit 4; 7: bit 6, after the 2-bit field) */
            uint64_t w;
            memcpy(&w, hi + (bits == 7 ? n / 4 : 0) + i / 8, 8);
            c = _mm512_or_si512(c, _mm512_and_si512(_mm512_movm_epi8((__mmask64)w),
                                                    _mm512_set1_epi8(bits == 7 ? 0x40 : 0x10)));
        }
        _mm512_storeu_si512((void *)(codes + i), c);
    }
}

const sjk_attn_kernels sjk_attn_kernels_table_avx512 = {
    "avx512", chunk_f32_x, chunk_f32_many_x, chunk_f16_x, chunk_tq6_avx512, chunk_rec_avx512, unpack_row_avx512,
    f16_to_f32_x, 1, chunk_qblk_avx512, chunk_rec_q16_avx512, chunk_tq6_q16_avx512,
    sjk_attn_qint_prep_avx2, chunk_trellis_q16_avx512, chunk_qblk_q16_avx512,
    chunk_trellis_q8_avx512, NULL /* unpack_rows: unpack_row_avx512 row by row */, chunk_rec_v16_avx512,
    1 /* chunk_trellis_q8 reads records with one scalar tile */,
};
