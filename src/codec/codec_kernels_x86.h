/* codec_kernels_x86.h — the x86 SIMD seal and decode kernels (codec_kernels.h), written
 * once and compiled twice: codec_kernels_avx2.c (8 lanes, __m256) and
 * codec_kernels_avx512.c (16 lanes, __m512). Include it after defining SJK_CK_W (8 or 16),
 * SJK_CK_NAME (the table's name string) and SJK_CK_SFX(name) (the suffix of its symbol).
 * (Not a normal header: no include guard, included by exactly those two files.)
 *
 * Every kernel is bit-identical to the scalar reference in codec_kernels.c: the same IEEE
 * operations in the same order (no FMA), the row sweep's 16 partial sums in the reference
 * tree. What differs between the instruction sets (masks: AVX-512 __mmask16, AVX2 lane
 * masks; rounding; horizontal reductions; the code unpacking; the W x W transposes) is in
 * the small primitives at the top of this file; the kernels below them are the same text
 * for both widths. */
#include <immintrin.h>

#include "codec/codec_kernels_table.h"
#include "codec/record_layout.h"

#define W SJK_CK_W
#define SJK_X86_W SJK_CK_W
#include "codec/x86_vec.h"

/* ---- primitives, one block per width ------------------------------------------------ */
#if SJK_CK_W == 16
#define ROW_BLOCK 4 /* rows of the row sweep at a time (independent accumulator chains) */

static inline vf vround(vf x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vmask vgt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
static inline vmask veq(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
static inline vmask vnone(void) { return 0; }
static inline vi vinc(vmask m, vi e) { return _mm512_mask_add_epi32(e, m, e, _mm512_set1_epi32(1)); }

/* The reference tree: p[l] += p[l+8]; p[l] += p[l+4]; p[l] += p[l+2]; p[0] += p[1]. */
static inline float tree16(const vf *p)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(p[0]), _mm512_extractf32x8_ps(p[0], 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}
static inline float vhmin(vf v) { return _mm512_reduce_min_ps(v); }
static inline float vhmax(vf v) { return _mm512_reduce_max_ps(v); }

/* 16 int32 codes (0..15) -> 16 bytes in order */
static inline void store_codes16(uint8_t *dst, const vi *q)
{
    _mm_storeu_si128((__m128i *)dst, _mm512_cvtepi32_epi8(q[0]));
}

/* NaN, Inf, zero and denormals -> +0; finite values clamped to +-65504 */
static inline vf sanitize(vf x)
{
    const vi e = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7F800000));
    const vmask ok = _mm512_cmpneq_epi32_mask(e, _mm512_set1_epi32(0x7F800000)) &
                     _mm512_cmpneq_epi32_mask(e, _mm512_setzero_si512());
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-65504.0f)), _mm512_set1_ps(65504.0f));
    return _mm512_maskz_mov_ps(ok, x);
}

/* Codes i..i+15 (i % 16 == 0) of a payload row of n codes of 1..4 bits (1: the high
 * field of a 5-bit row), as 32-bit lanes. */
static inline vi unpack_le4(const uint8_t *row, size_t n, unsigned bits, size_t i)
{
    if (bits == 1) return _mm512_maskz_mov_epi32((vmask)sjk_rd_u16le(row + i / 8), _mm512_set1_epi32(1));
    if (bits == 4) {
        vi b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + (i / 32) * 16)));
        return _mm512_and_si512(_mm512_srli_epi32(b, (unsigned)(4 * ((i % 32) / 16))), _mm512_set1_epi32(15));
    }
    vi b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + (i / 64) * 16)));
    vi c = _mm512_and_si512(_mm512_srli_epi32(b, (unsigned)(2 * ((i % 64) / 16))), _mm512_set1_epi32(3));
    if (bits == 3) {
        vmask h = (vmask)sjk_rd_u16le(row + n / 4 + i / 8);
        c = _mm512_mask_or_epi32(c, h, c, _mm512_set1_epi32(4));
    }
    return c;
}

/* Codes i..i+15 of a payload row of any width (2..8 bits, docs/FORMAT.md §3). */
static inline vi unpack(const uint8_t *row, size_t n, unsigned bits, size_t i)
{
    if (bits == 8) return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + i)));
    if (bits > 4)
        return _mm512_or_si512(unpack_le4(row, n, 4, i), _mm512_slli_epi32(unpack_le4(row + n / 2, n, bits - 4, i), 4));
    return unpack_le4(row, n, bits, i);
}

/* The last stage of the W x W transpose (transpose_store below): u holds, per 128-bit
 * lane, 4 x 4 blocks already transposed; writes row i to out + i * stride. */
static inline void transpose_finish(const vf u[16], float *out, size_t stride)
{
    for (int b = 0; b < 4; b++) {
        vf va = _mm512_shuffle_f32x4(u[b], u[4 + b], 0x88);
        vf vb = _mm512_shuffle_f32x4(u[b], u[4 + b], 0xDD);
        vf vc = _mm512_shuffle_f32x4(u[8 + b], u[12 + b], 0x88);
        vf vd = _mm512_shuffle_f32x4(u[8 + b], u[12 + b], 0xDD);
        _mm512_storeu_ps(out + (size_t)b * stride, _mm512_shuffle_f32x4(va, vc, 0x88));
        _mm512_storeu_ps(out + (size_t)(8 + b) * stride, _mm512_shuffle_f32x4(va, vc, 0xDD));
        _mm512_storeu_ps(out + (size_t)(4 + b) * stride, _mm512_shuffle_f32x4(vb, vd, 0x88));
        _mm512_storeu_ps(out + (size_t)(12 + b) * stride, _mm512_shuffle_f32x4(vb, vd, 0xDD));
    }
}

#elif SJK_CK_W == 8
#define ROW_BLOCK 2

static inline vf vround(vf x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vmask vgt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
static inline vmask veq(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
static inline vmask vnone(void) { return _mm256_setzero_ps(); }
static inline vi vinc(vmask m, vi e)
{
    return _mm256_add_epi32(e, _mm256_and_si256(_mm256_castps_si256(m), _mm256_set1_epi32(1)));
}

/* Partials 0..7 in p[0], 8..15 in p[1]; the reference tree. */
static inline float tree16(const vf *p)
{
    __m256 s = _mm256_add_ps(p[0], p[1]);
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    __m128 y = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(y, _mm_shuffle_ps(y, y, 1)));
}
static inline float vhmin(vf v)
{
    __m128 x = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_min_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_min_ss(x, _mm_shuffle_ps(x, x, 1)));
}
static inline float vhmax(vf v)
{
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_shuffle_ps(x, x, 1)));
}

/* 16 int32 codes (0..15) in q[0], q[1] -> 16 bytes in order */
static inline void store_codes16(uint8_t *dst, const vi *q)
{
    __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(q[0], q[1]), 0xD8);
    _mm_storeu_si128((__m128i *)dst, _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
}

static inline vf sanitize(vf x)
{
    const vi e = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7F800000));
    const vi bad = _mm256_or_si256(_mm256_cmpeq_epi32(e, _mm256_set1_epi32(0x7F800000)),
                                   _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-65504.0f)), _mm256_set1_ps(65504.0f));
    return _mm256_andnot_ps(_mm256_castsi256_ps(bad), x);
}

/* Codes i..i+7 (i % 8 == 0) of a payload row of n codes of 1..4 bits (1: the high
 * field of a 5-bit row), as 32-bit lanes. */
static inline vi unpack_le4(const uint8_t *row, size_t n, unsigned bits, size_t i)
{
    if (bits == 1) {
        const vi sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        vi h = _mm256_and_si256(_mm256_set1_epi32(row[i / 8]), sel);
        return _mm256_and_si256(_mm256_cmpeq_epi32(h, sel), _mm256_set1_epi32(1));
    }
    if (bits == 4) {
        vi b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + (i / 32) * 16 + i % 16)));
        return _mm256_and_si256(_mm256_srli_epi32(b, (int)(4 * ((i % 32) / 16))), _mm256_set1_epi32(15));
    }
    vi b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + (i / 64) * 16 + i % 16)));
    vi c = _mm256_and_si256(_mm256_srli_epi32(b, (int)(2 * ((i % 64) / 16))), _mm256_set1_epi32(3));
    if (bits == 3) {
        const vi sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        vi h = _mm256_and_si256(_mm256_set1_epi32(row[n / 4 + i / 8]), sel);
        c = _mm256_or_si256(c, _mm256_and_si256(_mm256_cmpeq_epi32(h, sel), _mm256_set1_epi32(4)));
    }
    return c;
}

/* Codes i..i+7 of a payload row of any width (2..8 bits, docs/FORMAT.md §3). */
static inline vi unpack(const uint8_t *row, size_t n, unsigned bits, size_t i)
{
    if (bits == 8) return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + i)));
    if (bits > 4)
        return _mm256_or_si256(unpack_le4(row, n, 4, i), _mm256_slli_epi32(unpack_le4(row + n / 2, n, bits - 4, i), 4));
    return unpack_le4(row, n, bits, i);
}

static inline void transpose_finish(const vf u[8], float *out, size_t stride)
{
    for (int b = 0; b < 4; b++) {
        _mm256_storeu_ps(out + (size_t)b * stride, _mm256_permute2f128_ps(u[b], u[4 + b], 0x20));
        _mm256_storeu_ps(out + (size_t)(4 + b) * stride, _mm256_permute2f128_ps(u[b], u[4 + b], 0x31));
    }
}
#else
#error "codec_kernels_x86.h: define SJK_CK_W as 8 or 16"
#endif

/* W x W transpose: r[c] holds column c of a W x W block (lane = row); writes row i
 * (lanes = columns 0..W-1) to out + i * stride. The first two stages work within 128-bit
 * lanes and are the same for both widths; transpose_finish moves the 4 x 4 blocks. */
static inline void transpose_store(const vf r[W], float *out, size_t stride)
{
    vf t[W], u[W];
    for (int a = 0; a < W; a += 2) {
        t[a] = VF(unpacklo_ps)(r[a], r[a + 1]);
        t[a + 1] = VF(unpackhi_ps)(r[a], r[a + 1]);
    }
    for (int g = 0; g < W / 4; g++) {
        const vf *tt = t + 4 * g;
        u[4 * g + 0] = VF(shuffle_ps)(tt[0], tt[2], 0x44);
        u[4 * g + 1] = VF(shuffle_ps)(tt[0], tt[2], 0xEE);
        u[4 * g + 2] = VF(shuffle_ps)(tt[1], tt[3], 0x44);
        u[4 * g + 3] = VF(shuffle_ps)(tt[1], tt[3], 0xEE);
    }
    transpose_finish(u, out, stride);
}

#define P16 (16 / W) /* vectors per 16 values */

/* ---- the kernels ---------------------------------------------------------------------- */

static void col_sweep(const float *M, size_t R, size_t C, const float *rs, float *sum, float *sq)
{
    /* 4W columns at a time: 4 vectors of sums and 4 of squares stay in registers */
    for (size_t j = 0; j < C; j += 4 * W) {
        const size_t nv = (C - j) >= 4 * W ? 4 : (C - j) / W;
        vf s[4], q[4], k[4];
        const vf r0 = VF(set1_ps)(rs[0]);
        for (size_t v = 0; v < nv; v++) {
            s[v] = VF(setzero_ps)();
            q[v] = VF(setzero_ps)();
            k[v] = VF(mul_ps)(VF(loadu_ps)(M + j + W * v), r0);
        }
        for (size_t i = 0; i < R; i++) {
            const float *m = M + i * C + j;
            const vf ri = VF(set1_ps)(rs[i]);
            for (size_t v = 0; v < nv; v++) {
                vf d = VF(sub_ps)(VF(mul_ps)(VF(loadu_ps)(m + W * v), ri), k[v]);
                s[v] = VF(add_ps)(s[v], d);
                q[v] = VF(add_ps)(q[v], VF(mul_ps)(d, d));
            }
        }
        for (size_t v = 0; v < nv; v++) {
            VF(storeu_ps)(sum + j + W * v, s[v]);
            VF(storeu_ps)(sq + j + W * v, q[v]);
        }
    }
}

static void row_sweep(const float *M, size_t R, size_t C, const float *cs, float *sum, float *sq)
{
    /* ROW_BLOCK rows at a time, each in the reference order: partial l of a row takes
     * columns l, l + 16, ...; the 16 partials are P16 vectors */
    for (size_t i = 0; i < R; i += ROW_BLOCK) {
        const float *m = M + i * C;
        vf x0[ROW_BLOCK], p[ROW_BLOCK][P16], q[ROW_BLOCK][P16];
        for (int r = 0; r < ROW_BLOCK; r++) {
            x0[r] = VF(set1_ps)(m[r * C] * cs[0]);
            for (int v = 0; v < P16; v++) p[r][v] = q[r][v] = VF(setzero_ps)();
        }
        for (size_t j = 0; j < C; j += 16) {
            vf c[P16];
            for (int v = 0; v < P16; v++) c[v] = VF(loadu_ps)(cs + j + W * v);
            for (int r = 0; r < ROW_BLOCK; r++)
                for (int v = 0; v < P16; v++) {
                    vf d = VF(sub_ps)(VF(mul_ps)(VF(loadu_ps)(m + r * C + j + W * v), c[v]), x0[r]);
                    p[r][v] = VF(add_ps)(p[r][v], d);
                    q[r][v] = VF(add_ps)(q[r][v], VF(mul_ps)(d, d));
                }
        }
        for (int r = 0; r < ROW_BLOCK; r++) {
            sum[i + r] = tree16(p[r]);
            sq[i + r] = tree16(q[r]);
        }
    }
}

static void stds(const float *sum, const float *sq, size_t n, float cnt, const float *f, float *out)
{
    const vf vc = VF(set1_ps)(cnt), vc1 = VF(set1_ps)(cnt - 1.0f), zero = VF(setzero_ps)();
    for (size_t j = 0; j < n; j += W) {
        vf s = VF(loadu_ps)(sum + j);
        vf v = VF(div_ps)(VF(sub_ps)(VF(loadu_ps)(sq + j), VF(div_ps)(VF(mul_ps)(s, s), vc)), vc1);
        vf r = VF(sqrt_ps)(VF(max_ps)(v, zero));
        if (f) r = VF(mul_ps)(VF(loadu_ps)(f + j), r);
        VF(storeu_ps)(out + j, r);
    }
}

/* sjk_fast_logf / sjk_fast_expf (codec_kernels.c), W lanes, the same operations. */
static inline vf fast_log(vf x)
{
    const vi u = VCAST_SI(x);
    vi e = VF(sub_epi32)(VAND(VF(srli_epi32)(u, 23), VF(set1_epi32)(0xFF)), VF(set1_epi32)(127));
    vf m = VCAST_PS(VOR(VAND(u, VF(set1_epi32)(0x7FFFFF)), VF(set1_epi32)(0x3F800000)));
    const vmask big = vgt(m, VF(set1_ps)(1.41421356f));
    m = vpick(big, m, VF(mul_ps)(m, VF(set1_ps)(0.5f)));
    e = vinc(big, e);
    const vf one = VF(set1_ps)(1.0f);
    vf s = VF(div_ps)(VF(sub_ps)(m, one), VF(add_ps)(m, one));
    vf z = VF(mul_ps)(s, s);
    vf p = VF(set1_ps)(0.11111111f);
    p = VF(add_ps)(VF(mul_ps)(p, z), VF(set1_ps)(0.14285715f));
    p = VF(add_ps)(VF(mul_ps)(p, z), VF(set1_ps)(0.2f));
    p = VF(add_ps)(VF(mul_ps)(p, z), VF(set1_ps)(0.33333334f));
    p = VF(add_ps)(VF(mul_ps)(p, z), one);
    vf lm = VF(mul_ps)(VF(add_ps)(s, s), p);
    vf fe = VF(cvtepi32_ps)(e);
    return VF(add_ps)(VF(add_ps)(lm, VF(mul_ps)(fe, VF(set1_ps)(1.428606765330187e-06f))),
                      VF(mul_ps)(fe, VF(set1_ps)(0.693145751953125f)));
}

static inline vf fast_exp(vf y)
{
    vf n = vround(VF(mul_ps)(y, VF(set1_ps)(1.44269504f)));
    vf r = VF(sub_ps)(VF(sub_ps)(y, VF(mul_ps)(n, VF(set1_ps)(0.693145751953125f))),
                      VF(mul_ps)(n, VF(set1_ps)(1.428606765330187e-06f)));
    vf p = VF(set1_ps)(1.98412698e-4f);
    p = VF(add_ps)(VF(mul_ps)(p, r), VF(set1_ps)(1.38888889e-3f));
    p = VF(add_ps)(VF(mul_ps)(p, r), VF(set1_ps)(8.33333333e-3f));
    p = VF(add_ps)(VF(mul_ps)(p, r), VF(set1_ps)(4.16666667e-2f));
    p = VF(add_ps)(VF(mul_ps)(p, r), VF(set1_ps)(0.166666667f));
    p = VF(add_ps)(VF(mul_ps)(p, r), VF(set1_ps)(0.5f));
    p = VF(add_ps)(VF(mul_ps)(p, r), VF(set1_ps)(1.0f));
    p = VF(add_ps)(VF(mul_ps)(p, r), VF(set1_ps)(1.0f));
    vi b = VF(slli_epi32)(VF(add_epi32)(VF(cvtps_epi32)(n), VF(set1_epi32)(127)), 23);
    return VF(mul_ps)(p, VCAST_PS(b));
}

static void update_scales(float *a, float *inv, const float *st, size_t n, float std_lo, float std_hi,
                          float log_lo, float log_hi, int skip)
{
    const vf slo = VF(set1_ps)(std_lo), shi = VF(set1_ps)(std_hi);
    const vf llo = VF(set1_ps)(log_lo), lhi = VF(set1_ps)(log_hi);
    const vf sign = VF(set1_ps)(-0.0f);
    for (size_t j = 0; j < n; j += W) {
        vf s = VF(loadu_ps)(st + j), va = VF(loadu_ps)(a + j);
        vf c = VF(min_ps)(VF(max_ps)(s, slo), shi);
        vf t = VF(min_ps)(VF(max_ps)(VF(add_ps)(va, fast_log(c)), llo), lhi);
        vmask keep = skip ? veq(s, VF(setzero_ps)()) : vnone();
        va = vpick(keep, t, va);
        VF(storeu_ps)(a + j, va);
        VF(storeu_ps)(inv + j, fast_exp(VF(xor_ps)(va, sign)));
    }
}

static void scale_row(const float *m, size_t n, float ir, const float *ic, float *b)
{
    const vf r = VF(set1_ps)(ir);
    for (size_t j = 0; j < n; j += W)
        VF(storeu_ps)(b + j, VF(mul_ps)(VF(mul_ps)(VF(loadu_ps)(m + j), VF(loadu_ps)(ic + j)), r));
}

static void rtn_row(const float *m, size_t n, float ir, const float *ic, unsigned qmax, uint8_t *codes,
                    float *lo_out, float *step_out)
{
    const vf r = VF(set1_ps)(ir);
    vf vlo = VF(mul_ps)(VF(mul_ps)(VF(loadu_ps)(m), VF(loadu_ps)(ic)), r), vhi = vlo;
    for (size_t j = W; j < n; j += W) {
        vf b = VF(mul_ps)(VF(mul_ps)(VF(loadu_ps)(m + j), VF(loadu_ps)(ic + j)), r);
        vlo = VF(min_ps)(vlo, b);
        vhi = VF(max_ps)(vhi, b);
    }
    float lo = vhmin(vlo), hi = vhmax(vhi);
    lo += 0.0f;
    float step = (hi - lo) / (float)qmax;
    if (!(step >= 1e-10f)) step = 1e-10f;
    const vf vl = VF(set1_ps)(lo), vs = VF(set1_ps)(step);
    const vf zero = VF(setzero_ps)(), vq = VF(set1_ps)((float)qmax);
    for (size_t j = 0; j < n; j += 16) {
        vi qi[P16];
        for (int h = 0; h < P16; h++) {
            const size_t jj = j + W * (size_t)h;
            vf b = VF(mul_ps)(VF(mul_ps)(VF(loadu_ps)(m + jj), VF(loadu_ps)(ic + jj)), r);
            vf q = vround(VF(div_ps)(VF(sub_ps)(b, vl), vs));
            qi[h] = VF(cvttps_epi32)(VF(min_ps)(VF(max_ps)(q, zero), vq));
        }
        store_codes16(codes + j, qi);
    }
    *lo_out = lo;
    *step_out = step;
}

static void load_tiles(float *kt, float *vt, const float *k, const float *v, size_t D)
{
    const size_t G = SJK_GROUP;
    for (size_t i = 0; v && i < G * D; i += W) VF(storeu_ps)(vt + i, sanitize(VF(loadu_ps)(v + i)));
    for (size_t t0 = 0; k && t0 < G; t0 += W)
        for (size_t d0 = 0; d0 < D; d0 += W) {
            vf r[W];
            for (int t = 0; t < W; t++) r[t] = sanitize(VF(loadu_ps)(k + (t0 + (size_t)t) * D + d0));
            transpose_store(r, kt + d0 * G + t0, G);
        }
}

static void decode_k16(float *k, size_t D, const uint8_t *payload, size_t row_nbytes, unsigned bits,
                       const float *scale, const float *zero, const float *tok)
{
    for (size_t t0 = 0; t0 < SJK_GROUP; t0 += W) {
        const vf vt = VF(loadu_ps)(tok + t0);
        for (size_t c0 = 0; c0 < 16; c0 += W) {
            vf r[W];
            for (size_t c = 0; c < W; c++) {
                vf q = VF(cvtepi32_ps)(unpack(payload + (c0 + c) * row_nbytes, SJK_GROUP, bits, t0));
                r[c] = VF(mul_ps)(VF(add_ps)(VF(mul_ps)(q, VF(set1_ps)(scale[c0 + c])), VF(set1_ps)(zero[c0 + c])),
                                  vt);
            }
            transpose_store(r, k + t0 * D + c0, D);
        }
    }
}

static void decode_v_row(float *v, size_t n, const uint8_t *row, unsigned bits, float scale, float zero,
                         const float *ch)
{
    const vf vs = VF(set1_ps)(scale), vz = VF(set1_ps)(zero);
    for (size_t d = 0; d < n; d += W) {
        vf q = VF(cvtepi32_ps)(unpack(row, n, bits, d));
        VF(storeu_ps)(v + d, VF(mul_ps)(VF(add_ps)(VF(mul_ps)(q, vs), vz), VF(loadu_ps)(ch + d)));
    }
}

const sjk_codec_kernels SJK_CK_SFX(sjk_codec_kernels_table) = {
    SJK_CK_NAME, col_sweep, row_sweep, stds, update_scales, load_tiles, scale_row, rtn_row,
    decode_k16, decode_v_row,
};
