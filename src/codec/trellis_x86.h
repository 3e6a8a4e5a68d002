/* trellis_x86.h — the x86 SIMD trellis kernels (trellis.h), written once and compiled
 * twice: trellis_avx2.c (8 lanes, __m256, a block of 16 sequences as two halves) and
 * trellis_avx512.c (16 lanes, __m512, one vector per block). Include it after defining
 * SJK_TR_W (8 or 16) and SJK_TR_SFX(name) (the suffix of its symbols). (Not a normal
 * header: no include guard, included by exactly those two files.)
 *
 * The search is bit-identical to sjk_trellis_block_ref: the same metric (sub, then fused
 * multiply-add), the same first-minimum rule for the back-pointers, the same traceback. The decode
 * gives the reference's (C[w] * a + b) * col. What differs between the instruction sets
 * (masks, gathers, byte stores, how the next window is cut out of a step) is in the small
 * primitives at the top; the kernels below them are the same text for both widths. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "codec/trellis.h"
#include "codec/trellis_impl.h"

#define W SJK_TR_W
#define SJK_X86_W SJK_TR_W
#include "codec/x86_vec.h"
#define H (SJK_TRELLIS_LANES / W) /* vectors per block of 16 sequences */
_Static_assert(SJK_TRELLIS_LANES == 16, "a block is 16 sequences");

/* ---- primitives, one block per width ------------------------------------------------ */
#if SJK_TR_W == 16
static inline vmask vlt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline vmask veqi(vi a, vi b) { return _mm512_cmpeq_epi32_mask(a, b); }
static inline vi vpicki(vmask m, vi if_clear, vi if_set) { return _mm512_mask_blend_epi32(m, if_clear, if_set); }
static inline vf vgather(const float *base, vi idx) { return _mm512_i32gather_ps(idx, base, 4); }
static inline vi vzeroi(void) { return _mm512_setzero_si512(); }
/* W states (bytes) <-> W int32 lanes */
static inline vi load_states(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
static inline void store_states(uint8_t *p, vi s) { _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8(s)); }

/* Back-pointers of one state: the 16 lanes' choices j as bytes of an xmm (a mask move per
 * candidate), stored as 16 nibbles (trellis_impl.h). */
typedef __m128i bpv;
static inline bpv bp_zero(void) { return _mm_setzero_si128(); }
static inline bpv bp_pick(bpv bj, vmask m, unsigned j) { return _mm_mask_mov_epi8(bj, m, _mm_set1_epi8((char)j)); }
static inline void bp_store(uint8_t *p, const bpv *bj)
{
    __m128i x = _mm_maddubs_epi16(bj[0], _mm_set1_epi16(0x1001)); /* b[2i] + 16 b[2i+1] */
    _mm_storel_epi64((__m128i *)p, _mm_packus_epi16(x, x));
}

/* The next 16 windows of a group: lane 2q's symbol is at bit 2qk of a step word, lane
 * 2q+1's at (2q+1)k. Rotating the broadcast word right by 2qk - 6 puts lane 2q's symbol
 * at bits 6.. of the low dword of qword q; by (2q+1)k - 38 puts lane 2q+1's at bits 6..
 * of the high dword. */
typedef struct step_cut {
    __m512i rot_a, rot_b, m6;
} step_cut;

static inline __attribute__((always_inline)) step_cut step_cut_make(unsigned k)
{
    step_cut r;
    r.rot_a = _mm512_setr_epi64((0 * k - 6) & 63, (2 * k - 6) & 63, (4 * k - 6) & 63, (6 * k - 6) & 63,
                                (8 * k - 6) & 63, (10 * k - 6) & 63, (12 * k - 6) & 63, (14 * k - 6) & 63);
    r.rot_b = _mm512_and_si512(_mm512_add_epi64(r.rot_a, _mm512_set1_epi64((long long)k + 32)),
                               _mm512_set1_epi64(63));
    r.m6 = _mm512_set1_epi32((int)(((1u << k) - 1) << 6));
    return r;
}

/* w = (sym << 6) | (w >> k), 16 lanes ((x & m6) | y is one ternary-logic op). An 8-byte
 * broadcast load reads past a step of 4 or 6 bytes, so the very last step of the payload
 * (last != 0) is assembled from exact loads instead. h is always 0. */
static inline __attribute__((always_inline)) vi next_windows(vi w, const uint8_t *step, unsigned k, int last,
                                                             int h, const step_cut *r)
{
    (void)h;
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

#elif SJK_TR_W == 8
static inline vmask vlt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline vmask veqi(vi a, vi b) { return _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, b)); }
static inline vi vpicki(vmask m, vi if_clear, vi if_set)
{
    return _mm256_blendv_epi8(if_clear, if_set, _mm256_castps_si256(m));
}
static inline vf vgather(const float *base, vi idx) { return _mm256_i32gather_ps(base, idx, 4); }
static inline vi vzeroi(void) { return _mm256_setzero_si256(); }
static inline vi load_states(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
static inline void store_states(uint8_t *p, vi s) /* lanes hold 0..255 */
{
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    _mm_storel_epi64((__m128i *)p, _mm_packus_epi16(w, w));
}

/* Back-pointers of one state: each half's choices j in int32 lanes (a blend per
 * candidate), stored as 16 nibbles (trellis_impl.h). */
typedef __m256i bpv;
static inline bpv bp_zero(void) { return _mm256_setzero_si256(); }
static inline bpv bp_pick(bpv bj, vmask m, unsigned j) { return vpicki(m, bj, _mm256_set1_epi32((int)j)); }
static inline void bp_store(uint8_t *p, const bpv *bj)
{
    __m128i a = _mm_packus_epi32(_mm256_castsi256_si128(bj[0]), _mm256_extracti128_si256(bj[0], 1));
    __m128i b = _mm_packus_epi32(_mm256_castsi256_si128(bj[1]), _mm256_extracti128_si256(bj[1], 1));
    __m128i x = _mm_maddubs_epi16(_mm_packus_epi16(a, b), _mm_set1_epi16(0x1001)); /* b[2i] + 16 b[2i+1] */
    _mm_storel_epi64((__m128i *)p, _mm_packus_epi16(x, x));
}

/* The next 8 windows of half h of a group: lanes 0..7 of a step are its bits 0 .. 8k-1,
 * lanes 8..15 the next 8k bits, so each half is one 32-bit word shifted per lane. The
 * step is read with exact loads, so last does not matter. */
typedef struct step_cut {
    __m256i sh, mk;
} step_cut;

static inline __attribute__((always_inline)) step_cut step_cut_make(unsigned k)
{
    step_cut r;
    r.sh = _mm256_setr_epi32(0, (int)k, (int)(2 * k), (int)(3 * k), (int)(4 * k), (int)(5 * k),
                             (int)(6 * k), (int)(7 * k));
    r.mk = _mm256_set1_epi32((int)((1u << k) - 1));
    return r;
}

static inline __attribute__((always_inline)) vi next_windows(vi w, const uint8_t *step, unsigned k, int last,
                                                             int h, const step_cut *r)
{
    (void)last;
    uint32_t x = (uint32_t)(sjk_trellis_load_step(step, k) >> (8 * k * (unsigned)h));
    __m256i s = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)x), r->sh), r->mk);
    return _mm256_or_si256(_mm256_slli_epi32(s, 6), _mm256_srli_epi32(w, (int)k));
}
#else
#error "trellis_x86.h: define SJK_TR_W as 8 or 16"
#endif

/* ---- the search block: one sequence per lane ------------------------------------------
 * The forward pass of sjk_trellis_block_ref, vectorised over the lanes: the same costs
 * (the j = 0 candidate is min'ed with +inf, so a NaN candidate is dropped as the
 * reference's strict compare drops it) and the same back-pointer, the first j whose
 * candidate is strictly below the running minimum. The traceback is shared
 * (trellis_impl.h). */
static inline __attribute__((always_inline)) void
block_k(const unsigned k, const float *cb, uint8_t *codes, const float *u, size_t T,
        size_t stride, const uint8_t *init_state, const uint8_t *end_state, void *work,
        uint8_t *state_at)
{
    const unsigned nb = 1u << k;
    const vf inf = VF(set1_ps)(INFINITY), zero = VF(setzero_ps)();
    float *first = sjk_trellis_cost_row(work, 0);
#pragma GCC unroll 2
    for (int h = 0; h < H; h++) {
        const vi s0 = init_state ? load_states(init_state + W * h) : vzeroi();
        for (int s = 0; s < SJK_TRELLIS_STATES; s++) {
            vf v = init_state ? vpick(veqi(s0, VF(set1_epi32)(s)), inf, zero) : zero;
            VF(storeu_ps)(first + s * 16 + W * h, v);
        }
    }

    for (size_t t = 0; t < T; t++) {
        const float *prev = sjk_trellis_cost_row(work, t);
        float *cur = sjk_trellis_cost_row(work, t + 1);
        uint8_t *bp = sjk_trellis_bp_step(work, t);
        vf ut[H];
#pragma GCC unroll 2
        for (int h = 0; h < H; h++) ut[h] = VF(loadu_ps)(u + t * stride + W * h);
        /* The 2^k windows ending in ns are (ns << k) | j; their predecessors
         * ((ns << k) & 63) | j are 2^k consecutive states. */
        for (unsigned ns = 0; ns < SJK_TRELLIS_STATES; ns++) {
            const float *cw = cb + (ns << k);
            const float *pp = prev + ((ns << k) & 63u) * 16;
            vf acc[H];
            bpv bj[H];
            const vf c0 = VF(set1_ps)(cw[0]);
#pragma GCC unroll 2
            for (int h = 0; h < H; h++) {
                vf d = VF(sub_ps)(ut[h], c0);
                acc[h] = VF(min_ps)(VF(fmadd_ps)(d, d, VF(loadu_ps)(pp + W * h)), inf);
                bj[h] = bp_zero();
            }
#pragma GCC unroll 16
            for (unsigned j = 1; j < nb; j++) {
                const vf c = VF(set1_ps)(cw[j]);
#pragma GCC unroll 2
                for (int h = 0; h < H; h++) {
                    vf d = VF(sub_ps)(ut[h], c);
                    vf cand = VF(fmadd_ps)(d, d, VF(loadu_ps)(pp + j * 16 + W * h));
                    bj[h] = bp_pick(bj[h], vlt(cand, acc[h]), j);
                    acc[h] = VF(min_ps)(cand, acc[h]); /* cand < acc ? cand : acc */
                }
            }
#pragma GCC unroll 2
            for (int h = 0; h < H; h++) VF(storeu_ps)(cur + ns * 16 + W * h, acc[h]);
            bp_store(bp + ns * 8, bj);
        }
    }
    sjk_trellis_traceback(k, work, codes, T, stride, end_state, state_at);
}

void SJK_TR_SFX(sjk_trellis_block)(const float *cb, unsigned k, uint8_t *codes, const float *u,
                                   size_t T, size_t stride, const uint8_t *init_state,
                                   const uint8_t *end_state, void *work, uint8_t *state_at)
{
    SJK_TRELLIS_WITH_K(k, block_k, cb, codes, u, T, stride, init_state, end_state, work, state_at);
}

/* ---- dequantization of decoded codebook values ----------------------------------------
 * c of channels d0..d0+W-1 for output row t: (c * a + b) * col (mul, add, mul: the
 * reference's arithmetic). With rows_are_channels a, b are the channels' row scale and
 * zero and col the token's column scale, else a, b are the token's and col the
 * channels'. */
typedef struct dqv {
    const float *row_scale, *row_zero, *col_scale;
    int rows_are_channels;
    vf a, b, col; /* the per-channel parts, set by dqv_channels */
} dqv;

static inline __attribute__((always_inline)) void dqv_channels(dqv *q, size_t d0)
{
    q->a = q->b = q->col = VF(set1_ps)(1.0f);
    if (q->rows_are_channels) {
        q->a = VF(loadu_ps)(q->row_scale + d0);
        q->b = VF(loadu_ps)(q->row_zero + d0);
    } else if (q->col_scale) {
        q->col = VF(loadu_ps)(q->col_scale + d0);
    }
}

static inline __attribute__((always_inline)) void dqv_store(const dqv *q, vf c, size_t t, float *dst)
{
    vf at = q->a, bt = q->b, ct = q->col;
    if (q->rows_are_channels) {
        if (q->col_scale) ct = VF(set1_ps)(q->col_scale[t]);
    } else {
        at = VF(set1_ps)(q->row_scale[t]);
        bt = VF(set1_ps)(q->row_zero[t]);
    }
    vf y = VF(add_ps)(VF(mul_ps)(c, at), bt);
    if (q->col_scale) y = VF(mul_ps)(y, ct);
    VF(storeu_ps)(dst, y);
}

/* ---- decode of a token-axis tile --------------------------------------------------------
 * One group of 16 sequences = 16 consecutive channels d0..d0+15; step t of the group
 * holds their 16 symbols in 2k bytes, so the windows of W channels live in one vector:
 * w = (sym << 6) | (w >> k). Output row t gets (C[w] * a + b) * col (dqv_store). */
static inline __attribute__((always_inline)) void
decode_token_k(const unsigned k, float *out, size_t D, size_t G, const float *cb,
               const uint8_t *payload, const float *row_scale, const float *row_zero,
               const float *col_scale, int rows_are_channels)
{
    const size_t step_nbytes = 2 * k, group_nbytes = G * step_nbytes;
    const unsigned lead = (SJK_TRELLIS_STATE_BITS + k - 1) / k; /* steps that fill a window */
    const step_cut cut = step_cut_make(k);
    const size_t n_groups = D / 16;
    dqv q = {row_scale, row_zero, col_scale, rows_are_channels, VF(setzero_ps)(), VF(setzero_ps)(),
             VF(setzero_ps)()};
    for (size_t d0 = 0; d0 < D; d0 += 16) {
        const uint8_t *g = payload + d0 / 16 * group_nbytes;
        const int last_group = d0 / 16 == n_groups - 1;
        for (int h = 0; h < H; h++) {
            const size_t dh = d0 + W * (size_t)h;
            dqv_channels(&q, dh);
            vi w = vzeroi();
            for (size_t t = G - lead; t < G; t++)
                w = next_windows(w, g + t * step_nbytes, k, last_group && t == G - 1, h, &cut);
            for (size_t t = 0; t < G; t++) {
                w = next_windows(w, g + t * step_nbytes, k, last_group && t == G - 1, h, &cut);
                dqv_store(&q, vgather(cb, w), t, out + t * D + dh);
            }
        }
    }
}

void SJK_TR_SFX(sjk_trellis_decode_token)(float *out, size_t D, size_t G, const float *cb, unsigned k,
                                          const uint8_t *payload, const float *row_scale,
                                          const float *row_zero, const float *col_scale,
                                          int rows_are_channels)
{
    SJK_TRELLIS_WITH_K(k, decode_token_k, out, D, G, cb, payload, row_scale, row_zero, col_scale, rows_are_channels);
}
