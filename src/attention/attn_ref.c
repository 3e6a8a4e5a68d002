/* attn_ref.c — the portable scalar reference of the attention chunk kernels
 * (attn_kernels.h), and the run-time choice among the kernel tables. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "common/cpu.h"
#include "codec/format.h"
#include "codec/trellis.h"
#include "common/fp16.h"
#include "common/util.h"

/* Online-softmax update of one row from scores s[0..nv): returns the factor that scales
 * the old state and leaves p[t] = exp(s[t] − m_new) in s. */
static float softmax_update(float *s, size_t nv, float *m, float *l)
{
    float mx = s[0];
    for (size_t t = 1; t < nv; t++) mx = s[t] > mx ? s[t] : mx;
    float m_new = *m > mx ? *m : mx;
    float f = *m == -INFINITY ? 0.0f : expf(*m - m_new);
    float sum = 0;
    for (size_t t = 0; t < nv; t++) {
        s[t] = expf(s[t] - m_new);
        sum += s[t];
    }
    *l = *l * f + sum;
    *m = m_new;
    return f;
}

/* Value i of a row of fp32 (f16 = 0) or fp16 (f16 = 1) values. */
static inline float row_val(const void *row, size_t i, int f16)
{
    return f16 ? sjk_fp16_to_f32(((const uint16_t *)row)[i]) : ((const float *)row)[i];
}

/* Dot products with 8 interleaved partial sums (the order of the 8-lane SIMD kernels),
 * which also keeps the fp32 rounding error of long rows small. */
static float dot_row(const float *a, const void *b, size_t n, int f16)
{
    float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) p[i % 8] += a[i] * row_val(b, i, f16);
    return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
}

static float dot_f32(const float *a, const float *b, size_t n) { return dot_row(a, b, n, 0); }

/* fp32 or fp16 rows K, V [n][D] (elem: bytes of one value). */
static void chunk_rows_ref(const float *q, size_t R, size_t D, const uint32_t *nvis, const void *K, const void *V,
                           int f16, float *m, float *l, float *acc, float *work)
{
    const size_t elem = f16 ? 2 : 4;
    float *s = work;
    for (size_t r = 0; r < R; r++) {
        size_t nv = nvis[r];
        if (!nv) continue;
        const float *qr = q + r * D;
        for (size_t t = 0; t < nv; t++) s[t] = dot_row(qr, (const uint8_t *)K + t * D * elem, D, f16);
        float f = softmax_update(s, nv, &m[r], &l[r]);
        float *a = acc + r * D;
        for (size_t i = 0; i < D; i++) a[i] *= f;
        for (size_t t = 0; t < nv; t++)
            for (size_t i = 0; i < D; i++) a[i] += s[t] * row_val((const uint8_t *)V + t * D * elem, i, f16);
    }
}

static void chunk_f32_ref(const float *q, size_t R, size_t D, const uint32_t *nvis,
                          const float *K, const float *V, size_t n,
                          float *m, float *l, float *acc, float *work)
{
    (void)n;
    chunk_rows_ref(q, R, D, nvis, K, V, 0, m, l, acc, work);
}

static void chunk_f16_ref(const float *q, size_t R, size_t D, const uint32_t *nvis,
                          const uint16_t *K, const uint16_t *V, size_t n,
                          float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes)
{
    (void)n;
    (void)pf; /* a prefetch hint: nothing to do here */
    (void)pf_nbytes;
    chunk_rows_ref(q, R, D, nvis, K, V, 1, m, l, acc, work);
}

/* A record's K scales folded into the query row qr: qs[d] = qr[d] · Kscale[d]; returns
 * qr · Kzero. */
static float rec_kfold_ref(float *qs, const float *qr, const sjk_attn_rec *rc, size_t D)
{
    for (size_t d = 0; d < D; d++) qs[d] = qr[d] * rc->kscale[d];
    return dot_f32(qr, rc->kzero, D);
}

/* A record's V scales folded into the probabilities p[0..nv): returns Σ p[t] · Vzero[t]
 * (before the scaling), then p[t] *= Vscale[t]. */
static float rec_vfold_ref(float *p, size_t nv, const sjk_attn_rec *rc)
{
    float z = 0;
    for (size_t t = 0; t < nv; t++) {
        z += p[t] * rc->vzero[t];
        p[t] *= rc->vscale[t];
    }
    return z;
}

/* The code values of trellis channel d (one token-axis sequence): seq[t] = cb[w(d, t)]. */
static void trellis_seq_ref(float *seq, const float *cb, unsigned k, const uint8_t *payload, size_t d)
{
    const size_t G = SJK_GROUP;
    uint16_t w[SJK_GROUP];
    sjk_trellis_windows(w, payload + d / 16 * (G * 2 * k), (unsigned)(d % 16), G, k, SJK_TRELLIS_TAILBITE);
    for (size_t t = 0; t < G; t++) seq[t] = cb[w[t]];
}

/* A trellis record: the same folding as chunk_rec_ref with code values C[w] read
 * sequence by sequence (channel d's 128 tokens) from the packed payloads. */
/* The softmax update of one row from its scores s[0..nv) and the values of tq6_0_stage
 * rows V folded into a[D] (x: [D] scratch). */
static void tq6_values_ref(float *a, float *s, size_t nv, float *m, float *l, const uint8_t *V, float *x, size_t D)
{
    const size_t row_nbytes = D / SJK_TQ_BLOCK * SJK_TQ6_0_NBYTES;
    const float f = softmax_update(s, nv, m, l);
    for (size_t i = 0; i < D; i++) a[i] *= f;
    for (size_t t = 0; t < nv; t++) {
        sjk_decode_tq6_0_stage_ref(x, V + t * row_nbytes, D);
        for (size_t i = 0; i < D; i++) a[i] += s[t] * x[i];
    }
}

/* tq6_0_stage rows: each row decoded by the format's reference decode into work, then
 * the fp32 reference's arithmetic. */
static void chunk_tq6_ref(const float *q, size_t R, size_t D, const uint32_t *nvis,
                          const uint8_t *K, const uint8_t *V, size_t n,
                          float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes)
{
    (void)pf; /* a prefetch hint: nothing to do here */
    (void)pf_nbytes;
    const size_t G = SJK_GROUP, row_nbytes = D / SJK_TQ_BLOCK * SJK_TQ6_0_NBYTES;
    float *s = work, *x = work + G;
    (void)n;
    for (size_t r = 0; r < R; r++) {
        size_t nv = nvis[r];
        if (!nv) continue;
        const float *qr = q + r * D;
        for (size_t t = 0; t < nv; t++) {
            sjk_decode_tq6_0_stage_ref(x, K + t * row_nbytes, D);
            s[t] = dot_f32(qr, x, D);
        }
        tq6_values_ref(acc + r * D, s, nv, &m[r], &l[r], V, x, D);
    }
}

/* The int16 centroids, built once per process (immutable afterwards). */
static int16_t g_tq6_c16[64];
static float g_tq6_c16_scale;
static pthread_once_t g_tq6_c16_once = PTHREAD_ONCE_INIT;

static void tq6_c16_build(void)
{
    float cmax = 0;
    for (int j = 0; j < 64; j++) cmax = fabsf(sjk_tq6_centroids[j]) > cmax ? fabsf(sjk_tq6_centroids[j]) : cmax;
    for (int j = 0; j < 64; j++) g_tq6_c16[j] = (int16_t)lrintf(sjk_tq6_centroids[j] * (8191.0f / cmax));
    g_tq6_c16_scale = cmax / 8191.0f;
}

float sjk_attn_tq6_c16(int16_t c16[64])
{
    pthread_once(&g_tq6_c16_once, tq6_c16_build);
    memcpy(c16, g_tq6_c16, sizeof g_tq6_c16);
    return g_tq6_c16_scale;
}

/* Code j (0..127) of a tq6_0 block (docs/FORMAT.md: low 4 bits in the nibbles of qs,
 * high 2 bits in qh). */
static inline unsigned tq6_code(const uint8_t *blk, size_t j)
{
    const unsigned lo = (blk[2 + j / 2] >> (4 * (j % 2))) & 15, hi = (blk[66 + j / 4] >> (2 * (j % 4))) & 3;
    return lo | hi << 4;
}

/* tq6_0_stage rows with integer key scores (chunk_tq6_q16): the row's int16 query
 * against each block's int16 centroids, exact in int64, then the block norm and the two
 * scales in fp32; values as chunk_tq6_ref. */
static void chunk_tq6_q16_ref(const float *q, size_t R, size_t D, const uint32_t *nvis,
                              const uint8_t *K, const uint8_t *V, size_t n,
                              float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes)
{
    (void)pf;
    (void)pf_nbytes;
    const size_t G = SJK_GROUP, nb = D / SJK_TQ_BLOCK, row_nbytes = nb * SJK_TQ6_0_NBYTES;
    float *s = work, *x = work + G;
    int16_t *qi = (int16_t *)(void *)(x + D); /* [D] */
    int16_t *pi = qi + D;                     /* [G] */
    int16_t c16[64];
    const float cs = sjk_attn_tq6_c16(c16);
    (void)n;
    for (size_t r = 0; r < R; r++) {
        size_t nv = nvis[r];
        if (!nv) continue;
        float qs;
        sjk_attn_q16_prep(qi, &qs, q + r * D, D);
        for (size_t t = 0; t < nv; t++) {
            float sum = 0;
            for (size_t b = 0; b < nb; b++) {
                const uint8_t *blk = K + t * row_nbytes + b * SJK_TQ6_0_NBYTES;
                int64_t dot = 0;
                for (size_t i = 0; i < SJK_TQ_BLOCK; i++) dot += (int64_t)qi[b * SJK_TQ_BLOCK + i] * c16[tq6_code(blk, i)];
                sum += sjk_fp16_to_f32(sjk_rd_u16le(blk)) * (float)dot;
            }
            s[t] = qs * cs * sum;
        }
        /* values: per block the weights p · norm as int16, exact int32 sums */
        const float f = softmax_update(s, nv, &m[r], &l[r]);
        float *a = acc + r * D;
        for (size_t i = 0; i < D; i++) a[i] *= f;
        for (size_t b = 0; b < nb; b++) {
            for (size_t t = 0; t < nv; t++)
                x[t] = s[t] * sjk_fp16_to_f32(sjk_rd_u16le(V + t * row_nbytes + b * SJK_TQ6_0_NBYTES));
            float ps;
            sjk_attn_q16_prep_l1(pi, &ps, x, nv, SJK_ATTN_TQ6_SUM_MAX);
            for (size_t i = 0; i < SJK_TQ_BLOCK; i++) {
                int32_t dot = 0; /* exact: Σ|p16| · 8191 <= 2^31 − 1 */
                for (size_t t = 0; t < nv; t++)
                    dot += (int32_t)pi[t] * c16[tq6_code(V + t * row_nbytes + b * SJK_TQ6_0_NBYTES, i)];
                a[b * SJK_TQ_BLOCK + i] += ps * cs * (float)dot;
            }
        }
    }
}

/* Channel d of a trellis record's tile over its G tokens: the trellis sequence, or for a
 * scalar tile (above 4 bits, payload NULL) its unpacked codes (K [D][G], V [G][D]). */
static void trellis_tile_ref(float *seq, const float *cb, unsigned bits, const uint8_t *payload, const uint8_t *codes,
                             size_t d, int is_v, size_t D)
{
    if (payload) {
        trellis_seq_ref(seq, cb, bits, payload, d);
        return;
    }
    for (size_t t = 0; t < SJK_GROUP; t++) seq[t] = (float)(is_v ? codes[t * D + d] : codes[d * SJK_GROUP + t]);
}

static void chunk_trellis_ref(const float *q, size_t R, size_t D, const uint32_t *nvis,
                              const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    const size_t G = SJK_GROUP;
    float *s = work, *qs = work + G, *seq = qs + D;
    for (size_t r = 0; r < R; r++) {
        size_t nv = nvis[r];
        if (!nv) continue;
        const float *qr = q + r * D;
        const float cz = rec_kfold_ref(qs, qr, rc, D);
        for (size_t t = 0; t < nv; t++) s[t] = 0;
        for (size_t d = 0; d < D; d++) {
            trellis_tile_ref(seq, rc->kcb, rc->kbits, rc->kt, rc->kc, d, 0, D);
            for (size_t t = 0; t < nv; t++) s[t] += qs[d] * seq[t];
        }
        for (size_t t = 0; t < nv; t++) s[t] = rc->ktok[t] * (s[t] + cz);
        float f = softmax_update(s, nv, &m[r], &l[r]);
        const float z = rec_vfold_ref(s, nv, rc);
        float *a = acc + r * D;
        for (size_t d = 0; d < D; d++) {
            trellis_tile_ref(seq, rc->vcb, rc->vbits, rc->vt, rc->vc, d, 1, D);
            float racc = 0;
            for (size_t t = 0; t < nv; t++) racc += s[t] * seq[t];
            a[d] = a[d] * f + rc->vch[d] * (racc + z);
        }
    }
}

void sjk_attn_q16_prep(int16_t *q16, float *scale, const float *x, size_t D)
{
    float amax = 0;
    int finite = 1;
    for (size_t i = 0; i < D; i++) {
        finite &= isfinite(x[i]) != 0;
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    }
    if (!finite) amax = NAN;
    const float s = isfinite(amax) ? amax / 32767.0f : NAN;
    const float inv = s > 0 ? 1.0f / s : 0.0f;
    *scale = s;
    for (size_t i = 0; i < D; i++) {
        float y = isfinite(amax) ? nearbyintf(x[i] * inv) : 0.0f;
        y = y > 32767 ? 32767 : y < -32767 ? -32767 : y;
        q16[i] = (int16_t)y;
    }
}

/* Records: scores in fp32 (q16 = 0) or by the integer dot products of chunk_rec_q16;
 * values in fp32 (v16 = 0) or, for 4-bit V codes, by the int16 weights of chunk_rec_v16. */
static void rec_ref(const float *q, size_t R, size_t D, const uint32_t *nvis, const sjk_attn_rec *rc,
                    float *m, float *l, float *acc, float *work, int q16, int v16)
{
    const size_t G = SJK_GROUP;
    float *s = work, *qs = work + G, *racc = qs + D;
    int16_t *qi = (int16_t *)(void *)(racc + D); /* [D] */
    int16_t *w16 = qi + D;                       /* [G] */
    for (size_t r = 0; r < R; r++) {
        size_t nv = nvis[r];
        if (!nv) continue;
        const float *qr = q + r * D;
        const float cz = rec_kfold_ref(qs, qr, rc, D);
        if (q16) {
            float sc;
            sjk_attn_q16_prep(qi, &sc, qs, D);
            for (size_t t = 0; t < nv; t++) {
                int32_t dot = 0; /* exact: |dot| <= 512 * 32767 * 127 < 2^31 (4-bit codes: < 2^28) */
                for (size_t d = 0; d < D; d++)
                    dot += qi[d] * (int32_t)(rc->kc ? rc->kc[d * G + t] : sjk_payload_get(rc->kp + d * (G / 2), G, 4, t));
                s[t] = rc->ktok[t] * (sc * (float)dot + cz);
            }
        } else {
            for (size_t t = 0; t < nv; t++) s[t] = 0;
            for (size_t d = 0; d < D; d++)
                for (size_t t = 0; t < nv; t++)
                    s[t] += qs[d] * (float)(rc->kc ? rc->kc[d * G + t] : sjk_payload_get(rc->kp + d * (G / 2), G, 4, t));
            for (size_t t = 0; t < nv; t++) s[t] = rc->ktok[t] * (s[t] + cz);
        }
        float f = softmax_update(s, nv, &m[r], &l[r]);
        const float z = rec_vfold_ref(s, nv, rc);
        if (v16) {
            float ws;
            sjk_attn_q16_prep(w16, &ws, s, nv);
            for (size_t d = 0; d < D; d++) {
                int32_t dot = 0; /* exact: |dot| <= 128 * 32767 * 255 < 2^31 (4-bit codes: < 2^26) */
                for (size_t t = 0; t < nv; t++)
                    dot += (int32_t)w16[t] * (int32_t)(rc->vc ? rc->vc[t * D + d] : sjk_payload_get(rc->vp + t * (D / 2), D, 4, d));
                racc[d] = ws * (float)dot;
            }
        } else {
            for (size_t d = 0; d < D; d++) racc[d] = 0;
            for (size_t t = 0; t < nv; t++)
                for (size_t d = 0; d < D; d++)
                    racc[d] += s[t] * (float)(rc->vc ? rc->vc[t * D + d] : sjk_payload_get(rc->vp + t * (D / 2), D, 4, d));
        }
        float *a = acc + r * D;
        for (size_t d = 0; d < D; d++) a[d] = a[d] * f + rc->vch[d] * (racc[d] + z);
    }
}

static void chunk_rec_ref(const float *q, size_t R, size_t D, const uint32_t *nvis,
                          const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    if (rc->kt || rc->vt) chunk_trellis_ref(q, R, D, nvis, rc, m, l, acc, work);
    else rec_ref(q, R, D, nvis, rc, m, l, acc, work, 0, 0);
}

static void chunk_rec_q16_ref(const float *q, size_t R, size_t D, const uint32_t *nvis,
                              const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    rec_ref(q, R, D, nvis, rc, m, l, acc, work, 1, 0);
}

static void chunk_rec_v16_ref(const float *q, size_t R, size_t D, const uint32_t *nvis,
                              const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    rec_ref(q, R, D, nvis, rc, m, l, acc, work, rc->kp != NULL || (rc->kc && rc->kbits && rc->kbits <= 7), 1);
}

/* ---- trellis records by int16 dot products (chunk_trellis_q16) ---------------------- */

static int16_t g_trq_c16[SJK_TRELLIS_CB_SETS][3][64 << SJK_TRELLIS_MAX_BITS];
static float g_trq_scale[SJK_TRELLIS_CB_SETS][3];
static pthread_once_t g_trq_once = PTHREAD_ONCE_INIT;

static void trq_c16_build(void)
{
    for (unsigned set = 0; set < SJK_TRELLIS_CB_SETS; set++)
        for (unsigned k = 2; k <= 4; k++) {
            const float *cb = sjk_trellis_codebook_of_set(set, k);
            const size_t n = (size_t)64 << k;
            float cmax = 0;
            for (size_t w = 0; w < n; w++) cmax = fabsf(cb[w]) > cmax ? fabsf(cb[w]) : cmax;
            for (size_t w = 0; w < n; w++)
                g_trq_c16[set][k - 2][w] = (int16_t)lrintf(cb[w] * ((float)SJK_ATTN_TRQ_CMAX / cmax));
            g_trq_scale[set][k - 2] = cmax / (float)SJK_ATTN_TRQ_CMAX;
        }
}

const int16_t *sjk_attn_trellis_c16_of(const float *cb, unsigned k, float *scale)
{
    const int set = sjk_trellis_codebook_set(cb, k);
    if (set < 0) return NULL;
    pthread_once(&g_trq_once, trq_c16_build);
    *scale = g_trq_scale[set][k - 2];
    return g_trq_c16[set][k - 2];
}

const int16_t *sjk_attn_trellis_c16(unsigned k, float *scale)
{
    return k < 2 || k > 4 ? NULL : sjk_attn_trellis_c16_of(sjk_trellis_codebook(k), k, scale);
}

void sjk_attn_q16_prep_l1(int16_t *q16, float *scale, const float *x, size_t n, uint32_t sum_max)
{
    float amax = 0, l1 = 0;
    int finite = 1;
    for (size_t i = 0; i < n; i++) {
        finite &= isfinite(x[i]) != 0;
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        l1 += fabsf(x[i]);
    }
    if (!finite) amax = NAN;
    float s = isfinite(amax) ? amax / 32767.0f : NAN;
    const float sl = l1 / (float)(sum_max - sum_max / 64);
    if (isfinite(amax) && sl > s) s = sl;
    const float inv = s > 0 ? 1.0f / s : 0.0f;
    *scale = s;
    for (size_t i = 0; i < n; i++) {
        float y = isfinite(amax) ? nearbyintf(x[i] * inv) : 0.0f;
        y = y > 32767 ? 32767 : y < -32767 ? -32767 : y;
        q16[i] = (int16_t)y;
    }
}

/* The int16 code values of trellis channel d: seq[t] = c16[w(d, t)]. */
static void trellis_seq16_ref(int16_t *seq, const int16_t *c16, unsigned k, const uint8_t *payload, size_t d)
{
    const size_t G = SJK_GROUP;
    uint16_t w[SJK_GROUP];
    sjk_trellis_windows(w, payload + d / 16 * (G * 2 * k), (unsigned)(d % 16), G, k, SJK_TRELLIS_TAILBITE);
    for (size_t t = 0; t < G; t++) seq[t] = c16[w[t]];
}

/* chunk_trellis_q16 (attn_kernels.h): chunk_trellis_ref's folding with both sums in
 * int32 over the int16 codebooks, weights and queries. */
static void chunk_trellis_q16_ref(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                  const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    const size_t G = SJK_GROUP;
    float ck, cv;
    const int16_t *k16 = sjk_attn_trellis_c16_of(rc->kcb, rc->kbits, &ck);
    const int16_t *v16 = sjk_attn_trellis_c16_of(rc->vcb, rc->vbits, &cv);
    if (!k16 || !v16) {
        chunk_trellis_ref(q, R, D, nvis, rc, m, l, acc, work);
        return;
    }
    float *s = work, *qs = work + G;
    int32_t *dot = (int32_t *)(void *)(qs + D);      /* [G] */
    int16_t *qi = (int16_t *)(void *)(dot + G);      /* [D] */
    int16_t *pi = qi + D, *seq = pi + G;             /* [G] [G] */
    for (size_t r = 0; r < R; r++) {
        size_t nv = nvis[r];
        if (!nv) continue;
        const float *qr = q + r * D;
        const float cz = rec_kfold_ref(qs, qr, rc, D);
        float sq;
        sjk_attn_q16_prep_l1(qi, &sq, qs, D, SJK_ATTN_TRQ_SUM_MAX);
        for (size_t t = 0; t < nv; t++) dot[t] = 0;
        for (size_t d = 0; d < D; d++) { /* exact: Σ|q16| · CMAX <= 2^31 − 1 */
            trellis_seq16_ref(seq, k16, rc->kbits, rc->kt, d);
            for (size_t t = 0; t < nv; t++) dot[t] += (int32_t)qi[d] * seq[t];
        }
        const float fk = sq * ck;
        for (size_t t = 0; t < nv; t++) s[t] = rc->ktok[t] * (fk * (float)dot[t] + cz);
        const float f = softmax_update(s, nv, &m[r], &l[r]);
        const float z = rec_vfold_ref(s, nv, rc);
        float sp;
        sjk_attn_q16_prep_l1(pi, &sp, s, nv, SJK_ATTN_TRQ_SUM_MAX);
        const float fv = sp * cv;
        float *a = acc + r * D;
        for (size_t d = 0; d < D; d++) {
            trellis_seq16_ref(seq, v16, rc->vbits, rc->vt, d);
            int32_t va = 0;
            for (size_t t = 0; t < nv; t++) va += (int32_t)pi[t] * seq[t];
            a[d] = a[d] * f + rc->vch[d] * (fv * (float)va + z);
        }
    }
}

/* ---- trellis records on the int8-grid codebooks (chunk_trellis_q8) ----------------- */

void sjk_attn_q8_pieces(int8_t *hi, int8_t *lo, float *scale, int32_t *ysum, const float *x, size_t n)
{
    float amax = 0;
    int finite = 1;
    for (size_t i = 0; i < n; i++) {
        finite &= isfinite(x[i]) != 0;
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    }
    if (!finite) amax = NAN;
    const float s = isfinite(amax) ? amax / 16256.0f : NAN;
    const float inv = s > 0 ? 1.0f / s : 0.0f;
    *scale = s;
    int32_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        float y = isfinite(amax) ? nearbyintf(x[i] * inv) : 0.0f;
        y = y > 16256 ? 16256 : y < -16256 ? -16256 : y;
        const float h = nearbyintf(y * (1.0f / 128.0f)); /* |h| <= 127 */
        hi[i] = (int8_t)h;
        lo[i] = (int8_t)(y - 128.0f * h);
        sum += (int32_t)y;
    }
    *ysum = sum;
}

/* The int8 code values of trellis channel d: seq[t] = c8[w(d, t)]. */
static void trellis_seq8_ref(int8_t *seq, const int8_t *c8, unsigned k, const uint8_t *payload, size_t d)
{
    const size_t G = SJK_GROUP;
    uint16_t w[SJK_GROUP];
    sjk_trellis_windows(w, payload + d / 16 * (G * 2 * k), (unsigned)(d % 16), G, k, SJK_TRELLIS_TAILBITE);
    for (size_t t = 0; t < G; t++) seq[t] = c8[w[t]];
}

/* chunk_trellis_q8 (attn_kernels.h): chunk_trellis_ref's folding with both sums in int32
 * over the grid tables' int8 entries and the int8 pieces of the query and the weights. */
static void chunk_trellis_q8_ref(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                 const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work)
{
    const size_t G = SJK_GROUP;
    float ck = 0, cv = 0;
    const int kmix = !rc->kt && rc->kc, vmix = !rc->vt && rc->vc; /* a scalar tile: as chunk_rec reads it */
    const int8_t *k8 = kmix ? NULL : sjk_trellis_codebook_i8(rc->kcb, rc->kbits, &ck);
    const int8_t *v8 = vmix ? NULL : sjk_trellis_codebook_i8(rc->vcb, rc->vbits, &cv);
    if ((!kmix && !k8) || (!vmix && !v8) || (kmix && vmix)) {
        (kmix && vmix ? chunk_rec_ref : chunk_trellis_q16_ref)(q, R, D, nvis, rc, m, l, acc, work);
        return;
    }
    float *s = work, *qs = work + G;
    int32_t *dot = (int32_t *)(void *)(qs + D);  /* [G] */
    int8_t *qh = (int8_t *)(void *)(dot + G);    /* [D] */
    int8_t *ql = qh + D, *ph = ql + D, *pl = ph + G, *seq = pl + G; /* [D] [G] [G] [G] */
    for (size_t r = 0; r < R; r++) {
        size_t nv = nvis[r];
        if (!nv) continue;
        const float cz = rec_kfold_ref(qs, q + r * D, rc, D);
        float sq;
        int32_t ys;
        if (kmix && rc->kbits <= 7) { /* the unpacked codes against the query as int16 */
            int16_t *qi = (int16_t *)(void *)qh; /* qh, ql: [D] int16 */
            sjk_attn_q16_prep(qi, &sq, qs, D);
            for (size_t t = 0; t < nv; t++) {
                int32_t dk = 0; /* exact: |dk| <= 512 * 32767 * 127 < 2^31 */
                for (size_t d = 0; d < D; d++) dk += (int32_t)qi[d] * rc->kc[d * G + t];
                s[t] = rc->ktok[t] * (sq * (float)dk + cz);
            }
        } else if (kmix) { /* 8-bit codes: fp32 scores */
            for (size_t t = 0; t < nv; t++) s[t] = 0;
            for (size_t d = 0; d < D; d++)
                for (size_t t = 0; t < nv; t++) s[t] += qs[d] * (float)rc->kc[d * G + t];
            for (size_t t = 0; t < nv; t++) s[t] = rc->ktok[t] * (s[t] + cz);
        } else {
            sjk_attn_q8_pieces(qh, ql, &sq, &ys, qs, D);
            for (size_t t = 0; t < nv; t++) dot[t] = 0;
            for (size_t d = 0; d < D; d++) { /* exact: |dot| <= 512 * 16256 * 127 < 2^31 */
                trellis_seq8_ref(seq, k8, rc->kbits, rc->kt, d);
                const int32_t y = 128 * (int32_t)qh[d] + ql[d];
                for (size_t t = 0; t < nv; t++) dot[t] += y * seq[t];
            }
            const float fk = sq * ck;
            for (size_t t = 0; t < nv; t++) s[t] = rc->ktok[t] * (fk * (float)dot[t] + cz);
        }
        const float f = softmax_update(s, nv, &m[r], &l[r]);
        const float z = rec_vfold_ref(s, nv, rc);
        float *a = acc + r * D;
        if (vmix) { /* fp32 sums of the unpacked codes */
            for (size_t d = 0; d < D; d++) {
                float racc = 0;
                for (size_t t = 0; t < nv; t++) racc += s[t] * (float)rc->vc[t * D + d];
                a[d] = a[d] * f + rc->vch[d] * (racc + z);
            }
            continue;
        }
        float sp;
        sjk_attn_q8_pieces(ph, pl, &sp, &ys, s, nv);
        const float fv = sp * cv;
        for (size_t d = 0; d < D; d++) {
            trellis_seq8_ref(seq, v8, rc->vbits, rc->vt, d);
            int32_t va = 0;
            for (size_t t = 0; t < nv; t++) va += (128 * (int32_t)ph[t] + pl[t]) * seq[t];
            a[d] = a[d] * f + rc->vch[d] * (fv * (float)va + z);
        }
    }
}

/* ---- ggml block rows (q8_0, q4_0) against int8 query pieces ------------------------- */

/* nearbyintf(y) for |y| < 2^22 in the default rounding mode, inline: adding 1.5 * 2^23
 * leaves no fraction bits, so the sum rounds y to the nearest integer (ties to even) and
 * the subtraction is exact (the libm call cost more than the rest of the loop). */
static inline float round_small(float y)
{
    const float M = 12582912.0f; /* 1.5 * 2^23 */
    return (y + M) - M;
}

void sjk_attn_qint_prep(sjk_attn_qint *qi, void *buf, const float *q, size_t R, size_t D)
{
    uintptr_t a = ((uintptr_t)buf + 63) & ~(uintptr_t)63;
    float *scale = (float *)a, *bsum = scale + R;
    int32_t *corr8 = (int32_t *)(void *)(bsum + R * (D / 32));
    int16_t *w16 = (int16_t *)(void *)(corr8 + R * (D / 4));
    int8_t *hi = (int8_t *)(void *)(w16 + R * D), *lo = hi + R * D;
    for (size_t r = 0; r < R; r++) {
        const float *x = q + r * D;
        float amax = 0;
        int nan = 0;
        for (size_t i = 0; i < D; i++) {
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
            nan |= isnan(x[i]);
        }
        /* a non-finite row (an infinity or a NaN: the compare above skips NaN, whose
         * pieces would be a NaN cast to int8, undefined) gets scale NaN and zero pieces,
         * so it scores NaN, as the fp32 kernels would make it */
        if (nan) amax = NAN;
        const float s = isfinite(amax) ? amax / (127.0f * 128.0f) : NAN;
        const float inv = s > 0 ? 1.0f / s : 0.0f;
        scale[r] = s;
        for (size_t i = 0; i < D; i++) {
            const float y = isfinite(amax) ? x[i] * inv : 0.0f; /* |y| <= 16256 */
            float h = round_small(y / 128.0f);
            h = h > 127 ? 127 : h < -127 ? -127 : h;
            float lw = round_small(y - 128.0f * h); /* |lw| <= 64 */
            lw = lw > 127 ? 127 : lw < -127 ? -127 : lw;
            hi[r * D + i] = (int8_t)h;
            lo[r * D + i] = (int8_t)lw;
        }
        for (size_t g = 0; g < D / 4; g++) {
            int32_t sh = 0, sl = 0;
            for (size_t i = 4 * g; i < 4 * g + 4; i++) {
                sh += hi[r * D + i];
                sl += lo[r * D + i];
            }
            corr8[r * (D / 4) + g] = -128 * sh - sl;
        }
        for (size_t k = 0; k < D; k++) {
            const size_t c = sjk_attn_qint_w16_chan(k, D);
            w16[r * D + k] = (int16_t)(128 * hi[r * D + c] + lo[r * D + c]);
        }
        for (size_t b = 0; b < D / 32; b++) {
            int32_t sum = 0;
            for (size_t i = 32 * b; i < 32 * b + 32; i++) sum += 128 * hi[r * D + i] + lo[r * D + i];
            bsum[r * (D / 32) + b] = (float)sum;
        }
    }
    qi->hi = hi;
    qi->lo = lo;
    qi->corr8 = corr8;
    qi->bsum = bsum;
    qi->scale = scale;
    qi->w16 = w16;
    qi->D = D;
}

sjk_attn_qint sjk_attn_qint_rows(const sjk_attn_qint *qi, size_t r0)
{
    sjk_attn_qint v = *qi;
    v.hi += r0 * qi->D;
    v.lo += r0 * qi->D;
    v.corr8 += r0 * (qi->D / 4);
    v.bsum += r0 * (qi->D / 32);
    v.w16 += r0 * qi->D;
    v.scale += r0;
    return v;
}

/* Code i (0..31) of a ggml block as a signed integer, and the block's scale. */
static inline int qblk_code(const uint8_t *blk, unsigned bits, size_t i)
{
    if (bits == 8) return (int8_t)blk[2 + i];
    return (int)((i < 16 ? blk[2 + i] : blk[2 + i - 16] >> 4) & 15) - 8;
}

static inline float qblk_scale(const uint8_t *blk) { return sjk_fp16_to_f32(sjk_rd_u16le(blk)); }

/* Block rows: values in fp32 (v16 = 0, chunk_qblk) or by int16 weights (v16 = 1,
 * chunk_qblk_q16: per block the weights p · d as int16, exact int32 sums). */
static void qblk_ref(const sjk_attn_qint *qi, size_t R, size_t D, const uint32_t *nvis,
                     unsigned kbits, unsigned vbits, const uint8_t *K, const uint8_t *V,
                     float *m, float *l, float *acc, float *work, int v16)
{
    const size_t nb = D / SJK_QK;
    const size_t kbn = kbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES, vbn = vbits == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES;
    float *s = work, *x = work + SJK_GROUP;
    int16_t *w16 = (int16_t *)(void *)(x + SJK_GROUP);
    for (size_t r = 0; r < R; r++) {
        size_t nv = nvis[r];
        if (!nv) continue;
        const int8_t *hi = qi->hi + r * D, *lo = qi->lo + r * D;
        for (size_t t = 0; t < nv; t++) {
            float sum = 0;
            for (size_t b = 0; b < nb; b++) {
                const uint8_t *blk = K + (t * nb + b) * kbn;
                int32_t dot = 0; /* exact: |dot| <= 32 * 128 * 16320 < 2^27 */
                for (size_t i = 0; i < SJK_QK; i++)
                    dot += qblk_code(blk, kbits, i) * (128 * hi[b * SJK_QK + i] + lo[b * SJK_QK + i]);
                sum += qblk_scale(blk) * (float)dot;
            }
            s[t] = qi->scale[r] * sum;
        }
        float f = softmax_update(s, nv, &m[r], &l[r]);
        float *a = acc + r * D;
        for (size_t i = 0; i < D; i++) a[i] *= f;
        if (v16) {
            for (size_t b = 0; b < nb; b++) {
                for (size_t t = 0; t < nv; t++) x[t] = s[t] * qblk_scale(V + (t * nb + b) * vbn);
                float ws;
                sjk_attn_q16_prep(w16, &ws, x, nv);
                for (size_t i = 0; i < SJK_QK; i++) {
                    int32_t dot = 0; /* exact: |dot| <= 128 * 32767 * 128 < 2^30 (q4_0: |code| <= 8) */
                    for (size_t t = 0; t < nv; t++) dot += (int32_t)w16[t] * qblk_code(V + (t * nb + b) * vbn, vbits, i);
                    a[b * SJK_QK + i] += ws * (float)dot;
                }
            }
            continue;
        }
        for (size_t t = 0; t < nv; t++)
            for (size_t b = 0; b < nb; b++) {
                const uint8_t *blk = V + (t * nb + b) * vbn;
                const float w = s[t] * qblk_scale(blk);
                for (size_t i = 0; i < SJK_QK; i++) a[b * SJK_QK + i] += w * (float)qblk_code(blk, vbits, i);
            }
    }
}

static void chunk_qblk_ref(const sjk_attn_qint *qi, size_t R, size_t D, const uint32_t *nvis,
                           unsigned kbits, unsigned vbits, const uint8_t *K, const uint8_t *V, size_t n,
                           float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes)
{
    (void)pf; /* a prefetch hint: nothing to do here */
    (void)pf_nbytes;
    (void)n;
    qblk_ref(qi, R, D, nvis, kbits, vbits, K, V, m, l, acc, work, 0);
}

static void chunk_qblk_q16_ref(const sjk_attn_qint *qi, size_t R, size_t D, const uint32_t *nvis,
                               unsigned kbits, unsigned vbits, const uint8_t *K, const uint8_t *V, size_t n,
                               float *m, float *l, float *acc, float *work, const uint8_t *pf, size_t pf_nbytes)
{
    (void)pf;
    (void)pf_nbytes;
    (void)n;
    qblk_ref(qi, R, D, nvis, kbits, vbits, K, V, m, l, acc, work, 1);
}

void sjk_attn_unpack_row_ref(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits)
{
    for (size_t i = 0; i < n; i++) codes[i] = (uint8_t)sjk_payload_get(row, n, bits, i);
}

static void f16_to_f32_ref(float *dst, const uint8_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = sjk_fp16_to_f32(sjk_rd_u16le(src + 2 * i));
}

const sjk_attn_kernels sjk_attn_kernels_table_ref = {
    "ref", chunk_f32_ref, chunk_f32_ref /* many rows: the same reference */, chunk_f16_ref, chunk_tq6_ref,
    chunk_rec_ref, sjk_attn_unpack_row_ref, f16_to_f32_ref, 1, chunk_qblk_ref, chunk_rec_q16_ref, chunk_tq6_q16_ref,
    sjk_attn_qint_prep, chunk_trellis_q16_ref, chunk_qblk_q16_ref, chunk_trellis_q8_ref,
    NULL /* unpack_rows: unpack_row row by row */, chunk_rec_v16_ref, 1 /* trellis_mixed */,
};

const sjk_attn_kernels *sjk_attn_kernels_ref(void) { return &sjk_attn_kernels_table_ref; }

/* The x86 tables exist only in x86 builds; each is offered when the CPU has its feature. */
#if defined(__x86_64__)
#define X86_TABLE(t) (&(t))
#else
#define X86_TABLE(t) NULL
#endif

static const sjk_attn_kernels *table_if(unsigned feature, const sjk_attn_kernels *k)
{
    return k && (sjk_cpu_features() & feature) ? k : NULL;
}

const sjk_attn_kernels *sjk_attn_kernels_avx2(void) { return table_if(SJK_CPU_AVX2, X86_TABLE(sjk_attn_kernels_table_avx2)); }

const sjk_attn_kernels *sjk_attn_kernels_avx512(void)
{
    return table_if(SJK_CPU_AVX512, X86_TABLE(sjk_attn_kernels_table_avx512));
}

static const sjk_attn_kernels *g_kernels; /* written once under g_once */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const sjk_attn_kernels *k = sjk_attn_kernels_avx512();
    if (!k) k = sjk_attn_kernels_avx2();
    if (!k) k = &sjk_attn_kernels_table_ref;
    g_kernels = k;
}

const sjk_attn_kernels *sjk_attn_kernels_get(void)
{
    pthread_once(&g_once, choose);
    return g_kernels;
}
