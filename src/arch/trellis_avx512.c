/* trellis_avx512.c — the trellis search block with one sequence per lane of a zmm
 * (16 sequences). Bit-identical to sjk_trellis_block_ref: the same metric
 * (sub, then fused multiply-add), the same first-minimum rule in the traceback. */
#include <immintrin.h>
#include <math.h>

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
        for (unsigned ns = 0; ns < SJK_TRELLIS_STATES; ns++) {
            const float *cw = cb + (ns << k);
            __m512 acc = inf;
            for (unsigned j = 0; j < nb; j++) {
                unsigned p = ((ns << k) | j) & 63u;
                __m512 d = _mm512_sub_ps(ut, _mm512_set1_ps(cw[j]));
                __m512 cand = _mm512_fmadd_ps(d, d, _mm512_loadu_ps(prev + p * 16));
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
