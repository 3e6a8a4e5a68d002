/* bench_mm_k.c — in-process A/B of the two prefill matmuls of quantized weights with 8-bit
 * activations (act_quant 1), one thread, the Q4_K / Q6_K shapes of Qwen2.5-1.5B (1536 ->
 * 1536, 1536 -> 256, 1536 -> 8960, 8960 -> 1536) and Q8_0 / Q5_0 ones of Qwen2.5-0.5B
 * (896 -> 896, 896 -> 4864), at a chunk of 512 tokens:
 *   f32    the path before: dequantize 32 rows, pack them (ops.h mm_f32_pack) and multiply
 *          them with the Q8_K activations expanded back to f32 (mm_f32_panel)
 *   int8   quants.h mm_many: 16 rows unpacked to bytes, vpdpbusd against the 8-bit rows
 * alternated round by round, so that a machine whose load drifts slows both alike. Prints
 * each one's median GMAC/s and the ratio of the medians (int8 over f32).
 *
 *   make build/bench/bench_mm_k && ./build/bench/bench_mm_k [rounds=5] [tokens=512]
 *
 * Weights: random blocks with sane scales (K-quants) or quantized random floats (legacy);
 * activations: random floats quantized to the dot type. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcommon.h"
#include "kernels/ops.h"
#include "kernels/quants.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the f32 path of forward.c (mmx_task with the panel kernel) for rows [0, n_out) */
static void run_f32(const sjkh_qtraits *qt, uint32_t type, const uint8_t *w, size_t ws, size_t n_in, size_t n_out,
                    const float *xr, size_t nt, float *y, float *buf)
{
    const sjkh_ops *ops = sjkh_ops_get();
    float *wp = buf + SJKH_MM_PANEL * n_in;
    for (size_t rt = 0; rt < n_out; rt += SJKH_MM_PANEL) {
        size_t nr = n_out - rt < SJKH_MM_PANEL ? n_out - rt : SJKH_MM_PANEL;
        for (size_t r = 0; r < nr; r++) {
            if (qt->dequant) qt->dequant(w + (rt + r) * ws, buf + r * n_in, n_in);
            else sjkh_dequant_row(type, w + (rt + r) * ws, buf + r * n_in, n_in);
        }
        ops->mm_f32_pack(buf, nr, n_in, wp);
        ops->mm_f32_panel(wp, nr, xr, nt, n_in, y + rt, n_out);
    }
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    size_t nt = argc > 2 ? (size_t)atoi(argv[2]) : 512;
    if (rounds < 1 || rounds > 100 || nt < 1 || nt > 4096) {
        fprintf(stderr, "usage: %s [rounds 1..100] [tokens 1..4096]\n", argv[0]);
        return 2;
    }
    const sjkh_ops *ops = sjkh_ops_get();
    const struct { uint32_t type; size_t n_in, n_out; } shapes[] = {
        {SJKH_TYPE_Q4_K, 1536, 1536}, {SJKH_TYPE_Q4_K, 1536, 256}, {SJKH_TYPE_Q4_K, 1536, 8960},
        {SJKH_TYPE_Q4_K, 8960, 1536}, {SJKH_TYPE_Q6_K, 8960, 1536}, {SJKH_TYPE_Q8_0, 896, 896},
        {SJKH_TYPE_Q5_0, 896, 4864}};
    printf("%-5s %6s %6s %6s %12s %12s %8s\n", "type", "n_in", "n_out", "tokens", "f32 GMAC/s", "int8 GMAC/s",
           "x_int8");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        uint32_t type = shapes[si].type;
        size_t n_in = shapes[si].n_in, n_out = shapes[si].n_out;
        const sjkh_qtraits *qt = sjkh_qtraits_get(type);
        const sjkh_type_info *ti = sjkh_type_get(type);
        if (!qt->mm_many || !ops->mm_f32_panel) {
            printf("%-5s: no int8 or f32 panel kernel on this CPU (they need AVX512-VNNI)\n", ti->name);
            continue;
        }
        const uint32_t dt = qt->dot_type;
        size_t ws = ti->block_nbytes * (n_in / ti->block_values), xs = sjkh_dot_row_nbytes(dt, n_in);
        size_t ps = sjkh_dotn_row_nbytes(dt, n_in);
        uint8_t *w = malloc(n_out * ws), *xq = malloc(nt * xs), *xp = malloc(nt * ps);
        float *x = malloc(nt * n_in * sizeof *x), *xr = malloc(nt * n_in * sizeof *xr), *xd = malloc(nt * n_in / 32 * 4);
        float *y = malloc(nt * n_out * sizeof *y), *buf = malloc(2 * SJKH_MM_PANEL * n_in * sizeof *buf);
        void *scratch = malloc(sjkh_mm_many_scratch_nbytes(n_in));
        if (!w || !xq || !xp || !x || !xr || !xd || !y || !buf || !scratch) return 1;
        for (size_t i = 0; i < nt * n_in; i++) x[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f;
        if (dt == SJKH_TYPE_Q8_K) {
            for (size_t i = 0; i < n_out * ws; i++) w[i] = (uint8_t)rnd();
            for (size_t r = 0; r < n_out; r++)
                for (size_t b = 0; b < n_in / QK_K; b++) { /* sane fp16 scales */
                    uint8_t *blk = w + r * ws + b * ti->block_nbytes;
                    uint16_t d = sjkh_f32_to_f16(0.001f + 0.01f * (float)(rnd() % 100) / 100.0f);
                    memcpy(blk + (type == SJKH_TYPE_Q6_K ? 208 : 0), &d, 2);
                }
        } else {
            for (size_t r = 0; r < n_out; r++) sjkh_quantize_row_ref(type, x + (r % nt) * n_in, w + r * ws, n_in);
        }
        for (size_t t = 0; t < nt; t++) {
            qt->quantize(x + t * n_in, xq + t * xs, n_in);
            sjkh_dotn_prepare(dt, xq + t * xs, xp + t * ps, n_in);
            sjkh_dequant_dot_row(dt, xq + t * xs, xr + t * n_in, xd + t * (n_in / 32), n_in);
        }
        double tf[100], ti8[100];
        for (int r = 0; r < rounds; r++) {
            double t0 = now_s();
            run_f32(qt, type, w, ws, n_in, n_out, xr, nt, y, buf);
            double t1 = now_s();
            qt->mm_many(n_in, w, ws, n_out, xp, ps, nt, y, n_out, scratch);
            double t2 = now_s();
            tf[r] = t1 - t0;
            ti8[r] = t2 - t1;
        }
        qsort(tf, (size_t)rounds, sizeof *tf, cmp_d);
        qsort(ti8, (size_t)rounds, sizeof *ti8, cmp_d);
        double macs = (double)n_in * (double)n_out * (double)nt, mf = tf[rounds / 2], mi = ti8[rounds / 2];
        printf("%-5s %6zu %6zu %6zu %12.1f %12.1f %8.2f\n", ti->name, n_in, n_out, nt, macs / mf * 1e-9,
               macs / mi * 1e-9, mf / mi);
        free(w);
        free(xq);
        free(xp);
        free(x);
        free(xr);
        free(xd);
        free(y);
        free(buf);
        free(scratch);
    }
    return 0;
}
