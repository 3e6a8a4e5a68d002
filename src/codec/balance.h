/* balance.h — log-domain Sinkhorn-style balancing of one R x C fp32 tile (docs/DESIGN.md §2.2).
 *
 * The tile M is [R][C] row-major; rows are the axis quantized as one group (K: rows =
 * channels, cols = tokens; V: rows = tokens, cols = channels). Balancing returns positive
 * s_row[R], s_col[C] such that B = M / (s_row (x) s_col) has near-equal row and column
 * standard deviations (unbiased, mean-centred). docs/BALANCING.md has the numbers behind
 * the sj rule.
 */
#ifndef SJK_BALANCE_H
#define SJK_BALANCE_H

#include <stddef.h>

#include "codec/codec_kernels.h"
#include "sjkvarn.h"

/* One balancing rule. The modes of sjk_balance_mode are fixed instances of it. */
typedef struct sjk_balance_rule {
    unsigned n_iter;          /* passes (column update, then row update) */
    float std_lo, std_hi;     /* clamp of each pass's std before its log */
    float log_lo, log_hi;     /* clamp of the cumulative log-scale */
    unsigned keep_best;       /* 1: keep the lowest-imbalance iterate, ties to the later one,
                                 identity as the initial candidate; 0: keep the final one */
    unsigned skip_constant;   /* 1: a row/column whose std is exactly 0 keeps its scale */
    float tol;                /* keep-final rules: stop early once a pass moves no scale by
                                 more than this (relative); 0 = always run n_iter passes */
    unsigned split;           /* 1: move a common factor between s_row and s_col so their
                                 geometric means are equal (products unchanged; keeps the
                                 stored fp16 scales away from under/overflow) */
} sjk_balance_rule;

/* The rule of a mode (OFF: n_iter = 0). */
sjk_balance_rule sjk_balance_rule_of(sjk_balance_mode mode);

/* Result details (optional). */
typedef struct sjk_balance_info {
    float imbalance_initial;  /* of the raw tile */
    float imbalance;          /* of the returned scaling */
    unsigned best_pass;       /* 0 = identity, else the pass whose scales were kept (keep-final
                                 rules: the number of passes run) */
} sjk_balance_info;

/* Scratch floats needed for an R x C tile. */
size_t sjk_balance_scratch_floats(size_t R, size_t C);

/* Balances M. Writes s_row, s_col (the scales) and inv_row, inv_col (their reciprocals as
 * exp(-log-scale), which the quantizer multiplies by). kern: NULL = the dispatched path.
 * R, C: multiples of 16 in [16, 4096]. Never allocates. */
void sjk_balance_run(const float *M, size_t R, size_t C, const sjk_balance_rule *rule,
                     const sjk_codec_kernels *kern, float *s_row, float *s_col,
                     float *inv_row, float *inv_col, float *scratch, sjk_balance_info *info);

/* Imbalance of M / (s_row (x) s_col) given the inverse scales: max/min of column stds +
 * max/min of row stds, denominators floored at 1e-8 (the reference's metric). */
float sjk_balance_imbalance(const float *M, size_t R, size_t C, const float *inv_row,
                            const float *inv_col, const sjk_codec_kernels *kern, float *scratch);

#endif
