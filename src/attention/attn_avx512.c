/* attn_avx512.c — AVX-512 twins of the attention chunk kernels (attn_kernels.h): the
 * same algorithm and loop structure as attn_avx2.c (read that file's notes), 16 lanes.
 *
 * Shape: rows are taken SJK_ATTN_RB (4) at a time so that the query heads sharing a KV
 * head (GQA) and the rows of a prefill reuse every key and value load. Scores are
 * computed into work[], the online-softmax update runs 16 lanes at a time with a
 * polynomial exp (relative error < 2e-7 on the range used), and values accumulate 16
 * channels x 4 rows in registers. Tested against attn_ref.c.
 *
 * That shape is for decode (a few rows). Prefill (many rows, attend.c) goes to
 * chunk_f32_many below: rows in lanes for the scores, blocked matrix products, no
 * per-pair horizontal sums.
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
#define RBX SJK_ATTN_RB_MAX /* rows per block at most (the kernels below that take NR) */
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
 * LOADX2(v0, v1, t, d0) yields channels d0..d0+31 of key t. Keys go in blocks of BLK so
 * the block's values stay in L1 across the channel passes (TB for rows of floats; a whole
 * chunk, G, for packed codes: a 4-bit chunk's V codes, 16 KiB at D = 256); 32 channels x
 * RB rows accumulate in registers. Keys beyond a row's nvis have p = 0. */
#define TB 32
#define V_ACCUM(LOADX2, BLK)                                                               \
    for (size_t r = 0; r < rb; r++) {                                                      \
        if (!nvis[r0 + r]) continue;                                                       \
        float *a = acc + (r0 + r) * D;                                                     \
        __m512 vf = _mm512_set1_ps(fct[r]);                                                \
        for (size_t d = 0; d < D; d += 16)                                                 \
            _mm512_storeu_ps(a + d, _mm512_fmadd_ps(_mm512_loadu_ps(a + d), vf, PRE(r, d))); \
    }                                                                                      \
    for (size_t tb = 0; tb < ntm; tb += (BLK)) {                                           \
        size_t te = tb + (BLK) < ntm ? tb + (BLK) : ntm;                                   \
        for (size_t d0 = 0; d0 < D; d0 += 32) {                                            \
            __m512 a0[RBX], a1[RBX];                                                         \
            _Pragma("GCC unroll 8")                                                        \
            for (size_t r = 0; r < NR; r++) { a0[r] = _mm512_setzero_ps(); a1[r] = _mm512_setzero_ps(); } \
            for (size_t t = tb; t < te; t++) {                                             \
                __m512 v0, v1;                                                             \
                LOADX2(v0, v1, t, d0);                                                     \
                _Pragma("GCC unroll 8")                                                    \
                for (size_t r = 0; r < NR; r++) {                                          \
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
#define X2(LOAD, v0, v1, t, d0) ((v0) = LOAD(t, d0), (v1) = LOAD(t, (d0) + 16))
#define LOADX2_F32(v0, v1, t, d0) X2(LOAD_F32, v0, v1, t, d0)
#define LOADX2_F16(v0, v1, t, d0) X2(LOAD_F16, v0, v1, t, d0)
#define LOADX2_U8(v0, v1, t, d0) X2(LOAD_U8, v0, v1, t, d0)
#define POST_NONE(a, d) (a)
#define PRE_NONE(r, d) _mm512_setzero_ps()

/* Scores of rows [r0, r0+rb) against keys [0, ntm) for fp32 / fp16 keys. */
#define SCORES_DOT(LOADK)                                                                  \
    for (size_t t = 0; t < ntm; t++) {                                                     \
        __m512 s0[RBX], s1[RBX];                                                             \
        _Pragma("GCC unroll 8")                                                            \
        for (size_t r = 0; r < NR; r++) { s0[r] = _mm512_setzero_ps(); s1[r] = _mm512_setzero_ps(); } \
        for (size_t d = 0; d < D; d += 32) {                                               \
            __m512 kv0 = LOADK(t, d), kv1 = LOADK(t, d + 16);                               \
            _Pragma("GCC unroll 8")                                                        \
            for (size_t r = 0; r < NR; r++) {                                              \
                s0[r] = _mm512_fmadd_ps(_mm512_loadu_ps(qrow[r] + d), kv0, s0[r]);         \
                s1[r] = _mm512_fmadd_ps(_mm512_loadu_ps(qrow[r] + d + 16), kv1, s1[r]);     \
            }                                                                              \
        }                                                                                  \
        for (size_t r = 0; r < NR; r++) p[r * G + t] = hsum512(_mm512_add_ps(s0[r], s1[r])); \
    }

#define LOADK_F32(t, d) _mm512_loadu_ps(K + (t) * D + (d))
#define LOADK_F16(t, d) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(K + (t) * D + (d))))

/* Rows are processed RB at a time with every per-row loop of compile-time length RB (so
 * accumulators stay in registers); a short last block reads a zero query row. Declares
 * rb (rows in the block), ntm (keys the block sees) and qrow[RB]. */
#define ROW_SETUP()                                                                        \
    size_t rb = R - r0 < NR ? R - r0 : NR, ntm = 0;                                        \
    for (size_t r = 0; r < rb; r++) ntm = nvis[r0 + r] > ntm ? nvis[r0 + r] : ntm;         \
    const float *qrow[RBX];                                                                 \
    for (size_t r = 0; r < NR; r++) qrow[r] = r < rb ? q + (r0 + r) * D : zero;

#define CHUNK_BODY(LOADK, LOADV)                                                           \
    const size_t NR = RB;                                                                  \
    float *p = work; /* [RBX][G] scores, then probabilities */                               \
    float *zero = work + RBX * G + RBX * D; /* [D] zeros */                                   \
    memset(zero, 0, D * sizeof(float));                                                    \
    for (size_t r0 = 0; r0 < R; r0 += NR) {                                                \
        ROW_SETUP()                                                                        \
        if (!ntm) continue; /* no row of the block sees a key of this chunk */             \
        SCORES_DOT(LOADK)                                                                  \
        float fct[RBX] = {1, 1, 1, 1, 1, 1, 1, 1};                                                      \
        for (size_t r = 0; r < NR; r++) {                                                  \
            if (r < rb && nvis[r0 + r]) fct[r] = softmax_row(p + r * G, nvis[r0 + r], &m[r0 + r], &l[r0 + r]); \
            else memset(p + r * G, 0, G * sizeof(float));                                  \
        }                                                                                  \
        V_ACCUM(LOADV, TB)                                                                 \
    }

#define POST POST_NONE
#define PRE PRE_NONE
static void chunk_f32_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                           const float *K, const float *V, size_t n,
                           float *m, float *l, float *acc, float *work)
{
    (void)n;
    CHUNK_BODY(LOADK_F32, LOADX2_F32)
}

static void chunk_f16_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                           const uint16_t *K, const uint16_t *V, size_t n,
                           float *m, float *l, float *acc, float *work)
{
    (void)n;
    CHUNK_BODY(LOADK_F16, LOADX2_F16)
}
#undef POST
#undef PRE

/* ---- many query rows (prefill): chunk_f32_many ---------------------------------------
 * With R rows against one chunk the work is two small matrix products, S = Q·Kᵀ
 * (rows x keys over D) and A += P·V (rows x channels over keys), and the kernel is laid
 * out for them instead of for a few rows: no horizontal sum per (key, row) pair and no
 * K/V conversion per row block (the caller hands fp32 K and V, converted or decoded once
 * per chunk for all rows; attend.c).
 *
 * Rows go in blocks of MRB (32). Per block:
 *
 *   qT [D][rp]    the block's queries transposed (16x16 register transposes; rp = rows
 *                 rounded up to 16, zero columns past the last row), so that
 *   s  [G][rp]    scores: a tile of 8 keys x 32 rows is 16 zmm accumulators, each step d
 *                 one broadcast K[t][d] per key against the rows' q[.][d] in lanes;
 *                 then the online-softmax update runs across lanes too (16 rows at a
 *                 time: running max, exp, sums, the factors f; masked by nvis[r]),
 *                 leaving p in s;
 *   acc[r][d]  = acc[r][d] * f[r] + Σ_t p[t][r] V[t][d], a tile of 4 rows x 64 channels
 *                 (16 zmm) over the keys row r's tile may see, broadcasting p[t][r].
 *
 * Keys past the block's largest nvis are not computed (score tiles round up to 8 keys,
 * reading the last visible key again; those scores are masked). */
#define MRB SJK_ATTN_MANY_RB
#define MKT 8 /* keys per score tile */
_Static_assert(MRB == 32 && G % MKT == 0, "chunk_f32_many: score tiles of 32 rows x 8 keys");

/* x[i] lane j <- x[j] lane i: unpack pairs, then pairs of pairs, then 128-bit lanes twice. */
static inline void transpose16x16(__m512 x[16])
{
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(x[i], x[i + 1]);     /* a0 b0 a1 b1 (per 128-bit lane) */
        t[i + 1] = _mm512_unpackhi_ps(x[i], x[i + 1]); /* a2 b2 a3 b3 */
    }
    for (int g = 0; g < 4; g++) { /* rows 4g..4g+3: u[4g + c] holds column c of each lane */
        u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int c = 0; c < 4; c++) { /* column 4k + c gathers lane k of u[c], u[4+c], u[8+c], u[12+c] */
        __m512 xl = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(2, 0, 2, 0));
        __m512 xh = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 1, 3, 1));
        __m512 yl = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(2, 0, 2, 0));
        __m512 yh = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 1, 3, 1));
        x[c] = _mm512_shuffle_f32x4(xl, yl, _MM_SHUFFLE(2, 0, 2, 0));
        x[8 + c] = _mm512_shuffle_f32x4(xl, yl, _MM_SHUFFLE(3, 1, 3, 1));
        x[4 + c] = _mm512_shuffle_f32x4(xh, yh, _MM_SHUFFLE(2, 0, 2, 0));
        x[12 + c] = _mm512_shuffle_f32x4(xh, yh, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* Scores of keys [0, nk) (nk a multiple of MKT) against RZ * 16 columns of qT: s[t][c]. */
#define MANY_SCORES(RZ)                                                                    \
    for (size_t t0 = 0; t0 < nk; t0 += MKT) {                                              \
        const float *kr[MKT];                                                              \
        for (size_t j = 0; j < MKT; j++) kr[j] = K + (t0 + j < ntm ? t0 + j : ntm - 1) * D; \
        __m512 a[MKT][RZ];                                                                 \
        _Pragma("GCC unroll 8")                                                            \
        for (size_t j = 0; j < MKT; j++)                                                   \
            _Pragma("GCC unroll 2")                                                        \
            for (size_t z = 0; z < RZ; z++) a[j][z] = _mm512_setzero_ps();                 \
        for (size_t d = 0; d < D; d++) {                                                   \
            __m512 qv[RZ];                                                                 \
            _Pragma("GCC unroll 2")                                                        \
            for (size_t z = 0; z < RZ; z++) qv[z] = _mm512_loadu_ps(qT + d * rp + 16 * z); \
            _Pragma("GCC unroll 8")                                                        \
            for (size_t j = 0; j < MKT; j++) {                                             \
                const __m512 kb = _mm512_set1_ps(kr[j][d]);                                \
                _Pragma("GCC unroll 2")                                                    \
                for (size_t z = 0; z < RZ; z++) a[j][z] = _mm512_fmadd_ps(qv[z], kb, a[j][z]); \
            }                                                                              \
        }                                                                                  \
        _Pragma("GCC unroll 8")                                                            \
        for (size_t j = 0; j < MKT; j++)                                                   \
            _Pragma("GCC unroll 2")                                                        \
            for (size_t z = 0; z < RZ; z++) _mm512_storeu_ps(s + (t0 + j) * rp + 16 * z, a[j][z]); \
    }

static void chunk_f32_many_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                  const float *K, const float *V, size_t n,
                                  float *m, float *l, float *acc, float *work)
{
    float *qT = work;             /* [D][rp] */
    float *s = qT + D * MRB;      /* [G][rp] scores, then probabilities */
    float *fct = s + G * MRB;     /* [MRB] factors for the old state */
    (void)n;
    for (size_t b0 = 0; b0 < R; b0 += MRB) {
        const size_t rb = R - b0 < MRB ? R - b0 : MRB, rp = (rb + 15) & ~(size_t)15;
        const uint32_t *nv = nvis + b0;
        size_t ntm = 0;
        for (size_t r = 0; r < rb; r++) ntm = nv[r] > ntm ? nv[r] : ntm;
        if (!ntm) continue;
        for (size_t g = 0; g < rp; g += 16)
            for (size_t d0 = 0; d0 < D; d0 += 16) {
                __m512 x[16];
                for (size_t i = 0; i < 16; i++)
                    x[i] = g + i < rb ? _mm512_loadu_ps(q + (b0 + g + i) * D + d0) : _mm512_setzero_ps();
                transpose16x16(x);
                for (size_t i = 0; i < 16; i++) _mm512_storeu_ps(qT + (d0 + i) * rp + g, x[i]);
            }
        const size_t nk = (ntm + MKT - 1) / MKT * MKT;
        if (rp == 32) { MANY_SCORES(2) }
        else { MANY_SCORES(1) }
        /* online softmax, 16 rows per vector (row b0 + g + i in lane i) */
        for (size_t g = 0; g < rp; g += 16) {
            const __mmask16 in = rb - g >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (rb - g)) - 1);
            const __m512i nvv = _mm512_maskz_loadu_epi32(in, nv + g);
            const __mmask16 live = _mm512_mask_cmpgt_epi32_mask(in, nvv, _mm512_setzero_si512());
            size_t ntg = 0;
            for (size_t i = g; i < g + 16 && i < rb; i++) ntg = nv[i] > ntg ? nv[i] : ntg;
            if (!ntg) continue;
            const __m512 mo = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), live, m + b0 + g);
            __m512 mx = _mm512_set1_ps(-INFINITY);
            for (size_t t = 0; t < ntg; t++) {
                const __mmask16 k = _mm512_cmpgt_epi32_mask(nvv, _mm512_set1_epi32((int)t));
                mx = _mm512_mask_max_ps(mx, k, mx, _mm512_loadu_ps(s + t * rp + g));
            }
            const __m512 mn = _mm512_max_ps(mo, mx);
            const __mmask16 old = _mm512_mask_cmp_ps_mask(live, mo, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
            const __m512 f = _mm512_maskz_mov_ps(old, exp512(_mm512_sub_ps(mo, mn)));
            __m512 sum = _mm512_setzero_ps();
            for (size_t t = 0; t < ntg; t++) {
                const __mmask16 k = _mm512_cmpgt_epi32_mask(nvv, _mm512_set1_epi32((int)t));
                const __m512 p = _mm512_maskz_mov_ps(k, exp512(_mm512_sub_ps(_mm512_loadu_ps(s + t * rp + g), mn)));
                _mm512_storeu_ps(s + t * rp + g, p);
                sum = _mm512_add_ps(sum, p);
            }
            const __m512 lo = _mm512_maskz_loadu_ps(live, l + b0 + g);
            _mm512_mask_storeu_ps(l + b0 + g, live, _mm512_fmadd_ps(lo, f, sum));
            _mm512_mask_storeu_ps(m + b0 + g, live, mn);
            _mm512_storeu_ps(fct + g, f);
        }
        /* values: 4 rows x 64 channels per tile, over the keys the tile's rows see */
        for (size_t d0 = 0; d0 < D; d0 += 64)
            for (size_t r0 = 0; r0 < rb; r0 += 4) {
                size_t nt = 0;
                for (size_t r = r0; r < r0 + 4 && r < rb; r++) nt = nv[r] > nt ? nv[r] : nt;
                if (!nt) continue;
                __m512 a[4][4];
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < 4; r++)
                    _Pragma("GCC unroll 8")
                    for (size_t i = 0; i < 4; i++) a[r][i] = _mm512_setzero_ps();
                for (size_t t = 0; t < nt; t++) {
                    __m512 v[4];
                    _Pragma("GCC unroll 8")
                    for (size_t i = 0; i < 4; i++) v[i] = _mm512_loadu_ps(V + t * D + d0 + 16 * i);
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < 4; r++) {
                        const __m512 pb = _mm512_set1_ps(s[t * rp + r0 + r]);
                        _Pragma("GCC unroll 8")
                        for (size_t i = 0; i < 4; i++) a[r][i] = _mm512_fmadd_ps(pb, v[i], a[r][i]);
                    }
                }
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < 4; r++) {
                    if (r0 + r >= rb || !nv[r0 + r]) continue;
                    float *ad = acc + (b0 + r0 + r) * D + d0;
                    const __m512 f = _mm512_set1_ps(fct[r0 + r]);
                    _Pragma("GCC unroll 8")
                    for (size_t i = 0; i < 4; i++)
                        _mm512_storeu_ps(ad + 16 * i, _mm512_fmadd_ps(_mm512_loadu_ps(ad + 16 * i), f, a[r][i]));
                }
            }
    }
}
#undef MANY_SCORES
#undef MKT
#undef MRB

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

static inline __attribute__((always_inline)) void chunk_tq6_nr(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                                                const uint8_t *K, const uint8_t *V, size_t n,
                                                                float *m, float *l, float *acc, float *work,
                                                                const size_t NR)
{
    const size_t nb = D / SJK_TQ_BLOCK, row_nbytes = nb * SJK_TQ6_0_NBYTES;
    const tq6_lut tt = tq6_lut_init();
    float *p = work;                                   /* [RBX][G] scores, probabilities */
    float *qp = work + RBX * G;                         /* [RBX][D] queries, decode order */
    float *kn = work + RBX * (2 * D + 4 * G + 8);       /* [n][nb] K block norms */
    float *vn = kn + G * nb;                           /* [nb][G] V block norms (0 past n) */
    float *pn = vn + G * nb;                           /* [nb][RBX][G] p * V norm */
    float *va = pn + nb * RBX * G;                      /* [RBX][128] a block's values, decode order */
    int32_t elem[SJK_TQ_BLOCK];
    for (size_t i = 0; i < SJK_TQ_BLOCK; i++) elem[i] = (int32_t)tq6_elem(i);
    /* the fp16 norms, 16 at a time by one gather: K's in key order, V's per block */
    tq6_norms(kn, K, n * nb, SJK_TQ6_0_NBYTES);
    for (size_t b = 0; b < nb; b++) {
        tq6_norms(vn + b * G, V + b * SJK_TQ6_0_NBYTES, n, row_nbytes);
        for (size_t t = n; t < ((n + 15) & ~(size_t)15); t++) vn[b * G + t] = 0.0f;
    }
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t rb = R - r0 < NR ? R - r0 : NR, ntm = 0;
        for (size_t r = 0; r < rb; r++) ntm = nvis[r0 + r] > ntm ? nvis[r0 + r] : ntm;
        if (!ntm) continue;
        for (size_t r = 0; r < NR; r++)
            for (size_t b = 0; b < nb; b++)
                for (size_t i = 0; i < SJK_TQ_BLOCK; i += 16)
                    _mm512_storeu_ps(qp + r * D + b * SJK_TQ_BLOCK + i,
                                     r < rb ? _mm512_i32gather_ps(_mm512_loadu_si512((const void *)(elem + i)),
                                                                  q + (r0 + r) * D + b * SJK_TQ_BLOCK, 4)
                                            : _mm512_setzero_ps());
        /* scores: per key, per block the 4 rows' lane partials, scaled by the block norm */
        for (size_t t = 0; t < ntm; t++) {
            const uint8_t *row = K + t * row_nbytes;
            __m512 s[RBX];
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) s[r] = _mm512_setzero_ps();
            for (size_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * SJK_TQ6_0_NBYTES;
                const float *qb = qp + b * SJK_TQ_BLOCK;
                __m512 e[2][RBX];
                _Pragma("GCC unroll 2")
                for (int par = 0; par < 2; par++) {
                    __m512 f[4];
                    tq6_values64(&tt, tq6_codes64(&tt, blk, par), f);
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < NR; r++) {
                        const float *qr = qb + r * D + 64 * par;
                        __m512 x = _mm512_mul_ps(_mm512_loadu_ps(qr), f[0]);
                        x = _mm512_fmadd_ps(_mm512_loadu_ps(qr + 16), f[1], x);
                        x = _mm512_fmadd_ps(_mm512_loadu_ps(qr + 32), f[2], x);
                        e[par][r] = _mm512_fmadd_ps(_mm512_loadu_ps(qr + 48), f[3], x);
                    }
                }
                const __m512 nv = _mm512_set1_ps(kn[t * nb + b]);
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < NR; r++) s[r] = _mm512_fmadd_ps(_mm512_add_ps(e[0][r], e[1][r]), nv, s[r]);
            }
            float sv[RBX];
            for (size_t r = 0; r < NR; r += 4) _mm_storeu_ps(sv + r, hsum4x16(s[r], s[r + 1], s[r + 2], s[r + 3]));
            for (size_t r = 0; r < NR; r++) p[r * G + t] = sv[r];
        }
        float fct[RBX] = {1, 1, 1, 1, 1, 1, 1, 1};
        for (size_t r = 0; r < NR; r++) {
            if (r < rb && nvis[r0 + r]) fct[r] = softmax_row(p + r * G, nvis[r0 + r], &m[r0 + r], &l[r0 + r]);
            else memset(p + r * G, 0, G * sizeof(float));
        }
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
            __m512 vf = _mm512_set1_ps(fct[r]);
            for (size_t d = 0; d < D; d += 16) _mm512_storeu_ps(a + d, _mm512_mul_ps(_mm512_loadu_ps(a + d), vf));
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
                for (size_t i = 0; i < SJK_TQ_BLOCK; i += 16) {
                    const __m512i ix = _mm512_loadu_si512((const void *)(elem + i));
                    const __m512 x = _mm512_add_ps(_mm512_i32gather_ps(ix, ad, 4), _mm512_loadu_ps(vr + i));
                    _mm512_i32scatter_ps(ad, ix, x, 4);
                }
            }
        }
    }
}

/* Rows per block: 4, or 8 when a call has more than 4 rows (the 6 GQA rows of a Qwen2.5
 * head, 8 of a Llama-3 head), so that a chunk's codes are decoded once per call instead
 * of once per 4 rows; the padding rows of a block are zero queries (their FMAs are the
 * price of the shared decode). */
static inline size_t rows_per_block(size_t R) { return R > RB ? RBX : RB; }

static void chunk_tq6_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                             const uint8_t *K, const uint8_t *V, size_t n,
                             float *m, float *l, float *acc, float *work)
{
    if (rows_per_block(R) == RBX) chunk_tq6_nr(q, R, D, nvis, K, V, n, m, l, acc, work, RBX);
    else chunk_tq6_nr(q, R, D, nvis, K, V, n, m, l, acc, work, RB);
}

/* The record's K scales folded into rows q[rb][D] of a block of NR: qs[r][d] = q[r][d] *
 * Kscale[d] and cz[r] = q[r] . Kzero (rows rb..NR-1: zero queries, cz untouched). */
static inline void rec_fold(float *qs, float *cz, const float *q, size_t rb, size_t NR, size_t D, const sjk_attn_rec *rc)
{
    for (size_t r = 0; r < rb; r++) {
        const float *qr = q + r * D;
        __m512 z = _mm512_setzero_ps();
        for (size_t d = 0; d < D; d += 16) {
            __m512 qv = _mm512_loadu_ps(qr + d);
            _mm512_storeu_ps(qs + r * D + d, _mm512_mul_ps(qv, _mm512_loadu_ps(rc->kscale + d)));
            z = _mm512_fmadd_ps(qv, _mm512_loadu_ps(rc->kzero + d), z);
        }
        cz[r] = hsum512(z);
    }
    for (size_t r = rb; r < NR; r++) memset(qs + r * D, 0, D * sizeof(float));
}

/* The online-softmax update of a record block's scores p[NR][G] (rows rb..NR-1 and keys
 * past a row's nvis: p = 0), then the V scales folded in: p[r][t] *= Vscale[t] and
 * zz[r] = Σ_t p[r][t] · Vzero[t] (before the scaling); fct[r] the old state's factor. */
static inline void rec_probs(float *p, float *fct, float *zz, const uint32_t *nvis, size_t rb, size_t NR, float *m,
                             float *l, const sjk_attn_rec *rc)
{
    for (size_t r = 0; r < NR; r++) {
        const size_t nv = r < rb ? nvis[r] : 0;
        if (!nv) { memset(p + r * G, 0, G * sizeof(float)); continue; }
        fct[r] = softmax_row(p + r * G, nv, &m[r], &l[r]);
        const size_t nv16 = (nv + 15) & ~(size_t)15;
        __m512 z = _mm512_setzero_ps();
        for (size_t t = 0; t < nv16; t += 16) {
            const __m512 pv = _mm512_loadu_ps(p + r * G + t);
            z = _mm512_fmadd_ps(pv, _mm512_loadu_ps(rc->vzero + t), z);
            _mm512_storeu_ps(p + r * G + t, _mm512_mul_ps(pv, _mm512_loadu_ps(rc->vscale + t)));
        }
        zz[r] = hsum512(z);
    }
}

/* ---- trellis records, read in place -------------------------------------------------
 * A payload group is 16 channels d0..d0+15 (docs/FORMAT.md); step t holds their 16
 * symbols in 2k bytes, so the 16 windows of token t live in one vector and advance as
 * w = (sym << 6) | (w >> k) (the tile decoder's recurrence, trellis_avx512.c); the code
 * values are one gather from the codebook (L1-resident: 1 / 2 / 4 KiB).
 *
 * Tokens go in pairs: one pair-table gather element per channel gives the values of
 * tokens t and t+1 (trel_pair), and the pair's index is built from the two steps'
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

/* Values of tokens t and t+1 of the 16 channels of group g, interleaved: lo holds
 * channels 0..7 and hi channels 8..15, lane 2i token t and lane 2i+1 token t+1 of its
 * channel (the order in which the pair-table gathers deliver them; the callers weight
 * them with duplicated queries or with the probability pair of (t, t+1), so no lane
 * shuffle is needed per pair). Advances the state *w (trel_state) from token t-1 to
 * t+1. P: pair table, or NULL (two one-value gathers from cb, interleaved here). */
static inline __attribute__((always_inline)) void trel_pair(__m512 *lo, __m512 *hi, __m512i *w, const uint8_t *g,
                                                            size_t t, int lastg, const float *cb,
                                                            const uint64_t *P, const unsigned k, const trel_rot *rt)
{
    if (k == 4 || !P) {
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
    *lo = _mm512_castsi512_ps(_mm512_i32gather_epi64(_mm512_castsi512_si256(idx), (const void *)P, 8));
    *hi = _mm512_castsi512_ps(_mm512_i32gather_epi64(_mm512_extracti64x4_epi64(idx, 1), (const void *)P, 8));
}

/* trel_pair's carried state from the window w(t-1): the window itself on the one-value
 * path, w(t-1) >> k on the pair-table path. */
static inline __attribute__((always_inline)) __m512i trel_state(__m512i w, const uint64_t *P, const unsigned k)
{
    return k == 4 || !P ? w : _mm512_srli_epi32(w, (int)k);
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
        size_t rb = R - r0 < NR ? R - r0 : NR, ntm = 0;
        for (size_t r = 0; r < rb; r++) ntm = nvis[r0 + r] > ntm ? nvis[r0 + r] : ntm;
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

/* 16 codes as floats from 16 bytes (codes 0..255 unpacked), and 32 4-bit codes from the
 * low and high nibbles of 16 bytes. The nibbles are not masked: vpermps reads only the
 * low 4 bits of each index, so a table of 0..15 turns a code into its float (exactly
 * what cvtdq2ps would give) in one instruction on the zero-extended byte. */
#define LOADC_U8(ptr) _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(ptr))))
#define LOADC_NIB(lo, hi, ptr)                                                             \
    do {                                                                                   \
        const __m512i x_ = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(ptr))); \
        (lo) = _mm512_permutexvar_ps(x_, lut16);                                           \
        (hi) = _mm512_permutexvar_ps(_mm512_srli_epi32(x_, 4), lut16);                     \
    } while (0)
/* channels d0..d0+31 of a 4-bit V payload row: the 16 bytes of unit d0/32 */
#define LOAD_V4X2(v0, v1, t, d0) LOADC_NIB(v0, v1, vp + (t) * (D / 2) + (d0) / 2)

/* sjk_attn_q16_prep (attn_ref.c) 16 lanes at a time, to the same bits: the row x[D] as
 * int16 q16[D] and its scale. */
static void q16_prep(int16_t *q16, float *scale, const float *x, size_t D)
{
    __m512 mx = _mm512_setzero_ps();
    __mmask16 bad = 0;
    for (size_t d = 0; d < D; d += 16) {
        const __m512 v = _mm512_loadu_ps(x + d);
        bad |= _mm512_fpclass_ps_mask(v, 0x99); /* NaN, +inf, -inf */
        mx = _mm512_max_ps(mx, _mm512_abs_ps(v));
    }
    const float amax = bad ? NAN : _mm512_reduce_max_ps(mx);
    const float s = isfinite(amax) ? amax / 32767.0f : NAN;
    const float inv = s > 0 ? 1.0f / s : 0.0f;
    *scale = s;
    const __m512 vi = _mm512_set1_ps(isfinite(amax) ? inv : 0.0f), lim = _mm512_set1_ps(32767.0f);
    for (size_t d = 0; d < D; d += 16) {
        __m512 y = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + d), vi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        y = _mm512_max_ps(_mm512_min_ps(y, lim), _mm512_sub_ps(_mm512_setzero_ps(), lim));
        _mm256_storeu_si256((__m256i *)(void *)(q16 + d), _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(y)));
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
#define POST(a, d) _mm512_mul_ps(_mm512_loadu_ps(rc->vch + (d)), (a))
#define PRE(r, d) _mm512_mul_ps(_mm512_loadu_ps(rc->vch + (d)), _mm512_set1_ps(zz[r]))
static inline __attribute__((always_inline)) void chunk_rec_nr(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                                                const sjk_attn_rec *rc, float *m, float *l, float *acc,
                                                                float *work, const size_t NR, const int Q16)
{
    float *p = work;                 /* [RBX][G] */
    float *qs = work + RBX * G;       /* [RBX][D] */
    int16_t *q16 = (int16_t *)(void *)(work + RBX * (2 * D + 4 * G + 8)); /* [RBX][D] (Q16) */
    float q16s[RBX] = {0};
    const uint8_t *kc = rc->kc, *vc = rc->vc, *vp = rc->vp;
    const __m512 lut16 = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t rb = R - r0 < NR ? R - r0 : NR, ntm = 0;
        for (size_t r = 0; r < rb; r++) ntm = nvis[r0 + r] > ntm ? nvis[r0 + r] : ntm;
        if (!ntm) continue;
        float cz[RBX] = {0}, zz[RBX] = {0}, fct[RBX] = {1, 1, 1, 1, 1, 1, 1, 1};
        rec_fold(qs, cz, q + r0 * D, rb, NR, D, rc);
        size_t ntm16 = (ntm + 31) & ~(size_t)31;
        if (Q16) {
            for (size_t r = 0; r < NR; r++) {
                if (r < rb) q16_prep(q16 + r * D, &q16s[r], qs + r * D, D);
                else memset(q16 + r * D, 0, D * sizeof(int16_t)), q16s[r] = 0.0f;
            }
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
                const size_t pfo = (t0 / 32) * D * 64, pfn = r0 == 0 ? rc->pf_nbytes : 0;
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
                const __m512 kt0 = _mm512_loadu_ps(rc->ktok + t0), kt1 = _mm512_loadu_ps(rc->ktok + t0 + 16);
                for (size_t r = 0; r < NR; r++) {
                    const __m512 sc = _mm512_set1_ps(q16s[r]), c = _mm512_set1_ps(cz[r]);
                    _mm512_storeu_ps(p + r * G + t0, _mm512_mul_ps(kt0, _mm512_add_ps(_mm512_mul_ps(sc, _mm512_cvtepi32_ps(A0[r])), c)));
                    _mm512_storeu_ps(p + r * G + t0 + 16,
                                     _mm512_mul_ps(kt1, _mm512_add_ps(_mm512_mul_ps(sc, _mm512_cvtepi32_ps(A1[r])), c)));
                }
            }
        }
        for (size_t t0 = 0; t0 < (Q16 ? 0 : ntm16); t0 += 32) {
            __m512 s0[RBX], s1[RBX];
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) { s0[r] = _mm512_setzero_ps(); s1[r] = _mm512_setzero_ps(); }
            /* 32 tokens of one channel: two runs of 16 unpacked bytes, or the low and high
             * nibbles of one 16-byte unit */
            /* the next record, a line per channel step (rc->pf: attn_kernels.h) */
            const size_t pfo = (t0 / 32) * D * 64, pfn = r0 == 0 ? rc->pf_nbytes : 0;
#define PREFETCH_NEXT(o) if ((o) < pfn) _mm_prefetch((const char *)rc->pf + (o), _MM_HINT_T1)
            if (kc) {
                for (size_t d = 0; d < D; d++) {
                    PREFETCH_NEXT(pfo + d * 64);
                    __m512 k0 = LOADC_U8(kc + d * G + t0), k1 = LOADC_U8(kc + d * G + t0 + 16);
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < NR; r++) {
                        __m512 qb = _mm512_set1_ps(qs[r * D + d]);
                        s0[r] = _mm512_fmadd_ps(qb, k0, s0[r]);
                        s1[r] = _mm512_fmadd_ps(qb, k1, s1[r]);
                    }
                }
            } else {
                for (size_t d = 0; d < D; d++) {
                    __m512 k0, k1;
                    PREFETCH_NEXT(pfo + d * 64);
                    LOADC_NIB(k0, k1, rc->kp + d * (G / 2) + t0 / 2);
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < NR; r++) {
                        __m512 qb = _mm512_set1_ps(qs[r * D + d]);
                        s0[r] = _mm512_fmadd_ps(qb, k0, s0[r]);
                        s1[r] = _mm512_fmadd_ps(qb, k1, s1[r]);
                    }
                }
            }
            __m512 kt0 = _mm512_loadu_ps(rc->ktok + t0), kt1 = _mm512_loadu_ps(rc->ktok + t0 + 16);
            for (size_t r = 0; r < NR; r++) {
                __m512 c = _mm512_set1_ps(cz[r]);
                _mm512_storeu_ps(p + r * G + t0, _mm512_mul_ps(kt0, _mm512_add_ps(s0[r], c)));
                _mm512_storeu_ps(p + r * G + t0 + 16, _mm512_mul_ps(kt1, _mm512_add_ps(s1[r], c)));
            }
        }
        rec_probs(p, fct, zz, nvis + r0, rb, NR, m + r0, l + r0, rc);
        if (vc) { V_ACCUM(LOADX2_U8, TB) }
        else { V_ACCUM(LOAD_V4X2, G) }
    }
}
#undef POST
#undef PREFETCH_NEXT
#undef PRE

static void chunk_rec_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                             const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    const size_t nr = rows_per_block(R);
    if (rc->kt && nr == RBX) chunk_trellis_nr(q, R, D, nvis, rc, m, l, acc, work, RBX);
    else if (rc->kt) chunk_trellis_nr(q, R, D, nvis, rc, m, l, acc, work, RB);
    else if (nr == RBX) chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, RBX, 0);
    else chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, RB, 0);
}

static void chunk_rec_q16_avx512(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                 const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    if (rows_per_block(R) == RBX) chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, RBX, 1);
    else chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, RB, 1);
}

/* ---- ggml block rows (q8_0, q4_0) read in place: chunk_qblk --------------------------
 * Scores by integer dot products against the int8 query pieces (attn_kernels.h,
 * sjk_attn_qint): a pair of blocks (64 codes) is one zmm of unsigned bytes u (q8_0: the
 * code + 128, by one xor; q4_0: the nibbles, lanes 0..15 and 32..47 the low ones, in
 * element order), and per query row
 *     a = corr8 (q8_0) or 0;  a = dpbusd(a, u, hi);  a <<= 7;  a = dpbusd(a, u, lo)
 * leaves in each int32 lane the exact Σ code · (128 hi + lo) over 4 channels (corr8
 * removes the +128 of q8_0's bytes); lanes 0..7 belong to the first block, 8..15 to the
 * second, so one fp32 multiply-add by the blocks' scales (d_j in lanes 0..7, d_j+1 in
 * 8..15) folds the pair into the row's 16 fp32 partials. q4_0's −8 offset is one more
 * multiply-add per key (Σ_b d_b · 8 · bsum_b). One 4-row horizontal sum per key.
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
                                                              const float *dkf, const int8_t *const hi[RBX],
                                                              const int8_t *const lo[RBX], const int32_t *const corr[RBX],
                                                              const float bs[RBX][16], const float sc[RBX],
                                                              const unsigned kbits, const size_t NR)
{
    const size_t nb = D / 32, bn = kbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES;
    const __mmask16 mnb = (__mmask16)((1u << nb) - 1);
    const __m512i half = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m512 bsv[RBX];
    for (size_t r = 0; r < NR; r++) bsv[r] = _mm512_mul_ps(_mm512_loadu_ps(bs[r]), _mm512_set1_ps(8.0f));
    for (size_t t = 0; t < ntm; t++) {
        const uint8_t *row = K + t * nb * bn;
        const __m512 dkz = _mm512_maskz_loadu_ps(mnb, dkf + t * nb);
        __m512 F[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) F[r] = _mm512_setzero_ps();
        for (size_t j = 0; j < nb; j += 2) {
            __m512i u;
            const uint8_t *b0 = row + j * bn + 2;
            if (kbits == 8) {
                u = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)b0)),
                                       _mm256_loadu_si256((const __m256i *)(const void *)(b0 + bn)), 1);
                u = _mm512_xor_si512(u, _mm512_set1_epi8((char)0x80));
            } else {
                __m512i z = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)b0));
                z = _mm512_mask_broadcast_i32x4(z, (__mmask16)0xFF00, _mm_loadu_si128((const __m128i *)(const void *)(b0 + bn)));
                z = _mm512_mask_srli_epi16(z, (__mmask32)0xFF00FF00u, z, 4);
                u = _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
            }
            const __m512 dk = _mm512_permutexvar_ps(_mm512_add_epi32(half, _mm512_set1_epi32((int)j)), dkz);
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                __m512i a = kbits == 8 ? _mm512_loadu_si512((const void *)(corr[r] + j * 8)) : _mm512_setzero_si512();
                a = _mm512_dpbusd_epi32(a, u, _mm512_loadu_si512((const void *)(hi[r] + j * 32)));
                a = _mm512_slli_epi32(a, 7);
                a = _mm512_dpbusd_epi32(a, u, _mm512_loadu_si512((const void *)(lo[r] + j * 32)));
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

#define LOADX2_Q8V(v0, v1, t, d0)                                                          \
    do {                                                                                   \
        const size_t bi_ = (t) * nb + (d0) / 32;                                           \
        const uint8_t *b_ = V + bi_ * SJK_Q8_0_NBYTES + 2;                                 \
        const __m512 dv_ = _mm512_set1_ps(dvf[bi_]);                                       \
        (v0) = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)b_))), dv_); \
        (v1) = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(b_ + 16)))), dv_); \
    } while (0)
#define LOADX2_Q4V(v0, v1, t, d0)                                                          \
    do {                                                                                   \
        const size_t bi_ = (t) * nb + (d0) / 32;                                           \
        const __m512i x_ = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(V + bi_ * SJK_Q4_0_NBYTES + 2))); \
        const __m512 dv_ = _mm512_set1_ps(dvf[bi_]);                                       \
        (v0) = _mm512_mul_ps(_mm512_permutexvar_ps(x_, lut_m8), dv_);                      \
        (v1) = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(x_, 4), lut_m8), dv_); \
    } while (0)

#define POST POST_NONE
#define PRE PRE_NONE
static inline __attribute__((always_inline)) void chunk_qblk_nr(const sjk_attn_qint *qi, size_t R, size_t D,
                                                                 const uint32_t *nvis, unsigned kbits, unsigned vbits,
                                                                 const uint8_t *K, const uint8_t *V, size_t n, float *m,
                                                                 float *l, float *acc, float *work, const size_t NR)
{
    const size_t nb = D / 32;
    float *p = work;                   /* [RBX][G] scores, then probabilities */
    float *dkf = p + RBX * G;           /* [n * nb + 16] K block scales */
    float *dvf = dkf + G * nb + 16;    /* [n * nb + 16] V block scales */
    int8_t *zero8 = (int8_t *)(void *)(dvf + G * nb + 16); /* [2 D] zero bytes: pieces of absent rows */
    const __m512 lut_m8 = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    memset(zero8, 0, 2 * D);
    size_t nall = 0;
    for (size_t r = 0; r < R; r++) nall = nvis[r] > nall ? nvis[r] : nall;
    if (!nall) return;
    (void)n;
    qblk_scales(dkf, K, nall * nb, kbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES);
    qblk_scales(dvf, V, nall * nb, vbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES);
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t rb = R - r0 < NR ? R - r0 : NR, ntm = 0;
        for (size_t r = 0; r < rb; r++) ntm = nvis[r0 + r] > ntm ? nvis[r0 + r] : ntm;
        if (!ntm) continue;
        const int8_t *hi[RBX], *lo[RBX];
        const int32_t *corr[RBX];
        float bs[RBX][16], sc[RBX];
        for (size_t r = 0; r < NR; r++) {
            const int live = r < rb;
            hi[r] = live ? qi->hi + (r0 + r) * D : zero8;
            lo[r] = live ? qi->lo + (r0 + r) * D : zero8;
            corr[r] = live ? qi->corr8 + (r0 + r) * (D / 4) : (const int32_t *)(const void *)(zero8 + D);
            sc[r] = live ? qi->scale[r0 + r] : 0.0f;
            for (size_t b = 0; b < 16; b++) bs[r][b] = live && b < nb ? qi->bsum[(r0 + r) * nb + b] : 0.0f;
        }
        if (kbits == 8) qblk_scores(p, K, ntm, D, dkf, hi, lo, corr, bs, sc, 8, NR);
        else qblk_scores(p, K, ntm, D, dkf, hi, lo, corr, bs, sc, 4, NR);
        float fct[RBX] = {1, 1, 1, 1, 1, 1, 1, 1};
        for (size_t r = 0; r < NR; r++) {
            if (r < rb && nvis[r0 + r]) fct[r] = softmax_row(p + r * G, nvis[r0 + r], &m[r0 + r], &l[r0 + r]);
            else memset(p + r * G, 0, G * sizeof(float));
        }
        if (vbits == 8) { V_ACCUM(LOADX2_Q8V, TB) }
        else { V_ACCUM(LOADX2_Q4V, TB) }
    }
}
#undef POST
#undef PRE

static void chunk_qblk_avx512(const sjk_attn_qint *qi, size_t R, size_t D, const uint32_t *nvis,
                              unsigned kbits, unsigned vbits, const uint8_t *K, const uint8_t *V, size_t n,
                              float *m, float *l, float *acc, float *work)
{
    if (rows_per_block(R) == RBX) chunk_qblk_nr(qi, R, D, nvis, kbits, vbits, K, V, n, m, l, acc, work, RBX);
    else chunk_qblk_nr(qi, R, D, nvis, kbits, vbits, K, V, n, m, l, acc, work, RB);
}

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
    "avx512", chunk_f32_avx512, chunk_f32_many_avx512, chunk_f16_avx512, chunk_tq6_avx512, chunk_rec_avx512, sjk_attn_unpack_row_avx2,
    f16_to_f32_avx512, 1, chunk_qblk_avx512, chunk_rec_q16_avx512,
};
