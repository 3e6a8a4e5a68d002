/* bench_qblk.c — in-process A/B of the decode-attention readers of ggml block rows.
 *
 *   build/bench/bench_qblk [D] [ROWS] [KEYS] [ROUNDS]     (defaults 256 4 32768 9)
 *
 * The same KEYS synthetic rows (the bench attn kind: channel offsets with outliers,
 * per-token swings) stored as fp16, q8_0 and q4_0; one KV head, ROWS query rows (the GQA
 * group). Per round, in a rotating order, each reader folds every 128-key chunk into one
 * online-softmax state, as attend.c does for one unit:
 *   f16        chunk_f16 on the fp16 rows (the baseline)
 *   q8_0 dec   the rows decoded to fp32 (the format's decode), then chunk_f32 (the path
 *              before chunk_qblk)
 *   q8_0 int   chunk_qblk: int8 query pieces (made once), integer dot products
 *   (and the same two for q4_0)
 * Times are per-thread CPU seconds (one thread), median over the rounds; each reader's
 * ratio to f16 is the median of the per-round ratios. Kernels: the dispatched table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/attn_kernels.h"
#include "codec/format.h"
#include "common/fp16.h"
#include "common/rng.h"
#include "bench_util.h"

enum { NREAD = 5, MAXROUNDS = 31 };

int main(int argc, char **argv)
{
    const size_t D = argc > 1 ? (size_t)atoi(argv[1]) : 256, R = argc > 2 ? (size_t)atoi(argv[2]) : 4;
    const size_t N = argc > 3 ? (size_t)atoi(argv[3]) : 32768;
    int rounds = argc > 4 ? atoi(argv[4]) : 9;
    if (D % 64 || D > 512 || R < 1 || R > 15 || N < 128 || N % 128 || rounds < 1 || rounds > MAXROUNDS) {
        fprintf(stderr, "usage: bench_qblk [D (64..512, multiple of 64)] [ROWS 1..15] [KEYS, multiple of 128] [ROUNDS 1..31]\n");
        return 2;
    }
    const sjk_attn_kernels *k = sjk_attn_kernels_get();
    const size_t G = SJK_GROUP, nb = D / 32;
    float *K = malloc(sizeof(float) * N * D), *V = malloc(sizeof(float) * N * D), *q = malloc(sizeof(float) * R * D);
    uint16_t *K16 = malloc(2 * N * D), *V16 = malloc(2 * N * D);
    uint8_t *K8 = malloc(N * nb * SJK_Q8_0_NBYTES), *V8 = malloc(N * nb * SJK_Q8_0_NBYTES);
    uint8_t *K4 = malloc(N * nb * SJK_Q4_0_NBYTES), *V4 = malloc(N * nb * SJK_Q4_0_NBYTES);
    float *kf = malloc(sizeof(float) * G * D), *vf = malloc(sizeof(float) * G * D);
    float *work = malloc(sizeof(float) * SJK_ATTN_WORK_FLOATS(D));
    void *qbuf = malloc(SJK_ATTN_QINT_NBYTES(16, D));
    float *m = malloc(sizeof(float) * R), *l = malloc(sizeof(float) * R), *acc = malloc(sizeof(float) * R * D);
    if (!K || !V || !q || !K16 || !V16 || !K8 || !V8 || !K4 || !V4 || !kf || !vf || !work || !qbuf || !m || !l || !acc) {
        fprintf(stderr, "bench_qblk: out of memory\n");
        return 1;
    }
    if (!k->chunk_qblk) fprintf(stderr, "bench_qblk: the %s table has no chunk_qblk; 'int' rows use the reference\n", k->name);
    const sjk_attn_kernels *kq = k->chunk_qblk ? k : sjk_attn_kernels_ref();
    sjk_rng r;
    sjk_rng_seed(&r, 1234);
    float off[512];
    for (size_t d = 0; d < D; d++) off[d] = (float)(0.5 * sjk_rng_normal(&r)) * (d % 23 == 1 ? 8.0f : 1.0f);
    for (size_t t = 0; t < N; t++) {
        const float sw = (float)(0.5 + sjk_rng_uniform(&r));
        for (size_t d = 0; d < D; d++) {
            K[t * D + d] = off[d] + sw * (float)sjk_rng_normal(&r);
            V[t * D + d] = sw * (float)sjk_rng_normal(&r);
            K16[t * D + d] = sjk_f32_to_fp16(K[t * D + d]);
            V16[t * D + d] = sjk_f32_to_fp16(V[t * D + d]);
        }
    }
    for (size_t i = 0; i < R * D; i++) q[i] = (float)sjk_rng_normal(&r) / 16.0f;
    sjk_encode_q8_0(K8, K, N * D);
    sjk_encode_q8_0(V8, V, N * D);
    sjk_encode_q4_0(K4, K, N * D);
    sjk_encode_q4_0(V4, V, N * D);
    uint32_t nvis[16];
    for (size_t i = 0; i < R; i++) nvis[i] = (uint32_t)G;
    static const char *const names[NREAD] = {"f16", "q8_0 dec", "q8_0 int", "q4_0 dec", "q4_0 int"};
    static const double bytes_per_value[NREAD] = {2.0, 34.0 / 32, 34.0 / 32, 18.0 / 32, 18.0 / 32};
    double t[NREAD][MAXROUNDS], ratio[NREAD][MAXROUNDS];
    volatile float sink = 0;
    for (int rd = 0; rd < rounds; rd++)
        for (int j = 0; j < NREAD; j++) {
            const int ri = (j + rd) % NREAD;
            for (size_t i = 0; i < R; i++) { m[i] = -1e30f; l[i] = 0; }
            memset(acc, 0, sizeof(float) * R * D);
            const double t0 = bench_cpu_s();
            sjk_attn_qint qi;
            if (ri == 2 || ri == 4) sjk_attn_qint_prep(&qi, qbuf, q, R, D);
            for (size_t c = 0; c < N / G; c++) {
                const size_t e0 = c * G * D, more = c + 1 < N / G; /* the next chunk: a prefetch hint */
                switch (ri) {
                case 0:
                    k->chunk_f16(q, R, D, nvis, K16 + e0, V16 + e0, G, m, l, acc, work,
                                 more ? (const uint8_t *)(K16 + e0 + G * D) : NULL, more ? G * D * sizeof(uint16_t) : 0);
                    break;
                case 1:
                    sjk_decode_q8_0(kf, K8 + e0 / 32 * SJK_Q8_0_NBYTES, G * D);
                    sjk_decode_q8_0(vf, V8 + e0 / 32 * SJK_Q8_0_NBYTES, G * D);
                    k->chunk_f32(q, R, D, nvis, kf, vf, G, m, l, acc, work);
                    break;
                case 2:
                    kq->chunk_qblk(&qi, R, D, nvis, 8, 8, K8 + e0 / 32 * SJK_Q8_0_NBYTES, V8 + e0 / 32 * SJK_Q8_0_NBYTES, G, m, l,
                                   acc, work, more ? K8 + (e0 + G * D) / 32 * SJK_Q8_0_NBYTES : NULL, more ? G * D / 32 * SJK_Q8_0_NBYTES : 0);
                    break;
                case 3:
                    sjk_decode_q4_0(kf, K4 + e0 / 32 * SJK_Q4_0_NBYTES, G * D);
                    sjk_decode_q4_0(vf, V4 + e0 / 32 * SJK_Q4_0_NBYTES, G * D);
                    k->chunk_f32(q, R, D, nvis, kf, vf, G, m, l, acc, work);
                    break;
                default:
                    kq->chunk_qblk(&qi, R, D, nvis, 4, 4, K4 + e0 / 32 * SJK_Q4_0_NBYTES, V4 + e0 / 32 * SJK_Q4_0_NBYTES, G, m, l,
                                   acc, work, more ? K4 + (e0 + G * D) / 32 * SJK_Q4_0_NBYTES : NULL, more ? G * D / 32 * SJK_Q4_0_NBYTES : 0);
                    break;
                }
            }
            t[ri][rd] = bench_cpu_s() - t0;
            sink += acc[0] / l[0];
        }
    for (int rd = 0; rd < rounds; rd++)
        for (int j = 0; j < NREAD; j++) ratio[j][rd] = t[0][rd] / t[j][rd];
    printf("# bench_qblk: D=%zu rows=%zu keys=%zu rounds=%d kernels %s (per-thread CPU time, medians)\n", D, R, N, rounds,
           k->name);
    for (int j = 0; j < NREAD; j++) {
        const double tm = bench_median(t[j], rounds);
        printf("%-9s %10.1f us %7.2fx f16 %8.2f GB/s\n", names[j], tm * 1e6, bench_median(ratio[j], rounds),
               2.0 * bytes_per_value[j] * (double)(N * D) / tm / 1e9);
    }
    (void)sink;
    return 0;
}
