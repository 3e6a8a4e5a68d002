/* bench_stats.h — the statistics the CLI's benchmarks report (bench attn, bench run):
 * medians over rounds, since a shared machine's speed drifts between rounds. */
#ifndef SJK_TOOLS_BENCH_STATS_H
#define SJK_TOOLS_BENCH_STATS_H

#include <stdlib.h>
#include <string.h>

#define SJK_BENCH_MEDIAN_MAX 64 /* values sjk_bench_median sorts at most */

static int sjk_bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n-1], 1 <= n <= SJK_BENCH_MEDIAN_MAX (v is left as it was): the middle
 * value, for even n the mean of the two middle ones. */
static inline double sjk_bench_median(const double *v, size_t n)
{
    double t[SJK_BENCH_MEDIAN_MAX];
    memcpy(t, v, n * sizeof *t);
    qsort(t, n, sizeof *t, sjk_bench_cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

#endif
