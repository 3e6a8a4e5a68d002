/* attn_avx2.c — AVX2/FMA/F16C twins of the attention chunk kernels (attn_kernels.h).
 *
 * Shape: rows are taken SJK_ATTN_RB (4) at a time so that the query heads sharing a KV
 * head (GQA) and the rows of a prefill reuse every key and value load. Scores are
 * computed into work[], the online-softmax update runs 8 lanes at a time with a
 * polynomial exp (relative error < 2e-7 on the range used), and values accumulate 16
 * channels x 4 rows in registers. Tested against attn_ref.c. Many rows (prefill) go
 * to chunk_f32_many (blocked matrix products; attn_avx512.c explains the layout).
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attention/attn_kernels.h"

#define RB SJK_ATTN_RB
#define G SJK_GROUP

/* exp(x) for x <= 0 (scores minus the running max); x < -87 gives ~0. Cephes expf. */
static inline __m256 exp256(__m256 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500E-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
    __m256 x2 = _mm256_mul_ps(x, x);
    y = _mm256_fmadd_ps(y, x2, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float hmax256(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Softmax update of one row: s[0..nv) scores (s padded to a multiple of 8 with
 * anything); afterwards s[t] = p[t] for t < nv and 0 up to G. Returns the
 * factor for the old state. */
static float softmax_row(float *s, size_t nv, float *m, float *l)
{
    size_t nv8 = (nv + 7) & ~(size_t)7;
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (size_t t = 0; t < nv8; t += 8) {
        __m256 mask = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(nv - t)), lane));
        vmx = _mm256_max_ps(vmx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_loadu_ps(s + t), mask));
    }
    float mx = hmax256(vmx);
    float m_new = *m > mx ? *m : mx;
    float f = *m == -INFINITY ? 0.0f : expf(*m - m_new);
    __m256 vm = _mm256_set1_ps(m_new), sum = _mm256_setzero_ps();
    for (size_t t = 0; t < nv8; t += 8) {
        __m256 mask = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(nv - t)), lane));
        __m256 p = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_loadu_ps(s + t), vm)), mask);
        _mm256_storeu_ps(s + t, p);
        sum = _mm256_add_ps(sum, p);
    }
    for (size_t t = nv8; t < G; t++) s[t] = 0;
    *l = *l * f + hsum256(sum);
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
        __m256 vf = _mm256_set1_ps(fct[r]);                                                \
        for (size_t d = 0; d < D; d += 8)                                                  \
            _mm256_storeu_ps(a + d, _mm256_fmadd_ps(_mm256_loadu_ps(a + d), vf, PRE(r, d))); \
    }                                                                                      \
    for (size_t tb = 0; tb < ntm; tb += TB) {                                              \
        size_t te = tb + TB < ntm ? tb + TB : ntm;                                         \
        for (size_t d0 = 0; d0 < D; d0 += 16) {                                            \
            __m256 a0[RB], a1[RB];                                                         \
            _Pragma("GCC unroll 4")                                                        \
            for (size_t r = 0; r < RB; r++) { a0[r] = _mm256_setzero_ps(); a1[r] = _mm256_setzero_ps(); } \
            for (size_t t = tb; t < te; t++) {                                             \
                __m256 v0 = LOAD8(t, d0), v1 = LOAD8(t, d0 + 8);                           \
                _Pragma("GCC unroll 4")                                                    \
                for (size_t r = 0; r < RB; r++) {                                          \
                    __m256 pw = _mm256_broadcast_ss(&p[r * G + t]);                        \
                    a0[r] = _mm256_fmadd_ps(pw, v0, a0[r]);                                \
                    a1[r] = _mm256_fmadd_ps(pw, v1, a1[r]);                                \
                }                                                                          \
            }                                                                              \
            for (size_t r = 0; r < rb; r++) {                                              \
                if (!nvis[r0 + r]) continue;                                               \
                float *a = acc + (r0 + r) * D + d0;                                        \
                _mm256_storeu_ps(a, _mm256_add_ps(_mm256_loadu_ps(a), POST(a0[r], d0)));   \
                _mm256_storeu_ps(a + 8, _mm256_add_ps(_mm256_loadu_ps(a + 8), POST(a1[r], d0 + 8))); \
            }                                                                              \
        }                                                                                  \
    }

#define LOAD_F32(t, d) _mm256_loadu_ps(V + (t) * D + (d))
#define LOAD_F16(t, d) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(V + (t) * D + (d))))
#define LOAD_U8(t, d) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(vc + (t) * D + (d)))))
/* 8 channels d..d+7 (d % 8 == 0) of a 4-bit V payload row: bytes d%16 .. d%16+7 of
 * unit d/32, low nibbles for d%32 < 16, high nibbles otherwise. */
#define LOAD_V4(t, d) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_and_si128(_mm_srl_epi16(         \
    _mm_loadl_epi64((const __m128i *)(const void *)(vp + (t) * (D / 2) + ((d) / 32) * 16 + (d) % 16)), \
    _mm_cvtsi32_si128((int)(((d) % 32) / 16) * 4)), _mm_set1_epi8(0x0F))))
#define POST_NONE(a, d) (a)
#define PRE_NONE(r, d) _mm256_setzero_ps()

/* Scores of rows [r0, r0+rb) against keys [0, ntm) for fp32 / fp16 keys. */
#define SCORES_DOT(LOADK)                                                                  \
    for (size_t t = 0; t < ntm; t++) {                                                     \
        __m256 s0[RB], s1[RB];                                                             \
        _Pragma("GCC unroll 4")                                                            \
        for (size_t r = 0; r < RB; r++) { s0[r] = _mm256_setzero_ps(); s1[r] = _mm256_setzero_ps(); } \
        for (size_t d = 0; d < D; d += 16) {                                               \
            __m256 kv0 = LOADK(t, d), kv1 = LOADK(t, d + 8);                               \
            _Pragma("GCC unroll 4")                                                        \
            for (size_t r = 0; r < RB; r++) {                                              \
                s0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(qrow[r] + d), kv0, s0[r]);         \
                s1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(qrow[r] + d + 8), kv1, s1[r]);     \
            }                                                                              \
        }                                                                                  \
        for (size_t r = 0; r < RB; r++) p[r * G + t] = hsum256(_mm256_add_ps(s0[r], s1[r])); \
    }

#define LOADK_F32(t, d) _mm256_loadu_ps(K + (t) * D + (d))
#define LOADK_F16(t, d) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(K + (t) * D + (d))))

/* Rows are processed RB at a time with every per-row loop of compile-time length RB (so
 * accumulators stay in registers); a short last block reads a zero query row. Declares
 * rb (rows in the block), ntm (keys the block sees) and qrow[RB]. */
#define ROW_SETUP()                                                                        \
    size_t rb = R - r0 < RB ? R - r0 : RB, ntm = 0;                                        \
    for (size_t r = 0; r < rb; r++) ntm = nvis[r0 + r] > ntm ? nvis[r0 + r] : ntm;         \
    const float *qrow[RB];                                                                 \
    for (size_t r = 0; r < RB; r++) qrow[r] = r < rb ? q + (r0 + r) * D : zero;

#define CHUNK_BODY(LOADK, LOADV)                                                           \
    float *p = work; /* [RB][G] scores, then probabilities */                               \
    float *zero = work + RB * G + RB * D; /* [D] zeros */                                   \
    memset(zero, 0, D * sizeof(float));                                                    \
    for (size_t r0 = 0; r0 < R; r0 += RB) {                                                \
        ROW_SETUP()                                                                        \
        if (!ntm) continue; /* no row of the block sees a key of this chunk */             \
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
static void chunk_f32_avx2(const float *q, size_t R, size_t D, const uint32_t *nvis,
                           const float *K, const float *V, size_t n,
                           float *m, float *l, float *acc, float *work)
{
    (void)n;
    CHUNK_BODY(LOADK_F32, LOAD_F32)
}

static void chunk_f16_avx2(const float *q, size_t R, size_t D, const uint32_t *nvis,
                           const uint16_t *K, const uint16_t *V, size_t n,
                           float *m, float *l, float *acc, float *work)
{
    (void)n;
    CHUNK_BODY(LOADK_F16, LOAD_F16)
}
#undef POST
#undef PRE

/* ---- many query rows (prefill): chunk_f32_many ---------------------------------------
 * The layout of attn_avx512.c's chunk_f32_many (read its notes) in 8 lanes and 16
 * registers: queries transposed to qT [D][rp] (8x8 register transposes, rp = rows
 * rounded up to 8), score tiles of 4 keys x 16 rows (8 accumulators; 8 keys x 8 rows
 * for an odd last 8), the online softmax across 8 rows per vector, values in tiles of
 * 4 rows x 16 channels. */
#define MRB SJK_ATTN_MANY_RB
_Static_assert(MRB == 32 && G % 8 == 0, "chunk_f32_many: row blocks of 32, score tiles of 4 or 8 keys");

/* x[i] lane j <- x[j] lane i, 8x8. */
static inline void transpose8x8(__m256 x[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(x[i], x[i + 1]);     /* a0 b0 a1 b1 | a4 b4 a5 b5 */
        t[i + 1] = _mm256_unpackhi_ps(x[i], x[i + 1]); /* a2 b2 a3 b3 | a6 b6 a7 b7 */
    }
    for (int g = 0; g < 2; g++) { /* rows 4g..4g+3: u[4g + c] holds column c (c + 4 high) */
        u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int c = 0; c < 4; c++) {
        x[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        x[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

/* Scores of keys [0, nk) (nk a multiple of KT) against RZ * 8 columns of qT from c0. */
#define MANY_SCORES(RZ, KT, c0)                                                            \
    for (size_t t0 = 0; t0 < nk; t0 += (KT)) {                                             \
        const float *kr[KT];                                                               \
        for (size_t j = 0; j < (KT); j++) kr[j] = K + (t0 + j < ntm ? t0 + j : ntm - 1) * D; \
        __m256 a[KT][RZ];                                                                  \
        _Pragma("GCC unroll 8")                                                            \
        for (size_t j = 0; j < (KT); j++)                                                  \
            _Pragma("GCC unroll 2")                                                        \
            for (size_t z = 0; z < (RZ); z++) a[j][z] = _mm256_setzero_ps();               \
        for (size_t d = 0; d < D; d++) {                                                   \
            __m256 qv[RZ];                                                                 \
            _Pragma("GCC unroll 2")                                                        \
            for (size_t z = 0; z < (RZ); z++) qv[z] = _mm256_loadu_ps(qT + d * rp + (c0) + 8 * z); \
            _Pragma("GCC unroll 8")                                                        \
            for (size_t j = 0; j < (KT); j++) {                                            \
                const __m256 kb = _mm256_broadcast_ss(kr[j] + d);                          \
                _Pragma("GCC unroll 2")                                                    \
                for (size_t z = 0; z < (RZ); z++) a[j][z] = _mm256_fmadd_ps(qv[z], kb, a[j][z]); \
            }                                                                              \
        }                                                                                  \
        _Pragma("GCC unroll 8")                                                            \
        for (size_t j = 0; j < (KT); j++)                                                  \
            _Pragma("GCC unroll 2")                                                        \
            for (size_t z = 0; z < (RZ); z++) _mm256_storeu_ps(s + (t0 + j) * rp + (c0) + 8 * z, a[j][z]); \
    }

static void chunk_f32_many_avx2(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                const float *K, const float *V, size_t n,
                                float *m, float *l, float *acc, float *work)
{
    float *qT = work;             /* [D][rp] */
    float *s = qT + D * MRB;      /* [G][rp] scores, then probabilities */
    float *fct = s + G * MRB;     /* [MRB] factors for the old state */
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    (void)n;
    for (size_t b0 = 0; b0 < R; b0 += MRB) {
        const size_t rb = R - b0 < MRB ? R - b0 : MRB, rp = (rb + 7) & ~(size_t)7;
        const uint32_t *nv = nvis + b0;
        size_t ntm = 0;
        for (size_t r = 0; r < rb; r++) ntm = nv[r] > ntm ? nv[r] : ntm;
        if (!ntm) continue;
        for (size_t g = 0; g < rp; g += 8)
            for (size_t d0 = 0; d0 < D; d0 += 8) {
                __m256 x[8];
                for (size_t i = 0; i < 8; i++)
                    x[i] = g + i < rb ? _mm256_loadu_ps(q + (b0 + g + i) * D + d0) : _mm256_setzero_ps();
                transpose8x8(x);
                for (size_t i = 0; i < 8; i++) _mm256_storeu_ps(qT + (d0 + i) * rp + g, x[i]);
            }
        size_t nk = (ntm + 3) & ~(size_t)3;
        size_t c0 = 0;
        for (; c0 + 16 <= rp; c0 += 16) { MANY_SCORES(2, 4, c0) }
        if (c0 < rp) {
            nk = (ntm + 7) & ~(size_t)7;
            MANY_SCORES(1, 8, c0)
        }
        /* online softmax, 8 rows per vector (row b0 + g + i in lane i) */
        for (size_t g = 0; g < rp; g += 8) {
            const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            const __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(rb - g)), lane);
            const __m256i nvv = _mm256_and_si256(in, _mm256_maskload_epi32((const int *)(const void *)(nv + g), in));
            const __m256i live = _mm256_cmpgt_epi32(nvv, _mm256_setzero_si256());
            size_t ntg = 0;
            for (size_t i = g; i < g + 8 && i < rb; i++) ntg = nv[i] > ntg ? nv[i] : ntg;
            if (!ntg) continue;
            const __m256 mo = _mm256_blendv_ps(ninf, _mm256_maskload_ps(m + b0 + g, live), _mm256_castsi256_ps(live));
            __m256 mx = ninf;
            for (size_t t = 0; t < ntg; t++) {
                const __m256 k = _mm256_castsi256_ps(_mm256_cmpgt_epi32(nvv, _mm256_set1_epi32((int)t)));
                mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, _mm256_loadu_ps(s + t * rp + g), k));
            }
            const __m256 mn = _mm256_max_ps(mo, mx);
            const __m256 old = _mm256_cmp_ps(mo, ninf, _CMP_NEQ_OQ);
            const __m256 f = _mm256_and_ps(old, exp256(_mm256_sub_ps(mo, mn)));
            __m256 sum = _mm256_setzero_ps();
            for (size_t t = 0; t < ntg; t++) {
                const __m256 k = _mm256_castsi256_ps(_mm256_cmpgt_epi32(nvv, _mm256_set1_epi32((int)t)));
                const __m256 p = _mm256_and_ps(k, exp256(_mm256_sub_ps(_mm256_loadu_ps(s + t * rp + g), mn)));
                _mm256_storeu_ps(s + t * rp + g, p);
                sum = _mm256_add_ps(sum, p);
            }
            const __m256 lo = _mm256_maskload_ps(l + b0 + g, live);
            _mm256_maskstore_ps(l + b0 + g, live, _mm256_fmadd_ps(lo, f, sum));
            _mm256_maskstore_ps(m + b0 + g, live, mn);
            _mm256_storeu_ps(fct + g, f);
        }
        /* values: 4 rows x 16 channels per tile, over the keys the tile's rows see */
        for (size_t d0 = 0; d0 < D; d0 += 16)
            for (size_t r0 = 0; r0 < rb; r0 += 4) {
                size_t nt = 0;
                for (size_t r = r0; r < r0 + 4 && r < rb; r++) nt = nv[r] > nt ? nv[r] : nt;
                if (!nt) continue;
                __m256 a[4][2];
                _Pragma("GCC unroll 4")
                for (size_t r = 0; r < 4; r++) { a[r][0] = _mm256_setzero_ps(); a[r][1] = _mm256_setzero_ps(); }
                for (size_t t = 0; t < nt; t++) {
                    const __m256 v0 = _mm256_loadu_ps(V + t * D + d0), v1 = _mm256_loadu_ps(V + t * D + d0 + 8);
                    _Pragma("GCC unroll 4")
                    for (size_t r = 0; r < 4; r++) {
                        const __m256 pb = _mm256_broadcast_ss(s + t * rp + r0 + r);
                        a[r][0] = _mm256_fmadd_ps(pb, v0, a[r][0]);
                        a[r][1] = _mm256_fmadd_ps(pb, v1, a[r][1]);
                    }
                }
                _Pragma("GCC unroll 4")
                for (size_t r = 0; r < 4; r++) {
                    if (r0 + r >= rb || !nv[r0 + r]) continue;
                    float *ad = acc + (b0 + r0 + r) * D + d0;
                    const __m256 f = _mm256_set1_ps(fct[r0 + r]);
                    _mm256_storeu_ps(ad, _mm256_fmadd_ps(_mm256_loadu_ps(ad), f, a[r][0]));
                    _mm256_storeu_ps(ad + 8, _mm256_fmadd_ps(_mm256_loadu_ps(ad + 8), f, a[r][1]));
                }
            }
    }
}
#undef MANY_SCORES
#undef MRB

/* Record chunk: scores by channel rows of codes (16 tokens x 4 rows in registers),
 * values by token rows of codes; scales folded as in attn_kernels.h. */
#define POST(a, d) _mm256_mul_ps(_mm256_loadu_ps(rc->vch + (d)), (a))
#define PRE(r, d) _mm256_mul_ps(_mm256_loadu_ps(rc->vch + (d)), _mm256_set1_ps(zz[r]))
static void chunk_rec_avx2(const float *q, size_t R, size_t D, const uint32_t *nvis,
                           const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
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
            __m256 z = _mm256_setzero_ps();
            for (size_t d = 0; d < D; d += 8) {
                __m256 qv = _mm256_loadu_ps(qr + d);
                _mm256_storeu_ps(qs + r * D + d, _mm256_mul_ps(qv, _mm256_loadu_ps(rc->kscale + d)));
                z = _mm256_fmadd_ps(qv, _mm256_loadu_ps(rc->kzero + d), z);
            }
            cz[r] = hsum256(z);
        }
        for (size_t r = rb; r < RB; r++) memset(qs + r * D, 0, D * sizeof(float));
        size_t ntm16 = (ntm + 15) & ~(size_t)15;
        for (size_t t0 = 0; t0 < ntm16; t0 += 16) {
            __m256 s0[RB], s1[RB];
            _Pragma("GCC unroll 4")
            for (size_t r = 0; r < RB; r++) { s0[r] = _mm256_setzero_ps(); s1[r] = _mm256_setzero_ps(); }
            /* 16 tokens of one channel: unpacked bytes, or one nibble of a 16-byte unit */
            const uint8_t *kb = kc ? kc + t0 : rc->kp + (t0 / 32) * 16;
            const size_t kstride = kc ? G : G / 2;
            const __m128i kshift = _mm_cvtsi32_si128(kc ? 0 : (int)(t0 % 32) / 4);
            const __m128i kmask = _mm_set1_epi8(kc ? (char)0xFF : 0x0F);
            for (size_t d = 0; d < D; d++) {
                __m128i c16 = _mm_and_si128(_mm_srl_epi16(_mm_loadu_si128((const __m128i *)(const void *)(kb + d * kstride)), kshift), kmask);
                __m256 k0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c16));
                __m256 k1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(c16, 8)));
                _Pragma("GCC unroll 4")
                for (size_t r = 0; r < RB; r++) {
                    __m256 qb = _mm256_broadcast_ss(qs + r * D + d);
                    s0[r] = _mm256_fmadd_ps(qb, k0, s0[r]);
                    s1[r] = _mm256_fmadd_ps(qb, k1, s1[r]);
                }
            }
            __m256 kt0 = _mm256_loadu_ps(rc->ktok + t0), kt1 = _mm256_loadu_ps(rc->ktok + t0 + 8);
            for (size_t r = 0; r < RB; r++) {
                __m256 c = _mm256_set1_ps(cz[r]);
                _mm256_storeu_ps(p + r * G + t0, _mm256_mul_ps(kt0, _mm256_add_ps(s0[r], c)));
                _mm256_storeu_ps(p + r * G + t0 + 8, _mm256_mul_ps(kt1, _mm256_add_ps(s1[r], c)));
            }
        }
        for (size_t r = 0; r < RB; r++) {
            size_t nv = r < rb ? nvis[r0 + r] : 0;
            if (!nv) { memset(p + r * G, 0, G * sizeof(float)); continue; }
            fct[r] = softmax_row(p + r * G, nv, &m[r0 + r], &l[r0 + r]);
            __m256 z = _mm256_setzero_ps();
            for (size_t t = 0; t < ntm16; t += 8) {
                __m256 pv = _mm256_loadu_ps(p + r * G + t);
                z = _mm256_fmadd_ps(pv, _mm256_loadu_ps(rc->vzero + t), z);
                _mm256_storeu_ps(p + r * G + t, _mm256_mul_ps(pv, _mm256_loadu_ps(rc->vscale + t)));
            }
            zz[r] = hsum256(z);
        }
        if (vc) { V_ACCUM(LOAD_U8) }
        else { V_ACCUM(LOAD_V4) }
    }
}
#undef POST
#undef PRE

void sjk_attn_unpack_row_avx2(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits);
void sjk_attn_unpack_row_avx2(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits)
{
    const __m128i m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(0x03);
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

static void f16_to_f32_avx2(float *dst, const uint8_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i))));
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        dst[i] = _cvtsh_ss(h);
    }
}

const sjk_attn_kernels sjk_attn_kernels_table_avx2 = {
    "avx2", chunk_f32_avx2, chunk_f32_many_avx2, chunk_f16_avx2, NULL /* tq6_0 rows: decoded by the caller */, chunk_rec_avx2, sjk_attn_unpack_row_avx2, f16_to_f32_avx2,
    0 /* trellis records: decoded by the caller */,
    NULL /* ggml block rows: decoded by the caller */,
    NULL /* 4-bit records by integer dot products: chunk_rec scores them in fp32 */,
};
