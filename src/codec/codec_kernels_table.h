/* codec_kernels_table.h — the inner loops of the seal (balancing sweeps, row quantization)
 * and of record decode as one table: the contract that the scalar reference
 * (codec_kernels.c) and its SIMD twins (codec_kernels_avx2.c, codec_kernels_avx512.c,
 * from codec_kernels_x86.h) implement; codec_kernels.h dispatches.
 *
 * Determinism contract: the sweeps and the quantizer are BIT-EXACT across paths. Every
 * path performs the same IEEE operations in the same order (no FMA contraction, fixed
 * per-lane accumulation order and a fixed reduction tree), so a record has the same bytes
 * whichever path sealed it. The decoders are bit-exact too (mul then add, no FMA).
 *
 * Canonical orders (the scalar reference spells them out):
 *  - column sweep: each column j accumulates rows i = 0, 1, ..., R-1 in order;
 *  - row sweep: 16 partial sums, partial l takes columns j = l, l+16, l+32, ... in order;
 *    then p[l] += p[l+8] (l < 8), p[l] += p[l+4] (l < 4), p[l] += p[l+2] (l < 2), p[0] += p[1].
 * Row and column counts are multiples of 16 (D in {64..512}, G = 128).
 */
#ifndef SJK_CODEC_KERNELS_TABLE_H
#define SJK_CODEC_KERNELS_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sjk_codec_kernels {
    const char *name; /* "ref", "avx2", "avx512" */
    /* Column statistics of X = diag(rs) M, M [R][C] row-major. With the shift K_j = X_0j:
     * sum[j] = sum_i (X_ij - K_j), sq[j] = sum_i (X_ij - K_j)^2. */
    void (*col_sweep)(const float *M, size_t R, size_t C, const float *rs, float *sum, float *sq);
    /* Row statistics of X = M diag(cs). With K_i = X_i0: sum[i], sq[i] as above. */
    void (*row_sweep)(const float *M, size_t R, size_t C, const float *cs, float *sum, float *sq);
    /* out[j] = f[j] * sqrt(max((sq[j] - sum[j] * sum[j] / cnt) / (cnt - 1), 0)) (f = NULL: 1),
     * for j < n (n a multiple of 16): unbiased stds from shifted sums, in fp32. */
    void (*stds)(const float *sum, const float *sq, size_t n, float cnt, const float *f, float *out);
    /* One balancing update of n log-scales (n a multiple of 16): unless skip && st[j] == 0,
     * a[j] = clamp(a[j] + log(clamp(st[j], std_lo, std_hi)), log_lo, log_hi); then
     * inv[j] = exp(-a[j]). log and exp are the polynomials of sjk_fast_logf/expf
     * (codec_kernels.c), evaluated identically on every path. */
    void (*update_scales)(float *a, float *inv, const float *st, size_t n, float std_lo, float std_hi,
                          float log_lo, float log_hi, int skip);
    /* Loads one group into the two tiles, sanitized (NaN/Inf/zero/denormal -> +0, |x| >
     * 65504 -> +-65504): kt[d][t] = san(k[t][d]) (K transposed to channel-major),
     * vt[t][d] = san(v[t][d]). k, v: [128][D], D a multiple of 16; k NULL: no K tile
     * (kt untouched), v NULL: no V tile (a seal of one part, sjk_record_seal_part). */
    void (*load_tiles)(float *kt, float *vt, const float *k, const float *v, size_t D);
    /* b[j] = (m[j] * ic[j]) * ir: one balanced row. */
    void (*scale_row)(const float *m, size_t n, float ir, const float *ic, float *b);
    /* Scalar body, fused with scale_row: b as above; lo = min b, step = max((max b - lo) /
     * qmax, 1e-10); codes[j] = clamp(rint((b[j] - lo) / step), 0, qmax) (ties to even). */
    void (*rtn_row)(const float *m, size_t n, float ir, const float *ic, unsigned qmax,
                    uint8_t *codes, float *lo, float *step);
    /* Record decode of K: rows d0..d0+15 of the K payload (each `row_nbytes` apart, 128
     * tokens, `bits` per code, docs/FORMAT.md order) into k[t][d0 + c] for all 128 tokens,
     * k having row stride D. scale/zero: the 16 channels' fp32 Kscale/Kzero; tok: Ktok[128]. */
    void (*decode_k16)(float *k, size_t D, const uint8_t *payload, size_t row_nbytes,
                       unsigned bits, const float *scale, const float *zero, const float *tok);
    /* Record decode of one V row of n codes: v[d] = (q[d] * scale + zero) * ch[d]. */
    void (*decode_v_row)(float *v, size_t n, const uint8_t *row, unsigned bits, float scale,
                         float zero, const float *ch);
} sjk_codec_kernels;

/* The tables themselves (defined in codec_kernels_avx*.c when the compiler targets x86-64). */
extern const sjk_codec_kernels sjk_codec_kernels_table_ref;
extern const sjk_codec_kernels sjk_codec_kernels_table_avx2;
extern const sjk_codec_kernels sjk_codec_kernels_table_avx512;

#endif
