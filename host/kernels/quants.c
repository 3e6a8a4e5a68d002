/* quants.c — scalar reference kernels for the ggml weight formats, the activation
 * quantizers, and the per-type traits table that picks the fastest kernel once.
 *
 * Block layouts (docs/BACKGROUND.md, "ggml block formats") are pinned by the _Static_asserts in
 * quants.h. Dot products follow llama.cpp's integer formulation so that our logits carry
 * the same activation-quantization noise as llama.cpp's (the oracle we are compared to):
 *
 *   q4_0 . q8_0 = sum_b  d_w d_x  sum_i (q_i - 8) x_i
 *   q4_1 . q8_1 = sum_b [d_w d_x  sum_i q_i x_i  +  m_w s_x]           (s_x = d_x sum x_i)
 *   q4_K . q8_K = sum_B [d_x d_w  sum_k sc_k sum_i q_i x_i - d_x dmin_w sum_k mn_k bsum_k]
 *   q6_K . q8_K = sum_B  d_x d_w  sum_k sc_k sum_i (q_i - 32) x_i
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hcommon.h"
#include "quants.h"

/* ---- activation quantizers --------------------------------------------------------
 * As llama.cpp's x86 path does at run time: id = 127/amax, round to nearest even. Not the
 * cache's q8_0 (src/codec/format_ggml.c, ggml's reference rounding): docs/DESIGN.md §3,
 * "Two q8_0 quantizers", says why there are two. */

void sjkh_quantize_q8_0_ref(const float *x, void *dst, size_t n)
{
    blk_q8_0 *y = dst;
    for (size_t b = 0; b < n / QK; b++, x += QK) {
        float amax = 0;
        for (int i = 0; i < QK; i++) amax = fmaxf(amax, fabsf(x[i]));
        float d = amax / 127.0f, id = amax ? 127.0f / amax : 0.0f;
        y[b].d = sjkh_f32_to_f16(d);
        for (int i = 0; i < QK; i++) y[b].qs[i] = (int8_t)rintf(x[i] * id);
    }
}

void sjkh_quantize_q8_1_ref(const float *x, void *dst, size_t n)
{
    blk_q8_1 *y = dst;
    for (size_t b = 0; b < n / QK; b++, x += QK) {
        float amax = 0;
        for (int i = 0; i < QK; i++) amax = fmaxf(amax, fabsf(x[i]));
        float d = amax / 127.0f, id = amax ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int i = 0; i < QK; i++) {
            y[b].qs[i] = (int8_t)rintf(x[i] * id);
            sum += y[b].qs[i];
        }
        y[b].d = sjkh_f32_to_f16(d);
        y[b].s = sjkh_f32_to_f16((float)sum * d);
    }
}

static inline int nearest_int(float f) { return (int)lrintf(f); }

void sjkh_quantize_q8_K_ref(const float *x, void *dst, size_t n)
{
    blk_q8_K *y = dst;
    for (size_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float amax = 0, mx = 0;
        for (int i = 0; i < QK_K; i++) {
            float a = fabsf(x[i]);
            if (a > amax) {
                amax = a;
                mx = x[i];
            }
        }
        if (!amax) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        float iscale = -127.0f / mx;
        for (int i = 0; i < QK_K; i++) {
            int v = nearest_int(iscale * x[i]);
            y[b].qs[i] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += y[b].qs[j * 16 + i];
            y[b].bsums[j] = (int16_t)s;
        }
        y[b].d = 1.0f / iscale;
    }
}

/* ---- weight quantizers (ggml reference rounding; legacy and float types) ----------- */

static void quantize_q4_0(const float *x, blk_q4_0 *y, size_t nb, int bits5, blk_q5_0 *y5)
{
    const float lev = bits5 ? -16.0f : -8.0f;
    const int maxq = bits5 ? 31 : 15;
    for (size_t b = 0; b < nb; b++, x += QK) {
        float amax = 0, mx = 0;
        for (int i = 0; i < QK; i++)
            if (fabsf(x[i]) > amax) {
                amax = fabsf(x[i]);
                mx = x[i];
            }
        float d = mx / lev, id = d ? 1.0f / d : 0.0f;
        uint8_t q[QK];
        for (int i = 0; i < QK; i++) {
            int v = (int)(x[i] * id + (bits5 ? 16.5f : 8.5f));
            q[i] = (uint8_t)(v > maxq ? maxq : v);
        }
        uint8_t *qs = bits5 ? y5[b].qs : y[b].qs;
        for (int i = 0; i < 16; i++) qs[i] = (uint8_t)((q[i] & 0xF) | ((q[i + 16] & 0xF) << 4));
        if (bits5) {
            uint32_t qh = 0;
            for (int i = 0; i < QK; i++) qh |= (uint32_t)(q[i] >> 4) << i;
            y5[b].d = sjkh_f32_to_f16(d);
            memcpy(y5[b].qh, &qh, 4);
        } else {
            y[b].d = sjkh_f32_to_f16(d);
        }
    }
}

static void quantize_q4_1(const float *x, blk_q4_1 *y, size_t nb, int bits5, blk_q5_1 *y5)
{
    const int maxq = bits5 ? 31 : 15;
    for (size_t b = 0; b < nb; b++, x += QK) {
        float lo = x[0], hi = x[0];
        for (int i = 1; i < QK; i++) {
            lo = fminf(lo, x[i]);
            hi = fmaxf(hi, x[i]);
        }
        float d = (hi - lo) / (float)maxq, id = d ? 1.0f / d : 0.0f;
        uint8_t q[QK];
        for (int i = 0; i < QK; i++) {
            int v = (int)((x[i] - lo) * id + 0.5f);
            q[i] = (uint8_t)(v > maxq ? maxq : v);
        }
        uint8_t *qs = bits5 ? y5[b].qs : y[b].qs;
        for (int i = 0; i < 16; i++) qs[i] = (uint8_t)((q[i] & 0xF) | ((q[i + 16] & 0xF) << 4));
        if (bits5) {
            uint32_t qh = 0;
            for (int i = 0; i < QK; i++) qh |= (uint32_t)(q[i] >> 4) << i;
            y5[b].d = sjkh_f32_to_f16(d);
            y5[b].m = sjkh_f32_to_f16(lo);
            memcpy(y5[b].qh, &qh, 4);
        } else {
            y[b].d = sjkh_f32_to_f16(d);
            y[b].m = sjkh_f32_to_f16(lo);
        }
    }
}

void sjkh_quantize_row_ref(uint32_t type, const float *x, void *dst, size_t n)
{
    switch (type) {
    case SJKH_TYPE_F32: memcpy(dst, x, n * 4); break;
    case SJKH_TYPE_F16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = sjkh_f32_to_f16(x[i]);
        break;
    case SJKH_TYPE_BF16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = sjkh_f32_to_bf16(x[i]);
        break;
    case SJKH_TYPE_Q4_0: quantize_q4_0(x, dst, n / QK, 0, NULL); break;
    case SJKH_TYPE_Q5_0: quantize_q4_0(x, NULL, n / QK, 1, dst); break;
    case SJKH_TYPE_Q4_1: quantize_q4_1(x, dst, n / QK, 0, NULL); break;
    case SJKH_TYPE_Q5_1: quantize_q4_1(x, NULL, n / QK, 1, dst); break;
    case SJKH_TYPE_Q8_0: sjkh_quantize_q8_0_ref(x, dst, n); break;
    default: break; /* K-quant weight quantizers are not needed by the host */
    }
}

/* ---- dequantization ---------------------------------------------------------------- */

static void dq_q4_0(const blk_q4_0 *x, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, y += QK) {
        float d = sjkh_f16_to_f32(x[b].d);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((x[b].qs[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

static void dq_q4_1(const blk_q4_1 *x, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, y += QK) {
        float d = sjkh_f16_to_f32(x[b].d), m = sjkh_f16_to_f32(x[b].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(x[b].qs[j] & 0xF) * d + m;
            y[j + 16] = (float)(x[b].qs[j] >> 4) * d + m;
        }
    }
}

static void dq_q5_0(const blk_q5_0 *x, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, y += QK) {
        float d = sjkh_f16_to_f32(x[b].d);
        uint32_t qh = sjkh_rd_u32(x[b].qh);
        for (int j = 0; j < 16; j++) {
            int lo = (x[b].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (x[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (float)(lo - 16) * d;
            y[j + 16] = (float)(hi - 16) * d;
        }
    }
}

static void dq_q5_1(const blk_q5_1 *x, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, y += QK) {
        float d = sjkh_f16_to_f32(x[b].d), m = sjkh_f16_to_f32(x[b].m);
        uint32_t qh = sjkh_rd_u32(x[b].qh);
        for (int j = 0; j < 16; j++) {
            int lo = (x[b].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (x[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (float)lo * d + m;
            y[j + 16] = (float)hi * d + m;
        }
    }
}

static void dq_q8_0(const blk_q8_0 *x, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++, y += QK) {
        float d = sjkh_f16_to_f32(x[b].d);
        for (int j = 0; j < QK; j++) y[j] = (float)x[b].qs[j] * d;
    }
}

static void dq_q4_K(const blk_q4_K *x, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++) {
        float d = sjkh_f16_to_f32(x[b].d), dmin = sjkh_f16_to_f32(x[b].dmin);
        const uint8_t *q = x[b].qs;
        for (int j = 0; j < 4; j++, q += 32, y += 64) {
            uint8_t sc1, m1, sc2, m2;
            sjkh_k_scale_min(2 * j, x[b].scales, &sc1, &m1);
            sjkh_k_scale_min(2 * j + 1, x[b].scales, &sc2, &m2);
            for (int l = 0; l < 32; l++) {
                y[l] = d * (float)sc1 * (float)(q[l] & 0xF) - dmin * (float)m1;
                y[l + 32] = d * (float)sc2 * (float)(q[l] >> 4) - dmin * (float)m2;
            }
        }
    }
}

static void dq_q5_K(const blk_q5_K *x, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++) {
        float d = sjkh_f16_to_f32(x[b].d), dmin = sjkh_f16_to_f32(x[b].dmin);
        const uint8_t *q = x[b].qs, *qh = x[b].qh;
        for (int j = 0; j < 4; j++, q += 32, y += 64) {
            uint8_t sc1, m1, sc2, m2;
            sjkh_k_scale_min(2 * j, x[b].scales, &sc1, &m1);
            sjkh_k_scale_min(2 * j + 1, x[b].scales, &sc2, &m2);
            uint8_t u1 = (uint8_t)(1u << (2 * j)), u2 = (uint8_t)(2u << (2 * j));
            for (int l = 0; l < 32; l++) {
                int lo = (q[l] & 0xF) + ((qh[l] & u1) ? 16 : 0);
                int hi = (q[l] >> 4) + ((qh[l] & u2) ? 16 : 0);
                y[l] = d * (float)sc1 * (float)lo - dmin * (float)m1;
                y[l + 32] = d * (float)sc2 * (float)hi - dmin * (float)m2;
            }
        }
    }
}

static void dq_q6_K(const blk_q6_K *x, float *y, size_t nb)
{
    for (size_t b = 0; b < nb; b++) {
        float d = sjkh_f16_to_f32(x[b].d);
        for (int h = 0; h < 2; h++, y += 128) {
            const uint8_t *ql = x[b].ql + 64 * h, *qh = x[b].qh + 32 * h;
            const int8_t *sc = x[b].scales + 8 * h;
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

void sjkh_dequant_row(uint32_t type, const void *src, float *dst, size_t n)
{
    switch (type) {
    case SJKH_TYPE_F32: memcpy(dst, src, n * 4); break;
    case SJKH_TYPE_F16:
        for (size_t i = 0; i < n; i++) dst[i] = sjkh_f16_to_f32(sjkh_rd_u16((const uint16_t *)src + i));
        break;
    case SJKH_TYPE_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = sjkh_bf16_to_f32(sjkh_rd_u16((const uint16_t *)src + i));
        break;
    case SJKH_TYPE_Q4_0: dq_q4_0(src, dst, n / QK); break;
    case SJKH_TYPE_Q4_1: dq_q4_1(src, dst, n / QK); break;
    case SJKH_TYPE_Q5_0: dq_q5_0(src, dst, n / QK); break;
    case SJKH_TYPE_Q5_1: dq_q5_1(src, dst, n / QK); break;
    case SJKH_TYPE_Q8_0: dq_q8_0(src, dst, n / QK); break;
    case SJKH_TYPE_Q4_K: dq_q4_K(src, dst, n / QK_K); break;
    case SJKH_TYPE_Q5_K: dq_q5_K(src, dst, n / QK_K); break;
    case SJKH_TYPE_Q6_K: dq_q6_K(src, dst, n / QK_K); break;
    default: memset(dst, 0, n * sizeof *dst); break;
    }
}

/* ---- scalar dot products ----------------------------------------------------------- */

float sjkh_vec_dot_q4_0_ref(size_t n, const void *w, const void *xv)
{
    const blk_q4_0 *a = w;
    const blk_q8_0 *x = xv;
    float sum = 0;
    for (size_t b = 0; b < n / QK; b++) {
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += ((a[b].qs[j] & 0xF) - 8) * x[b].qs[j] + ((a[b].qs[j] >> 4) - 8) * x[b].qs[j + 16];
        sum += (float)s * sjkh_f16_to_f32(a[b].d) * sjkh_f16_to_f32(x[b].d);
    }
    return sum;
}

float sjkh_vec_dot_q4_1_ref(size_t n, const void *w, const void *xv)
{
    const blk_q4_1 *a = w;
    const blk_q8_1 *x = xv;
    float sum = 0;
    for (size_t b = 0; b < n / QK; b++) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += (a[b].qs[j] & 0xF) * x[b].qs[j] + (a[b].qs[j] >> 4) * x[b].qs[j + 16];
        sum += (float)s * sjkh_f16_to_f32(a[b].d) * sjkh_f16_to_f32(x[b].d) +
               sjkh_f16_to_f32(a[b].m) * sjkh_f16_to_f32(x[b].s);
    }
    return sum;
}

float sjkh_vec_dot_q5_0_ref(size_t n, const void *w, const void *xv)
{
    const blk_q5_0 *a = w;
    const blk_q8_0 *x = xv;
    float sum = 0;
    for (size_t b = 0; b < n / QK; b++) {
        uint32_t qh = sjkh_rd_u32(a[b].qh);
        int s = 0;
        for (int j = 0; j < 16; j++) {
            int lo = ((a[b].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4)) - 16;
            int hi = ((a[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16;
            s += lo * x[b].qs[j] + hi * x[b].qs[j + 16];
        }
        sum += (float)s * sjkh_f16_to_f32(a[b].d) * sjkh_f16_to_f32(x[b].d);
    }
    return sum;
}

float sjkh_vec_dot_q5_1_ref(size_t n, const void *w, const void *xv)
{
    const blk_q5_1 *a = w;
    const blk_q8_1 *x = xv;
    float sum = 0;
    for (size_t b = 0; b < n / QK; b++) {
        uint32_t qh = sjkh_rd_u32(a[b].qh);
        int s = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (a[b].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (a[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            s += lo * x[b].qs[j] + hi * x[b].qs[j + 16];
        }
        sum += (float)s * sjkh_f16_to_f32(a[b].d) * sjkh_f16_to_f32(x[b].d) +
               sjkh_f16_to_f32(a[b].m) * sjkh_f16_to_f32(x[b].s);
    }
    return sum;
}

float sjkh_vec_dot_q8_0_ref(size_t n, const void *w, const void *xv)
{
    const blk_q8_0 *a = w;
    const blk_q8_0 *x = xv;
    float sum = 0;
    for (size_t b = 0; b < n / QK; b++) {
        int s = 0;
        for (int j = 0; j < QK; j++) s += a[b].qs[j] * x[b].qs[j];
        sum += (float)s * sjkh_f16_to_f32(a[b].d) * sjkh_f16_to_f32(x[b].d);
    }
    return sum;
}

/* One super-block of Q4_K or Q5_K (qh: NULL, or Q5_K's fifth bits) against Q8_K: the
 * integer sums ggml takes, sumi over the scaled sub-blocks and summ over the mins. */
static float k45_block_dot(uint16_t wd, uint16_t wdmin, const uint8_t *scales, const uint8_t *q, const uint8_t *qh,
                           const blk_q8_K *x)
{
    int sumi = 0, summ = 0;
    const int8_t *y = x->qs;
    for (int j = 0; j < 4; j++, q += 32, y += 64) {
        uint8_t sc1, m1, sc2, m2;
        sjkh_k_scale_min(2 * j, scales, &sc1, &m1);
        sjkh_k_scale_min(2 * j + 1, scales, &sc2, &m2);
        int s1 = 0, s2 = 0;
        for (int l = 0; l < 32; l++) {
            int h1 = qh ? ((qh[l] >> (2 * j)) & 1) << 4 : 0, h2 = qh ? ((qh[l] >> (2 * j + 1)) & 1) << 4 : 0;
            s1 += ((q[l] & 0xF) + h1) * y[l];
            s2 += ((q[l] >> 4) + h2) * y[l + 32];
        }
        sumi += sc1 * s1 + sc2 * s2;
        summ += m1 * (x->bsums[4 * j] + x->bsums[4 * j + 1]) + m2 * (x->bsums[4 * j + 2] + x->bsums[4 * j + 3]);
    }
    float d = x->d * sjkh_f16_to_f32(wd), dmin = x->d * sjkh_f16_to_f32(wdmin);
    return d * (float)sumi - dmin * (float)summ;
}

float sjkh_vec_dot_q4_K_ref(size_t n, const void *w, const void *xv)
{
    const blk_q4_K *a = w;
    const blk_q8_K *x = xv;
    float sum = 0;
    for (size_t b = 0; b < n / QK_K; b++) sum += k45_block_dot(a[b].d, a[b].dmin, a[b].scales, a[b].qs, NULL, x + b);
    return sum;
}

float sjkh_vec_dot_q5_K_ref(size_t n, const void *w, const void *xv)
{
    const blk_q5_K *a = w;
    const blk_q8_K *x = xv;
    float sum = 0;
    for (size_t b = 0; b < n / QK_K; b++)
        sum += k45_block_dot(a[b].d, a[b].dmin, a[b].scales, a[b].qs, a[b].qh, x + b);
    return sum;
}

float sjkh_vec_dot_q6_K_ref(size_t n, const void *w, const void *xv)
{
    const blk_q6_K *a = w;
    const blk_q8_K *x = xv;
    float sum = 0;
    for (size_t b = 0; b < n / QK_K; b++) {
        int sumi = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = a[b].ql + 64 * h, *qh = a[b].qh + 32 * h;
            const int8_t *sc = a[b].scales + 8 * h, *y = x[b].qs + 128 * h;
            int s[8] = {0};
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                s[is + 0] += (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * y[l];
                s[is + 2] += (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * y[l + 32];
                s[is + 4] += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * y[l + 64];
                s[is + 6] += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * y[l + 96];
            }
            for (int k = 0; k < 8; k++) sumi += sc[k] * s[k];
        }
        sum += x[b].d * sjkh_f16_to_f32(a[b].d) * (float)sumi;
    }
    return sum;
}

/* 64 bytes of alignment slack, then the packed blocks of one 16-row panel */
size_t sjkh_mm_many_scratch_nbytes(size_t n) { return 64 + (n + QK - 1) / QK * (size_t)SJKH_MM_MANY_NBYTES_PER_32; }

float sjkh_vec_dot_f32_ref(size_t n, const void *w, const void *xv)
{
    const float *a = w, *x = xv;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)sjkh_rd_f32(a + i) * x[i];
    return (float)s;
}

float sjkh_vec_dot_f16_ref(size_t n, const void *w, const void *xv)
{
    const uint16_t *a = w;
    const float *x = xv;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)sjkh_f16_to_f32(sjkh_rd_u16(a + i)) * x[i];
    return (float)s;
}

float sjkh_vec_dot_bf16_ref(size_t n, const void *w, const void *xv)
{
    const uint16_t *a = w;
    const float *x = xv;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)sjkh_bf16_to_f32(sjkh_rd_u16(a + i)) * x[i];
    return (float)s;
}

/* ---- traits table ------------------------------------------------------------------ */

size_t sjkh_dot_row_nbytes(uint32_t dot_type, size_t n)
{
    switch (dot_type) {
    case SJKH_TYPE_Q8_0: return n / QK * sizeof(blk_q8_0);
    case SJKH_TYPE_Q8_1: return n / QK * sizeof(blk_q8_1);
    case SJKH_TYPE_Q8_K: return n / QK_K * sizeof(blk_q8_K);
    default: return n * sizeof(float);
    }
}

/* x[i] = d * qs[i] of every block: exact for Q8_0 and Q8_1 (an fp16 scale times an int8
 * has at most 19 significant bits), one f32 rounding for Q8_K's f32 scale. The Q8_1 gap
 * s - d * sum(qs) is exact too: |sum| <= 32 * 127 < 2^12, so d * sum has <= 23 bits. */
void sjkh_dequant_dot_row(uint32_t dot_type, const void *src, float *dst, float *gap, size_t n)
{
    if (dot_type == SJKH_TYPE_Q8_0 || dot_type == SJKH_TYPE_Q8_1) {
        size_t nb = dot_type == SJKH_TYPE_Q8_0 ? sizeof(blk_q8_0) : sizeof(blk_q8_1);
        for (size_t b = 0; b < n / QK; b++) {
            const uint8_t *blk = (const uint8_t *)src + b * nb;
            float d = sjkh_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
            const int8_t *qs = (const int8_t *)(blk + nb - QK);
            int sum = 0;
            for (size_t i = 0; i < QK; i++) {
                dst[b * QK + i] = d * (float)qs[i];
                sum += qs[i];
            }
            if (gap && dot_type == SJKH_TYPE_Q8_1)
                gap[b] = sjkh_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8)) - d * (float)sum;
        }
    } else if (dot_type == SJKH_TYPE_Q8_K) {
        const blk_q8_K *x = src;
        for (size_t b = 0; b < n / QK_K; b++)
            for (size_t i = 0; i < QK_K; i++) dst[b * QK_K + i] = x[b].d * (float)x[b].qs[i];
    } else {
        memcpy(dst, src, n * sizeof(float));
    }
}

size_t sjkh_dotn_row_nbytes(uint32_t dot_type, size_t n)
{
    if (dot_type == SJKH_TYPE_Q8_0) return n + n / QK * sizeof(float);
    if (dot_type == SJKH_TYPE_Q8_1) return n + 2 * (n / QK) * sizeof(float);
    return sjkh_dot_row_nbytes(dot_type, n);
}

void sjkh_dotn_prepare(uint32_t dot_type, const void *src, void *dst, size_t n)
{
    uint8_t *q = dst;
    const size_t nb = n / QK;
    if (dot_type == SJKH_TYPE_Q8_0 || dot_type == SJKH_TYPE_Q8_1) {
        const int q8_0 = dot_type == SJKH_TYPE_Q8_0;
        float *d = (float *)(void *)(q + nb * QK), *sm = d + nb;
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = (const uint8_t *)src + b * (q8_0 ? sizeof(blk_q8_0) : sizeof(blk_q8_1));
            const uint8_t *qs = blk + (q8_0 ? 2 : 4);
            for (size_t i = 0; i < QK; i++) q[b * QK + i] = q8_0 ? (uint8_t)(qs[i] ^ 0x80) : qs[i];
            d[b] = sjkh_f16_to_f32(sjkh_rd_u16(blk));
            if (!q8_0) sm[b] = sjkh_f16_to_f32(sjkh_rd_u16(blk + 2));
        }
        return;
    }
    memcpy(dst, src, sjkh_dot_row_nbytes(dot_type, n));
}

static sjkh_qtraits g_traits[SJKH_TYPE_COUNT]; /* filled once under g_once, then read-only */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void traits_init(void)
{
#define T(ty, dt, qf, ref) g_traits[ty] = (sjkh_qtraits){dt, qf, ref, ref, NULL, NULL, NULL, NULL}
    T(SJKH_TYPE_F32, SJKH_TYPE_F32, NULL, sjkh_vec_dot_f32_ref);
    T(SJKH_TYPE_F16, SJKH_TYPE_F32, NULL, sjkh_vec_dot_f16_ref);
    T(SJKH_TYPE_BF16, SJKH_TYPE_F32, NULL, sjkh_vec_dot_bf16_ref);
    T(SJKH_TYPE_Q4_0, SJKH_TYPE_Q8_0, sjkh_quantize_q8_0_ref, sjkh_vec_dot_q4_0_ref);
    T(SJKH_TYPE_Q4_1, SJKH_TYPE_Q8_1, sjkh_quantize_q8_1_ref, sjkh_vec_dot_q4_1_ref);
    T(SJKH_TYPE_Q5_0, SJKH_TYPE_Q8_0, sjkh_quantize_q8_0_ref, sjkh_vec_dot_q5_0_ref);
    T(SJKH_TYPE_Q5_1, SJKH_TYPE_Q8_1, sjkh_quantize_q8_1_ref, sjkh_vec_dot_q5_1_ref);
    T(SJKH_TYPE_Q8_0, SJKH_TYPE_Q8_0, sjkh_quantize_q8_0_ref, sjkh_vec_dot_q8_0_ref);
    T(SJKH_TYPE_Q4_K, SJKH_TYPE_Q8_K, sjkh_quantize_q8_K_ref, sjkh_vec_dot_q4_K_ref);
    T(SJKH_TYPE_Q5_K, SJKH_TYPE_Q8_K, sjkh_quantize_q8_K_ref, sjkh_vec_dot_q5_K_ref);
    T(SJKH_TYPE_Q6_K, SJKH_TYPE_Q8_K, sjkh_quantize_q8_K_ref, sjkh_vec_dot_q6_K_ref);
#undef T
#if defined(__x86_64__)
    if (sjk_cpu_features() & SJK_CPU_AVX2) {
        g_traits[SJKH_TYPE_F32].vec_dot = sjkh_vec_dot_f32_avx2;
        g_traits[SJKH_TYPE_F16].vec_dot = sjkh_vec_dot_f16_avx2;
        g_traits[SJKH_TYPE_BF16].vec_dot = sjkh_vec_dot_bf16_avx2;
        g_traits[SJKH_TYPE_Q4_0].vec_dot = sjkh_vec_dot_q4_0_avx2;
        g_traits[SJKH_TYPE_Q4_1].vec_dot = sjkh_vec_dot_q4_1_avx2;
        g_traits[SJKH_TYPE_Q5_0].vec_dot = sjkh_vec_dot_q5_0_avx2;
        g_traits[SJKH_TYPE_Q5_1].vec_dot = sjkh_vec_dot_q5_1_avx2;
        g_traits[SJKH_TYPE_Q8_0].vec_dot = sjkh_vec_dot_q8_0_avx2;
        g_traits[SJKH_TYPE_Q4_K].vec_dot = sjkh_vec_dot_q4_K_avx2;
        g_traits[SJKH_TYPE_Q5_K].vec_dot = sjkh_vec_dot_q5_K_avx2;
        g_traits[SJKH_TYPE_Q6_K].vec_dot = sjkh_vec_dot_q6_K_avx2;
        g_traits[SJKH_TYPE_Q4_K].vec_dot4 = sjkh_vec_dot4_q4_K_avx2;
        g_traits[SJKH_TYPE_Q6_K].vec_dot4 = sjkh_vec_dot4_q6_K_avx2;
        g_traits[SJKH_TYPE_Q4_0].vec_dot4 = sjkh_vec_dot4_q4_0_avx2;
        g_traits[SJKH_TYPE_Q4_1].vec_dot4 = sjkh_vec_dot4_q4_1_avx2;
        g_traits[SJKH_TYPE_Q5_0].vec_dot4 = sjkh_vec_dot4_q5_0_avx2;
        g_traits[SJKH_TYPE_Q5_1].vec_dot4 = sjkh_vec_dot4_q5_1_avx2;
        g_traits[SJKH_TYPE_Q8_0].vec_dot4 = sjkh_vec_dot4_q8_0_avx2;
        g_traits[SJKH_TYPE_Q4_0].quantize = sjkh_quantize_q8_0_avx2;
        g_traits[SJKH_TYPE_Q5_0].quantize = sjkh_quantize_q8_0_avx2;
        g_traits[SJKH_TYPE_Q8_0].quantize = sjkh_quantize_q8_0_avx2;
        g_traits[SJKH_TYPE_Q4_1].quantize = sjkh_quantize_q8_1_avx2;
        g_traits[SJKH_TYPE_Q5_1].quantize = sjkh_quantize_q8_1_avx2;
        g_traits[SJKH_TYPE_Q4_0].dequant = sjkh_dequant_q4_0_avx2;
        g_traits[SJKH_TYPE_Q4_1].dequant = sjkh_dequant_q4_1_avx2;
        g_traits[SJKH_TYPE_Q5_0].dequant = sjkh_dequant_q5_0_avx2;
        g_traits[SJKH_TYPE_Q5_1].dequant = sjkh_dequant_q5_1_avx2;
        g_traits[SJKH_TYPE_Q8_0].dequant = sjkh_dequant_q8_0_avx2;
        g_traits[SJKH_TYPE_Q4_K].dequant = sjkh_dequant_q4_K_avx2;
        g_traits[SJKH_TYPE_Q6_K].dequant = sjkh_dequant_q6_K_avx2;
    }
    if (sjk_cpu_features() & SJK_CPU_AVX512) {
        g_traits[SJKH_TYPE_Q4_0].vec_dot = sjkh_vec_dot_q4_0_avx512;
        g_traits[SJKH_TYPE_Q4_1].vec_dot = sjkh_vec_dot_q4_1_avx512;
        g_traits[SJKH_TYPE_Q5_0].vec_dot = sjkh_vec_dot_q5_0_avx512;
        g_traits[SJKH_TYPE_Q5_1].vec_dot = sjkh_vec_dot_q5_1_avx512;
        g_traits[SJKH_TYPE_Q8_0].vec_dot = sjkh_vec_dot_q8_0_avx512;
        g_traits[SJKH_TYPE_Q4_K].vec_dot = sjkh_vec_dot_q4_K_avx512;
        g_traits[SJKH_TYPE_Q5_K].vec_dot = sjkh_vec_dot_q5_K_avx512;
        g_traits[SJKH_TYPE_Q6_K].vec_dot = sjkh_vec_dot_q6_K_avx512;
        g_traits[SJKH_TYPE_Q4_K].vec_dot4 = sjkh_vec_dot4_q4_K_avx512;
        g_traits[SJKH_TYPE_Q6_K].vec_dot4 = sjkh_vec_dot4_q6_K_avx512;
        g_traits[SJKH_TYPE_Q4_0].vec_dot4 = sjkh_vec_dot4_q4_0_avx512;
        g_traits[SJKH_TYPE_Q4_1].vec_dot4 = sjkh_vec_dot4_q4_1_avx512;
        g_traits[SJKH_TYPE_Q5_0].vec_dot4 = sjkh_vec_dot4_q5_0_avx512;
        g_traits[SJKH_TYPE_Q5_1].vec_dot4 = sjkh_vec_dot4_q5_1_avx512;
        g_traits[SJKH_TYPE_Q8_0].vec_dot4 = sjkh_vec_dot4_q8_0_avx512;
        g_traits[SJKH_TYPE_Q4_K].quantize = sjkh_quantize_q8_K_avx512;
        g_traits[SJKH_TYPE_Q5_K].quantize = sjkh_quantize_q8_K_avx512;
        g_traits[SJKH_TYPE_Q6_K].quantize = sjkh_quantize_q8_K_avx512;
        g_traits[SJKH_TYPE_Q4_0].vec_dotn = sjkh_vec_dotn_q4_0_avx512;
        g_traits[SJKH_TYPE_Q4_1].vec_dotn = sjkh_vec_dotn_q4_1_avx512;
        g_traits[SJKH_TYPE_Q5_0].vec_dotn = sjkh_vec_dotn_q5_0_avx512;
        g_traits[SJKH_TYPE_Q5_1].vec_dotn = sjkh_vec_dotn_q5_1_avx512;
        g_traits[SJKH_TYPE_Q8_0].vec_dotn = sjkh_vec_dotn_q8_0_avx512;
        g_traits[SJKH_TYPE_Q4_K].vec_dotn = sjkh_vec_dotn_q4_K_avx512;
        g_traits[SJKH_TYPE_Q6_K].vec_dotn = sjkh_vec_dotn_q6_K_avx512;
        g_traits[SJKH_TYPE_Q4_K].mm_many = sjkh_mm_q4_K_avx512;
        g_traits[SJKH_TYPE_Q6_K].mm_many = sjkh_mm_q6_K_avx512;
        g_traits[SJKH_TYPE_Q8_0].mm_many = sjkh_mm_q8_0_avx512;
        g_traits[SJKH_TYPE_Q5_0].mm_many = sjkh_mm_q5_0_avx512;
    }
#endif
}

const sjkh_qtraits *sjkh_qtraits_get(uint32_t type)
{
    pthread_once(&g_once, traits_init);
    if (type >= SJKH_TYPE_COUNT || !g_traits[type].vec_dot) return NULL;
    return &g_traits[type];
}
