/* attn_avx2.c — the AVX2/FMA/F16C attention kernels (attn_kernels.h): the kernels both
 * instruction sets share, from attn_x86.h at 8 lanes, token-axis trellis records read in
 * place (below), and the payload unpacking (which attn_avx512.c reuses). The families
 * that need AVX-512 (the tq6_0 ring and ggml blocks read in place, int16 record scores)
 * are NULL here: attend.c decodes those chunks and uses chunk_f32, or chunk_rec for
 * 4-bit records. Tested against attn_ref.c (tests/test_attention.c).
 */
#include "codec/trellis.h" /* before attn_x86.h, whose short macros (G, W) it would see */

#define SJK_ATTN_W 8
#include "attention/attn_x86.h"

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
    if (NR <= RB) {
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
    const uint64_t *P = rc->kcb == sjk_trellis_codebook(k) ? sjk_trellis_pair_table(k) : NULL;
    if (P) trel8_scores(p, wst, qd, D, ntm2, rc->ktok, cz, rc->kt, rc->kcb, P, k, 1, rc->pf, pfn, NR);
    else trel8_scores(p, wst, qd, D, ntm2, rc->ktok, cz, rc->kt, rc->kcb, NULL, k, 0, rc->pf, pfn, NR);
}

static ALWAYS_INLINE void trel8_values_k(__m256 a[RBX], const float *p, size_t ntm2, const sjk_attn_rec *rc, size_t hh,
                                         const unsigned k, const size_t NR)
{
    const uint64_t *P = rc->vcb == sjk_trellis_codebook(k) ? sjk_trellis_pair_table(k) : NULL;
    const uint8_t *g = rc->vt + hh / 2 * (G * 2 * k);
    if (P) trel8_values(a, p, ntm2, g, hh % 2, rc->vcb, P, k, 1, NR);
    else trel8_values(a, p, ntm2, g, hh % 2, rc->vcb, NULL, k, 0, NR);
}

/* Rows go NR at a time: RB (4), or RBX (8) when the call has more than 4 (the 6 GQA rows
 * of a Qwen2.5 head), so that a record's codes are walked once per call instead of once
 * per 4 rows; the padding rows are zero queries. */
static ALWAYS_INLINE void chunk_trellis8_nr(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                            const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work,
                                            const size_t NR)
{
    float *p = work;            /* [RBX][G] scores, then probabilities */
    float *qs = work + RBX * G; /* [RBX][D] folded queries */
    __m256i *wst = (__m256i *)(void *)(((uintptr_t)(work + RBX * (2 * D + 4 * G + 8)) + 31) & ~(uintptr_t)31); /* [D/8] */
    float *qd = (float *)(void *)(wst + D / 8); /* [D/8][NR][16] queries in the pair layout */
    const __m256i dlo = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), dhi = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
    const unsigned kb = rc->kbits, vb = rc->vbits;
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, r0, NR, &ntm);
        if (!ntm) continue;
        float cz[RBX], zz[RBX], fct[RBX];
        rec_fold(qs, cz, q + r0 * D, rb, NR, D, rc);
        for (size_t hh = 0; hh < D / 8; hh++)
            for (size_t r = 0; r < NR; r++) {
                const __m256 x = _mm256_loadu_ps(qs + r * D + 8 * hh);
                _mm256_storeu_ps(qd + (hh * NR + r) * 16, _mm256_permutevar8x32_ps(x, dlo));
                _mm256_storeu_ps(qd + (hh * NR + r) * 16 + 8, _mm256_permutevar8x32_ps(x, dhi));
            }
        const size_t ntm2 = (ntm + 1) & ~(size_t)1; /* pairs of tokens; the extra score is unused */
        const size_t pfn = r0 == 0 ? rc->pf_nbytes : 0;
        if (kb == 2) trel8_scores_k(p, wst, qd, D, ntm2, rc, cz, 2, pfn, NR);
        else if (kb == 3) trel8_scores_k(p, wst, qd, D, ntm2, rc, cz, 3, pfn, NR);
        else trel8_scores_k(p, wst, qd, D, ntm2, rc, cz, 4, pfn, NR);
        rec_probs(p, fct, zz, nvis + r0, rb, NR, m + r0, l + r0, rc);
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
                               float *m, float *l, float *acc, float *work)
{
    if (R > RB) chunk_trellis8_nr(q, R, D, nvis, rc, m, l, acc, work, RBX);
    else chunk_trellis8_nr(q, R, D, nvis, rc, m, l, acc, work, RB);
}

/* Records: trellis read in place (chunk_trellis_avx2), scalar ones by chunk_rec_scalar. */
static void chunk_rec_avx2(const float *q, size_t R, size_t D, const uint32_t *nvis, const sjk_attn_rec *rc,
                           float *m, float *l, float *acc, float *work)
{
    if (rc->kt) chunk_trellis_avx2(q, R, D, nvis, rc, m, l, acc, work);
    else chunk_rec_scalar(q, R, D, nvis, rc, m, l, acc, work);
}

void sjk_attn_unpack_row_avx2(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits);
void sjk_attn_unpack_row_avx2(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits)
{
    const __m128i m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(0x03);
    if (bits == 8) {
        memcpy(codes, row, n);
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
    "avx2", chunk_f32_x, chunk_f32_many_x, chunk_f16_x, NULL /* tq6_0 rows: decoded by the caller */, chunk_rec_avx2,
    sjk_attn_unpack_row_avx2, f16_to_f32_x, 1 /* token-axis trellis records read in place */,
    NULL /* ggml block rows: decoded by the caller */,
    NULL /* 4-bit records by integer dot products: chunk_rec scores them in fp32 */,
    NULL /* tq6_0 rows by integer dot products: decoded by the caller */,
};
