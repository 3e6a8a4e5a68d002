/* trellis_avx512.c — the trellis search block with one sequence per lane of a zmm
 * (16 sequences). Bit-identical to sjk_trellis_block_ref: the same metric
 * (sub, then fused multiply-add), the same first-minimum rule in the traceback. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "codec/trellis.h"
#include "codec/trellis_impl.h"

_Static_assert(SJK_TRELLIS_LANES == 16, "one zmm per block");

static inline __attribute__((always_inline)) void
block_k(const float *cb, const unsigned k, uint8_t *codes, const float *u, size_t T,
        size_t stride, const uint8_t *init_state, const uint8_t *end_state, float *hist,
        uint8_t *state_at)
{
    const unsigned nb = 1u << k, sh = SJK_TRELLIS_STATE_BITS - k;
    const __m512 inf = _mm512_set1_ps(INFINITY), zero = _mm512_setzero_ps();
    if (init_state) {
        __m512i s0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)init_state));
        for (int s = 0; s < SJK_TRELLIS_STATES; s++) {
            __mmask16 m = _mm512_cmpeq_epi32_mask(s0, _mm512_set1_epi32(s));
            _mm512_storeu_ps(hist + s * 16, _mm512_mask_blend_ps(m, inf, zero));
        }
    } else {
        for (int s = 0; s < SJK_TRELLIS_STATES; s++) _mm512_storeu_ps(hist + s * 16, zero);
    }

    for (size_t t = 0; t < T; t++) {
        const float *prev = hist + t * SJK_TRELLIS_STEP_FLOATS;
        float *cur = hist + (t + 1) * SJK_TRELLIS_STEP_FLOATS;
        const __m512 ut = _mm512_loadu_ps(u + t * stride);
        /* The 2^k windows ending in ns are (ns << k) | j; their predecessors
         * ((ns << k) & 63) | j are 2^k consecutive states. */
        for (unsigned ns = 0; ns < SJK_TRELLIS_STATES; ns++) {
            const float *cw = cb + (ns << k);
            const float *pp = prev + ((ns << k) & 63u) * 16;
            __m512 d0 = _mm512_sub_ps(ut, _mm512_set1_ps(cw[0]));
            __m512 acc = _mm512_fmadd_ps(d0, d0, _mm512_loadu_ps(pp));
#pragma GCC unroll 16
            for (unsigned j = 1; j < nb; j++) {
                __m512 d = _mm512_sub_ps(ut, _mm512_set1_ps(cw[j]));
                __m512 cand = _mm512_fmadd_ps(d, d, _mm512_loadu_ps(pp + j * 16));
                acc = _mm512_min_ps(cand, acc); /* equal values: either is the same */
            }
            _mm512_storeu_ps(cur + ns * 16, acc);
        }
    }

    /* Final state: given, or the first minimum over states. */
    __m512i s;
    if (end_state) {
        s = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)end_state));
    } else {
        const float *last = hist + T * SJK_TRELLIS_STEP_FLOATS;
        __m512 best = _mm512_loadu_ps(last);
        s = _mm512_setzero_si512();
        for (int q = 1; q < SJK_TRELLIS_STATES; q++) {
            __m512 v = _mm512_loadu_ps(last + q * 16);
            __mmask16 m = _mm512_cmp_ps_mask(v, best, _CMP_LT_OQ);
            best = _mm512_mask_blend_ps(m, best, v);
            s = _mm512_mask_blend_epi32(m, s, _mm512_set1_epi32(q));
        }
    }
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i m63 = _mm512_set1_epi32(63);
    for (size_t t = T; t-- > 0;) {
        const float *prev = hist + t * SJK_TRELLIS_STEP_FLOATS;
        if (state_at) _mm_storeu_si128((__m128i *)(state_at + (t + 1) * 16), _mm512_cvtepi32_epi8(s));
        _mm_storeu_si128((__m128i *)(codes + t * stride),
                         _mm512_cvtepi32_epi8(_mm512_srli_epi32(s, (int)sh)));
        const __m512 ut = _mm512_loadu_ps(u + t * stride);
        const __m512i base = _mm512_slli_epi32(s, (int)k);
        __m512 best = _mm512_set1_ps(INFINITY);
        __m512i bj = _mm512_setzero_si512();
        for (unsigned j = 0; j < nb; j++) {
            __m512i w = _mm512_or_si512(base, _mm512_set1_epi32((int)j));
            __m512i p = _mm512_and_si512(w, m63);
            __m512 c = _mm512_i32gather_ps(w, cb, 4);
            __m512 pc = _mm512_i32gather_ps(_mm512_add_epi32(_mm512_slli_epi32(p, 4), lane), prev, 4);
            __m512 d = _mm512_sub_ps(ut, c);
            __m512 cand = _mm512_fmadd_ps(d, d, pc);
            __mmask16 m = _mm512_cmp_ps_mask(cand, best, _CMP_LT_OQ);
            best = _mm512_mask_blend_ps(m, best, cand);
            bj = _mm512_mask_blend_epi32(m, bj, _mm512_set1_epi32((int)j));
        }
        s = _mm512_and_si512(_mm512_or_si512(base, bj), m63);
    }
    if (state_at) _mm_storeu_si128((__m128i *)state_at, _mm512_cvtepi32_epi8(s));
}

void sjk_trellis_block_avx512(const float *cb, unsigned k, uint8_t *codes, const float *u,
                              size_t T, size_t stride, const uint8_t *init_state,
                              const uint8_t *end_state, float *hist, uint8_t *state_at)
{
    switch (k) {
    case 2: block_k(cb, 2, codes, u, T, stride, init_state, end_state, hist, state_at); break;
    case 3: block_k(cb, 3, codes, u, T, stride, init_state, end_state, hist, state_at); break;
    default: block_k(cb, 4, codes, u, T, stride, init_state, end_state, hist, state_at); break;
    }
}

/* ---- decode of a token-axis tile ----------------------------------------------------
 * One group of 16 sequences = 16 consecutive channels d0..d0+15; step t of the group
 * holds their 16 symbols in 2k bytes, so the 16 windows live in one vector:
 * w = (sym << 6) | (w >> k). Output row t gets (C[w] * a + b) * col (dq16_store). */
/* Lane 2q's symbol is at bit 2qk of a step word, lane 2q+1's at (2q+1)k. Rotating the
 * broadcast word right by 2qk - 6 puts lane 2q's symbol at bits 6.. of the low dword of
 * qword q; by (2q+1)k - 38 puts lane 2q+1's at bits 6.. of the high dword. */
typedef struct step_rot {
    __m512i rot_a, rot_b, m6;
} step_rot;

static inline __attribute__((always_inline)) step_rot step_rot_make(unsigned k)
{
    step_rot r;
    r.rot_a = _mm512_setr_epi64((0 * k - 6) & 63, (2 * k - 6) & 63, (4 * k - 6) & 63, (6 * k - 6) & 63,
                                (8 * k - 6) & 63, (10 * k - 6) & 63, (12 * k - 6) & 63, (14 * k - 6) & 63);
    r.rot_b = _mm512_and_si512(_mm512_add_epi64(r.rot_a, _mm512_set1_epi64((long long)k + 32)),
                               _mm512_set1_epi64(63));
    r.m6 = _mm512_set1_epi32((int)(((1u << k) - 1) << 6));
    return r;
}

/* The 16 windows after one more step: w = (sym << 6) | (w >> k), 16 lanes ((x & m6) | y is
 * one ternary-logic op). An 8-byte broadcast load reads past a step of 4 or 6 bytes, so
 * the very last step of the payload (last != 0) is assembled from exact loads instead. */
static inline __attribute__((always_inline)) __m512i next_windows(__m512i w, const uint8_t *step, unsigned k,
                                                                  int last, const step_rot *r)
{
    __m512i bc;
    if (k == 4 || !last) {
        long long q;
        memcpy(&q, step, 8);
        bc = _mm512_set1_epi64(q);
    } else {
        bc = _mm512_set1_epi64((long long)sjk_trellis_load_step(step, k));
    }
    __m512i x = _mm512_mask_blend_epi32(0xAAAA, _mm512_rorv_epi64(bc, r->rot_a), _mm512_rorv_epi64(bc, r->rot_b));
    return _mm512_ternarylogic_epi32(x, r->m6, _mm512_srli_epi32(w, (int)k), 0xEA);
}

/* The dequantization of decoded codebook values c of channels d0..d0+15 for output row
 * t: (c * a + b) * col (mul, add, mul: the reference's arithmetic). With rows_are_channels
 * a, b are the channels' row scale and zero and col the token's column scale, else a, b
 * are the token's and col the channels'. */
typedef struct dq16 {
    const float *row_scale, *row_zero, *col_scale;
    int rows_are_channels;
    __m512 a, b, col; /* the per-channel parts, set by dq16_channels */
} dq16;

static inline __attribute__((always_inline)) void dq16_channels(dq16 *q, size_t d0)
{
    q->a = q->b = q->col = _mm512_set1_ps(1.0f);
    if (q->rows_are_channels) {
        q->a = _mm512_loadu_ps(q->row_scale + d0);
        q->b = _mm512_loadu_ps(q->row_zero + d0);
    } else if (q->col_scale) {
        q->col = _mm512_loadu_ps(q->col_scale + d0);
    }
}

static inline __attribute__((always_inline)) void dq16_store(const dq16 *q, __m512 c, size_t t, float *dst)
{
    __m512 at = q->a, bt = q->b, ct = q->col;
    if (q->rows_are_channels) {
        if (q->col_scale) ct = _mm512_set1_ps(q->col_scale[t]);
    } else {
        at = _mm512_set1_ps(q->row_scale[t]);
        bt = _mm512_set1_ps(q->row_zero[t]);
    }
    __m512 y = _mm512_add_ps(_mm512_mul_ps(c, at), bt);
    if (q->col_scale) y = _mm512_mul_ps(y, ct);
    _mm512_storeu_ps(dst, y);
}

static inline __attribute__((always_inline)) void
decode_token_k(float *out, size_t D, size_t G, const float *cb, const unsigned k,
               const uint8_t *payload, const float *row_scale, const float *row_zero,
               const float *col_scale, int rows_are_channels)
{
    const size_t step_nbytes = 2 * k, group_nbytes = G * step_nbytes;
    const unsigned lead = (SJK_TRELLIS_STATE_BITS + k - 1) / k; /* steps that fill a window */
    const step_rot rot = step_rot_make(k);
    const size_t n_groups = D / 16;
    dq16 q = {row_scale, row_zero, col_scale, rows_are_channels, _mm512_setzero_ps(), _mm512_setzero_ps(),
              _mm512_setzero_ps()};
    for (size_t d0 = 0; d0 < D; d0 += 16) {
        const uint8_t *g = payload + d0 / 16 * group_nbytes;
        const int last_group = d0 / 16 == n_groups - 1;
        dq16_channels(&q, d0);
        __m512i w = _mm512_setzero_si512();
        for (size_t t = G - lead; t < G; t++)
            w = next_windows(w, g + t * step_nbytes, k, last_group && t == G - 1, &rot);
        for (size_t t = 0; t < G; t++) {
            w = next_windows(w, g + t * step_nbytes, k, last_group && t == G - 1, &rot);
            dq16_store(&q, _mm512_i32gather_ps(w, cb, 4), t, out + t * D + d0);
        }
    }
}

void sjk_trellis_decode_token_avx512(float *out, size_t D, size_t G, const float *cb,
                                     unsigned k, const uint8_t *payload, const float *row_scale,
                                     const float *row_zero, const float *col_scale,
                                     int rows_are_channels)
{
    switch (k) {
    case 2: decode_token_k(out, D, G, cb, 2, payload, row_scale, row_zero, col_scale, rows_are_channels); break;
    case 3: decode_token_k(out, D, G, cb, 3, payload, row_scale, row_zero, col_scale, rows_are_channels); break;
    default: decode_token_k(out, D, G, cb, 4, payload, row_scale, row_zero, col_scale, rows_are_channels); break;
    }
}

/* ---- decode of a channel-axis tile --------------------------------------------------
 * A group is 16 tokens t0..t0+15, its steps are channels. 16 steps give a 16 x 16 block
 * [channel][token] of codebook values; a gather with stride 16 turns each token's column
 * into a row of 16 channels, which gets the same (C * a + b) * col as the reference. */
static inline __attribute__((always_inline)) void
decode_channel_k(float *out, size_t D, size_t G, const float *cb, const unsigned k,
                 const uint8_t *payload, const float *row_scale, const float *row_zero,
                 const float *col_scale, int rows_are_channels)
{
    const size_t step_nbytes = 2 * k, group_nbytes = D * step_nbytes;
    const unsigned lead = (SJK_TRELLIS_STATE_BITS + k - 1) / k;
    const step_rot rot = step_rot_make(k);
    const __m512i col16 = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192,
                                            208, 224, 240);
    const size_t n_groups = G / 16;
    float blk[256]; /* [16 channels][16 tokens] */
    dq16 q = {row_scale, row_zero, col_scale, rows_are_channels, _mm512_setzero_ps(), _mm512_setzero_ps(),
              _mm512_setzero_ps()};
    for (size_t t0 = 0; t0 < G; t0 += 16) {
        const uint8_t *g = payload + t0 / 16 * group_nbytes;
        const int last_group = t0 / 16 == n_groups - 1;
        __m512i w = _mm512_setzero_si512();
        for (size_t d = D - lead; d < D; d++)
            w = next_windows(w, g + d * step_nbytes, k, last_group && d == D - 1, &rot);
        for (size_t d0 = 0; d0 < D; d0 += 16) {
            for (size_t j = 0; j < 16; j++) {
                w = next_windows(w, g + (d0 + j) * step_nbytes, k, last_group && d0 + j == D - 1, &rot);
                _mm512_storeu_ps(blk + 16 * j, _mm512_i32gather_ps(w, cb, 4));
            }
            dq16_channels(&q, d0);
            for (size_t l = 0; l < 16; l++)
                dq16_store(&q, _mm512_i32gather_ps(col16, blk + l, 4), t0 + l, out + (t0 + l) * D + d0);
        }
    }
}

void sjk_trellis_decode_channel_avx512(float *out, size_t D, size_t G, const float *cb,
                                       unsigned k, const uint8_t *payload, const float *row_scale,
                                       const float *row_zero, const float *col_scale,
                                       int rows_are_channels)
{
    switch (k) {
    case 2: decode_channel_k(out, D, G, cb, 2, payload, row_scale, row_zero, col_scale, rows_are_channels); break;
    case 3: decode_channel_k(out, D, G, cb, 3, payload, row_scale, row_zero, col_scale, rows_are_channels); break;
    default: decode_channel_k(out, D, G, cb, 4, payload, row_scale, row_zero, col_scale, rows_are_channels); break;
    }
}
