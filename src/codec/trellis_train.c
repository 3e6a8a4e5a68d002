/* trellis_train.c — the offline codebook trainer (generalized Lloyd on trellis paths).
 *
 * Why Lloyd works here: with the code sequences fixed, the squared error is a sum over
 * windows of (u - C[w])^2 and is minimised by setting each C[w] to the mean of the values
 * coded with w; with the table fixed, the Viterbi search finds the best code sequence.
 * Alternating the two never increases the training error (up to the tail-biting
 * approximation), so the printed MSE is (almost) monotone.
 *
 * The table is committed (src/codec/trellis_codebooks.c); this file only exists so that
 * anyone can regenerate it with `sjkvarn train-codebook` and get the same bytes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/trellis.h"
#include "common/rng.h"
#include "common/util.h"

/* Standard normal quantile by bisection on erfc (robust in the tails; double). */
double sjk_trellis_normal_quantile(double p)
{
    double lo = -12, hi = 12;
    for (int i = 0; i < 100; i++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(-mid / 1.4142135623730951) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

static void init_codebook(float *cb, size_t n, uint64_t seed)
{
    size_t *perm = malloc(n * sizeof *perm);
    sjk_rng r;
    sjk_rng_seed(&r, seed ^ 0xC0DEB00Cull);
    for (size_t i = 0; i < n; i++) perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) { /* Fisher–Yates */
        size_t j = (size_t)(sjk_rng_u64(&r) % (i + 1));
        size_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (size_t i = 0; i < n; i++) cb[perm[i]] = (float)sjk_trellis_normal_quantile(((double)i + 0.5) / (double)n);
    free(perm);
}

/* Rows of T values, step-major [T][n_seq], each row normalised to mean 0, variance 1. */
static void make_data(float *u, size_t T, size_t n_seq, uint64_t seed)
{
    sjk_rng r;
    sjk_rng_seed(&r, seed);
    double *row = malloc(T * sizeof *row);
    for (size_t s = 0; s < n_seq; s++) {
        double m = 0, v = 0;
        for (size_t t = 0; t < T; t++) {
            row[t] = sjk_rng_normal(&r);
            m += row[t];
        }
        m /= (double)T;
        for (size_t t = 0; t < T; t++) v += (row[t] - m) * (row[t] - m);
        double is = 1.0 / sqrt(v / (double)T);
        for (size_t t = 0; t < T; t++) u[t * n_seq + s] = (float)((row[t] - m) * is);
    }
    free(row);
}

sjk_status sjk_trellis_train(const sjk_trellis_train_params *p, float *cb_out,
                             sjk_trellis_train_log_fn log, void *log_ctx)
{
    if (!p || !cb_out || p->bits < 2 || p->bits > 4 || p->T < 8 || p->T > SJK_TRELLIS_MAX_T ||
        (p->T * p->bits) % 8 || p->data > SJK_TRELLIS_DATA_GIVEN || p->tie > SJK_TRELLIS_TIE_S128 ||
        (p->tie && p->init))
        return SJK_ERR_PARAM;
    const int given = p->data == SJK_TRELLIS_DATA_GIVEN;
    if (given && (!p->u || p->n_seq % SJK_TRELLIS_LANES)) return SJK_ERR_PARAM;
    const unsigned k = p->bits;
    const size_t T = p->T, ncb = SJK_TRELLIS_CB_SIZE(k);
    size_t n_seq = given ? p->n_seq : p->samples / T / SJK_TRELLIS_LANES * SJK_TRELLIS_LANES;
    if (n_seq == 0) return SJK_ERR_PARAM;
    size_t n, scratch_nbytes = sjk_trellis_scratch_nbytes(T);
    if (!sjk_mul_ok(n_seq, T, &n)) return SJK_ERR_PARAM;

    float *own = given ? NULL : malloc(n * sizeof *own);
    const float *u = given ? p->u : own;
    uint8_t *codes = malloc(n);
    uint16_t *win = malloc(T * sizeof *win), *ix = malloc(ncb * sizeof *ix);
    double *sum = malloc(ncb * sizeof *sum);
    uint64_t *cnt = malloc(ncb * sizeof *cnt);
    void *scratch = aligned_alloc(64, (scratch_nbytes + 63) & ~(size_t)63);
    sjk_status st = SJK_OK;
    if (!u || !codes || !win || !ix || !sum || !cnt || !scratch) {
        st = SJK_ERR_NOMEM;
        goto out;
    }
    if (!given) make_data(own, T, n_seq, p->seed);
    /* tied: entry w of the table is A[ix[w]], A of 128 (the sums pool over ix) */
    const int tied = p->tie == SJK_TRELLIS_TIE_S128;
    for (size_t w = 0; w < ncb; w++) ix[w] = (uint16_t)(tied ? sjk_trellis_s128_index(k, (unsigned)w) : w);
    if (p->init) memcpy(cb_out, p->init, ncb * sizeof *cb_out);
    else if (tied) {
        float a[SJK_TRELLIS_S128_ENTRIES];
        init_codebook(a, SJK_TRELLIS_S128_ENTRIES, p->seed);
        for (size_t w = 0; w < ncb; w++) cb_out[w] = a[ix[w]];
    } else
        init_codebook(cb_out, ncb, p->seed);

    for (unsigned it = 0; it <= p->iters; it++) {
        sjk_trellis_encode(cb_out, k, SJK_TRELLIS_TAILBITE, codes, u, T, n_seq, n_seq, scratch);
        memset(sum, 0, ncb * sizeof *sum);
        memset(cnt, 0, ncb * sizeof *cnt);
        double sse = 0;
        for (size_t s = 0; s < n_seq; s++) {
            /* windows of the ring: the state before step 0 is the last 6 bits */
            unsigned st0 = 0;
            for (size_t t = 0; t < T; t++) st0 = (((unsigned)codes[t * n_seq + s] << 6) | st0) >> k;
            for (size_t t = 0; t < T; t++) {
                win[t] = (uint16_t)(((unsigned)codes[t * n_seq + s] << 6) | st0);
                st0 = win[t] >> k;
            }
            for (size_t t = 0; t < T; t++) {
                double x = u[t * n_seq + s], d = x - cb_out[win[t]];
                sse += d * d;
                sum[ix[win[t]]] += x;
                cnt[ix[win[t]]]++;
            }
        }
        if (log) log(log_ctx, it, sse / (double)n);
        if (it == p->iters) break;
        for (size_t w = 0; w < ncb; w++)
            if (cnt[ix[w]]) cb_out[w] = (float)(sum[ix[w]] / (double)cnt[ix[w]]);
    }
out:
    free(ix);
    free(own);
    free(codes);
    free(win);
    free(sum);
    free(cnt);
    free(scratch);
    return st;
}
