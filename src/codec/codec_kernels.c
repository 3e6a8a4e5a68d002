/* codec_kernels.c — scalar references of the seal and decode inner loops, and the
 * run-time choice of path. The orders of operations here are the contract the SIMD twins
 * in src/codec/codec_kernels_*.c reproduce bit for bit (codec_kernels.h). */
#include <math.h>
#include <pthread.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#include "codec/codec_kernels.h"
#include "codec/record_layout.h"
#include "common/cpu.h"

static void col_sweep_ref(const float *M, size_t R, size_t C, const float *rs, float *sum, float *sq)
{
    for (size_t j = 0; j < C; j++) sum[j] = 0.0f, sq[j] = 0.0f;
    for (size_t i = 0; i < R; i++) {
        const float *m = M + i * C;
        for (size_t j = 0; j < C; j++) {
            float d = m[j] * rs[i] - M[j] * rs[0];
            sum[j] += d;
            sq[j] += d * d;
        }
    }
}

/* The fixed reduction tree of 16 partial sums. */
static inline float tree16(float p[16])
{
    for (int w = 8; w >= 1; w >>= 1)
        for (int l = 0; l < w; l++) p[l] += p[l + w];
    return p[0];
}

static void row_sweep_ref(const float *M, size_t R, size_t C, const float *cs, float *sum, float *sq)
{
    for (size_t i = 0; i < R; i++) {
        const float *m = M + i * C;
        const float x0 = m[0] * cs[0];
        float p[16] = {0}, q[16] = {0};
        for (size_t j = 0; j < C; j += 16)
            for (int l = 0; l < 16; l++) {
                float d = m[j + l] * cs[j + l] - x0;
                p[l] += d;
                q[l] += d * d;
            }
        sum[i] = tree16(p);
        sq[i] = tree16(q);
    }
}

static void stds_ref(const float *sum, const float *sq, size_t n, float cnt, const float *f, float *out)
{
    const float cm1 = cnt - 1.0f;
    for (size_t j = 0; j < n; j++) {
        float v = (sq[j] - (sum[j] * sum[j]) / cnt) / cm1;
        v = v > 0.0f ? v : 0.0f;
        float s = sqrtf(v);
        out[j] = f ? f[j] * s : s;
    }
}

/* log: x = m * 2^e with m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(s), s = (m-1)/(m+1),
 * by its odd series to s^9; the two-part ln 2 keeps e * ln 2 exact. Every step is one
 * IEEE operation in a fixed order, so the SIMD twins reproduce it bit for bit. */
#define SJK_LN2_HI 0.693145751953125f
#define SJK_LN2_LO 1.428606765330187e-06f
float sjk_fast_logf(float x)
{
    uint32_t u = sjk_f32_bits(x);
    int32_t e = (int32_t)((u >> 23) & 0xFFu) - 127;
    float m = sjk_bits_f32((u & 0x7FFFFFu) | 0x3F800000u);
    if (m > 1.41421356f) {
        m = m * 0.5f;
        e = e + 1;
    }
    float s = (m - 1.0f) / (m + 1.0f);
    float z = s * s;
    float p = 0.11111111f;
    p = p * z + 0.14285715f;
    p = p * z + 0.2f;
    p = p * z + 0.33333334f;
    p = p * z + 1.0f;
    float lm = (s + s) * p;
    float fe = (float)e;
    return (lm + fe * SJK_LN2_LO) + fe * SJK_LN2_HI;
}

/* exp: y = n ln 2 + r, |r| <= ln2/2; exp(r) by its Taylor series to r^7; times 2^n. */
float sjk_fast_expf(float y)
{
    float n = rintf(y * 1.44269504f);
    float r = (y - n * SJK_LN2_HI) - n * SJK_LN2_LO;
    float p = 1.98412698e-4f;
    p = p * r + 1.38888889e-3f;
    p = p * r + 8.33333333e-3f;
    p = p * r + 4.16666667e-2f;
    p = p * r + 0.166666667f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return p * sjk_bits_f32((uint32_t)((int32_t)n + 127) << 23);
}

static void update_scales_ref(float *a, float *inv, const float *st, size_t n, float std_lo,
                              float std_hi, float log_lo, float log_hi, int skip)
{
    for (size_t j = 0; j < n; j++) {
        if (!(skip && st[j] == 0.0f)) {
            float s = st[j] < std_lo ? std_lo : (st[j] > std_hi ? std_hi : st[j]);
            float t = a[j] + sjk_fast_logf(s);
            a[j] = t < log_lo ? log_lo : (t > log_hi ? log_hi : t);
        }
        inv[j] = sjk_fast_expf(-a[j]);
    }
}

static inline float sanitize(float x)
{
    uint32_t e = sjk_f32_bits(x) & 0x7F800000u;
    if (e == 0x7F800000u || e == 0) return 0.0f; /* NaN, Inf, zero, denormal -> +0 */
    return x > 65504.0f ? 65504.0f : (x < -65504.0f ? -65504.0f : x);
}

static void load_tiles_ref(float *kt, float *vt, const float *k, const float *v, size_t D)
{
    const size_t G = SJK_GROUP;
    for (size_t i = 0; v && i < G * D; i++) vt[i] = sanitize(v[i]);
    for (size_t t0 = 0; k && t0 < G; t0 += 16)
        for (size_t d0 = 0; d0 < D; d0 += 16)
            for (size_t t = t0; t < t0 + 16; t++)
                for (size_t d = d0; d < d0 + 16; d++) kt[d * G + t] = sanitize(k[t * D + d]);
}

static void scale_row_ref(const float *m, size_t n, float ir, const float *ic, float *b)
{
    for (size_t j = 0; j < n; j++) b[j] = (m[j] * ic[j]) * ir;
}

static void rtn_row_ref(const float *m, size_t n, float ir, const float *ic, unsigned qmax,
                        uint8_t *codes, float *lo_out, float *step_out)
{
    float lo = (m[0] * ic[0]) * ir, hi = lo;
    for (size_t j = 1; j < n; j++) {
        float b = (m[j] * ic[j]) * ir;
        lo = b < lo ? b : lo;
        hi = b > hi ? b : hi;
    }
    lo += 0.0f; /* -0 -> +0: every path stores the same bytes */
    float step = (hi - lo) / (float)qmax;
    if (!(step >= 1e-10f)) step = 1e-10f;
    const float fq = (float)qmax;
    for (size_t j = 0; j < n; j++) {
        float b = (m[j] * ic[j]) * ir;
        float q = rintf((b - lo) / step);
        q = q < 0.0f ? 0.0f : (q > fq ? fq : q);
        codes[j] = (uint8_t)q;
    }
    *lo_out = lo;
    *step_out = step;
}

static void decode_k16_ref(float *k, size_t D, const uint8_t *payload, size_t row_nbytes,
                           unsigned bits, const float *scale, const float *zero, const float *tok)
{
    for (size_t c = 0; c < 16; c++) {
        const uint8_t *row = payload + c * row_nbytes;
        for (size_t t = 0; t < SJK_GROUP; t++) {
            float q = (float)sjk_payload_get(row, SJK_GROUP, bits, t);
            k[t * D + c] = (q * scale[c] + zero[c]) * tok[t];
        }
    }
}

static void decode_v_row_ref(float *v, size_t n, const uint8_t *row, unsigned bits, float scale,
                             float zero, const float *ch)
{
    for (size_t d = 0; d < n; d++) {
        float q = (float)sjk_payload_get(row, n, bits, d);
        v[d] = (q * scale + zero) * ch[d];
    }
}

const sjk_codec_kernels sjk_codec_kernels_table_ref = {
    "ref", col_sweep_ref, row_sweep_ref, stds_ref, update_scales_ref, load_tiles_ref, scale_row_ref, rtn_row_ref, decode_k16_ref, decode_v_row_ref,
};

const sjk_codec_kernels *sjk_codec_kernels_ref(void) { return &sjk_codec_kernels_table_ref; }

const sjk_codec_kernels *sjk_codec_kernels_avx2(void)
{
#if defined(__x86_64__)
    return (sjk_cpu_features() & SJK_CPU_AVX2) ? &sjk_codec_kernels_table_avx2 : NULL;
#else
    return NULL;
#endif
}

const sjk_codec_kernels *sjk_codec_kernels_avx512(void)
{
#if defined(__x86_64__)
    return (sjk_cpu_features() & SJK_CPU_AVX512) ? &sjk_codec_kernels_table_avx512 : NULL;
#else
    return NULL;
#endif
}

static const sjk_codec_kernels *g_kern; /* set once under g_once, then read-only */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const sjk_codec_kernels *k = sjk_codec_kernels_avx512();
    if (!k) k = sjk_codec_kernels_avx2();
    g_kern = k ? k : &sjk_codec_kernels_table_ref;
}

const sjk_codec_kernels *sjk_codec_kernels_get(void)
{
    pthread_once(&g_once, choose);
    return g_kern;
}
