/* bench_util.h — what the in-process benchmarks of bench/ share: the clocks, the median of
 * a run of timings and a seeded Gaussian generator for their synthetic data. Header only
 * (static inline), since each benchmark is one file and bench/ggml/attn_peer.c builds
 * without the library. Not part of libsjkvarn. */
#ifndef SJK_BENCH_UTIL_H
#define SJK_BENCH_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Seconds on clock id (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...). */
static inline double bench_clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static inline double bench_cpu_s(void) { return bench_clock_s(CLOCK_THREAD_CPUTIME_ID); } /* this thread */
static inline double bench_now_s(void) { return bench_clock_s(CLOCK_MONOTONIC); }         /* wall */

static inline int bench_cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n-1] (n >= 1; sorts v): the middle value, for even n the mean of
 * the two middle ones. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* xorshift64 in [0, 1) and a Box-Muller normal from two of them; *s is the state (any
 * value but 0), so each benchmark keeps its own seed. */
static inline double bench_uniform(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) * (1.0 / 9007199254740992.0);
}
static inline double bench_normal(uint64_t *s)
{
    double u = bench_uniform(s), v = bench_uniform(s);
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

#endif
