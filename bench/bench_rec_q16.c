/* bench_rec_q16.c — in-process A/B of the two readers of a 4-bit scalar record.
 *
 *   build/bench/bench_rec_q16 [D] [ROWS] [ROUNDS]     (defaults 256 4 15)
 *
 * One record chunk of 128 keys with random 4-bit K and V codes (read in place, as
 * attend.c hands them) and positive scales; ROWS query rows (the GQA group of one KV
 * head), every row seeing every key. Per round, in alternating order, each reader folds
 * the chunk into one online-softmax state 200 times:
 *   chunk_rec       scores in fp32 (the folded query broadcast per channel)
 *   chunk_rec_q16   int16 folded queries per record, integer dot products (vpdpwssd)
 * Times are per-thread CPU microseconds per chunk, the best round of each; the ratio is
 * chunk_rec's over chunk_rec_q16's. Kernels: the dispatched table (a table without
 * chunk_rec_q16 says so and exits 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/attn_kernels.h"
#include "codec/record_layout.h"
#include "common/rng.h"
#include "bench_util.h"

#define G SJK_GROUP
#define MAXD 512
#define REPS 200

static float g_work[SJK_ATTN_WORK_FLOATS(MAXD)];
static uint8_t g_kc[G * MAXD], g_vc[G * MAXD], g_kp[MAXD * G / 2], g_vp[G * MAXD / 2];
static float g_q[16 * MAXD], g_sc[3 * MAXD + 3 * G], g_m[16], g_l[16], g_acc[16 * MAXD];

int main(int argc, char **argv)
{
    const size_t D = argc > 1 ? (size_t)atoi(argv[1]) : 256, R = argc > 2 ? (size_t)atoi(argv[2]) : 4;
    const int rounds = argc > 3 ? atoi(argv[3]) : 15;
    if (D % 64 || D > MAXD || R < 1 || R > 16 || rounds < 1 || rounds > 1000) {
        fprintf(stderr, "usage: bench_rec_q16 [D (64..512, multiple of 64)] [ROWS 1..16] [ROUNDS 1..1000]\n");
        return 2;
    }
    const sjk_attn_kernels *k = sjk_attn_kernels_get();
    if (!k->chunk_rec_q16) {
        printf("# bench_rec_q16: kernels %s have no chunk_rec_q16; nothing to compare\n", k->name);
        return 0;
    }
    sjk_rng r;
    sjk_rng_seed(&r, 1);
    for (size_t i = 0; i < G * D; i++) {
        g_kc[i] = (uint8_t)(sjk_rng_u64(&r) % 16);
        g_vc[i] = (uint8_t)(sjk_rng_u64(&r) % 16);
    }
    for (size_t d = 0; d < D; d++) sjk_payload_pack_row(g_kp + d * (G / 2), G, 4, g_kc + d * G);
    for (size_t t = 0; t < G; t++) sjk_payload_pack_row(g_vp + t * (D / 2), D, 4, g_vc + t * D);
    for (size_t i = 0; i < R * D; i++) g_q[i] = 0.1f * (float)sjk_rng_normal(&r);
    for (size_t i = 0; i < 3 * D + 3 * G; i++) g_sc[i] = 0.05f + 0.1f * (float)sjk_rng_uniform(&r);
    sjk_attn_rec rc;
    memset(&rc, 0, sizeof rc);
    rc.kp = g_kp;
    rc.vp = g_vp;
    rc.kscale = g_sc;
    rc.kzero = g_sc + D;
    rc.ktok = g_sc + 2 * D;
    rc.vch = g_sc + 2 * D + G;
    rc.vscale = g_sc + 3 * D + G;
    rc.vzero = g_sc + 3 * D + 2 * G;
    uint32_t nvis[16];
    for (size_t i = 0; i < R; i++) nvis[i] = G;
    double best[2] = {1e30, 1e30};
    for (int rd = 0; rd < rounds; rd++)
        for (int w0 = 0; w0 < 2; w0++) {
            const int w = (w0 + rd) % 2;
            for (size_t i = 0; i < R; i++) {
                g_m[i] = -1e30f;
                g_l[i] = 0;
            }
            memset(g_acc, 0, sizeof g_acc);
            const double t0 = bench_cpu_s();
            for (int it = 0; it < REPS; it++) {
                if (w) k->chunk_rec_q16(g_q, R, D, nvis, &rc, g_m, g_l, g_acc, g_work);
                else k->chunk_rec(g_q, R, D, nvis, &rc, g_m, g_l, g_acc, g_work);
            }
            const double t = (bench_cpu_s() - t0) / REPS;
            if (t < best[w]) best[w] = t;
        }
    printf("# bench_rec_q16: D=%zu rows=%zu rounds=%d kernels %s (per-thread CPU time, best round)\n", D, R, rounds, k->name);
    printf("chunk_rec       %8.2f us/chunk\nchunk_rec_q16   %8.2f us/chunk   %.2fx\n", best[0] * 1e6, best[1] * 1e6,
           best[0] / best[1]);
    return 0;
}
