/* trellis_avx512.c — the AVX-512 trellis kernels, one sequence per lane of a zmm (a
 * block of 16 sequences is one vector). The search and the token-axis decode are in
 * trellis_x86.h (shared with trellis_avx2.c); the channel-axis decode, which only this
 * width has, is below. Bit-identical to the scalar reference (trellis.c). */
#define SJK_TR_W 16
#define SJK_TR_SFX(name) name##_avx512
#include "codec/trellis_x86.h"

/* ---- decode of a channel-axis tile --------------------------------------------------
 * A group is 16 tokens t0..t0+15, its steps are channels. 16 steps give a 16 x 16 block
 * [channel][token] of codebook values; a gather with stride 16 turns each token's column
 * into a row of 16 channels, which gets the same (C * a + b) * col as the reference. */
static inline __attribute__((always_inline)) void
decode_channel_k(const unsigned k, float *out, size_t D, size_t G, const float *cb,
                 const uint8_t *payload, const float *row_scale, const float *row_zero,
                 const float *col_scale, int rows_are_channels)
{
    const size_t step_nbytes = 2 * k, group_nbytes = D * step_nbytes;
    const unsigned lead = (SJK_TRELLIS_STATE_BITS + k - 1) / k;
    const step_cut cut = step_cut_make(k);
    const __m512i col16 = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192,
                                            208, 224, 240);
    const size_t n_groups = G / 16;
    float blk[256]; /* [16 channels][16 tokens] */
    dqv q = {row_scale, row_zero, col_scale, rows_are_channels, _mm512_setzero_ps(), _mm512_setzero_ps(),
             _mm512_setzero_ps()};
    for (size_t t0 = 0; t0 < G; t0 += 16) {
        const uint8_t *g = payload + t0 / 16 * group_nbytes;
        const int last_group = t0 / 16 == n_groups - 1;
        __m512i w = _mm512_setzero_si512();
        for (size_t d = D - lead; d < D; d++)
            w = next_windows(w, g + d * step_nbytes, k, last_group && d == D - 1, 0, &cut);
        for (size_t d0 = 0; d0 < D; d0 += 16) {
            for (size_t j = 0; j < 16; j++) {
                w = next_windows(w, g + (d0 + j) * step_nbytes, k, last_group && d0 + j == D - 1, 0, &cut);
                _mm512_storeu_ps(blk + 16 * j, _mm512_i32gather_ps(w, cb, 4));
            }
            dqv_channels(&q, d0);
            for (size_t l = 0; l < 16; l++)
                dqv_store(&q, _mm512_i32gather_ps(col16, blk + l, 4), t0 + l, out + (t0 + l) * D + d0);
        }
    }
}

void sjk_trellis_decode_channel_avx512(float *out, size_t D, size_t G, const float *cb,
                                       unsigned k, const uint8_t *payload, const float *row_scale,
                                       const float *row_zero, const float *col_scale,
                                       int rows_are_channels)
{
    SJK_TRELLIS_WITH_K(k, decode_channel_k, out, D, G, cb, payload, row_scale, row_zero, col_scale, rows_are_channels);
}
