/* ops_q8.c — scalar references of the q8_0 window-row kernels (ops.h scores_q8_0_multi,
 * wsum_q8_0_multi). A q8_0 row is ggml's block layout, written by the library's q8_0
 * encoder (sjk_format_get(SJK_FMT_Q8_0)->encode):
 *
 *   block [34 B] = | d: fp16 scale (2 B) | qs: 32 x int8 |      x[i] = d * qs[i]
 *   row of n values = n / 32 blocks, back to back
 *
 * d * qs[i] is exact in f32 (11 + 8 significant bits), so every version dequantizes a
 * value exactly and differs from these references only in how it orders (and fuses) the
 * f32 sums. */
#include "hcommon.h"
#include "ops.h"

#define QK 32
#define Q8_NB 34

void sjkh_scores_q8_0_multi_ref(const uint8_t *k, size_t k_stride, size_t n_t, const float *q, size_t q_stride,
                                size_t nq, size_t n, float *out)
{
    for (size_t t = 0; t < n_t; t++) {
        const uint8_t *row = k + t * k_stride;
        for (size_t h = 0; h < nq; h++) {
            const float *qh = q + h * q_stride;
            float acc = 0;
            for (size_t b = 0; b < n / QK; b++) {
                const uint8_t *blk = row + b * Q8_NB;
                float d = sjkh_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
                for (size_t i = 0; i < QK; i++) acc += d * (float)(int8_t)blk[2 + i] * qh[b * QK + i];
            }
            out[t * nq + h] = acc;
        }
    }
}

void sjkh_wsum_q8_0_multi_ref(const float *w, size_t w_stride, const uint8_t *v, size_t v_stride, size_t n_t,
                              float *o, size_t o_stride, size_t nq, size_t n)
{
    for (size_t t = 0; t < n_t; t++) {
        const uint8_t *row = v + t * v_stride;
        for (size_t b = 0; b < n / QK; b++) {
            const uint8_t *blk = row + b * Q8_NB;
            float d = sjkh_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
            for (size_t h = 0; h < nq; h++) {
                float wt = w[t * w_stride + h], *oh = o + h * o_stride + b * QK;
                for (size_t i = 0; i < QK; i++) oh[i] += wt * (d * (float)(int8_t)blk[2 + i]);
            }
        }
    }
}
