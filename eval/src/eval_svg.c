/* eval_svg.c — two plots of a finished study, written as plain SVG by a small writer of
 * our own (no dependencies):
 *
 *   frontier:  mean KL (log10 axis) against bits per value (occupied, or allocated:
 *              frontier-allocated.svg), one labelled point per configuration, ours
 *              filled and the comparators hollow, with the comparators' staircase (the
 *              lowest KL any of them reaches at those bits or fewer) dashed. Down and to
 *              the left is better: the quality-per-bit frontier.
 *   positions: mean KL (log10 axis) along the position axis, one line per configuration;
 *              positions are binned (at most 64 bins) and each bin averages every document.
 *
 * KL of exactly 0 (a configuration identical to the reference) has no logarithm; such
 * values are drawn on the axis floor, one decade below the smallest positive value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_internal.h"

#define W 860.0
#define H 480.0
#define ML 80.0 /* margins: left, right, top, bottom */
#define MR 230.0
#define MT 40.0
#define MB 60.0

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define PALETTE_N (sizeof palette / sizeof palette[0])

typedef struct axis { double lo, hi; int log; } axis;

static double ax_map(const axis *a, double v, double p0, double p1)
{
    double t;
    if (a->log) t = (log10(v) - a->lo) / (a->hi - a->lo);
    else t = (v - a->lo) / (a->hi - a->lo);
    return p0 + t * (p1 - p0);
}

static void svg_text_esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

static void svg_begin(FILE *f, const char *title)
{
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%.1f\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">",
            W, H, W, H, (ML + W - MR) / 2);
    svg_text_esc(f, title);
    fputs("</text>\n", f);
}

/* Frame, ticks and labels. Log axes tick every decade; linear axes get 6 ticks. */
static void svg_axes(FILE *f, const axis *x, const axis *y, const char *xl, const char *yl)
{
    double x0 = ML, x1 = W - MR, y0 = H - MB, y1 = MT;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
               "stroke=\"black\"/>\n", x0, y1, x1 - x0, y0 - y1);
    /* x ticks at a round step (1, 2 or 5 times a power of ten), about 6 of them */
    double span = x->hi - x->lo, raw = span / 6.0, mag = pow(10.0, floor(log10(raw)));
    double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
    for (double v = ceil(x->lo / step) * step; v <= x->hi + 1e-9 * span; v += step) {
        double px = ax_map(x, v, x0, x1);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.6g</text>\n",
                px, y0, px, y1, px, y0 + 16, v);
    }
    for (int e = (int)ceil(y->lo - 1e-9); e <= (int)floor(y->hi + 1e-9); e++) {
        double py = ax_map(y, pow(10.0, e), y0, y1);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n",
                x0, py, x1, py, x0 - 6, py + 4, e);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (x0 + x1) / 2, H - 18);
    svg_text_esc(f, xl);
    fprintf(f, "</text>\n<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 18 %.1f)\">", (y0 + y1) / 2, (y0 + y1) / 2);
    svg_text_esc(f, yl);
    fputs("</text>\n", f);
}

/* A log axis over the positive values in v[0..n), padded; floor for zeros. */
static axis log_axis(const double *v, size_t n, double *floor_out)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (v[i] > 0 && isfinite(v[i])) { if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i]; }
    if (!isfinite(lo)) { lo = 1e-6; hi = 1e-2; }
    double fl = lo / 10.0;
    axis a = {floor(log10(fl)), ceil(log10(hi) + 1e-9), 1};
    if (a.hi <= a.lo) a.hi = a.lo + 1;
    *floor_out = fl;
    return a;
}

static sjk_status io_status(FILE *f) { return ferror(f) ? SJK_ERR_IO : SJK_OK; }

static void zero_note(FILE *f)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#555\">"
               "KL = 0 (identical to the reference) is drawn on the bottom edge</text>\n", ML + 6, H - MB - 6);
}

/* A comparator: a configuration that is not one of ours (its name does not start with
 * "sj:" or "sj/"), drawn as a hollow point; the staircase through the comparators that
 * no other comparator beats at fewer or equal bits is what an sj point must lie below. */
static int is_ours(const char *name) { return !strncmp(name, "sj:", 3) || !strcmp(name, "sj"); }

static sjk_status frontier(const sjk_eval_study *st, FILE *f, int allocated)
{
    if (!st || !f || !st->finished) return SJK_ERR_PARAM;
    size_t nc = st->n_configs;
    double ys[SJK_EVAL_MAX_CONFIGS] = {0}, xs[SJK_EVAL_MAX_CONFIGS] = {0}, fl;
    double xlo = INFINITY, xhi = -INFINITY;
    for (size_t c = 0; c < nc; c++) {
        ys[c] = st->res[c].s.mean;
        xs[c] = allocated ? st->res[c].bpv_allocated : st->res[c].bpv_occupied;
        if (xs[c] < xlo) xlo = xs[c];
        if (xs[c] > xhi) xhi = xs[c];
    }
    axis y = log_axis(ys, nc, &fl);
    axis x = {floor(xlo) - 1.0, ceil(xhi) + 1.0, 0};
    if (x.lo < 0) x.lo = 0;
    svg_begin(f, allocated ? "Quality per allocated bit: mean KL vs allocated bits per value"
                           : "Quality per bit: mean KL vs bits per value");
    svg_axes(f, &x, &y,
             allocated ? "bits per value allocated (K/V regions, whole ring, seal scratch; at the context)"
                       : "bits per value (occupied, at the scored positions)",
             "mean KL(p_ref ‖ q), nats");
    int any_zero = 0;
    for (size_t c = 0; c < nc; c++) any_zero |= !(ys[c] > 0);
    if (any_zero) zero_note(f);
    /* the comparators' frontier: sorted by bits, each point that lowers the best KL so far */
    size_t ord[SJK_EVAL_MAX_CONFIGS], no = 0;
    for (size_t c = 0; c < nc; c++)
        if (!is_ours(st->cols[c].name)) ord[no++] = c;
    for (size_t i = 1; i < no; i++)
        for (size_t j = i; j > 0 && (xs[ord[j]] < xs[ord[j - 1]] ||
                                     (xs[ord[j]] == xs[ord[j - 1]] && ys[ord[j]] < ys[ord[j - 1]])); j--) {
            size_t t = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = t;
        }
    if (no) {
        fputs("<polyline fill=\"none\" stroke=\"#888\" stroke-dasharray=\"5,4\" points=\"", f);
        double best = INFINITY, px_prev = 0;
        for (size_t i = 0; i < no; i++) {
            double v = ys[ord[i]] > 0 ? ys[ord[i]] : fl;
            if (!(v < best)) continue;
            double px = ax_map(&x, xs[ord[i]], ML, W - MR), py = ax_map(&y, v, H - MB, MT);
            if (isfinite(best)) fprintf(f, "%.1f,%.1f ", px, ax_map(&y, best, H - MB, MT));
            fprintf(f, "%.1f,%.1f ", px, py);
            best = v;
            px_prev = px;
        }
        (void)px_prev;
        fprintf(f, "%.1f,%.1f\"/>\n", W - MR, ax_map(&y, best, H - MB, MT));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#555\">"
                   "dashed: the best comparator at these bits or fewer; hollow: comparators</text>\n",
                ML + 6, MT + 14);
    }
    for (size_t c = 0; c < nc; c++) {
        double v = ys[c] > 0 ? ys[c] : fl;
        double px = ax_map(&x, xs[c], ML, W - MR);
        double py = ax_map(&y, v, H - MB, MT);
        const char *col = palette[c % PALETTE_N];
        int ours = is_ours(st->cols[c].name);
        /* the point, a short label (its index) beside it, and the full name in the legend */
        if (ours)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n", px, py, col);
        else
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"white\" stroke=\"%s\" "
                       "stroke-width=\"2\"/>\n", px, py, col);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%zu</text>\n",
                px + 7, py + (c % 2 ? 15.0 : -6.0), col, c + 1);
        double ly = MT + 14.0 + 16.0 * (double)c;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"%s\">%zu ",
                W - MR + 14, ly - 4, ours ? col : "white", W - MR + 22, ly, col, c + 1);
        svg_text_esc(f, st->cols[c].name);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    return io_status(f);
}

sjk_status sjk_eval_write_svg_frontier(const sjk_eval_study *st, FILE *f) { return frontier(st, f, 0); }
sjk_status sjk_eval_write_svg_frontier_allocated(const sjk_eval_study *st, FILE *f) { return frontier(st, f, 1); }

#define NBINS 64

sjk_status sjk_eval_write_svg_positions(const sjk_eval_study *st, FILE *f)
{
    if (!st || !f || !st->finished) return SJK_ERR_PARAM;
    size_t nc = st->n_configs;
    uint32_t pmin = UINT32_MAX, pmax = 0;
    for (size_t c = 0; c < nc; c++)
        for (size_t i = 0; i < st->cols[c].n; i++) {
            uint32_t p = st->cols[c].pos[i];
            if (p < pmin) pmin = p;
            if (p > pmax) pmax = p;
        }
    if (pmin > pmax) pmin = pmax = 0;
    size_t span = (size_t)(pmax - pmin) + 1, nb = span < NBINS ? span : NBINS;
    double *mean = calloc(nc * nb, sizeof(double));
    size_t *cnt = calloc(nc * nb, sizeof(size_t));
    if (!mean || !cnt) { free(mean); free(cnt); return SJK_ERR_NOMEM; }
    for (size_t c = 0; c < nc; c++)
        for (size_t i = 0; i < st->cols[c].n; i++) {
            size_t b = (size_t)((double)(st->cols[c].pos[i] - pmin) * (double)nb / (double)span);
            if (b >= nb) b = nb - 1;
            mean[c * nb + b] += st->cols[c].kl[i];
            cnt[c * nb + b]++;
        }
    int any_zero = 0;
    for (size_t k = 0; k < nc * nb; k++)
        if (cnt[k]) { mean[k] /= (double)cnt[k]; any_zero |= !(mean[k] > 0); }
    double fl;
    axis y = log_axis(mean, nc * nb, &fl);
    axis x = {(double)pmin, (double)pmin + (double)span, 0}; /* bins cover [pmin, pmax + 1) */
    svg_begin(f, "KL along the position axis (generated tokens)");
    svg_axes(f, &x, &y, "position in the context (tokens)", "mean KL(p_ref ‖ q), nats");
    if (any_zero) zero_note(f);
    for (size_t c = 0; c < nc; c++) {
        const char *col = palette[c % PALETTE_N];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", col);
        for (size_t b = 0; b < nb; b++) {
            if (!cnt[c * nb + b]) continue;
            double v = mean[c * nb + b] > 0 ? mean[c * nb + b] : fl;
            double pos = pmin + ((double)b + 0.5) * (double)span / (double)nb;
            fprintf(f, "%.1f,%.1f ", ax_map(&x, pos, ML, W - MR), ax_map(&y, v, H - MB, MT));
        }
        fputs("\"/>\n", f);
        double ly = MT + 14.0 + 16.0 * (double)c;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"3\"/>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">",
                W - MR + 10, ly - 4, W - MR + 26, ly - 4, col, W - MR + 30, ly);
        svg_text_esc(f, st->cols[c].name);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    free(mean);
    free(cnt);
    return io_status(f);
}
