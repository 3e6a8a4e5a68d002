/* test_host_quants.c — the host's weight formats: dequantization against an independent
 * per-element reading of the block layouts (docs/BACKGROUND.md, "ggml block formats"), the integer dot
 * products against dequantize-then-dot, and every SIMD kernel against its scalar twin. */
#include <stdint.h>

#include "harness.h"
#include "hcommon.h"
#include "kernels/quants.h"
#include "sjkhost.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
static float rndf(void) { return (float)(rnd() % 2000001) / 1000000.0f - 1.0f; } /* [-1, 1] */

/* Weights of any compute type: legacy/float types by quantizing random floats, K-quants
 * as random bytes with sane f16 scales (every bit pattern is a valid block). */
static void random_weights(uint32_t type, void *dst, size_t n)
{
    const sjkh_type_info *ti = sjkh_type_get(type);
    size_t nb = n / ti->block_values;
    if (type == SJKH_TYPE_Q4_K || type == SJKH_TYPE_Q5_K || type == SJKH_TYPE_Q6_K) {
        uint8_t *p = dst;
        for (size_t i = 0; i < nb * ti->block_nbytes; i++) p[i] = (uint8_t)rnd();
        for (size_t b = 0; b < nb; b++) {
            uint8_t *blk = p + b * ti->block_nbytes;
            uint16_t d = sjkh_f32_to_f16(0.001f + 0.01f * (float)(rnd() % 100) / 100.0f);
            uint16_t dm = sjkh_f32_to_f16(0.002f * (float)(rnd() % 100) / 100.0f);
            if (type == SJKH_TYPE_Q6_K) {
                memcpy(blk + 208, &d, 2);
            } else {
                memcpy(blk, &d, 2);
                memcpy(blk + 2, &dm, 2);
            }
        }
        return;
    }
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = rndf() * (1.0f + (float)(i % 7));
    sjkh_quantize_row_ref(type, x, dst, n);
    free(x);
}

static const uint32_t k_types[] = {SJKH_TYPE_F32, SJKH_TYPE_F16, SJKH_TYPE_BF16, SJKH_TYPE_Q4_0,
                                   SJKH_TYPE_Q4_1, SJKH_TYPE_Q5_0, SJKH_TYPE_Q5_1, SJKH_TYPE_Q8_0,
                                   SJKH_TYPE_Q4_K, SJKH_TYPE_Q5_K, SJKH_TYPE_Q6_K};

typedef struct kpair {
    uint32_t type;
    sjkh_vec_dot_fn fast;
} kpair;

/* Independent per-element readings of the formats (docs/BACKGROUND.md, "ggml block formats"; K-quants as drawn in host/kernels/quants.c). */
static float elem_q4_K(const uint8_t *blk, int e, int five)
{
    float d = sjkh_f16_to_f32(sjkh_rd_u16(blk)), dmin = sjkh_f16_to_f32(sjkh_rd_u16(blk + 2));
    const uint8_t *S = blk + 4, *qh = blk + 16, *qs = blk + (five ? 48 : 16);
    int c = e / 64, w = e % 64, k = w < 32 ? 2 * c : 2 * c + 1;
    int sc, mn;
    if (k < 4) {
        sc = S[k] & 63;
        mn = S[k + 4] & 63;
    } else {
        sc = (S[k + 4] & 0x0F) | ((S[k - 4] >> 6) << 4);
        mn = (S[k + 4] >> 4) | ((S[k] >> 6) << 4);
    }
    int q = w < 32 ? qs[32 * c + w] & 0xF : qs[32 * c + w - 32] >> 4;
    if (five) q += 16 * (w < 32 ? (qh[w] >> (2 * c)) & 1 : (qh[w - 32] >> (2 * c + 1)) & 1);
    return d * (float)sc * (float)q - dmin * (float)mn;
}

static float elem_q6_K(const uint8_t *blk, int e)
{
    int h = e / 128, w = e % 128, g = w / 32, l = w % 32;
    const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(blk + 192) + 8 * h;
    int low = (g == 0) ? ql[l] & 0xF : (g == 1) ? ql[l + 32] & 0xF : (g == 2) ? ql[l] >> 4 : ql[l + 32] >> 4;
    int high = (qh[l] >> (2 * g)) & 3;
    float d = sjkh_f16_to_f32(sjkh_rd_u16(blk + 208));
    return d * (float)sc[l / 16 + 2 * g] * (float)((low | high << 4) - 32);
}

static float elem_legacy(uint32_t type, const uint8_t *blk, int e)
{
    float d = sjkh_f16_to_f32(sjkh_rd_u16(blk));
    int j = e % 16, shift = e < 16 ? 0 : 4;
    switch (type) {
    case SJKH_TYPE_Q4_0: return (float)(((blk[2 + j] >> shift) & 0xF) - 8) * d;
    case SJKH_TYPE_Q4_1: return (float)((blk[4 + j] >> shift) & 0xF) * d + sjkh_f16_to_f32(sjkh_rd_u16(blk + 2));
    case SJKH_TYPE_Q5_0: {
        uint32_t H = sjkh_rd_u32(blk + 2);
        int q = ((blk[6 + j] >> shift) & 0xF) | (int)(((H >> e) & 1) << 4);
        return (float)(q - 16) * d;
    }
    case SJKH_TYPE_Q5_1: {
        uint32_t H = sjkh_rd_u32(blk + 4);
        int q = ((blk[8 + j] >> shift) & 0xF) | (int)(((H >> e) & 1) << 4);
        return (float)q * d + sjkh_f16_to_f32(sjkh_rd_u16(blk + 2));
    }
    case SJKH_TYPE_Q8_0: return (float)(int8_t)blk[2 + e] * d;
    default: return 0;
    }
}

TEST(test_dequant_matches_element_formulas)
{
    const size_t n = 512;
    for (size_t t = 0; t < SJKH_ARRAY_LEN(k_types); t++) {
        uint32_t type = k_types[t];
        const sjkh_type_info *ti = sjkh_type_get(type);
        if (ti->block_values == 1) continue;
        size_t nbytes = n / ti->block_values * ti->block_nbytes;
        uint8_t *w = malloc(nbytes);
        float *y = malloc(n * sizeof *y);
        random_weights(type, w, n);
        sjkh_dequant_row(type, w, y, n);
        int bad = 0;
        for (size_t e = 0; e < n; e++) {
            const uint8_t *blk = w + e / ti->block_values * ti->block_nbytes;
            int ie = (int)(e % ti->block_values);
            float want = type == SJKH_TYPE_Q4_K   ? elem_q4_K(blk, ie, 0)
                         : type == SJKH_TYPE_Q5_K ? elem_q4_K(blk, ie, 1)
                         : type == SJKH_TYPE_Q6_K ? elem_q6_K(blk, ie)
                                                  : elem_legacy(type, blk, ie);
            if (fabsf(want - y[e]) > 1e-6f * (1.0f + fabsf(want))) bad++;
        }
        CHECKF(bad == 0, "%s: %d elements differ", ti->name, bad);
        free(w);
        free(y);
    }
}

TEST(test_legacy_quantizers_round_trip)
{
    const size_t n = 256;
    float x[256], y[256];
    for (size_t i = 0; i < n; i++) x[i] = rndf();
    uint8_t buf[256 * 4];
    const uint32_t types[] = {SJKH_TYPE_Q4_0, SJKH_TYPE_Q4_1, SJKH_TYPE_Q5_0, SJKH_TYPE_Q5_1, SJKH_TYPE_Q8_0,
                              SJKH_TYPE_F16, SJKH_TYPE_BF16};
    const float tol[] = {0.14f, 0.07f, 0.07f, 0.035f, 0.01f, 0.0005f, 0.004f};
    for (size_t t = 0; t < SJKH_ARRAY_LEN(types); t++) {
        sjkh_quantize_row_ref(types[t], x, buf, n);
        sjkh_dequant_row(types[t], buf, y, n);
        float worst = 0;
        for (size_t i = 0; i < n; i++) worst = fmaxf(worst, fabsf(x[i] - y[i]));
        CHECKF(worst <= tol[t], "%s: worst error %g", sjkh_type_get(types[t])->name, worst);
    }
}

/* ref dot == dot(dequant(w), dequant(quantize(x))) up to float rounding, and close to the
 * exact dot within the activation quantization error. */
TEST(test_vec_dot_ref_matches_dequant)
{
    const size_t n = 768;
    float *x = malloc(n * sizeof *x), *wf = malloc(n * sizeof *wf), *xq = malloc(n * sizeof *xq);
    uint8_t *w = malloc(n * 4), *xb = malloc(n * 4 + 64);
    for (size_t t = 0; t < SJKH_ARRAY_LEN(k_types); t++) {
        uint32_t type = k_types[t];
        const sjkh_qtraits *qt = sjkh_qtraits_get(type);
        CHECK(qt != NULL);
        if (!qt) continue;
        for (int rep = 0; rep < 20; rep++) {
            for (size_t i = 0; i < n; i++) x[i] = rndf() * (rep % 3 ? 1.0f : 30.0f);
            random_weights(type, w, n);
            sjkh_dequant_row(type, w, wf, n);
            const void *xa = x;
            if (qt->quantize) {
                qt->quantize(x, xb, n);
                xa = xb;
                if (qt->dot_type == SJKH_TYPE_Q8_K) {
                    const blk_q8_K *k = (const blk_q8_K *)xb;
                    for (size_t i = 0; i < n; i++) xq[i] = k[i / 256].d * (float)k[i / 256].qs[i % 256];
                } else {
                    for (size_t i = 0; i < n; i++) {
                        const uint8_t *blk = xb + (i / 32) * (qt->dot_type == SJKH_TYPE_Q8_1 ? 36 : 34);
                        int off = qt->dot_type == SJKH_TYPE_Q8_1 ? 4 : 2;
                        xq[i] = sjkh_f16_to_f32(sjkh_rd_u16(blk)) * (float)(int8_t)blk[off + i % 32];
                    }
                }
            } else {
                memcpy(xq, x, n * sizeof *x);
            }
            double want = 0, mag = 0, exact = 0;
            for (size_t i = 0; i < n; i++) {
                want += (double)wf[i] * xq[i];
                exact += (double)wf[i] * x[i];
                mag += fabs((double)wf[i] * x[i]);
            }
            float got = qt->vec_dot_ref(n, w, xa);
            /* Q8_1's s is stored in f16: allow its rounding on the min term */
            double tol = 1e-5 * mag + 1e-6 + (qt->dot_type == SJKH_TYPE_Q8_1 ? 2e-3 * mag : 0);
            CHECKF(fabs(got - want) <= tol, "%s rep %d: ref %g, dequant dot %g (mag %g)",
                   sjkh_type_get(type)->name, rep, got, want, mag);
            CHECKF(fabs(got - exact) <= 0.02 * mag + 1e-6, "%s rep %d: ref %g, exact %g",
                   sjkh_type_get(type)->name, rep, got, exact);
        }
    }
    free(x);
    free(wf);
    free(xq);
    free(w);
    free(xb);
}

/* The act_quant 1 prefill path (forward.c matmul) multiplies dequantized weight rows with
 * the quantized activations expanded back to f32 (sjkh_dequant_dot_row) in f32, and adds
 * the weights' mins times Q8_1's fp16 gaps: that must be the integer dot's value up to
 * float rounding, with no allowance for the f16 block sum (the test above has one). */
TEST(test_expanded_activations_reproduce_integer_dot)
{
    const size_t n = 768;
    float *x = malloc(n * sizeof *x), *wf = malloc(n * sizeof *wf), *xr = malloc(n * sizeof *xr);
    float gap[768 / 32];
    uint8_t *w = malloc(n * 4), *xb = malloc(n * 4 + 64);
    for (size_t t = 0; t < SJKH_ARRAY_LEN(k_types); t++) {
        uint32_t type = k_types[t];
        const sjkh_qtraits *qt = sjkh_qtraits_get(type);
        if (!qt || !qt->quantize) continue;
        const sjkh_type_info *ti = sjkh_type_get(type);
        for (int rep = 0; rep < 20; rep++) {
            for (size_t i = 0; i < n; i++) x[i] = rndf() * (rep % 3 ? 1.0f : 30.0f) + (rep % 2 ? 0.5f : 0.0f);
            random_weights(type, w, n);
            sjkh_dequant_row(type, w, wf, n);
            qt->quantize(x, xb, n);
            for (size_t b = 0; b < n / 32; b++) gap[b] = 0;
            sjkh_dequant_dot_row(qt->dot_type, xb, xr, gap, n);
            double want = 0, mag = 0;
            for (size_t i = 0; i < n; i++) {
                want += (double)wf[i] * xr[i];
                mag += fabs((double)wf[i] * xr[i]);
            }
            if (qt->dot_type == SJKH_TYPE_Q8_1)
                for (size_t b = 0; b < n / 32; b++) {
                    const uint8_t *blk = w + b * ti->block_nbytes;
                    want += (double)sjkh_f16_to_f32(sjkh_rd_u16(blk + 2)) * gap[b];
                }
            else
                for (size_t b = 0; b < n / 32; b++) CHECK(gap[b] == 0); /* only Q8_1 has gaps */
            float got = qt->vec_dot_ref(n, w, xb);
            CHECKF(fabs(got - want) <= 1e-5 * mag + 1e-6, "%s rep %d: integer dot %g, expanded %g (mag %g)", ti->name,
                   rep, got, want, mag);
        }
    }
    free(x);
    free(wf);
    free(xr);
    free(w);
    free(xb);
}

static void check_simd_dots(const kpair *pairs, size_t n_pairs, const char *isa)
{
    const size_t sizes[] = {256, 640, 768, 2048}; /* 640: 20 blocks, a tail after 4-block steps */
    for (size_t p = 0; p < n_pairs; p++) {
        const sjkh_qtraits *qt = sjkh_qtraits_get(pairs[p].type);
        for (size_t s = 0; s < SJKH_ARRAY_LEN(sizes); s++) {
            size_t n = sizes[s];
            /* rows are whole blocks (640 is not, for the 256-value K-quants: their dequant
             * would leave wf's tail unwritten, which valgrind caught) */
            if (n % sjkh_type_get(pairs[p].type)->block_values) continue;
            float *x = malloc(n * sizeof *x), *wf = malloc(n * sizeof *wf);
            uint8_t *w = malloc(n * 4), *xb = malloc(n * 4 + 64);
            for (int rep = 0; rep < 10; rep++) {
                for (size_t i = 0; i < n; i++) x[i] = rndf() * 4.0f;
                random_weights(pairs[p].type, w, n);
                sjkh_dequant_row(pairs[p].type, w, wf, n);
                double mag = 0;
                for (size_t i = 0; i < n; i++) mag += fabs((double)wf[i] * x[i]);
                const void *xa = x;
                if (qt->quantize) {
                    if (qt->dot_type == SJKH_TYPE_Q8_0) sjkh_quantize_q8_0_ref(x, xb, n);
                    else if (qt->dot_type == SJKH_TYPE_Q8_1) sjkh_quantize_q8_1_ref(x, xb, n);
                    else sjkh_quantize_q8_K_ref(x, xb, n);
                    xa = xb;
                }
                float r = qt->vec_dot_ref(n, w, xa), f = pairs[p].fast(n, w, xa);
                CHECKF(fabs((double)r - f) <= 1e-5 * mag + 1e-6, "%s %s n=%zu: ref %.9g simd %.9g",
                       sjkh_type_get(pairs[p].type)->name, isa, n, r, f);
            }
            free(x);
            free(wf);
            free(w);
            free(xb);
        }
    }
}

TEST(test_simd_dots_match_ref)
{
    if (!(sjk_cpu_features() & SJK_CPU_AVX2)) SKIP_HW("no AVX2 on this CPU (or SJK_CPU_DISABLE)");
#if defined(__x86_64__)
    const kpair avx2[] = {
        {SJKH_TYPE_F32, sjkh_vec_dot_f32_avx2},   {SJKH_TYPE_F16, sjkh_vec_dot_f16_avx2},
        {SJKH_TYPE_BF16, sjkh_vec_dot_bf16_avx2}, {SJKH_TYPE_Q4_0, sjkh_vec_dot_q4_0_avx2},
        {SJKH_TYPE_Q4_1, sjkh_vec_dot_q4_1_avx2}, {SJKH_TYPE_Q5_0, sjkh_vec_dot_q5_0_avx2},
        {SJKH_TYPE_Q5_1, sjkh_vec_dot_q5_1_avx2}, {SJKH_TYPE_Q8_0, sjkh_vec_dot_q8_0_avx2},
        {SJKH_TYPE_Q4_K, sjkh_vec_dot_q4_K_avx2}, {SJKH_TYPE_Q5_K, sjkh_vec_dot_q5_K_avx2},
        {SJKH_TYPE_Q6_K, sjkh_vec_dot_q6_K_avx2},
    };
    check_simd_dots(avx2, SJKH_ARRAY_LEN(avx2), "avx2");
    if (!(sjk_cpu_features() & SJK_CPU_AVX512)) {
        SKIP_PART_HW("no AVX-512 VNNI here (or SJK_CPU_DISABLE): the avx512 kernels were not run");
        return;
    }
    const kpair avx512[] = {
        {SJKH_TYPE_F32, sjkh_vec_dot_f32_avx512},   {SJKH_TYPE_F16, sjkh_vec_dot_f16_avx512},
        {SJKH_TYPE_BF16, sjkh_vec_dot_bf16_avx512}, {SJKH_TYPE_Q4_0, sjkh_vec_dot_q4_0_avx512},
        {SJKH_TYPE_Q4_1, sjkh_vec_dot_q4_1_avx512}, {SJKH_TYPE_Q5_0, sjkh_vec_dot_q5_0_avx512},
        {SJKH_TYPE_Q5_1, sjkh_vec_dot_q5_1_avx512}, {SJKH_TYPE_Q8_0, sjkh_vec_dot_q8_0_avx512},
        {SJKH_TYPE_Q4_K, sjkh_vec_dot_q4_K_avx512}, {SJKH_TYPE_Q5_K, sjkh_vec_dot_q5_K_avx512},
        {SJKH_TYPE_Q6_K, sjkh_vec_dot_q6_K_avx512},
    };
    check_simd_dots(avx512, SJKH_ARRAY_LEN(avx512), "avx512");
#endif
}

TEST(test_dot4_matches_single_dots)
{
    const uint32_t types[] = {SJKH_TYPE_Q4_0, SJKH_TYPE_Q4_1, SJKH_TYPE_Q5_0, SJKH_TYPE_Q5_1, SJKH_TYPE_Q8_0,
                              SJKH_TYPE_Q4_K, SJKH_TYPE_Q6_K};
    const size_t n = 640;
    float *x = malloc(4 * n * sizeof *x);
    uint8_t *w = malloc(n * 2), *xb = malloc(4 * (n * 2));
    int tested = 0;
    for (size_t ti = 0; ti < SJKH_ARRAY_LEN(types); ti++) {
        const sjkh_qtraits *qt = sjkh_qtraits_get(types[ti]);
        size_t nn = qt->dot_type == SJKH_TYPE_Q8_K ? 512 : n;
        if (!qt->vec_dot4) continue;
        tested++;
        size_t xs = sjkh_dot_row_nbytes(qt->dot_type, nn);
        for (int rep = 0; rep < 10; rep++) {
            for (size_t i = 0; i < 4 * nn; i++) x[i] = rndf() * 3.0f;
            random_weights(types[ti], w, nn);
            for (int t = 0; t < 4; t++) qt->quantize(x + t * nn, xb + t * xs, nn);
            float o[4];
            qt->vec_dot4(nn, w, xb, xs, o);
            for (int t = 0; t < 4; t++) {
                float r = qt->vec_dot_ref(nn, w, xb + t * xs);
                CHECKF(fabsf(r - o[t]) <= 1e-5f * (1.0f + fabsf(r)) * 10, "%s t=%d: ref %g dot4 %g",
                       sjkh_type_get(types[ti])->name, t, r, o[t]);
            }
        }
    }
    free(x);
    free(w);
    free(xb);
    if (!tested) SKIP("no four-row kernels on this CPU (or SJK_CPU_DISABLE)");
}

/* vec_dotn (the batched decode step): every output equals vec_dot of its weight row and
 * token bit for bit, for every row count (odd ones too: the last row of a pair alone) and
 * every token count 1..8, and stays within the SIMD tolerance of the scalar reference.
 * The activation rows include extreme values (+-127 after quantization, all zero). */
TEST(test_dotn_matches_vec_dot_bit_for_bit)
{
    const uint32_t types[] = {SJKH_TYPE_Q4_0, SJKH_TYPE_Q4_1, SJKH_TYPE_Q5_0, SJKH_TYPE_Q5_1, SJKH_TYPE_Q8_0,
                              SJKH_TYPE_Q4_K, SJKH_TYPE_Q6_K};
    enum { NR = 5, NT = SJKH_DOTN_MAX_TOK };
    const size_t n = 512;
    float *x = malloc(NT * n * sizeof *x), y[NT * NR];
    uint8_t *w = malloc(NR * n * 2), *xq = malloc(NT * n * 2), *xp = malloc(NT * n * 2);
    int tested = 0;
    for (size_t ti = 0; ti < SJKH_ARRAY_LEN(types); ti++) {
        const sjkh_qtraits *qt = sjkh_qtraits_get(types[ti]);
        if (!qt->vec_dotn) continue;
        tested++;
        const char *name = sjkh_type_get(types[ti])->name;
        size_t ws = sjkh_type_get(types[ti])->block_nbytes * (n / sjkh_type_get(types[ti])->block_values);
        size_t xs = sjkh_dot_row_nbytes(qt->dot_type, n), ps = sjkh_dotn_row_nbytes(qt->dot_type, n);
        CHECK(ps <= n * 2);
        for (int rep = 0; rep < 4; rep++) {
            for (size_t i = 0; i < NT * n; i++) x[i] = rndf() * 3.0f;
            for (size_t i = 0; i < n; i += 7) x[i] = (rep & 1) ? 1e3f : -1e3f; /* saturating outliers */
            for (size_t i = 0; i < n; i++) x[(NT - 1) * n + i] = 0.0f;         /* an all-zero row */
            for (int r = 0; r < NR; r++) random_weights(types[ti], w + r * ws, n);
            for (int t = 0; t < NT; t++) {
                qt->quantize(x + t * n, xq + t * xs, n);
                sjkh_dotn_prepare(qt->dot_type, xq + t * xs, xp + t * ps, n);
            }
            for (size_t nt = 1; nt <= NT; nt++)
                for (size_t nr = 1; nr <= NR; nr++) {
                    for (size_t i = 0; i < NT * NR; i++) y[i] = -12345.0f;
                    qt->vec_dotn(n, w, ws, nr, xp, ps, nt, y, NR);
                    for (size_t t = 0; t < NT; t++)
                        for (size_t r = 0; r < NR; r++) {
                            float got = y[t * NR + r];
                            if (t >= nt || r >= nr) {
                                CHECKF(got == -12345.0f, "%s: wrote outside nr %zu nt %zu", name, nr, nt);
                                continue;
                            }
                            float one = qt->vec_dot(n, w + r * ws, xq + t * xs);
                            float ref = qt->vec_dot_ref(n, w + r * ws, xq + t * xs);
                            CHECKF(memcmp(&got, &one, sizeof got) == 0, "%s nr %zu nt %zu r %zu t %zu: dotn %.9g vec_dot %.9g",
                                   name, nr, nt, r, t, got, one);
                            /* float order only: within 1e-5 of sum |w x| (the outliers cancel) */
                            float wf[512], mag = 0.0f;
                            sjkh_dequant_row(types[ti], w + r * ws, wf, n);
                            for (size_t i = 0; i < n; i++) mag += fabsf(wf[i] * x[t * n + i]);
                            CHECKF(fabsf(got - ref) <= 1e-5f * (1.0f + mag), "%s: dotn %g ref %g (sum |w x| %g)", name,
                                   got, ref, mag);
                        }
                }
        }
    }
    free(x);
    free(w);
    free(xq);
    free(xp);
    if (!tested) SKIP_HW("no many-rows kernels on this CPU (they need AVX512-VNNI; or SJK_CPU_DISABLE)");
}

/* mm_many (the prefill matmul): every output equals vec_dot_ref of its weight row and
 * token bit for bit, for row counts that end inside a 16-row panel, token counts that end
 * inside an 8-token block and (legacy types) an odd number of blocks, and writes nothing
 * outside nr x nt. The activation rows include saturating outliers (+-127 after
 * quantization, all of one sign in a row) and an all-zero row. */
TEST(test_mm_many_matches_ref_bit_for_bit)
{
    const uint32_t types[] = {SJKH_TYPE_Q4_K, SJKH_TYPE_Q6_K, SJKH_TYPE_Q8_0, SJKH_TYPE_Q5_0};
    enum { NR = 37, NT = 19, YS = NR + 3, NMAX = 800 };
    float *x = malloc(NT * NMAX * sizeof *x), *y = malloc(NT * YS * sizeof *y);
    uint8_t *w = malloc(NR * NMAX * 2), *xq = malloc(NT * NMAX * 2), *xp = malloc(NT * NMAX * 2);
    void *scratch = malloc(sjkh_mm_many_scratch_nbytes(NMAX));
    int tested = 0;
    for (size_t ti = 0; ti < SJKH_ARRAY_LEN(types); ti++) {
        const sjkh_qtraits *qt = sjkh_qtraits_get(types[ti]);
        if (!qt->mm_many) continue;
        tested++;
        const sjkh_type_info *tinf = sjkh_type_get(types[ti]);
        const size_t n = qt->dot_type == SJKH_TYPE_Q8_K ? 768 : NMAX; /* 3 super-blocks; 25 blocks */
        size_t ws = tinf->block_nbytes * (n / tinf->block_values), xs = sjkh_dot_row_nbytes(qt->dot_type, n);
        size_t ps = sjkh_dotn_row_nbytes(qt->dot_type, n);
        CHECK(ps <= NMAX * 2 && ws <= NMAX * 2);
        for (int rep = 0; rep < 3; rep++) {
            for (size_t i = 0; i < NT * n; i++) x[i] = rndf() * 3.0f;
            for (size_t i = 0; i < n; i += 7) x[i] = (rep & 1) ? 1e3f : -1e3f;
            for (size_t i = 0; i < n; i++) x[(NT - 1) * n + i] = 0.0f;
            for (int r = 0; r < NR; r++) random_weights(types[ti], w + r * ws, n);
            for (int t = 0; t < NT; t++) {
                qt->quantize(x + t * n, xq + t * xs, n);
                sjkh_dotn_prepare(qt->dot_type, xq + t * xs, xp + t * ps, n);
            }
            const size_t nrs[] = {1, 16, 21, NR}, nts[] = {1, 8, 9, NT};
            for (size_t a = 0; a < SJKH_ARRAY_LEN(nrs); a++)
                for (size_t b = 0; b < SJKH_ARRAY_LEN(nts); b++) {
                    size_t nr = nrs[a], nt = nts[b];
                    for (size_t i = 0; i < NT * YS; i++) y[i] = -12345.0f;
                    qt->mm_many(n, w, ws, nr, xp, ps, nt, y, YS, scratch);
                    for (size_t t = 0; t < NT; t++)
                        for (size_t r = 0; r < YS; r++) {
                            float got = y[t * YS + r];
                            if (t >= nt || r >= nr) {
                                CHECKF(got == -12345.0f, "%s: wrote outside nr %zu nt %zu (r %zu t %zu)", tinf->name,
                                       nr, nt, r, t);
                                continue;
                            }
                            float want = qt->vec_dot_ref(n, w + r * ws, xq + t * xs);
                            CHECKF(memcmp(&got, &want, sizeof got) == 0,
                                   "%s nr %zu nt %zu r %zu t %zu: mm_many %.9g vec_dot_ref %.9g", tinf->name, nr, nt,
                                   r, t, got, want);
                        }
                }
        }
    }
    free(x);
    free(y);
    free(w);
    free(xq);
    free(xp);
    free(scratch);
    if (!tested) SKIP_HW("no many-token kernels on this CPU (they need AVX512-VNNI; or SJK_CPU_DISABLE)");
}

TEST(test_simd_activation_quantizers_bit_exact)
{
    if (!(sjk_cpu_features() & SJK_CPU_AVX2)) SKIP_HW("no AVX2 on this CPU (or SJK_CPU_DISABLE)");
#if defined(__x86_64__)
    const size_t n = 1024;
    float *x = malloc(n * sizeof *x);
    uint8_t a[1024 / 32 * 36], b[1024 / 32 * 36];
    for (int rep = 0; rep < 50; rep++) {
        for (size_t i = 0; i < n; i++) x[i] = rndf() * (float)(1 + rep);
        if (rep == 1) memset(x, 0, 32 * sizeof *x); /* an all-zero block */
        if (rep == 2) for (size_t i = 0; i < n; i++) x[i] = (float)((int)(i % 64) - 32) * 0.5f; /* ties */
        sjkh_quantize_q8_0_ref(x, a, n);
        sjkh_quantize_q8_0_avx2(x, b, n);
        CHECKF(!memcmp(a, b, n / 32 * 34), "q8_0 rep %d", rep);
        sjkh_quantize_q8_1_ref(x, a, n);
        sjkh_quantize_q8_1_avx2(x, b, n);
        CHECKF(!memcmp(a, b, n / 32 * 36), "q8_1 rep %d", rep);
        if (sjk_cpu_features() & SJK_CPU_AVX512) { /* Q8_K: also a NaN, an Inf, a tie of magnitudes */
            if (rep == 3) x[300] = NAN;
            if (rep == 4) x[600] = -INFINITY;
            if (rep == 5) { /* the first of two equal magnitudes sets the sign of iscale */
                x[11] = 100.0f;
                x[10] = -100.0f;
            }
            blk_q8_K ka[1024 / 256], kb[1024 / 256];
            sjkh_quantize_q8_K_ref(x, ka, n);
            sjkh_quantize_q8_K_avx512(x, kb, n);
            CHECKF(!memcmp(ka, kb, sizeof ka), "q8_K rep %d", rep);
        }
    }
    free(x);
#endif
}

TEST(test_q8_K_matches_llamacpp_rule)
{
    /* iscale = -127/M for the signed extreme M, q = nearest int, clamped to 127 */
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = (float)(i % 17) * 0.1f;
    x[100] = -3.0f;
    blk_q8_K q;
    sjkh_quantize_q8_K_ref(x, &q, 256);
    CHECK(q.qs[100] == -127); /* iscale = -127/-3; the extreme maps to -127 */
    CHECK_NEAR(q.d, 3.0f / 127.0f, 1e-9);
    CHECK(q.qs[17] == 0 && q.qs[1] == 4); /* 0.1 * 127/3 = 4.23 */
    int s = 0;
    for (int i = 0; i < 16; i++) s += q.qs[i];
    CHECK(q.bsums[0] == s);
}

int main(void)
{
    RUN(test_dequant_matches_element_formulas);
    RUN(test_legacy_quantizers_round_trip);
    RUN(test_vec_dot_ref_matches_dequant);
    RUN(test_expanded_activations_reproduce_integer_dot);
    RUN(test_simd_dots_match_ref);
    RUN(test_dot4_matches_single_dots);
    RUN(test_dotn_matches_vec_dot_bit_for_bit);
    RUN(test_mm_many_matches_ref_bit_for_bit);
    RUN(test_simd_activation_quantizers_bit_exact);
    RUN(test_q8_K_matches_llamacpp_rule);
    return test_summary();
}
