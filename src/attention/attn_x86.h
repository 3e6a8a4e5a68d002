/* attn_x86.h — the x86 SIMD attention kernels (attn_kernels.h) that both instruction
 * sets share, written once and compiled twice: attn_avx2.c (8 lanes, __m256) and
 * attn_avx512.c (16 lanes, __m512). Include it after defining SJK_ATTN_W (8 or 16).
 * (Not a normal header: no include guard, included by exactly those two files.)
 *
 * What differs between the widths (loads of fp16 / byte / nibble codes, lane masks,
 * horizontal reductions, the W x W transpose, how many rows a block may take) is in the
 * small primitives at the top; the kernels below them are the same text for both. The
 * AVX-512-only families (tq6_0 ring, int16 record scores) live in attn_avx512.c; the
 * trellis readers and the ggml block readers (attn_avx512.c: VNNI on 128-bit lanes of
 * blocks; attn_avx2.c: vpmaddwd per block) have one per width; all on top of the same
 * helpers.
 *
 * Decode shape: rows are taken RB (4) at a time (AVX-512: 8 when a call has more than 4)
 * so that the query heads sharing a KV head (GQA) reuse every key and value load. Scores
 * go to work[], the online-softmax update runs W lanes at a time with a polynomial exp
 * (relative error < 2e-7 on the range used), and values accumulate 2W channels x NR rows
 * in registers. Prefill shape (many rows): chunk_f32_many below. Every kernel is tested
 * against attn_ref.c (tests/test_attention.c, 1e-5). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "codec/format.h"

#define RB SJK_ATTN_RB
#define RBX SJK_ATTN_RB_MAX /* rows per block at most */
#define G SJK_GROUP
#define TB 32               /* keys per value block: the block's values stay in L1 */
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- primitives, one block per width ------------------------------------------------ */
#if SJK_ATTN_W == 16
typedef __m512 vf;
typedef __m512i vi;
typedef __mmask16 vmask;
#define W 16
#define NIB_BLK G   /* keys per value block for 4-bit codes (a chunk's V codes, 16 KiB at D = 256) */
#define MANY_KT2 8  /* keys per score tile of 2W rows (chunk_f32_many) */
#define MANY_VV 4   /* vectors of channels per value tile (chunk_f32_many) */

#define VF(op) _mm512_##op
static inline vf vround(vf x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* 2^n for integer-valued n (the exponent field) */
static inline vf vpow2n(vf n)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
static inline float vhsum(vf v) { return _mm512_reduce_add_ps(v); }
static inline float vhmax(vf v) { return _mm512_reduce_max_ps(v); }

/* lanes i < n */
static inline vmask vm_first(size_t n) { return n >= 16 ? (vmask)0xFFFF : (vmask)((1u << n) - 1); }
static inline vf vpick(vmask k, vf if_clear, vf if_set) { return _mm512_mask_blend_ps(k, if_clear, if_set); }
static inline vf vkeep(vmask k, vf x) { return _mm512_maskz_mov_ps(k, x); }
static inline vf vload_or(vf src, vmask k, const float *p) { return _mm512_mask_loadu_ps(src, k, p); }
static inline void vstore_m(float *p, vmask k, vf x) { _mm512_mask_storeu_ps(p, k, x); }
static inline vi vi_loadz(vmask k, const uint32_t *p) { return _mm512_maskz_loadu_epi32(k, p); }
/* lanes of k where a > t (signed) */
static inline vmask vm_gt(vmask k, vi a, int t) { return _mm512_mask_cmpgt_epi32_mask(k, a, _mm512_set1_epi32(t)); }
/* lanes of k where a != b (ordered) */
static inline vmask vm_neq(vmask k, vf a, vf b) { return _mm512_mask_cmp_ps_mask(k, a, b, _CMP_NEQ_OQ); }

/* W fp16 values, W bytes as unsigned, W bytes as signed */
static inline vf vld_f16(const void *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p)); }
static inline vf vld_u8(const uint8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)));
}
static inline vf vld_i8(const uint8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)));
}
/* Codes i0..i0+2W-1 (i0 % 2W == 0) of a 4-bit payload row (record_layout.h: unit i/32
 * of 16 bytes, low nibbles codes 0..15, high 16..31), minus `off` (0 or 8): the low and
 * high nibbles of one unit. The nibbles are not masked: vpermps reads only the low 4
 * bits of each index, so a table turns a code into its float in one instruction. */
static ALWAYS_INLINE void vld2_nib(vf *lo, vf *hi, const uint8_t *row, size_t i0, const int off)
{
    const vf lut = off ? _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7)
                       : _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + (i0 / 32) * 16)));
    *lo = _mm512_permutexvar_ps(x, lut);
    *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), lut);
}

/* The 32 codes of a q4_0 block (qs at p) as (nibble - 8) · d: the table scaled once, then
 * looked up (one multiply per block instead of one per 16 values). */
static ALWAYS_INLINE void vld2_q4(vf *lo, vf *hi, const uint8_t *p, size_t i0, vf d)
{
    (void)i0; /* 0: 2W = 32 codes are the whole block */
    const vf lut = _mm512_mul_ps(_mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7), d);
    const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    *lo = _mm512_permutexvar_ps(x, lut);
    *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), lut);
}

/* x[i] lane j <- x[j] lane i: unpack pairs, then pairs of pairs, then 128-bit lanes twice. */
static inline void vtranspose(vf x[16])
{
    vf t[16], u[16];
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
        vf xl = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(2, 0, 2, 0));
        vf xh = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 1, 3, 1));
        vf yl = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(2, 0, 2, 0));
        vf yh = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 1, 3, 1));
        x[c] = _mm512_shuffle_f32x4(xl, yl, _MM_SHUFFLE(2, 0, 2, 0));
        x[8 + c] = _mm512_shuffle_f32x4(xl, yl, _MM_SHUFFLE(3, 1, 3, 1));
        x[4 + c] = _mm512_shuffle_f32x4(xh, yh, _MM_SHUFFLE(2, 0, 2, 0));
        x[12 + c] = _mm512_shuffle_f32x4(xh, yh, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

#elif SJK_ATTN_W == 8
typedef __m256 vf;
typedef __m256i vi;
typedef __m256i vmask; /* all-ones lanes where set */
#define W 8
#define NIB_BLK TB
#define MANY_KT2 4 /* 16 registers: 4 keys x 2 vectors of rows */
#define MANY_VV 2

#define VF(op) _mm256_##op
static inline vf vround(vf x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vf vpow2n(vf n)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
static inline float vhsum(vf v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float vhmax(vf v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline vmask vm_first(size_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n >= 8 ? 8 : (int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline vf vpick(vmask k, vf if_clear, vf if_set) { return _mm256_blendv_ps(if_clear, if_set, _mm256_castsi256_ps(k)); }
static inline vf vkeep(vmask k, vf x) { return _mm256_and_ps(_mm256_castsi256_ps(k), x); }
static inline vf vload_or(vf src, vmask k, const float *p) { return vpick(k, src, _mm256_maskload_ps(p, k)); }
static inline void vstore_m(float *p, vmask k, vf x) { _mm256_maskstore_ps(p, k, x); }
static inline vi vi_loadz(vmask k, const uint32_t *p) { return _mm256_and_si256(k, _mm256_maskload_epi32((const int *)(const void *)p, k)); }
static inline vmask vm_gt(vmask k, vi a, int t) { return _mm256_and_si256(k, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(t))); }
static inline vmask vm_neq(vmask k, vf a, vf b) { return _mm256_and_si256(k, _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_NEQ_OQ))); }

static inline vf vld_f16(const void *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p)); }
static inline vf vld_u8(const uint8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}
static inline vf vld_i8(const uint8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}
/* Codes i0..i0+15 (i0 % 16 == 0) of a 4-bit payload row, minus off: bytes 0..7 and 8..15
 * of unit i0/32 zero-extended to dwords (one load-and-extend each), then the low nibbles
 * (i0 % 32 < 16: masked) or the high ones (shifted: each dword holds one byte, so no mask
 * is needed), converted: 6 operations for 16 codes (a load, shift, mask, extend and convert
 * per 8 before: 10). */
static ALWAYS_INLINE void vld2_nib(vf *lo, vf *hi, const uint8_t *row, size_t i0, const int off)
{
    const uint8_t *u = row + (i0 / 32) * 16;
    __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)u));
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(u + 8)));
    if (i0 % 32 < 16) {
        const __m256i m4 = _mm256_set1_epi32(0x0F);
        a = _mm256_and_si256(a, m4);
        b = _mm256_and_si256(b, m4);
    } else {
        a = _mm256_srli_epi32(a, 4);
        b = _mm256_srli_epi32(b, 4);
    }
    *lo = _mm256_cvtepi32_ps(a);
    *hi = _mm256_cvtepi32_ps(b);
    if (off) {
        *lo = _mm256_sub_ps(*lo, _mm256_set1_ps((float)off));
        *hi = _mm256_sub_ps(*hi, _mm256_set1_ps((float)off));
    }
}

/* Codes i0..i0+15 (i0 % 16 == 0) of a q4_0 block (qs at p) as (nibble - 8) · d. */
static ALWAYS_INLINE void vld2_q4(vf *lo, vf *hi, const uint8_t *p, size_t i0, vf d)
{
    vld2_nib(lo, hi, p, i0, 8);
    *lo = _mm256_mul_ps(*lo, d);
    *hi = _mm256_mul_ps(*hi, d);
}

/* x[i] lane j <- x[j] lane i, 8x8. */
static inline void vtranspose(vf x[8])
{
    vf t[8], u[8];
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
#else
#error "attn_x86.h: define SJK_ATTN_W as 8 or 16"
#endif

/* The float operations whose names differ only in the width's prefix. */
static inline vf vzero(void) { return VF(setzero_ps)(); }
static inline vf vset1(float x) { return VF(set1_ps)(x); }
static inline vf vload(const float *p) { return VF(loadu_ps)(p); }
static inline void vstore(float *p, vf x) { VF(storeu_ps)(p, x); }
static inline vf vadd(vf a, vf b) { return VF(add_ps)(a, b); }
static inline vf vsub(vf a, vf b) { return VF(sub_ps)(a, b); }
static inline vf vmul(vf a, vf b) { return VF(mul_ps)(a, b); }
static inline vf vmax(vf a, vf b) { return VF(max_ps)(a, b); }
static inline vf vfmadd(vf a, vf b, vf c) { return VF(fmadd_ps)(a, b, c); }
static inline vf vfnmadd(vf a, vf b, vf c) { return VF(fnmadd_ps)(a, b, c); }

/* ---- shared helpers --------------------------------------------------------------- */

/* exp(x) for x <= 0 (scores minus the running max); x < -87 gives ~0. Cephes expf. */
static inline vf vexp(vf x)
{
    x = vmax(x, vset1(-87.0f));
    const vf fx = vround(vmul(x, vset1(1.44269504088896341f)));
    x = vfnmadd(fx, vset1(0.693359375f), x);
    x = vfnmadd(fx, vset1(-2.12194440e-4f), x);
    vf y = vset1(1.9875691500E-4f);
    y = vfmadd(y, x, vset1(1.3981999507E-3f));
    y = vfmadd(y, x, vset1(8.3334519073E-3f));
    y = vfmadd(y, x, vset1(4.1665795894E-2f));
    y = vfmadd(y, x, vset1(1.6666665459E-1f));
    y = vfmadd(y, x, vset1(5.0000001201E-1f));
    y = vfmadd(y, vmul(x, x), vadd(x, vset1(1.0f)));
    return vmul(y, vpow2n(fx));
}

/* Softmax update of one row: s[0..nv) scores (s padded to a multiple of W with
 * anything); afterwards s[t] = p[t] for t < nv and 0 up to G. Returns the factor for
 * the old state. */
static float softmax_row(float *s, size_t nv, float *m, float *l)
{
    const size_t nvw = (nv + W - 1) & ~(size_t)(W - 1);
    const vf ninf = vset1(-INFINITY);
    vf vmx = ninf;
    for (size_t t = 0; t < nvw; t += W) vmx = vmax(vmx, vpick(vm_first(nv - t), ninf, vload(s + t)));
    const float mx = vhmax(vmx);
    const float m_new = *m > mx ? *m : mx;
    const float f = *m == -INFINITY ? 0.0f : expf(*m - m_new);
    const vf vm = vset1(m_new);
    vf sum = vzero();
    for (size_t t = 0; t < nvw; t += W) {
        const vf p = vkeep(vm_first(nv - t), vexp(vsub(vload(s + t), vm)));
        vstore(s + t, p);
        sum = vadd(sum, p);
    }
    for (size_t t = nvw; t < G; t++) s[t] = 0;
    *l = *l * f + vhsum(sum);
    *m = m_new;
    return f;
}

#if SJK_ATTN_W == 16
/* Rows per block on AVX-512 (32 registers), for the readers of codes (records, tq6_0
 * rows, q8_0 / q4_0 blocks): RB (4) for up to 4 rows, one block of 6 for 5 or 6 rows
 * (the 6 GQA rows of a Qwen2.5 head: a block of 8 spent a quarter of its dot products and
 * FMAs on two zero rows), RBX (8) above (a Llama-3 head), so that a chunk's codes are
 * decoded once per call instead of once per 4 rows; the padding rows of a block are
 * zero queries. ROWS_NR16(R, call) expands call with NR_ a compile-time constant. */
#define ROWS_NR16(R, call)                                                                                           \
    do {                                                                                                             \
        if ((R) <= RB) { const size_t NR_ = RB; call; }                                                              \
        else if ((R) <= 6) { const size_t NR_ = 6; call; }                                                           \
        else { const size_t NR_ = RBX; call; }                                                                       \
    } while (0)
#endif

/* The block of rows [r0, r0 + NR) of R: returns the rows in it (rb) and sets *ntm to the
 * most keys any of them sees. */
static inline size_t block_rows(const uint32_t *nvis, size_t R, size_t r0, size_t NR, size_t *ntm)
{
    const size_t rb = R - r0 < NR ? R - r0 : NR;
    size_t n = 0;
    for (size_t r = 0; r < rb; r++) n = nvis[r0 + r] > n ? nvis[r0 + r] : n;
    *ntm = n;
    return rb;
}

/* The online-softmax update of a block's scores p[NR][G] (rows past rb or without a
 * visible key: zeroed, factor 1). nvis, m, l: the block's first row. */
static inline void softmax_block(float *p, float *fct, const uint32_t *nvis, size_t rb, size_t NR, float *m, float *l)
{
    for (size_t r = 0; r < NR; r++) {
        fct[r] = 1.0f;
        if (r < rb && nvis[r]) fct[r] = softmax_row(p + r * G, nvis[r], &m[r], &l[r]);
        else memset(p + r * G, 0, G * sizeof(float));
    }
}

/* Where value vectors come from (vld2): rows of fp32 / fp16 values, unpacked codes
 * (bytes), 4-bit payload rows, q8_0 / q4_0 block rows (times the block's scale dv). */
typedef enum { VL_F32, VL_F16, VL_U8, VL_NIB, VL_Q8, VL_Q4 } vl_kind;

/* Channels d0..d0+2W-1 (d0 % 2W == 0) of key t of V (rows of D values). */
static ALWAYS_INLINE void vld2(vf *v0, vf *v1, const vl_kind kind, const void *V, const float *dv, size_t D, size_t t,
                               size_t d0)
{
    if (kind == VL_F32) {
        const float *x = (const float *)V + t * D + d0;
        *v0 = vload(x);
        *v1 = vload(x + W);
    } else if (kind == VL_F16) {
        const uint16_t *x = (const uint16_t *)V + t * D + d0;
        *v0 = vld_f16(x);
        *v1 = vld_f16(x + W);
    } else if (kind == VL_U8) {
        const uint8_t *x = (const uint8_t *)V + t * D + d0;
        *v0 = vld_u8(x);
        *v1 = vld_u8(x + W);
    } else if (kind == VL_NIB) {
        vld2_nib(v0, v1, (const uint8_t *)V + t * (D / 2), d0, 0);
    } else {
        /* ggml blocks: 2-byte fp16 scale then the codes; block bi = t * D/32 + d0/32 */
        const size_t bi = t * (D / 32) + d0 / 32;
        const vf s = vset1(dv[bi]);
        if (kind == VL_Q8) {
            const uint8_t *b = (const uint8_t *)V + bi * SJK_Q8_0_NBYTES + 2 + d0 % 32;
            *v0 = vmul(vld_i8(b), s);
            *v1 = vmul(vld_i8(b + W), s);
        } else {
            vld2_q4(v0, v1, (const uint8_t *)V + bi * SJK_Q4_0_NBYTES + 2, d0 % 32, s);
        }
    }
}

/* Values for one row block (rows r0.. of acc, nvis the block's first row), in two steps:
 *   acc[r] = acc[r] * f[r] + (rec ? Vch · zz[r] : 0)
 *   acc[r][d] += (rec ? Vch[d] : 1) · Σ_t p[r][t] · V[t][d]
 * Keys go in blocks of blk so the block's values stay in L1 across the channel passes;
 * 2W channels x NR rows accumulate in registers. Keys beyond a row's nvis have p = 0. */
static ALWAYS_INLINE void v_accum(float *acc, size_t D, const uint32_t *nvis, size_t rb, const size_t NR,
                                  const float *p, const float *fct, size_t ntm, const size_t blk,
                                  const vl_kind kind, const void *V, const float *dv,
                                  const int rec, const float *vch, const float *zz)
{
    for (size_t r = 0; r < rb; r++) {
        if (!nvis[r]) continue;
        float *a = acc + r * D;
        const vf f = vset1(fct[r]);
        for (size_t d = 0; d < D; d += W)
            vstore(a + d, vfmadd(vload(a + d), f, rec ? vmul(vload(vch + d), vset1(zz[r])) : vzero()));
    }
    for (size_t tb = 0; tb < ntm; tb += blk) {
        const size_t te = tb + blk < ntm ? tb + blk : ntm;
        for (size_t d0 = 0; d0 < D; d0 += 2 * W) {
            vf a0[RBX], a1[RBX];
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) { a0[r] = vzero(); a1[r] = vzero(); }
            for (size_t t = tb; t < te; t++) {
                vf v0, v1;
                vld2(&v0, &v1, kind, V, dv, D, t, d0);
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < NR; r++) {
                    const vf pw = vset1(p[r * G + t]);
                    a0[r] = vfmadd(pw, v0, a0[r]);
                    a1[r] = vfmadd(pw, v1, a1[r]);
                }
            }
            for (size_t r = 0; r < rb; r++) {
                if (!nvis[r]) continue;
                float *a = acc + r * D + d0;
                const vf x0 = rec ? vmul(vload(vch + d0), a0[r]) : a0[r];
                const vf x1 = rec ? vmul(vload(vch + d0 + W), a1[r]) : a1[r];
                vstore(a, vadd(vload(a), x0));
                vstore(a + W, vadd(vload(a + W), x1));
            }
        }
    }
}

/* ---- fp32 and fp16 rows (decode) ------------------------------------------------------ */

/* Scores p[r][t] of the rows qrow[NR] against keys [0, ntm) of K (rows of D fp32 or
 * fp16 values). */
static ALWAYS_INLINE void rows_scores(float *p, const float *const *qrow, const void *K, size_t D, size_t ntm,
                                      const int f16, const size_t NR, const uint16_t *pv, const uint8_t *pf, size_t pfn)
{
    const size_t rowb = D * sizeof(uint16_t);
    for (size_t t = 0; t < ntm; t++) {
        /* fp16 rows: the chunk's V row t into L1 for the values that follow, the next
         * chunk's K row t into L2 (pv / pf NULL: none) */
        if (pv)
            for (size_t o = 0; o < rowb; o += 64) _mm_prefetch((const char *)(pv + t * D) + o, _MM_HINT_T0);
        for (size_t o = t * rowb; o < (t + 1) * rowb && o < pfn; o += 64) _mm_prefetch((const char *)pf + o, _MM_HINT_T1);
        vf s0[RBX], s1[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) { s0[r] = vzero(); s1[r] = vzero(); }
        for (size_t d = 0; d < D; d += 2 * W) {
            vf k0, k1;
            vld2(&k0, &k1, f16 ? VL_F16 : VL_F32, K, NULL, D, t, d);
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                s0[r] = vfmadd(vload(qrow[r] + d), k0, s0[r]);
                s1[r] = vfmadd(vload(qrow[r] + d + W), k1, s1[r]);
            }
        }
        for (size_t r = 0; r < NR; r++) p[r * G + t] = vhsum(vadd(s0[r], s1[r]));
    }
}

#if SJK_ATTN_W == 8
/* AVX2 (16 registers): the GQA rows of one KV head in one block where they fit, so that
 * no FMAs go to zero rows and each K / V load serves every row: R = 1, 2, 3 (an MHA head,
 * the 3 rows of a SmolLM2 head) as blocks of R, R = 5, 6 (a Qwen2.5 head: 12 accumulators
 * + 3 registers) as one block of 6; other R take blocks of RB. ROWS_NR(R, call) expands
 * call with NR_ a compile-time constant. */
#define ROWS_NR(R, call)                                                                                             \
    do {                                                                                                             \
        if ((R) == 1) { const size_t NR_ = 1; call; }                                                                \
        else if ((R) == 2) { const size_t NR_ = 2; call; }                                                           \
        else if ((R) == 3) { const size_t NR_ = 3; call; }                                                           \
        else { const size_t NR_ = 6; call; }                                                                         \
    } while (0)
#endif

/* Rows are processed NR (RB; on AVX2 also 1, 2, 3, 6: ROWS_NR) at a time with every
 * per-row loop of compile-time length (so accumulators stay in registers); a short last
 * block reads a zero query row. */
static ALWAYS_INLINE void chunk_rows(const float *q, size_t R, size_t D, const uint32_t *nvis, const void *K,
                                     const void *V, const int f16, float *m, float *l, float *acc, float *work,
                                     const uint8_t *pf, size_t pf_nbytes, const size_t NR)
{
    float *p = work;                       /* [RBX][G] scores, then probabilities */
    float *zero = work + RBX * G + RBX * D; /* [D] zeros */
    memset(zero, 0, D * sizeof(float));
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, r0, NR, &ntm);
        if (!ntm) continue; /* no row of the block sees a key of this chunk */
        const float *qrow[RBX];
        for (size_t r = 0; r < NR; r++) qrow[r] = r < rb ? q + (r0 + r) * D : zero;
        /* prefetches (fp16 only) on the first block of rows; later blocks find the lines */
        rows_scores(p, qrow, K, D, ntm, f16, NR, f16 && r0 == 0 ? (const uint16_t *)V : NULL, r0 == 0 ? pf : NULL,
                    r0 == 0 ? pf_nbytes : 0);
        float fct[RBX];
        softmax_block(p, fct, nvis + r0, rb, NR, m + r0, l + r0);
        v_accum(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, ntm, TB, f16 ? VL_F16 : VL_F32, V, NULL, 0, NULL, NULL);
    }
}

static void chunk_f32_x(const float *q, size_t R, size_t D, const uint32_t *nvis, const float *K, const float *V,
                        size_t n, float *m, float *l, float *acc, float *work)
{
    (void)n;
#if SJK_ATTN_W == 8
    if (R <= 3 || R == 5 || R == 6) {
        ROWS_NR(R, chunk_rows(q, R, D, nvis, K, V, 0, m, l, acc, work, NULL, 0, NR_));
        return;
    }
    chunk_rows(q, R, D, nvis, K, V, 0, m, l, acc, work, NULL, 0, RB);
#else
    ROWS_NR16(R, chunk_rows(q, R, D, nvis, K, V, 0, m, l, acc, work, NULL, 0, NR_));
#endif
}

static void chunk_f16_x(const float *q, size_t R, size_t D, const uint32_t *nvis, const uint16_t *K,
                        const uint16_t *V, size_t n, float *m, float *l, float *acc, float *work, const uint8_t *pf,
                        size_t pf_nbytes)
{
    (void)n;
#if SJK_ATTN_W == 8
    if (R <= 3 || R == 5 || R == 6) {
        ROWS_NR(R, chunk_rows(q, R, D, nvis, K, V, 1, m, l, acc, work, pf, pf_nbytes, NR_));
        return;
    }
    chunk_rows(q, R, D, nvis, K, V, 1, m, l, acc, work, pf, pf_nbytes, RB);
#else
    /* one block for a Qwen2.5 head's 6 rows (ROWS_NR16), so each K / V row is read once */
    ROWS_NR16(R, chunk_rows(q, R, D, nvis, K, V, 1, m, l, acc, work, pf, pf_nbytes, NR_));
#endif
}

/* ---- many query rows (prefill): chunk_f32_many ---------------------------------------
 * With R rows against one chunk the work is two small matrix products, S = Q·Kᵀ
 * (rows x keys over D) and A += P·V (rows x channels over keys), and the kernel is laid
 * out for them instead of for a few rows: no horizontal sum per (key, row) pair and no
 * K/V conversion per row block (the caller hands fp32 K and V, converted or decoded once
 * per chunk for all rows; attend.c).
 *
 * Rows go in blocks of MRB (32). Per block:
 *
 *   qT [D][rp]    the block's queries transposed (W x W register transposes; rp = rows
 *                 rounded up to W, zero columns past the last row), so that
 *   s  [G][rp]    scores: a tile of MANY_KT2 keys x 2W rows (8 x 32 on AVX-512, 4 x 16
 *                 on AVX2; 8 keys x W rows for an odd last W), each step d one broadcast
 *                 K[t][d] per key against the rows' q[.][d] in lanes; then the online
 *                 softmax update runs across lanes too (W rows at a time: running max,
 *                 exp, sums, the factors f; masked by nvis[r]), leaving p in s;
 *   acc[r][d]  = acc[r][d] * f[r] + Σ_t p[t][r] V[t][d], a tile of 4 rows x MANY_VV W
 *                 channels over the keys row r's tile may see, broadcasting p[t][r].
 *
 * Keys past the block's largest nvis are not computed (score tiles round up to the
 * tile's keys, reading the last visible key again; those scores are masked). */
#define MRB SJK_ATTN_MANY_RB
_Static_assert(MRB == 32 && G % 8 == 0, "chunk_f32_many: row blocks of 32, score tiles of 4 or 8 keys");

/* Scores of keys [0, nk) (nk a multiple of KT) against RZ W columns of qT from c0. */
static ALWAYS_INLINE void many_scores(float *s, const float *qT, const float *K, size_t D, size_t ntm, size_t rp,
                                      size_t c0, const size_t RZ, const size_t KT)
{
    const size_t nk = (ntm + KT - 1) / KT * KT;
    for (size_t t0 = 0; t0 < nk; t0 += KT) {
        const float *kr[8];
        for (size_t j = 0; j < KT; j++) kr[j] = K + (t0 + j < ntm ? t0 + j : ntm - 1) * D;
        vf a[8][2];
        _Pragma("GCC unroll 8")
        for (size_t j = 0; j < KT; j++)
            _Pragma("GCC unroll 2")
            for (size_t z = 0; z < RZ; z++) a[j][z] = vzero();
        for (size_t d = 0; d < D; d++) {
            vf qv[2];
            _Pragma("GCC unroll 2")
            for (size_t z = 0; z < RZ; z++) qv[z] = vload(qT + d * rp + c0 + W * z);
            _Pragma("GCC unroll 8")
            for (size_t j = 0; j < KT; j++) {
                const vf kb = vset1(kr[j][d]);
                _Pragma("GCC unroll 2")
                for (size_t z = 0; z < RZ; z++) a[j][z] = vfmadd(qv[z], kb, a[j][z]);
            }
        }
        _Pragma("GCC unroll 8")
        for (size_t j = 0; j < KT; j++)
            _Pragma("GCC unroll 2")
            for (size_t z = 0; z < RZ; z++) vstore(s + (t0 + j) * rp + c0 + W * z, a[j][z]);
    }
}

static void chunk_f32_many_x(const float *q, size_t R, size_t D, const uint32_t *nvis, const float *K, const float *V,
                             size_t n, float *m, float *l, float *acc, float *work)
{
    float *qT = work;         /* [D][rp] */
    float *s = qT + D * MRB;  /* [G][rp] scores, then probabilities */
    float *fct = s + G * MRB; /* [MRB] factors for the old state */
    const vf ninf = vset1(-INFINITY);
    (void)n;
    for (size_t b0 = 0; b0 < R; b0 += MRB) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, b0, MRB, &ntm), rp = (rb + W - 1) & ~(size_t)(W - 1);
        const uint32_t *nv = nvis + b0;
        if (!ntm) continue;
        for (size_t g = 0; g < rp; g += W)
            for (size_t d0 = 0; d0 < D; d0 += W) {
                vf x[W];
                for (size_t i = 0; i < W; i++) x[i] = g + i < rb ? vload(q + (b0 + g + i) * D + d0) : vzero();
                vtranspose(x);
                for (size_t i = 0; i < W; i++) vstore(qT + (d0 + i) * rp + g, x[i]);
            }
        size_t c0 = 0;
        for (; c0 + 2 * W <= rp; c0 += 2 * W) many_scores(s, qT, K, D, ntm, rp, c0, 2, MANY_KT2);
        if (c0 < rp) many_scores(s, qT, K, D, ntm, rp, c0, 1, 8);
        /* online softmax, W rows per vector (row b0 + g + i in lane i) */
        for (size_t g = 0; g < rp; g += W) {
            const vmask in = vm_first(rb - g);
            const vi nvv = vi_loadz(in, nv + g);
            const vmask live = vm_gt(in, nvv, 0);
            size_t ntg = 0;
            for (size_t i = g; i < g + W && i < rb; i++) ntg = nv[i] > ntg ? nv[i] : ntg;
            if (!ntg) continue;
            const vf mo = vload_or(ninf, live, m + b0 + g);
            vf mx = ninf;
            for (size_t t = 0; t < ntg; t++) mx = vmax(mx, vpick(vm_gt(in, nvv, (int)t), ninf, vload(s + t * rp + g)));
            const vf mn = vmax(mo, mx);
            const vf f = vkeep(vm_neq(live, mo, ninf), vexp(vsub(mo, mn)));
            vf sum = vzero();
            for (size_t t = 0; t < ntg; t++) {
                const vf p = vkeep(vm_gt(in, nvv, (int)t), vexp(vsub(vload(s + t * rp + g), mn)));
                vstore(s + t * rp + g, p);
                sum = vadd(sum, p);
            }
            vstore_m(l + b0 + g, live, vfmadd(vload_or(vzero(), live, l + b0 + g), f, sum));
            vstore_m(m + b0 + g, live, mn);
            vstore(fct + g, f);
        }
        /* values: 4 rows x MANY_VV W channels per tile, over the keys the tile's rows see */
        for (size_t d0 = 0; d0 < D; d0 += MANY_VV * W)
            for (size_t r0 = 0; r0 < rb; r0 += 4) {
                size_t nt = 0;
                for (size_t r = r0; r < r0 + 4 && r < rb; r++) nt = nv[r] > nt ? nv[r] : nt;
                if (!nt) continue;
                vf a[4][MANY_VV];
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < 4; r++)
                    _Pragma("GCC unroll 8")
                    for (size_t i = 0; i < MANY_VV; i++) a[r][i] = vzero();
                for (size_t t = 0; t < nt; t++) {
                    vf v[MANY_VV];
                    _Pragma("GCC unroll 8")
                    for (size_t i = 0; i < MANY_VV; i++) v[i] = vload(V + t * D + d0 + W * i);
                    _Pragma("GCC unroll 8")
                    for (size_t r = 0; r < 4; r++) {
                        const vf pb = vset1(s[t * rp + r0 + r]);
                        _Pragma("GCC unroll 8")
                        for (size_t i = 0; i < MANY_VV; i++) a[r][i] = vfmadd(pb, v[i], a[r][i]);
                    }
                }
                _Pragma("GCC unroll 8")
                for (size_t r = 0; r < 4; r++) {
                    if (r0 + r >= rb || !nv[r0 + r]) continue;
                    float *ad = acc + (b0 + r0 + r) * D + d0;
                    const vf f = vset1(fct[r0 + r]);
                    _Pragma("GCC unroll 8")
                    for (size_t i = 0; i < MANY_VV; i++) vstore(ad + W * i, vfmadd(vload(ad + W * i), f, a[r][i]));
                }
            }
    }
}
#undef MRB

/* ---- scalar records ------------------------------------------------------------------ */

/* The record's K scales folded into rows q[rb][D] of a block of NR: qs[r][d] = q[r][d] *
 * Kscale[d] and cz[r] = q[r] . Kzero (rows rb..NR-1: zero queries, cz 0). */
static inline void rec_fold(float *qs, float *cz, const float *q, size_t rb, size_t NR, size_t D, const sjk_attn_rec *rc)
{
    for (size_t r = 0; r < rb; r++) {
        const float *qr = q + r * D;
        vf z = vzero();
        for (size_t d = 0; d < D; d += W) {
            const vf qv = vload(qr + d);
            vstore(qs + r * D + d, vmul(qv, vload(rc->kscale + d)));
            z = vfmadd(qv, vload(rc->kzero + d), z);
        }
        cz[r] = vhsum(z);
    }
    for (size_t r = rb; r < NR; r++) {
        memset(qs + r * D, 0, D * sizeof(float));
        cz[r] = 0.0f;
    }
}

/* The online-softmax update of a record block's scores p[NR][G] (rows rb..NR-1 and keys
 * past a row's nvis: p = 0), then the V scales folded in: p[r][t] *= Vscale[t] and
 * zz[r] = Σ_t p[r][t] · Vzero[t] (before the scaling); fct[r] the old state's factor. */
static inline void rec_probs(float *p, float *fct, float *zz, const uint32_t *nvis, size_t rb, size_t NR, float *m,
                             float *l, const sjk_attn_rec *rc)
{
    for (size_t r = 0; r < NR; r++) {
        const size_t nv = r < rb ? nvis[r] : 0;
        fct[r] = 1.0f;
        zz[r] = 0.0f;
        if (!nv) { memset(p + r * G, 0, G * sizeof(float)); continue; }
        fct[r] = softmax_row(p + r * G, nv, &m[r], &l[r]);
        const size_t nvw = (nv + W - 1) & ~(size_t)(W - 1);
        vf z = vzero();
        for (size_t t = 0; t < nvw; t += W) {
            const vf pv = vload(p + r * G + t);
            z = vfmadd(pv, vload(rc->vzero + t), z);
            vstore(p + r * G + t, vmul(pv, vload(rc->vscale + t)));
        }
        zz[r] = vhsum(z);
    }
}

/* Scores of a record block in fp32: 2W tokens of one channel at a time (unpacked bytes,
 * or one 16-byte unit of 4-bit codes), x NR rows in registers,
 *   p[r][t] = Ktok[t] · (Σ_d qs[r][d] · code[d][t] + cz[r]),  t < ntm rounded up to 2W.
 * pfn bytes of the next record (rc->pf) are prefetched, a line per channel step. */
static ALWAYS_INLINE void rec_scores(float *p, const float *qs, const float *cz, const sjk_attn_rec *rc, size_t D,
                                     size_t ntm, size_t pfn, const size_t NR)
{
    const size_t ntw = (ntm + 2 * W - 1) & ~(size_t)(2 * W - 1);
    for (size_t t0 = 0; t0 < ntw; t0 += 2 * W) {
        vf s0[RBX], s1[RBX];
        _Pragma("GCC unroll 8")
        for (size_t r = 0; r < NR; r++) { s0[r] = vzero(); s1[r] = vzero(); }
        const size_t pfo = (t0 / (2 * W)) * D * 64;
        for (size_t d = 0; d < D; d++) {
            if (pfo + d * 64 < pfn) _mm_prefetch((const char *)rc->pf + pfo + d * 64, _MM_HINT_T1);
            vf k0, k1;
            if (rc->kc) {
                k0 = vld_u8(rc->kc + d * G + t0);
                k1 = vld_u8(rc->kc + d * G + t0 + W);
            } else {
                vld2_nib(&k0, &k1, rc->kp + d * (G / 2), t0, 0);
            }
            _Pragma("GCC unroll 8")
            for (size_t r = 0; r < NR; r++) {
                const vf qb = vset1(qs[r * D + d]);
                s0[r] = vfmadd(qb, k0, s0[r]);
                s1[r] = vfmadd(qb, k1, s1[r]);
            }
        }
        const vf kt0 = vload(rc->ktok + t0), kt1 = vload(rc->ktok + t0 + W);
        for (size_t r = 0; r < NR; r++) {
            const vf c = vset1(cz[r]);
            vstore(p + r * G + t0, vmul(kt0, vadd(s0[r], c)));
            vstore(p + r * G + t0 + W, vmul(kt1, vadd(s1[r], c)));
        }
    }
}

/* 4-bit K codes by integer dot products (chunk_rec_q16): defined by each including file. */
static ALWAYS_INLINE void rec_scores_q16(float *p, int16_t *q16, const float *qs, const float *cz, const sjk_attn_rec *rc, size_t D,
                           size_t ntm, size_t rb, size_t pfn, const size_t NR);

#if SJK_ATTN_W == 16
/* Unpacked K codes of up to 7 bits by int16 dot products (chunk_rec_v16 on AVX-512):
 * attn_avx512.c. */
static ALWAYS_INLINE void rec_scores_c16(float *p, int16_t *q16, const float *qs, const float *cz, const sjk_attn_rec *rc,
                                         size_t D, size_t ntm, size_t rb, size_t pfn, const size_t NR);
/* 4-bit V codes by int16 weights (chunk_rec_q16 on AVX-512): attn_avx512.c. */
static ALWAYS_INLINE void rec_values_q16(float *acc, size_t D, const uint32_t *nvis, size_t rb, const size_t NR,
                                         const float *p, const float *fct, const float *zz, size_t ntm,
                                         const sjk_attn_rec *rc, int16_t *w16);
#endif

/* Record chunk: scores by channel rows of codes (rec_scores; with q16 = 1, 4-bit K codes by
 * integer dot products: rec_scores_q16, attn_avx512.c / attn_avx2.c; q16 = 2, unpacked
 * codes by int16 ones, rec_scores_c16 on AVX-512), values by token rows of codes
 * (unpacked bytes, or 4-bit payload rows read in place); scales folded as in
 * attn_kernels.h. */
static ALWAYS_INLINE void chunk_rec_nr(const float *q, size_t R, size_t D, const uint32_t *nvis,
                                       const sjk_attn_rec *rc, float *m, float *l, float *acc, float *work,
                                       const size_t NR, const int q16, const int v16)
{
    float *p = work;            /* [RBX][G] */
    float *qs = work + RBX * G; /* [RBX][D] */
    for (size_t r0 = 0; r0 < R; r0 += NR) {
        size_t ntm;
        const size_t rb = block_rows(nvis, R, r0, NR, &ntm);
        if (!ntm) continue;
        float cz[RBX], zz[RBX], fct[RBX];
        rec_fold(qs, cz, q + r0 * D, rb, NR, D, rc);
        const size_t pfn = r0 == 0 ? rc->pf_nbytes : 0;
        if (q16) {
            int16_t *qi = (int16_t *)(void *)(work + RBX * (2 * D + 4 * G + 8)); /* [RBX][D] */
#if SJK_ATTN_W == 16
            if (q16 == 2) rec_scores_c16(p, qi, qs, cz, rc, D, ntm, rb, pfn, NR); /* unpacked codes */
            else
#endif
                rec_scores_q16(p, qi, qs, cz, rc, D, ntm, rb, pfn, NR);
        } else {
            rec_scores(p, qs, cz, rc, D, ntm, pfn, NR);
        }
        rec_probs(p, fct, zz, nvis + r0, rb, NR, m + r0, l + r0, rc);
#if SJK_ATTN_W == 16
        if (v16) { /* 4-bit V codes; the weights after the int16 queries [RBX][D] */
            int16_t *w16 = (int16_t *)(void *)(work + RBX * (2 * D + 4 * G + 8)) + RBX * D; /* [RBX][G] */
            rec_values_q16(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, zz, ntm, rc, w16);
            continue;
        }
#endif
        if (rc->vc) v_accum(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, ntm, TB, VL_U8, rc->vc, NULL, 1, rc->vch, zz);
        else v_accum(acc + r0 * D, D, nvis + r0, rb, NR, p, fct, ntm, NIB_BLK, VL_NIB, rc->vp, NULL, 1, rc->vch, zz);
    }
}

/* A scalar record (codes unpacked, or 4-bit read in place), scored in fp32. */
static void chunk_rec_scalar(const float *q, size_t R, size_t D, const uint32_t *nvis, const sjk_attn_rec *rc,
                             float *m, float *l, float *acc, float *work)
{
#if SJK_ATTN_W == 8
    /* the GQA rows in one block where they fit (ROWS_NR), so that a record is decoded
     * once per call and no FMAs go to zero rows; else 4 at a time */
    if (R <= 3 || R == 5 || R == 6) ROWS_NR(R, chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, NR_, 0, 0));
    else chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, RB, 0, 0);
#else
    ROWS_NR16(R, chunk_rec_nr(q, R, D, nvis, rc, m, l, acc, work, NR_, 0, 0));
#endif
}

static void f16_to_f32_x(float *dst, const uint8_t *src, size_t n)
{
    size_t i = 0;
    for (; i + W <= n; i += W) vstore(dst + i, vld_f16((const uint16_t *)(const void *)(src + 2 * i)));
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        dst[i] = _cvtsh_ss(h);
    }
}
