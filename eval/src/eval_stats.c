/* eval_stats.c — KL of two next-token distributions, summaries, and paired bootstrap
 * comparisons for the KL study (docs/DESIGN.md §4).
 *
 * KL is heavy-tailed: a few positions carry most of the mass. So a configuration is
 * described by its mean and its high percentiles, and two configurations are compared by
 * the ratio of their means over the same positions with bootstrap intervals, twice: once
 * resampling positions inside each document (how sure are we on this text), once
 * resampling whole documents (would it hold on other texts). Both use a seeded PRNG, so a
 * rerun prints the same interval. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_internal.h"

/* Log-sum-exp of logits in double, with the maximum subtracted first so that exp never
 * overflows; also the (first) argmax. Returns 0 if a logit is NaN or +Inf. */
static int lse_argmax(const float *x, size_t n, double *max_out, double *lse_out,
                      uint32_t *arg_out)
{
    double mx = -INFINITY;
    uint32_t arg = 0;
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        if (isnan(v) || v == INFINITY) return 0;
        if (v > mx) { mx = v; arg = (uint32_t)i; }
    }
    if (mx == -INFINITY) return 0; /* no token has any probability */
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
    *max_out = mx;
    *lse_out = log(s);
    *arg_out = arg;
    return 1;
}

sjk_status sjk_eval_compare_logits(const float *p_logits, const float *q_logits,
                                   size_t n_vocab, sjk_eval_cmp *out)
{
    if (!p_logits || !q_logits || !out || n_vocab == 0 || n_vocab > UINT32_MAX)
        return SJK_ERR_PARAM;
    double pm, pl, qm, ql;
    uint32_t pa, qa;
    if (!lse_argmax(p_logits, n_vocab, &pm, &pl, &pa)) return SJK_ERR_RANGE;
    if (!lse_argmax(q_logits, n_vocab, &qm, &ql, &qa)) return SJK_ERR_RANGE;
    /* log p_i = x_i - pm - pl; log q_i = y_i - qm - ql. */
    double kl = 0.0;
    for (size_t i = 0; i < n_vocab; i++) {
        double lp = (double)p_logits[i] - pm - pl;
        if (lp == -INFINITY) continue;
        double p = exp(lp);
        if (p == 0.0) continue;
        double lq = (double)q_logits[i] - qm - ql;
        kl += p * (lp - lq);
    }
    out->kl = kl > 0.0 ? kl : 0.0;
    out->top_p = pa;
    out->top_q = qa;
    return SJK_OK;
}

sjk_status sjk_eval_ref_prepare(sjk_eval_ref *r, const float *logits, size_t n_vocab,
                                double *prob)
{
    if (!r || !logits || !prob || n_vocab == 0 || n_vocab > UINT32_MAX) return SJK_ERR_PARAM;
    double m, l;
    uint32_t a;
    if (!lse_argmax(logits, n_vocab, &m, &l, &a)) return SJK_ERR_RANGE;
    double z = m + l;
    for (size_t i = 0; i < n_vocab; i++) prob[i] = exp((double)logits[i] - z);
    r->logits = logits;
    r->prob = prob;
    r->n_vocab = n_vocab;
    r->log_z = z;
    r->top = a;
    return SJK_OK;
}

sjk_status sjk_eval_compare_ref(const sjk_eval_ref *r, const float *q_logits,
                                sjk_eval_cmp *out)
{
    if (!r || !r->logits || !r->prob || !q_logits || !out) return SJK_ERR_PARAM;
    double qm, ql;
    uint32_t qa;
    if (!lse_argmax(q_logits, r->n_vocab, &qm, &ql, &qa)) return SJK_ERR_RANGE;
    double qz = qm + ql, kl = 0.0;
    /* Σ p_i (log p_i − log q_i) with log p_i = x_i − log_z and log q_i = y_i − qz. */
    for (size_t i = 0; i < r->n_vocab; i++) {
        double p = r->prob[i];
        if (p == 0.0) continue;
        kl += p * (((double)r->logits[i] - r->log_z) - ((double)q_logits[i] - qz));
    }
    out->kl = kl > 0.0 ? kl : 0.0;
    out->top_p = r->top;
    out->top_q = qa;
    return SJK_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Percentile f of sorted v[0..n): linear interpolation at t = f(n-1). */
static double percentile_sorted(const double *v, size_t n, double f)
{
    if (n == 0) return 0.0;
    double t = f * (double)(n - 1);
    size_t i = (size_t)t;
    if (i + 1 >= n) return v[n - 1];
    double w = t - (double)i;
    return v[i] + w * (v[i + 1] - v[i]);
}

sjk_status sjk_eval_summarize(const double *kl, const uint8_t *same_top, size_t n,
                              sjk_eval_summary *out)
{
    if (!out || (n && !kl)) return SJK_ERR_PARAM;
    memset(out, 0, sizeof *out);
    if (n == 0) return SJK_OK;
    size_t nb;
    if (!eval_mul_ok(n, sizeof(double), &nb)) return SJK_ERR_PARAM;
    double *v = malloc(nb);
    if (!v) return SJK_ERR_NOMEM;
    memcpy(v, kl, nb);
    qsort(v, n, sizeof(double), cmp_double);
    double sum = 0.0;
    size_t same = 0;
    for (size_t i = 0; i < n; i++) {
        sum += kl[i];
        if (same_top && same_top[i]) same++;
    }
    out->n = n;
    out->mean = sum / (double)n;
    out->median = percentile_sorted(v, n, 0.5);
    out->p90 = percentile_sorted(v, n, 0.90);
    out->p99 = percentile_sorted(v, n, 0.99);
    out->max = v[n - 1];
    out->same_top = (double)same / (double)n;
    free(v);
    return SJK_OK;
}

static double ratio_of(double a, double b) { return b > 0.0 ? a / b : NAN; }

/* 2.5% and 97.5% percentiles of r[0..n) (sorted in place), skipping NaN resamples. */
static void ci95(double *r, size_t n, double *lo, double *hi)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(r[i])) r[m++] = r[i];
    if (m == 0) { *lo = *hi = NAN; return; }
    qsort(r, m, sizeof(double), cmp_double);
    *lo = percentile_sorted(r, m, 0.025);
    *hi = percentile_sorted(r, m, 0.975);
}

sjk_status sjk_eval_pair_compare(const double *kl_a, const double *kl_b, const uint32_t *doc,
                                 size_t n, uint32_t n_docs, uint32_t n_boot, uint64_t seed,
                                 sjk_eval_pair *out)
{
    if (!out || (n && (!kl_a || !kl_b || !doc)) || n_docs == 0) return SJK_ERR_PARAM;
    memset(out, 0, sizeof *out);
    out->ci_low = out->ci_high = out->doc_ci_low = out->doc_ci_high = NAN;
    out->n = n;
    for (size_t i = 0; i < n; i++)
        if (doc[i] >= n_docs) return SJK_ERR_PARAM;

    /* Per-document sums and the positions of each document, grouped:
     *   start[d] .. start[d+1]  index into order[] of document d's positions. */
    size_t nb_d, nb_n, nb_b;
    if (!eval_mul_ok((size_t)n_docs + 1, sizeof(double), &nb_d) ||
        !eval_mul_ok(n ? n : 1, sizeof(size_t), &nb_n) ||
        !eval_mul_ok(n_boot ? n_boot : 1, sizeof(double), &nb_b))
        return SJK_ERR_PARAM;
    double *sa = calloc((size_t)n_docs + 1, sizeof(double));
    double *sb = calloc((size_t)n_docs + 1, sizeof(double));
    size_t *start = calloc((size_t)n_docs + 2, sizeof(size_t));
    size_t *order = malloc(nb_n);
    size_t *fill = calloc((size_t)n_docs + 1, sizeof(size_t));
    double *r = malloc(nb_b);
    sjk_status st = SJK_OK;
    if (!sa || !sb || !start || !order || !fill || !r) { st = SJK_ERR_NOMEM; goto done; }

    double ta = 0.0, tb = 0.0;
    for (size_t i = 0; i < n; i++) {
        sa[doc[i]] += kl_a[i];
        sb[doc[i]] += kl_b[i];
        start[doc[i] + 1]++;
        ta += kl_a[i];
        tb += kl_b[i];
        if (kl_a[i] < kl_b[i]) out->positions_won++;
    }
    for (uint32_t d = 0; d < n_docs; d++) start[d + 1] += start[d];
    for (size_t i = 0; i < n; i++) order[start[doc[i]] + fill[doc[i]]++] = i;
    for (uint32_t d = 0; d < n_docs; d++) {
        size_t nd = start[d + 1] - start[d];
        if (!nd) continue;
        out->n_docs++;
        if (sa[d] < sb[d]) out->docs_won++;
    }
    out->ratio = ratio_of(ta, tb);
    if (n_boot == 0 || n == 0) goto done;

    sjk_rng rng;
    /* Positions, stratified: each document keeps its count, drawn from its own positions. */
    sjk_rng_seed(&rng, seed);
    for (uint32_t b = 0; b < n_boot; b++) {
        double xa = 0.0, xb = 0.0;
        for (uint32_t d = 0; d < n_docs; d++) {
            size_t nd = start[d + 1] - start[d];
            for (size_t k = 0; k < nd; k++) {
                size_t i = order[start[d] + (size_t)(sjk_rng_uniform(&rng) * (double)nd)];
                xa += kl_a[i];
                xb += kl_b[i];
            }
        }
        r[b] = ratio_of(xa, xb);
    }
    ci95(r, n_boot, &out->ci_low, &out->ci_high);

    /* Documents (cluster bootstrap): draw out->n_docs documents with replacement from the
     * non-empty ones; each brings all its positions. */
    sjk_rng_seed(&rng, seed ^ 0xD0C5D0C5D0C5D0C5ull);
    uint32_t *nonempty = (uint32_t *)fill; /* reuse: n_docs + 1 size_t >= n_docs u32 */
    uint32_t m = 0;
    for (uint32_t d = 0; d < n_docs; d++)
        if (start[d + 1] > start[d]) nonempty[m++] = d;
    for (uint32_t b = 0; b < n_boot; b++) {
        double xa = 0.0, xb = 0.0;
        for (uint32_t k = 0; k < m; k++) {
            uint32_t d = nonempty[(size_t)(sjk_rng_uniform(&rng) * (double)m)];
            xa += sa[d];
            xb += sb[d];
        }
        r[b] = ratio_of(xa, xb);
    }
    ci95(r, n_boot, &out->doc_ci_low, &out->doc_ci_high);

done:
    free(sa); free(sb); free(start); free(order); free(fill); free(r);
    return st;
}
