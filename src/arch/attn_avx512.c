/* attn_avx512.c — AVX-512 twins of the attention chunk kernels (attn_kernels.h): the
 * same algorithm and loop structure as attn_avx2.c (read that file's notes), 16 lanes.
 *
 * Shape: rows are taken SJK_ATTN_RB (4) at a time so that the query heads sharing a KV
 * head (GQA) and the rows of a prefill reuse every key and value load. Scores are
 * computed into work[], the online-softmax update runs 16 lanes at a time with a
 * polynomial exp (relative error < 2e-7 on the range used), and values accumulate 16
 * channels x 4 rows in registers. Tested against attn_ref.c.
 */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "codec/format.h"
#include "codec/trellis.h"

#define RB SJK_ATTN_RB
#define G SJK_GROUP

/* exp(x) for x <= 0 (scores minus the running max); x < -87 gives ~0. Cephes expf. */
static inline __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
    __m512 y = _mm512_set1_ps(1.9875691500E-4f);
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507E-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073E-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894E-2f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459E-1f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201E-1f));
    __m512 x2 = _mm512_mul_ps(x, x);
    y = _mm512_fmadd_ps(y, x2, _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

static inline float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

/* Softmax update of one row: s[0..nv) scores (s padded to a multiple of 8 with
 * anything); afterwards s[t] = p[t] for t < nv and 0 up to G. Returns the
 * factor for the old state. */
static float softmax_row(float *s, size_t nv, float *m, float *l)
{
    size_t nv16 = (nv + 15) & ~(size_t)15;
    __m512 vmx = _mm512_set1_ps(-INFINITY);
    for (size_t t = 0; t < nv16; t += 16) {
        __mmask16 k = nv - t >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nv - t)) - 1);
        vmx = _mm512_mask_max_ps(vmx, k, vmx, _mm512_loadu_ps(s + t));
    }
    float mx = _mm512_reduce_max_ps(vmx);
    float m_new = *m > mx ? *m : mx;
    float f = *m == -INFINITY ? 0.0f : expf(*m - m_new);
    __m512 vm = _mm512_set1_ps(m_new), sum = _mm512_setzero_ps();
    for (size_t t = 0; t < nv16; t += 16) {
        __mmask16 k = nv - t >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nv - t)) - 1);
        __m512 p = _mm512_maskz_mov_ps(k, exp512(_mm512_sub_ps(_mm512_loadu_ps(s + t), vm)));
        _mm512_storeu_ps(s + t, p);
        sum = _mm512_add_ps(sum, p);
    }
    for (size_t t = nv16; t < G; t++) s[t] = 0;
    *l = *l * f + hsum512(sum);
    *m = m_new;
    return f;
}

/* Values for one row block, in two steps:
 *   acc[r] = acc[r] * f[r] + PRE(r)                 (PRE: 0, or Vch · z[r] for records)
 *   acc[r][d] += POST(Σ_t p[r][t] · V[t][d])        (POST: identity, or · Vch[d])
 * Keys go in blocks of 32 so the block's values stay in L1 across the channel passes;
 * 16 channels x RB rows accumulate in registers. Keys beyond a row's nvis have p = 0. */
#define TB 32
#define V_ACCUM(LOAD8)                                                                     \
    for (size_t r = 0; r < rb; r++) {                                                      \
        if (!nvis[r0 + r]) continue;                                                       \
        float *a = acc + (r0 + r) * D;                                                     \
        __m512 vf = _mm512_set1_ps(fct[r]);                                                \
        for (size_t d = 0; d < D; d += 16)                                                 \
            _mm512_storeu_ps(a + d, _mm512_fmadd_ps(_mm512_loadu_ps(a + d), vf, PRE(r, d))); \
    }                                                                                      \
    for (size_t tb = 0; tb < ntm; tb += TB) {                                              \
        size_t te = tb + TB < ntm ? tb + TB : ntm;                                         \
        for (size_t d0 = 0; d0 < D; d0 += 32) {                                            \
            __m512 a0[RB], a1[RB];                                                         \
            _Pragma("GCC unroll 4")                                                        \
            for (size_t r = 0; r < RB; r++) { a0[r] = _mm512_setzero_ps(); a1[r] = _mm512_setzero_ps(); } \
            for (size_t t = tb; t < te; t++) {                                             \
                __m512 v0 = LOAD8(t, d0), v1 = LOAD8(t, d0 + 16);                           \
                _Pragma("GCC unroll 4")                                                    \
                for (size_t r = 0; r < RB; r++) {                                          \
                    __m512 pw = _mm512_set1_ps(p[r * G + t]);                        \
                    a0[r] = _mm512_fmadd_ps(pw, v0, a0[r]);                                \
                    a1[r] = _mm512_fmadd_ps(pw, v1, a1[r]);                                \
                }                                                                          \
            }                                                                              \
            for (size_t r = 0; r < rb; r++) {                                              \
                if (!nvis[r0 + r]) continue;                                               \
                float *a = acc + (r0 + r) * D + d0;                                        \
                _mm512_storeu_ps(a, _mm512_add_ps(_mm512_loadu_ps(a), POST(a0[r], d0)));   \
                _mm512_storeu_ps(a + 16, _mm512_add_ps(_mm512_loadu_ps(a + 16), POST(a1[r], d0 + 16))); \
            }                                                                              \
        }                                                                                  \
    }

#define LOAD_F32(t, d) _mm512_loadu_ps(V + (t) * D + (d))
#define LOAD_F16(t, d) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(V + (t) * D + (d))))
#define LOAD_U8(t, d) _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(vc + (t) * D + (d)))))
/* 16 channels d..d+15 (d % 16 == 0) of a 4-bit V payload row: unit d/32, low nibbles
 * for d%32 == 0, high nibbles for d%32 == 16. */
#define LOAD_V4(t, d) _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srl_epi16(         \
    _mm_loadu_si128((const __m128i *)(const void *)(vp + (t) * (D / 2) + ((d) / 32) * 16)),     \
    _mm_cvtsi32_si128((int)(((d) % 32) / 16) * 4)), _mm_set1_epi8(0x0F))))
#define POST_NONE(a, d) (a)
#define PRE_NONE(r, d) _mm512_setzero_ps()

/* Scores of rows [r0, r0+rb) against keys [0, ntm) for fp32 / fp16 keys. */
#define SCORES_DOT(LOADK)                                                                  \
    for (size_t t = 0; t < ntm; t++) {                                                     \
        __m512 s0[RB], s1[RB];                                                             \
        _Pragma("GCC unroll 4")                                                            \
        for (size_t r = 0; r < RB; r++) { s0[r] = _mm512_setzero_ps(); s1[r] = _mm512_setzero_ps(); } \
        for (size_t d = 0; d < D; d += 32) {                                               \
            __m512 kv0 = LOADK(t, d), kv1 = LOADK(t, d + 16);                               \
            _Pragma("GCC unroll 4")                                                        \
            for (size_t r = 0; r < RB; r++) {                                              \
                s0[r] = _mm512_fmadd_ps(_mm512_loadu_ps(qrow[r] + d), kv0, s0[r]);         \
                s1[r] = _mm512_fmadd_ps(_mm512_loadu_ps(qrow[r] + d + 16), kv1, s1[r]);     \
            }                                                                              \
        }                                                                                  \
        for (size_t r = 0; r < RB; r++) p[r * G + t] = hsum512(_mm512_add_ps(s0[r], s1[r])); \
    }

#define LOADK_F32(t, d) _mm512_loadu_ps(K + (t) * D + (d))
#define LOADK_F16(t, d) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(K + (t) * D + (d))))

/* Rows are processed RB at a time with every per-row loop of compile-time length RB (so
 * accumulators stay in registers); a short last block reads a zero query row. */
#define ROW_SETUP()                                                                        \
    size_t rb = R - r0 < RB ? R - r0 : RB, ntm = 0;                                        \
    for (size_t r = 0; r < rb; r++) ntm = nvis[r0 + r] > ntm ? nvis[r0 + r] : ntm;         \
    if (!ntm) continue;                                                                    \
    const float *qrow[RB];                                                                 \
    for (size_t r = 0; r < RB; r++) qrow[r] = r < rb ? q + (r0 + r) * D : zero;

#define CHUNK_BODY(LOADK, LOADV)                                                           \
    float *p = work; /* [RB][G] scores, then probabilities */                               \
    float *zero = work + RB * G + RB * D; /* [D] zeros */                                   \
    memset(zero, 0, D * sizeof(float));                                                    \
    for (size_t r0 = 0; r0 < R; r0 += RB) {                                                \
        ROW_SETUP()                                                                        \
        SCORES_DOT(LOADK)                                                                  \
        float fct[RB] = {1, 1, 1, 1};                                                      \
        for (size_t r = 0; r < RB; r++) {                                                  \
            if (r < rb && nvis[r0 + r]) fct[r] = softmax_row(p + r * G, nvis[r0 + r], &m[r0 + r], &l[r0 + r]); \
            else memset(p + r * G, 0, G * sizeof(float));                                  \
        }                                                                                  \
        V_ACCUM(LOADV)                                                                     \
    }

#define POST POST_NONE
#define PRE PRE_NONE
static void chunk_f32_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                           const float *K, const float *V, size_t n,
                           float *m, float *l, float *acc, float *work)
{
    (void)n;
    CHUNK_BODY(LOADK_F32, LOAD_F32)
}

static void chunk_f16_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                           const uint16_t *K, const uint16_t *V, size_t n,
                           float *m, float *l, float *acc, float *work)
{
    (void)n;
    CHUNK_BODY(LOADK_F16, LOAD_F16)
}
#undef POST
#undef PRE

/* tq6_0_stage rows (the staging ring), decoded 16 values at a time inside the loops of
 * the fp32 kernel and used by all RB rows at once. Block layout (docs/FORMAT.md): fp16
 * norm, qs[64] low nibbles (element j: bits 4j.. of the 64-bit word of qs[8k..8k+7] for
 * the k-th run of 16), qh[32] high 2 bits (element j: bits 2j.. of the 32-bit word
 * qh[4k..4k+3]). The unpack uses broadcast loads and per-lane rotates (no byte shuffles:
 * the permute port is the bottleneck); bits above the 6-bit code are left as garbage,
 * which the lookup ignores: permutex2var reads index bits 0..4 over two 16-entry halves,
 * and bit 5 picks the upper pair of halves. Values are centroid * norm, the format's
 * decode bit for bit; norms are converted once per chunk. */
typedef struct tq6_table { __m512 t0, t1, t2, t3; __m512i ra, rb, rh, m4; } tq6_table;

static inline __m512 tq6_values16(const tq6_table *t, const uint8_t *blk, size_t k)
{
    long long q;
    uint32_t h4;
    memcpy(&q, blk + 2 + 8 * k, 8);
    memcpy(&h4, blk + 66 + 4 * k, 4);
    const __m512i bq = _mm512_set1_epi64(q);
    const __m512i nib = _mm512_mask_blend_epi32(0xAAAA, _mm512_rorv_epi64(bq, t->ra), _mm512_rorv_epi64(bq, t->rb));
    const __m512i hi = _mm512_rorv_epi32(_mm512_set1_epi32((int)h4), t->rh);
    const __m512i code = _mm512_ternarylogic_epi32(nib, hi, t->m4, 0xE4); /* m4 ? nib : hi */
    const __m512 a = _mm512_permutex2var_ps(t->t0, code, t->t1);
    const __m512 b = _mm512_permutex2var_ps(t->t2, code, t->t3);
    return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_slli_epi32(code, 26)), a, b);
}

static inline tq6_table tq6_table_init(void)
{
    tq6_table t;
    t.t0 = _mm512_loadu_ps(sjk_tq6_centroids);
    t.t1 = _mm512_loadu_ps(sjk_tq6_centroids + 16);
    t.t2 = _mm512_loadu_ps(sjk_tq6_centroids + 32);
    t.t3 = _mm512_loadu_ps(sjk_tq6_centroids + 48);
    /* qword i holds lanes 2i (low dword) and 2i+1 (high dword): nibble 2i is at bit 8i,
     * nibble 2i+1 at 8i+4 and must land at bit 32 */
    t.ra = _mm512_setr_epi64(0, 8, 16, 24, 32, 40, 48, 56);
    t.rb = _mm512_setr_epi64((0 - 28) & 63, (8 - 28) & 63, (16 - 28) & 63, (24 - 28) & 63, 32 - 28, 40 - 28,
                             48 - 28, 56 - 28);
    /* lane j: bits 2j, 2j+1 to bits 4, 5 */
    t.rh = _mm512_setr_epi32(28, 30, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26);
    t.m4 = _mm512_set1_epi32(0x0F);
    return t;
}

static inline float tq6_norm(const uint8_t *blk)
{
    uint16_t h;
    memcpy(&h, blk, 2);
    return _cvtsh_ss(h);
}

/* 16 values d..d+15 (d % 16 == 0) of tq6_0_stage row t of X (rows of row_nbytes);
 * nrm[t * nb + block] the rows' block norms. */
static inline __m512 tq6_load(const tq6_table *tt, const uint8_t *X, const float *nrm, size_t row_nbytes,
                              size_t nb, size_t t, size_t d)
{
    const uint8_t *blk = X + t * row_nbytes + (d / SJK_TQ_BLOCK) * SJK_TQ6_0_NBYTES;
    return _mm512_mul_ps(tq6_values16(tt, blk, (d % SJK_TQ_BLOCK) / 16), _mm512_set1_ps(nrm[t * nb + d / SJK_TQ_BLOCK]));
}
#define LOADK_TQ6(t, d) tq6_load(&tt, K, kn, row_nbytes, nb, (t), (d))
#define LOAD_TQ6(t, d) tq6_load(&tt, V, vn, row_nbytes, nb, (t), (d))

#define POST POST_NONE
#define PRE PRE_NONE
static void chunk_tq6_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                             const uint8_t *K, const uint8_t *V, size_t n,
                             float *m, float *l, float *acc, float *work)
{
    const size_t nb = D / SJK_TQ_BLOCK, row_nbytes = nb * SJK_TQ6_0_NBYTES;
    const tq6_table tt = tq6_table_init();
    /* block norms [n][nb] of K and V, after the kernel's own work area */
    float *kn = work + RB * (2 * D + 4 * G + 8), *vn = kn + G * nb;
    for (size_t t = 0; t < n; t++)
        for (size_t b = 0; b < nb; b++) {
            kn[t * nb + b] = tq6_norm(K + t * row_nbytes + b * SJK_TQ6_0_NBYTES);
            vn[t * nb + b] = tq6_norm(V + t * row_nbytes + b * SJK_TQ6_0_NBYTES);
        }
    CHUNK_BODY(LOADK_TQ6, LOAD_TQ6)
}
#undef POST
#undef PRE

/* ---- trellis records, read in place -------------------------------------------------
 * A payload group is 16 channels d0..d0+15 (docs/FORMAT.md); step t holds their 16
 * symbols in 2k bytes, so the 16 windows of token t live in one vector and advance as
 * w = (sym << 6) | (w >> k) (the tile decoder's recurrence, trellis_avx512.c); the code
 * values are one gather from the codebook (L1-resident: 1 / 2 / 4 KiB).
 *
 *   scores: for each group, sacc[t][r][16] += qs[r][d0..d0+15] * C[w(t)]  (FMA per lane),
 *           then s[r][t] = Ktok[t] * (Σ_lanes sacc[t][r] + Σ_d q·Kzero)
 *   values: for each group, a[r][16] = Σ_t (p[r][t]·Vscale[t]) * C[w(t)], then
 *           acc[r][d0..] = acc·f + Vch·z[r] + Vch·a[r]
 * No K or V value is ever materialised; nothing is written but sacc (tokens in blocks of
 * TRB = 32: 8 KiB, L1-resident) and the carried windows. */
typedef struct trel_rot { __m512i a, b, m6; } trel_rot;

static inline __attribute__((always_inline)) trel_rot trel_rot_init(const unsigned k)
{
    /* Lane 2q's symbol is at bit 2qk of the step word, lane 2q+1's at (2q+1)k: rotate the
     * broadcast word so each lands at bits 6.. of its dword. */
    trel_rot r;
    r.a = _mm512_setr_epi64((0 * k - 6) & 63, (2 * k - 6) & 63, (4 * k - 6) & 63, (6 * k - 6) & 63,
                            (8 * k - 6) & 63, (10 * k - 6) & 63, (12 * k - 6) & 63, (14 * k - 6) & 63);
    r.b = _mm512_and_si512(_mm512_add_epi64(r.a, _mm512_set1_epi64((long long)k + 32)), _mm512_set1_epi64(63));
    r.m6 = _mm512_set1_epi32((int)(((1u << k) - 1) << 6));
    return r;
}

/* Advances the 16 windows by step t of group g. exact: the step is the last of the
 * payload, so only its 2k bytes are read (elsewhere an 8-byte load stays inside). */
static inline __attribute__((always_inline)) __m512i trel_step(__m512i w, const uint8_t *g, size_t t,
                                                               const unsigned k, int exact, const trel_rot *rt)
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
    __m512i bc = _mm512_set1_epi64(q);
    __m512i x = _mm512_mask_blend_epi32(0xAAAA, _mm512_rorv_epi64(bc, rt->a), _mm512_rorv_epi64(bc, rt->b));
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

/* Pair tables: for k = 2 and 3 bits, P_k[w | sym' << (6 + k)] = (C[w], C[w']) with
 * w' = (sym' << 6) | (w >> k), the window that follows w when the next symbol is sym'.
 * One 64-bit gather element then yields the values of two consecutive tokens, which
 * halves the gathered elements (the bottleneck of this kernel). 8 KiB and 32 KiB, built
 * once per process from the committed codebooks (immutable afterwards); a record with
 * another codebook (none today) takes the one-value path. k = 4 (128 KiB) always does. */
static uint64_t g_pair2[1u << 10], g_pair3[1u << 12];
static pthread_once_t g_pair_once = PTHREAD_ONCE_INIT;

static void pair_build(uint64_t *P, unsigned k)
{
    const float *cb = sjk_trellis_codebook(k);
    const unsigned L = 6 + k;
    for (unsigned w = 0; w < (1u << L); w++)
        for (unsigned s1 = 0; s1 < (1u << k); s1++) {
            unsigned w1 = (s1 << 6) | (w >> k);
            uint32_t a, b;
            memcpy(&a, cb + w, 4);
            memcpy(&b, cb + w1, 4);
            P[w | (s1 << L)] = (uint64_t)a | ((uint64_t)b << 32);
        }
}

static void pair_init(void)
{
    pair_build(g_pair2, 2);
    pair_build(g_pair3, 3);
}

static const uint64_t *pair_table(const float *cb, unsigned k)
{
    if (k > 3 || cb != sjk_trellis_codebook(k)) return NULL;
    pthread_once(&g_pair_once, pair_init);
    return k == 2 ? g_pair2 : g_pair3;
}

/* Values of tokens t and t+1 of the 16 channels of group g: advances *w from the window
 * of t-1 to that of t+1. P: pair table, or NULL (two one-value gathers from cb). */
static inline __attribute__((always_inline)) void trel_pair(__m512 *c0, __m512 *c1, __m512i *w, const uint8_t *g,
                                                            size_t t, int lastg, const float *cb,
                                                            const uint64_t *P, const unsigned k, const trel_rot *rt)
{
    if (k == 4 || !P) {
        *w = trel_step(*w, g, t, k, 0, rt);
        *c0 = _mm512_i32gather_ps(*w, cb, 4);
        *w = trel_step(*w, g, t + 1, k, lastg && t + 1 == G - 1, rt);
        *c1 = _mm512_i32gather_ps(*w, cb, 4);
        return;
    }
    __m512i w0 = trel_step(*w, g, t, k, 0, rt);
    /* the symbols of step t+1 at bits 6..: the pair index and the next window */
    __m512i x1 = trel_step(_mm512_setzero_si512(), g, t + 1, k, lastg && t + 1 == G - 1, rt);
    __m512i idx = _mm512_or_si512(w0, _mm512_slli_epi32(x1, (int)k));
    *w = _mm512_or_si512(x1, _mm512_srli_epi32(w0, (int)k));
    __m512i lo = _mm512_i32gather_epi64(_mm512_castsi512_si256(idx), (const void *)P, 8);
    __m512i hi = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(idx, 1), (const void *)P, 8);
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    *c0 = _mm512_permutex2var_ps(_mm512_castsi512_ps(lo), ev, _mm512_castsi512_ps(hi));
    *c1 = _mm512_permutex2var_ps(_mm512_castsi512_ps(lo), od, _mm512_castsi512_ps(hi));
}

#define TRB 32 /* tokens per score block: the block's partials stay in L1 (8 KiB) */

/* Scores of the RB rows for tokens t < ntm into p[r][t] = Ktok[t] * (Σ_d qs[r][d] *
 * C[w(d, t)] + cz[r]). Tokens go in blocks of TRB; inside a block every group adds its
 * 16 lanes into sacc[t][r][16] (each group's window carried in wst between blocks), then
 * the lanes are summed. ntm is rounded up to even (the extra token's score is unused). */
static inline __attribute__((always_inline)) void trel_scores(float *p, float *sacc, __m512i *wst, const float *qs,
                                                              size_t D, size_t ntm, const float *ktok,
                                                              const float *cz, const uint8_t *payload,
                                                              const float *cb, const unsigned k)
{
    const trel_rot rt = trel_rot_init(k);
    const uint64_t *P = pair_table(cb, k);
    const size_t ng = D / 16, gbytes = G * 2 * k;
    for (size_t j = 0; j < ng; j++) wst[j] = trel_start(payload + j * gbytes, k, j == ng - 1, &rt);
    for (size_t tb = 0; tb < ntm; tb += TRB) {
        const size_t te = tb + TRB < ntm ? tb + TRB : ntm;
        for (size_t j = 0; j < ng; j++) {
            const uint8_t *g = payload + j * gbytes;
            const int lastg = j == ng - 1;
            const __m512 q0 = _mm512_loadu_ps(qs + 0 * D + 16 * j), q1 = _mm512_loadu_ps(qs + 1 * D + 16 * j);
            const __m512 q2 = _mm512_loadu_ps(qs + 2 * D + 16 * j), q3 = _mm512_loadu_ps(qs + 3 * D + 16 * j);
            __m512i w = wst[j];
            for (size_t t = tb; t < te; t += 2) {
                __m512 c0, c1;
                trel_pair(&c0, &c1, &w, g, t, lastg, cb, P, k, &rt);
                float *sa = sacc + (t - tb) * (RB * 16);
                if (j == 0) {
                    _mm512_store_ps(sa, _mm512_mul_ps(q0, c0));
                    _mm512_store_ps(sa + 16, _mm512_mul_ps(q1, c0));
                    _mm512_store_ps(sa + 32, _mm512_mul_ps(q2, c0));
                    _mm512_store_ps(sa + 48, _mm512_mul_ps(q3, c0));
                    _mm512_store_ps(sa + 64, _mm512_mul_ps(q0, c1));
                    _mm512_store_ps(sa + 80, _mm512_mul_ps(q1, c1));
                    _mm512_store_ps(sa + 96, _mm512_mul_ps(q2, c1));
                    _mm512_store_ps(sa + 112, _mm512_mul_ps(q3, c1));
                } else {
                    _mm512_store_ps(sa, _mm512_fmadd_ps(q0, c0, _mm512_load_ps(sa)));
                    _mm512_store_ps(sa + 16, _mm512_fmadd_ps(q1, c0, _mm512_load_ps(sa + 16)));
                    _mm512_store_ps(sa + 32, _mm512_fmadd_ps(q2, c0, _mm512_load_ps(sa + 32)));
                    _mm512_store_ps(sa + 48, _mm512_fmadd_ps(q3, c0, _mm512_load_ps(sa + 48)));
                    _mm512_store_ps(sa + 64, _mm512_fmadd_ps(q0, c1, _mm512_load_ps(sa + 64)));
                    _mm512_store_ps(sa + 80, _mm512_fmadd_ps(q1, c1, _mm512_load_ps(sa + 80)));
                    _mm512_store_ps(sa + 96, _mm512_fmadd_ps(q2, c1, _mm512_load_ps(sa + 96)));
                    _mm512_store_ps(sa + 112, _mm512_fmadd_ps(q3, c1, _mm512_load_ps(sa + 112)));
                }
            }
            wst[j] = w;
        }
        for (size_t t = tb; t < te; t++)
            for (size_t r = 0; r < RB; r++)
                p[r * G + t] = ktok[t] * (hsum512(_mm512_load_ps(sacc + (t - tb) * (RB * 16) + r * 16)) + cz[r]);
    }
}

/* a[r] (16 channels of group g, 4 rows) = Σ_{t < ntm} p[r][t] * C[w(t)] (p is zero past
 * each row's visible keys and up to G), two partial sums per row (even, odd tokens). */
static inline __attribute__((always_inline)) void trel_values(__m512 a[RB], const float *p, size_t ntm,
                                                              const uint8_t *g, int lastg, const float *cb,
                                                              const unsigned k)
{
    const trel_rot rt = trel_rot_init(k);
    const uint64_t *P = pair_table(cb, k);
    __m512i w = trel_start(g, k, lastg, &rt);
    __m512 e[RB], o[RB];
    for (size_t r = 0; r < RB; r++) { e[r] = _mm512_setzero_ps(); o[r] = _mm512_setzero_ps(); }
    for (size_t t = 0; t < ntm; t += 2) {
        __m512 c0, c1;
        trel_pair(&c0, &c1, &w, g, t, lastg, cb, P, k, &rt);
        for (size_t r = 0; r < RB; r++) {
            e[r] = _mm512_fmadd_ps(_mm512_set1_ps(p[r * G + t]), c0, e[r]);
            o[r] = _mm512_fmadd_ps(_mm512_set1_ps(p[r * G + t + 1]), c1, o[r]);
        }
    }
    for (size_t r = 0; r < RB; r++) a[r] = _mm512_add_ps(e[r], o[r]);
}

static void chunk_trellis_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                 const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    float *p = work;                                 /* [RB][G] */
    float *qs = work + RB * G;                       /* [RB][D] */
    float *sacc = work + RB * (2 * D + 4 * G + 8);   /* [TRB][RB][16], 64-byte aligned below */
    sacc = (float *)(((uintptr_t)sacc + 63) & ~(uintptr_t)63);
    __m512i *wst = (__m512i *)(void *)(sacc + TRB * RB * 16); /* [D/16] carried windows */
    const unsigned kb = rc->kbits, vb = rc->vbits;
    for (size_t r0 = 0; r0 < R; r0 += RB) {
        size_t rb = R - r0 < RB ? R - r0 : RB, ntm = 0;
        for (size_t r = 0; r < rb; r++) ntm = nvis[r0 + r] > ntm ? nvis[r0 + r] : ntm;
        if (!ntm) continue;
        float cz[RB] = {0, 0, 0, 0}, zz[RB] = {0, 0, 0, 0}, fct[RB] = {1, 1, 1, 1};
        for (size_t r = 0; r < rb; r++) {
            const float *qr = q + (r0 + r) * D;
            __m512 z = _mm512_setzero_ps();
            for (size_t d = 0; d < D; d += 16) {
                __m512 qv = _mm512_loadu_ps(qr + d);
                _mm512_storeu_ps(qs + r * D + d, _mm512_mul_ps(qv, _mm512_loadu_ps(rc->kscale + d)));
                z = _mm512_fmadd_ps(qv, _mm512_loadu_ps(rc->kzero + d), z);
            }
            cz[r] = hsum512(z);
        }
        for (size_t r = rb; r < RB; r++) memset(qs + r * D, 0, D * sizeof(float));
        const size_t ntm2 = (ntm + 1) & ~(size_t)1; /* pairs of tokens */
        if (kb == 2) trel_scores(p, sacc, wst, qs, D, ntm2, rc->ktok, cz, rc->kt, rc->kcb, 2);
        else if (kb == 3) trel_scores(p, sacc, wst, qs, D, ntm2, rc->ktok, cz, rc->kt, rc->kcb, 3);
        else trel_scores(p, sacc, wst, qs, D, ntm2, rc->ktok, cz, rc->kt, rc->kcb, 4);
        for (size_t r = 0; r < RB; r++) {
            size_t nv = r < rb ? nvis[r0 + r] : 0;
            if (!nv) { memset(p + r * G, 0, G * sizeof(float)); continue; }
            fct[r] = softmax_row(p + r * G, nv, &m[r0 + r], &l[r0 + r]);
            size_t nv16 = (nv + 15) & ~(size_t)15;
            __m512 z = _mm512_setzero_ps();
            for (size_t t = 0; t < nv16; t += 16) {
                __m512 pv = _mm512_loadu_ps(p + r * G + t);
                z = _mm512_fmadd_ps(pv, _mm512_loadu_ps(rc->vzero + t), z);
                _mm512_storeu_ps(p + r * G + t, _mm512_mul_ps(pv, _mm512_loadu_ps(rc->vscale + t)));
            }
            zz[r] = hsum512(z);
        }
        const size_t ng = D / 16, gbytes = G * 2 * vb;
        for (size_t j = 0; j < ng; j++) {
            __m512 a[RB];
            const uint8_t *g = rc->vt + j * gbytes;
            if (vb == 2) trel_values(a, p, ntm2, g, j == ng - 1, rc->vcb, 2);
            else if (vb == 3) trel_values(a, p, ntm2, g, j == ng - 1, rc->vcb, 3);
            else trel_values(a, p, ntm2, g, j == ng - 1, rc->vcb, 4);
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

/* Record chunk: scores by channel rows of codes (16 tokens x 4 rows in registers),
 * values by token rows of codes; scales folded as in attn_kernels.h. */
#define POST(a, d) _mm512_mul_ps(_mm512_loadu_ps(rc->vch + (d)), (a))
#define PRE(r, d) _mm512_mul_ps(_mm512_loadu_ps(rc->vch + (d)), _mm512_set1_ps(zz[r]))
static void chunk_rec_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                           const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    if (rc->kt) {
        chunk_trellis_avx512(q, R, D, nvis, rc, m, l, acc, work);
        return;
    }
    float *p = work;                 /* [RB][G] */
    float *qs = work + RB * G;       /* [RB][D] */
    const uint8_t *kc = rc->kc, *vc = rc->vc, *vp = rc->vp;
    for (size_t r0 = 0; r0 < R; r0 += RB) {
        size_t rb = R - r0 < RB ? R - r0 : RB, ntm = 0;
        for (size_t r = 0; r < rb; r++) ntm = nvis[r0 + r] > ntm ? nvis[r0 + r] : ntm;
        if (!ntm) continue;
        float cz[RB] = {0, 0, 0, 0}, zz[RB] = {0, 0, 0, 0}, fct[RB] = {1, 1, 1, 1};
        for (size_t r = 0; r < rb; r++) {
            const float *qr = q + (r0 + r) * D;
            __m512 z = _mm512_setzero_ps();
            for (size_t d = 0; d < D; d += 16) {
                __m512 qv = _mm512_loadu_ps(qr + d);
                _mm512_storeu_ps(qs + r * D + d, _mm512_mul_ps(qv, _mm512_loadu_ps(rc->kscale + d)));
                z = _mm512_fmadd_ps(qv, _mm512_loadu_ps(rc->kzero + d), z);
            }
            cz[r] = hsum512(z);
        }
        for (size_t r = rb; r < RB; r++) memset(qs + r * D, 0, D * sizeof(float));
        size_t ntm16 = (ntm + 31) & ~(size_t)31;
        for (size_t t0 = 0; t0 < ntm16; t0 += 32) {
            __m512 s0[RB], s1[RB];
            _Pragma("GCC unroll 4")
            for (size_t r = 0; r < RB; r++) { s0[r] = _mm512_setzero_ps(); s1[r] = _mm512_setzero_ps(); }
            /* 32 tokens of one channel: two runs of 16 unpacked bytes, or the low and high
             * nibbles of one 16-byte unit */
            const __m128i m4 = _mm_set1_epi8(0x0F);
            for (size_t d = 0; d < D; d++) {
                __m128i c0, c1;
                if (kc) {
                    c0 = _mm_loadu_si128((const __m128i *)(const void *)(kc + d * G + t0));
                    c1 = _mm_loadu_si128((const __m128i *)(const void *)(kc + d * G + t0 + 16));
                } else {
                    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(rc->kp + d * (G / 2) + t0 / 2));
                    c0 = _mm_and_si128(x, m4);
                    c1 = _mm_and_si128(_mm_srli_epi16(x, 4), m4);
                }
                __m512 k0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c0));
                __m512 k1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c1));
                _Pragma("GCC unroll 4")
                for (size_t r = 0; r < RB; r++) {
                    __m512 qb = _mm512_set1_ps(qs[r * D + d]);
                    s0[r] = _mm512_fmadd_ps(qb, k0, s0[r]);
                    s1[r] = _mm512_fmadd_ps(qb, k1, s1[r]);
                }
            }
            __m512 kt0 = _mm512_loadu_ps(rc->ktok + t0), kt1 = _mm512_loadu_ps(rc->ktok + t0 + 16);
            for (size_t r = 0; r < RB; r++) {
                __m512 c = _mm512_set1_ps(cz[r]);
                _mm512_storeu_ps(p + r * G + t0, _mm512_mul_ps(kt0, _mm512_add_ps(s0[r], c)));
                _mm512_storeu_ps(p + r * G + t0 + 16, _mm512_mul_ps(kt1, _mm512_add_ps(s1[r], c)));
            }
        }
        for (size_t r = 0; r < RB; r++) {
            size_t nv = r < rb ? nvis[r0 + r] : 0;
            if (!nv) { memset(p + r * G, 0, G * sizeof(float)); continue; }
            fct[r] = softmax_row(p + r * G, nv, &m[r0 + r], &l[r0 + r]);
            __m512 z = _mm512_setzero_ps();
            for (size_t t = 0; t < ntm16; t += 16) {
                __m512 pv = _mm512_loadu_ps(p + r * G + t);
                z = _mm512_fmadd_ps(pv, _mm512_loadu_ps(rc->vzero + t), z);
                _mm512_storeu_ps(p + r * G + t, _mm512_mul_ps(pv, _mm512_loadu_ps(rc->vscale + t)));
            }
            zz[r] = hsum512(z);
        }
        if (vc) { V_ACCUM(LOAD_U8) }
        else { V_ACCUM(LOAD_V4) }
    }
}
#undef POST
#undef PRE

/* Unpacking is byte shuffling; the AVX2 version is as fast as it gets at these sizes. */
void sjk_attn_unpack_row_avx2(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits);

static void f16_to_f32_avx512(float *dst, const uint8_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + 2 * i))));
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        dst[i] = _cvtsh_ss(h);
    }
}

const sjk_attn_kernels sjk_attn_kernels_table_avx512 = {
    "avx512", chunk_f32_avx512, chunk_f16_avx512, chunk_tq6_avx512, chunk_rec_avx512, sjk_attn_unpack_row_avx2,
    f16_to_f32_avx512, 1,
};
