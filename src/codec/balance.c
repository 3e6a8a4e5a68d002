/* balance.c — log-domain Sinkhorn-style balancing of one tile (docs/DESIGN.md §2.2; docs/BACKGROUND.md, "KVarN balancing").
 *
 * Why it is cheap. The current tile is never materialised: cur[i][j] = M[i][j] * er[i] *
 * ec[j] with er = exp(-a_row), ec = exp(-a_col). A column's std is ec[j] times the std of
 * M[:, j] * er (one sweep over M gives it for all columns), and a row's std is er[i] times
 * the std of M[i, :] * ec. After a row update the new row stds are known without a sweep
 * (er changed by a known factor), and the column sweep that measures the imbalance after
 * pass p is the same sweep that drives the column update of pass p + 1. So a pass costs
 * two sweeps over the tile plus R + C logs and exps.
 *
 * Each sweep is one pass with a shift (the first element of each row or column), which
 * keeps the E[x^2] - mean^2 cancellation small; the sums run in a fixed order on every
 * SIMD path (codec_kernels.h), so the scales, and the record bytes, are bit-identical on
 * every dispatch path.
 */
#include <math.h>
#include <string.h>

#include "codec/balance.h"

sjk_balance_rule sjk_balance_rule_of(sjk_balance_mode mode)
{
    switch (mode) {
    case SJK_BALANCE_REFERENCE:
        /* KVarN (docs/BACKGROUND.md, "KVarN balancing"): 8 passes, std in [1e-3, 1e3],
         * cumulative log-scale in [-0.3, 10], keep the best iterate (<=, identity first). */
        return (sjk_balance_rule){.n_iter = 8, .std_lo = 1e-3f, .std_hi = 1e3f, .log_lo = -0.3f,
                                  .log_hi = 10.0f, .keep_best = 1};
    case SJK_BALANCE_SJ:
        /* Chosen by `sjkvarn bench balance` (docs/BALANCING.md): up to 16 passes, a
         * symmetric clamp wide enough never to stall (|log-scale| <= 30 keeps every product
         * of the two scales and a tile value finite in fp32), constant rows/columns left
         * alone, keep the final iterate (with no stalling clamp it is the best one), stop
         * once a pass changes nothing but a common factor (3-4 passes on the measured
         * data, same SNR as 16), and split the scales evenly for fp16 storage. */
        return (sjk_balance_rule){.n_iter = 16, .std_lo = 1e-30f, .std_hi = 1e30f, .log_lo = -30.0f,
                                  .log_hi = 30.0f, .keep_best = 0, .skip_constant = 1, .split = 1,
                                  .tol = 1e-3f};
    case SJK_BALANCE_OFF:
    default:
        return (sjk_balance_rule){0};
    }
}

size_t sjk_balance_scratch_floats(size_t R, size_t C) { return 6 * R + 6 * C; }

static float ratio_of(const float *s, size_t n)
{
    float mx = s[0], mn = s[0];
    for (size_t i = 1; i < n; i++) {
        mx = s[i] > mx ? s[i] : mx;
        mn = s[i] < mn ? s[i] : mn;
    }
    return mx / (mn > 1e-8f ? mn : 1e-8f);
}

/* max/min - 1 over the non-zero entries: how unequal one axis's stds still are. (Not
 * |s - 1|: at the fixed point the row stds are 1 and the column stds a common c that need
 * not be 1; the pass then moves every scale by the same factor, which changes nothing.) */
static float spread_of(const float *s, size_t n)
{
    float mx = 0.0f, mn = 3.4e38f;
    for (size_t i = 0; i < n; i++)
        if (s[i] != 0.0f) {
            mx = s[i] > mx ? s[i] : mx;
            mn = s[i] < mn ? s[i] : mn;
        }
    return mx > 0.0f ? mx / mn - 1.0f : 0.0f;
}

/* Column stds of the current tile into cstd[C] (sum/sq: scratch of C floats each). */
static void col_stds(const sjk_codec_kernels *kern, const float *M, size_t R, size_t C,
                     const float *er, const float *ec, float *sum, float *sq, float *cstd)
{
    kern->col_sweep(M, R, C, er, sum, sq);
    kern->stds(sum, sq, C, (float)R, ec, cstd);
}

/* Row stds of M * ec (without the row factor) into rraw[R]. */
static void row_stds_raw(const sjk_codec_kernels *kern, const float *M, size_t R, size_t C,
                         const float *ec, float *sum, float *sq, float *rraw)
{
    kern->row_sweep(M, R, C, ec, sum, sq);
    kern->stds(sum, sq, R, (float)C, NULL, rraw);
}

float sjk_balance_imbalance(const float *M, size_t R, size_t C, const float *inv_row,
                            const float *inv_col, const sjk_codec_kernels *kern, float *scratch)
{
    if (!kern) kern = sjk_codec_kernels_get();
    float *sum = scratch, *sq = sum + (R > C ? R : C), *st = sq + (R > C ? R : C);
    col_stds(kern, M, R, C, inv_row, inv_col, sum, sq, st);
    float imb = ratio_of(st, C);
    row_stds_raw(kern, M, R, C, inv_col, sum, sq, st);
    for (size_t i = 0; i < R; i++) st[i] *= inv_row[i];
    return imb + ratio_of(st, R);
}

void sjk_balance_run(const float *M, size_t R, size_t C, const sjk_balance_rule *rule,
                     const sjk_codec_kernels *kern, float *s_row, float *s_col,
                     float *inv_row, float *inv_col, float *scratch, sjk_balance_info *info)
{
    if (!kern) kern = sjk_codec_kernels_get();
    /* scratch: a_r[R] a_c[C] best_r[R] best_c[C] rstd[R] cstd[C] sum[max] sq[max] */
    const size_t RC = R > C ? R : C;
    float *a_r = scratch, *a_c = a_r + R, *best_r = a_c + C, *best_c = best_r + R;
    float *rstd = best_c + C, *cstd = rstd + R, *sum = cstd + C, *sq = sum + RC;
    float best_imb = 0.0f;
    unsigned best_pass = 0;

    for (size_t i = 0; i < R; i++) a_r[i] = 0.0f, inv_row[i] = 1.0f;
    for (size_t j = 0; j < C; j++) a_c[j] = 0.0f, inv_col[j] = 1.0f;

    const unsigned n = rule ? rule->n_iter : 0;
    unsigned n_done = n;
    if (info) info->imbalance_initial = sjk_balance_imbalance(M, R, C, inv_row, inv_col, kern, sum);
    if (n > 0) col_stds(kern, M, R, C, inv_row, inv_col, sum, sq, cstd);
    if (n > 0 && rule->keep_best) {
        row_stds_raw(kern, M, R, C, inv_col, sum, sq, rstd);
        best_imb = ratio_of(cstd, C) + ratio_of(rstd, R);
        memset(best_r, 0, R * sizeof *best_r);
        memset(best_c, 0, C * sizeof *best_c);
    }
    for (unsigned it = 1; it <= n; it++) {
        /* 1-2: column update from the current column stds, then recompute ec */
        kern->update_scales(a_c, inv_col, cstd, C, rule->std_lo, rule->std_hi, rule->log_lo,
                            rule->log_hi, (int)rule->skip_constant);
        /* 3-4: row update; the row stds after it follow without a sweep (rraw: the row
         * stds without the row factor; sum is free again once row_stds_raw is done) */
        float *rraw = sq;
        row_stds_raw(kern, M, R, C, inv_col, sum, rraw, rraw);
        for (size_t i = 0; i < R; i++) rstd[i] = inv_row[i] * rraw[i];
        float dev = rule->tol > 0 ? spread_of(rstd, R) : 0.0f;
        kern->update_scales(a_r, inv_row, rstd, R, rule->std_lo, rule->std_hi, rule->log_lo,
                            rule->log_hi, (int)rule->skip_constant);
        for (size_t i = 0; i < R; i++) rstd[i] = inv_row[i] * rraw[i];
        /* 5: column stds of the new tile: the imbalance now, the column update next pass */
        if (rule->keep_best || it < n) col_stds(kern, M, R, C, inv_row, inv_col, sum, sq, cstd);
        /* converged: this pass's row update and the next pass's column update move every
         * scale by the same factor to within tol (relative), i.e. change nothing */
        if (!rule->keep_best && rule->tol > 0 && it < n) {
            float dc = spread_of(cstd, C);
            if ((dev > dc ? dev : dc) < rule->tol) {
                n_done = it;
                break;
            }
        }
        if (rule->keep_best) {
            float imb = ratio_of(cstd, C) + ratio_of(rstd, R);
            if (imb <= best_imb) {
                best_imb = imb;
                best_pass = it;
                memcpy(best_r, a_r, R * sizeof *a_r);
                memcpy(best_c, a_c, C * sizeof *a_c);
            }
        }
    }
    if (n > 0 && rule->keep_best) {
        memcpy(a_r, best_r, R * sizeof *a_r);
        memcpy(a_c, best_c, C * sizeof *a_c);
    } else {
        best_pass = n_done;
    }
    if (n > 0 && rule->split) {
        double mr = 0, mc = 0;
        for (size_t i = 0; i < R; i++) mr += a_r[i];
        for (size_t j = 0; j < C; j++) mc += a_c[j];
        float h = (float)((mc / (double)C - mr / (double)R) * 0.5);
        for (size_t i = 0; i < R; i++) a_r[i] += h;
        for (size_t j = 0; j < C; j++) a_c[j] -= h;
    }
    for (size_t i = 0; i < R; i++) s_row[i] = sjk_fast_expf(a_r[i]), inv_row[i] = sjk_fast_expf(-a_r[i]);
    for (size_t j = 0; j < C; j++) s_col[j] = sjk_fast_expf(a_c[j]), inv_col[j] = sjk_fast_expf(-a_c[j]);
    if (info) {
        info->best_pass = best_pass;
        info->imbalance = sjk_balance_imbalance(M, R, C, inv_row, inv_col, kern, sum);
    }
}
