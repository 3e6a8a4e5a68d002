/* bench_cb_struct.c — how much search SNR a trellis loses when its table of 64 << k
 * entries is built from a small one (issue 17: "a computed codebook", for cheaper trellis
 * readers). The committed table C_k gives each window w its own trained value; here
 *
 *     C[w] = A[(w + T[w >> b]) mod M],   M = 2^b entries of A (64, 128 or 256),
 *
 * T a table of (64 << k) / M offsets: an attention reader would look 64 windows up with
 * one shift, one small permute (T), one add and one `vpermb` (M = 64), `vpermi2b`
 * (M = 128) or two and a merge (M = 256), against 2 / 4 / 8 `vpermi2b` and 1 / 3 / 7
 * merges for C_2 / C_3 / C_4 (src/attention/attn_avx512.c, chunk_trellis_q8). A state s
 * sees the entries s + 64 (c mod 2^(b-6)) + T[c >> (b-6)] for its symbols c, so the
 * offsets are chosen distinct modulo 64 and every state keeps 2^k distinct levels.
 *
 * A is trained by generalized Lloyd as the committed tables are (trellis_train.c): search
 * with the current table, then set each entry of A to the mean of the values coded with
 * any window that maps to it, from Gaussian quantiles in a seeded random order. Gaussian
 * sequences of 128 values, tail-biting search (the records' search); SNR on held-out
 * sequences, against C_k and the rate-distortion bound 6.02 k dB.
 *
 *     make benches && build/bench/bench_cb_struct [ROUNDS [SEEDS]]     (30 rounds, 1 seed)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/trellis.h"
#include "common/rng.h"

enum { T_LEN = 128, N_TRAIN = 4096, N_TEST = 2048, NW_MAX = 64 << 4 };
static unsigned K, NW; /* bits per value, windows (64 << K) */

/* SNR (dB) of coding u [T_LEN][n] (step-major) with table cb. */
static double snr_of(const float *cb, const float *u, size_t n, uint8_t *codes, void *scratch)
{
    sjk_trellis_encode(cb, K, SJK_TRELLIS_TAILBITE, codes, u, T_LEN, n, n, scratch);
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += sjk_trellis_seq_sse(cb, K, SJK_TRELLIS_TAILBITE, codes + i, u + i, T_LEN, n);
        for (size_t t = 0; t < T_LEN; t++) s += (double)u[t * n + i] * u[t * n + i];
    }
    return 10 * log10(s / e);
}

/* The windows of sequence i (tail-biting: the start state is the state after the last
 * symbol). */
static void windows_of(const uint8_t *codes, size_t n, size_t i, uint16_t *w)
{
    unsigned s = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t t = 0; t < T_LEN; t++) {
            unsigned x = ((unsigned)codes[t * n + i] << 6) | s;
            if (pass) w[t] = (uint16_t)x;
            s = x >> K;
        }
}

static void expand(float *cb, const float *A, const unsigned *idx)
{
    for (unsigned w = 0; w < NW; w++) cb[w] = A[idx[w]];
}

/* One structure: M entries, the offsets T; trains A for iters rounds and prints the
 * held-out SNR. */
static void run(unsigned M, const unsigned *T, unsigned nT, int iters, const float *utr, const float *ute,
                uint8_t *codes, void *scratch, uint64_t seed)
{
    unsigned idx[NW_MAX], b = M == 64 ? 6 : M == 128 ? 7 : 8;
    for (unsigned w = 0; w < NW; w++) idx[w] = (w + T[(w >> b) % nT]) % M;
    /* every state keeps 2^K distinct entries? */
    int distinct = 1;
    for (unsigned s = 0; s < 64 && distinct; s++)
        for (unsigned c1 = 0; c1 < (1u << K); c1++)
            for (unsigned c2 = c1 + 1; c2 < (1u << K); c2++)
                if (idx[(c1 << 6) | s] == idx[(c2 << 6) | s]) distinct = 0;
    float A[256], cb[NW_MAX];
    double *sum = calloc(M, sizeof *sum), *cnt = calloc(M, sizeof *cnt);
    sjk_rng r;
    sjk_rng_seed(&r, seed);
    unsigned perm[256];
    for (unsigned i = 0; i < M; i++) perm[i] = i;
    for (unsigned i = M - 1; i > 0; i--) {
        unsigned j = (unsigned)(sjk_rng_u64(&r) % (i + 1)), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (unsigned i = 0; i < M; i++) A[perm[i]] = (float)sjk_trellis_normal_quantile((i + 0.5) / M);
    uint16_t w[T_LEN];
    double snr = 0;
    for (int it = 0; it <= iters; it++) {
        expand(cb, A, idx);
        if (it == iters) break;
        sjk_trellis_encode(cb, K, SJK_TRELLIS_TAILBITE, codes, utr, T_LEN, N_TRAIN, N_TRAIN, scratch);
        memset(sum, 0, M * sizeof *sum);
        memset(cnt, 0, M * sizeof *cnt);
        for (size_t i = 0; i < N_TRAIN; i++) {
            windows_of(codes, N_TRAIN, i, w);
            for (size_t t = 0; t < T_LEN; t++) {
                sum[idx[w[t]]] += utr[t * N_TRAIN + i];
                cnt[idx[w[t]]] += 1;
            }
        }
        for (unsigned j = 0; j < M; j++)
            if (cnt[j] > 0) A[j] = (float)(sum[j] / cnt[j]);
    }
    snr = snr_of(cb, ute, N_TEST, codes, scratch);
    printf("k = %u, M = %3u, T = {", K, M);
    for (unsigned i = 0; i < nT; i++) printf("%s%u", i ? "," : "", T[i]);
    printf("}%s: held-out SNR %.3f dB (bound - SNR %.3f dB)\n", distinct ? "" : " (states with repeated levels)",
           snr, 6.0206 * K - snr);
    free(sum);
    free(cnt);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 30, seeds = argc > 2 ? atoi(argv[2]) : 1;
    float *utr = malloc(sizeof(float) * T_LEN * N_TRAIN), *ute = malloc(sizeof(float) * T_LEN * N_TEST);
    uint8_t *codes = malloc((size_t)T_LEN * N_TRAIN);
    void *scratch = malloc(sjk_trellis_scratch_nbytes(T_LEN));
    if (!utr || !ute || !codes || !scratch) return 1;
    sjk_rng r;
    sjk_rng_seed(&r, 2026);
    for (size_t i = 0; i < (size_t)T_LEN * N_TRAIN; i++) utr[i] = (float)sjk_rng_normal(&r);
    for (size_t i = 0; i < (size_t)T_LEN * N_TEST; i++) ute[i] = (float)sjk_rng_normal(&r);
    printf("# Gaussian sequences of %d, %d training and %d held-out, %d Lloyd rounds, %d seed(s)\n", T_LEN,
           N_TRAIN, N_TEST, iters, seeds);
    /* the offsets: distinct modulo 64 (or modulo M / 2^(b - 6) ...) so that no state repeats a level */
    static const unsigned t2_64[4] = {0, 16, 32, 48}, t2_128[2] = {0, 32};
    static const unsigned t3_64[8] = {0, 8, 16, 24, 32, 40, 48, 56}, t3_128[4] = {0, 16, 32, 48};
    static const unsigned t4_128[8] = {0, 8, 16, 24, 32, 40, 48, 56}, t4_256[4] = {0, 101, 38, 167};
    for (K = 2; K <= 4; K++) {
        NW = 64u << K;
        double c = snr_of(sjk_trellis_codebook(K), ute, N_TEST, codes, scratch);
        printf("k = %u, committed C_%u (%u entries): held-out SNR %.3f dB (bound - SNR %.3f dB)\n", K, K, NW, c,
               6.0206 * K - c);
        for (int sd = 1; sd <= seeds; sd++) {
            if (K == 2) {
                run(64, t2_64, 4, iters, utr, ute, codes, scratch, (uint64_t)sd);
                run(128, t2_128, 2, iters, utr, ute, codes, scratch, (uint64_t)sd);
            } else if (K == 3) {
                run(64, t3_64, 8, iters, utr, ute, codes, scratch, (uint64_t)sd);
                run(128, t3_128, 4, iters, utr, ute, codes, scratch, (uint64_t)sd);
            } else {
                run(128, t4_128, 8, iters, utr, ute, codes, scratch, (uint64_t)sd);
                run(256, t4_256, 4, iters, utr, ute, codes, scratch, (uint64_t)sd);
            }
        }
    }
    free(utr);
    free(ute);
    free(codes);
    free(scratch);
    return 0;
}
