/* test_model_golden.c — our forward pass against llama.cpp's next-token logits.
 *
 * tests/data/golden/logits-<model>.bin (tests/oracle/make_golden.py, llama-cpp-python with
 * fp16 K and V caches, no flash attention, one batch per prompt) holds, for 17 prompts per
 * model and every position, the log-sum-exp of llama.cpp's logits and its 128 largest
 * logits. We run the same token ids through an fp16-cache session ("host-f16", which
 * rounds the query and the softmax weights to f16 as llama.cpp's f16-cache attention does)
 * and measure
 *   - top-1 agreement: same argmax;
 *   - mean KL(llama.cpp || ours) in nats over llama.cpp's top 128 tokens plus one bucket for
 *     the rest (exact top-128 probabilities from the stored log-sum-exp; bucketing can only
 *     lower KL — the mean tail mass is printed).
 *
 * Issue #5 asks for top-1 >= 99% and mean KL <= 1e-3. llama.cpp does not meet that against
 * itself: golden/floor-<model>.txt (make_golden.py --floor) measures, on the same prompts and
 * with the same fp16 cache, how far llama.cpp's other valid execution paths (flash
 * attention; token-by-token evaluation) move its own logits — for these small quantized
 * models, mean KL 2e-3..1e-2 and top-1 agreement 96-98%. So the enforced bound is the
 * issue's target or llama.cpp's own noise level, whichever is looser:
 *   mean KL <= max(1e-3, the largest variant's mean_kl_top128)
 *   top-1   >= min(0.99, the smallest variant's top1 - 2 binomial standard errors)
 * (the standard error at our position count).
 * and the test prints loudly whether the issue's own target is met.
 *
 * That bound is llama.cpp's noise, far looser than what we measure, so on its own it would
 * let our agreement fall by half before failing. The enforced bound is therefore tight to
 * our own measurement on this build's dispatch path (measured[] below, host-f16, 2
 * threads, batch 512: the numbers are deterministic for a path): mean KL at most 10 %
 * above it and top-1 at most 3 positions below it, and never looser than llama.cpp's
 * noise. A change of the forward pass that moves either must update measured[] in the
 * same commit. The measured agreement is printed in the binary's summary line, which the
 * runner shows on every run. A path with no measurement (the scalar path) falls back to
 * the noise bound and says so.
 *
 * The model files come from scripts/fetch-model; without them the tests SKIP (CI counts a
 * skip as a failure). Qwen2.5-Coder-1.5B runs only under SJK_TEST_BIG=1 (CI does not fetch
 * it; `scripts/fetch-model every` does). Under AddressSanitizer or valgrind only the first 3 prompts run, and
 * the bounds (statistics over all 17) are printed but not enforced; with SJK_TEST_LIGHT
 * (`make valgrind`) only the first 16 positions of the first prompt.
 * SJK_GOLDEN_VERBOSE=1 prints every position; SJK_GOLDEN_KV picks another cache. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sjkhost.h"
#include "sjkvarn.h"
#include "support/models.h"

static int slow_build(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
    return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
    return 1;
#endif
#endif
    const char *pre = getenv("LD_PRELOAD");
    return (pre && strstr(pre, "vgpreload") != NULL) || test_light();
}

/* The golden file, read whole; positions are parsed in place. */
typedef struct golden {
    uint8_t *buf;
    size_t n;
    uint32_t n_vocab, k, n_prompts;
} golden;

static int read_golden(const char *path, golden *g)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    g->buf = sz > 20 ? malloc((size_t)sz) : NULL;
    g->n = (size_t)sz;
    int ok = g->buf && fread(g->buf, 1, g->n, f) == g->n && memcmp(g->buf, "SJKL", 4) == 0;
    fclose(f);
    uint32_t h[4];
    if (ok) {
        memcpy(h, g->buf + 4, sizeof h);
        ok = h[0] == 1 && h[2] > 0 && h[3] > 0;
        g->n_vocab = h[1];
        g->k = h[2];
        g->n_prompts = h[3];
    }
    if (!ok) free(g->buf);
    return ok;
}

static uint32_t rd_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The noise floor: the largest mean KL and the lowest top-1 agreement over llama.cpp's
 * variants. */
static int read_floor(const char *path, double *kl, double *top1, char *desc, size_t desc_cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512], name[64];
    int n_var = 0;
    size_t used = 0;
    *kl = 0;
    *top1 = 1;
    desc[0] = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long n;
        double kl_full, kl_top, agree;
        if (sscanf(line, "variant %63s positions %lu mean_kl %lf mean_kl_top128 %lf top1 %lf", name, &n,
                   &kl_full, &kl_top, &agree) != 5 || n == 0)
            continue;
        if (kl_top > *kl) *kl = kl_top;
        if (agree < *top1) *top1 = agree;
        if (used < desc_cap)
            used += (size_t)snprintf(desc + used, desc_cap - used, "%s%s: KL %.3g, top-1 %.2f%%",
                                     n_var ? "; " : "", name, kl_top, 100 * agree);
        n_var++;
    }
    fclose(f);
    return n_var;
}

/* Our agreement with llama.cpp as measured (build/tests/test_model_golden, and with
 * SJK_CPU_DISABLE=avx512 for the AVX2 path), 2026-12-01, tree of issue 21; the avx512
 * rows of Gemma 3 and Qwen2.5 again after prefill chunks of Q4_K, Q6_K, Q8_0 and Q5_0
 * weights took the integer panel kernels (quants.h mm_many, issue 16: the integer
 * products of vec_dot, as llama.cpp computes them, instead of f32 products of the
 * expanded activations), and SwiGLU took the AVX-512 exp (ops.h silu_mul). Before:
 * SmolLM2 0.00369 / 584, Gemma 3 0.00631 / 461, Qwen2.5-0.5B 0.000888 / 502, 1.5B
 * 0.00163 / 497. A path change of this kind (float rounding of the same products)
 * moves top-1 by a few positions either way, as llama.cpp's own variants do. The avx2
 * rows again (2026-12-06, the 2-vCPU Zen 3) after prefill chunks on AVX2 took the f32
 * panel kernel (ops.h mm_f32_panel; the expanded 8-bit activations against dequantized
 * weights, as on AVX-512 before mm_many, 1.6x the block dots' prefill) and SwiGLU and
 * GELU took the AVX2 exp (ops.h silu_mul, gelu_mul): before, SmolLM2 0.00253 / 587,
 * Gemma 3 0.00520 / 458, Qwen2.5-0.5B 0.000787 / 500, 1.5B 0.00190 / 495; all four stay
 * inside llama.cpp's own noise floor. */
typedef struct measured { const char *file, *path; double mean_kl; size_t top1, n_pos; } measured;
static const measured g_measured[] = {
    {"SmolLM2-135M-Instruct.Q4_1.gguf", "avx512", 0.0037, 583, 604},
    {"SmolLM2-135M-Instruct.Q4_1.gguf", "avx2", 0.00385, 587, 604},
    {"gemma-3-270m-q4_k_m.gguf", "avx512", 0.00633, 455, 474},
    {"gemma-3-270m-q4_k_m.gguf", "avx2", 0.00686, 457, 474},
    {"qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "avx512", 0.000713, 498, 505},
    {"qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "avx2", 0.000867, 498, 505},
    {"qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "avx512", 0.00153, 499, 505},
    {"qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "avx2", 0.00191, 495, 505},
};

static const char *dispatch_path(void)
{
    unsigned f = sjk_cpu_features();
    return f & SJK_CPU_AVX512 ? "avx512" : f & SJK_CPU_AVX2 ? "avx2" : "scalar";
}

static void check_model(const char *file, const char *golden_name, const char *floor_name)
{
    golden g = {0};
    CHECKF(read_golden(test_data_path(golden_name), &g), "cannot read %s", test_data_path(golden_name));
    if (t_cur_failed) return;
    FILE *probe = fopen(test_model_path(file), "rb");
    if (!probe) {
        free(g.buf);
        SKIP("%s missing (run scripts/fetch-model)", test_model_path(file));
    }
    fclose(probe);

    char err[256] = "";
    sjkh_model *m = NULL;
    sjk_status st = sjkh_model_load(test_model_path(file), &m, err, sizeof err);
    CHECKF(st == SJK_OK, "model_load: %s", err);
    if (st != SJK_OK) {
        free(g.buf);
        return;
    }
    const sjkh_model_info *mi = sjkh_model_get_info(m);
    CHECKF(mi->n_vocab == g.n_vocab, "vocab %u vs golden %u", mi->n_vocab, g.n_vocab);
    sjkh_session_params sp = sjkh_session_params_default();
    sp.n_ctx = 512;
    sp.n_batch = 512;
    sp.n_threads = 2;
    sp.kv = getenv("SJK_GOLDEN_KV") ? getenv("SJK_GOLDEN_KV") : "host-f16";
    sjkh_session *s = NULL;
    st = sjkh_session_create(m, &sp, &s, err, sizeof err);
    CHECKF(st == SJK_OK, "session_create: %s", err);

    size_t n_pos = 0, n_top1 = 0, off = 20;
    double kl_sum = 0, kl_max = 0, tail_sum = 0;
    /* instrumented builds: 3 prompts; SJK_TEST_LIGHT (valgrind): the first 16 positions of
     * the first prompt (the same prefill, logits and comparison, on less of it) */
    uint32_t n_prompts = test_light() ? 1 : slow_build() ? 3 : g.n_prompts;
    uint32_t max_nt = test_light() ? 16 : UINT32_MAX;
    size_t rec = 4 + (size_t)g.k * 8; /* lse, ids[k], logits[k] */
    for (uint32_t pi = 0; st == SJK_OK && pi < g.n_prompts; pi++) {
        if (off + 4 > g.n) break;
        uint32_t nt = rd_u32(g.buf + off);
        off += 4;
        if (nt == 0 || off + (size_t)nt * 4 + (size_t)nt * rec > g.n) {
            CHECKF(0, "golden file %s is truncated", golden_name);
            break;
        }
        const uint8_t *toks = g.buf + off;
        off += (size_t)nt * 4;
        const uint8_t *pos0 = g.buf + off;
        off += (size_t)nt * rec;
        if (pi >= n_prompts) continue;
        if (nt > max_nt) nt = max_nt; /* a prefix: causal, so its logits are the same */

        int32_t *ids = malloc(nt * sizeof *ids);
        float *logits = malloc((size_t)nt * g.n_vocab * sizeof *logits);
        if (!ids || !logits) {
            free(ids);
            free(logits);
            CHECK(0);
            break;
        }
        memcpy(ids, toks, nt * sizeof *ids);
        st = sjkh_session_reset(s);
        if (st == SJK_OK) st = sjkh_session_feed(s, ids, nt, logits, 1, err, sizeof err);
        CHECKF(st == SJK_OK, "feed prompt %u: %s", pi, err);
        for (uint32_t p = 0; st == SJK_OK && p < nt; p++) {
            const uint8_t *r = pos0 + (size_t)p * rec;
            float lse_p;
            memcpy(&lse_p, r, 4);
            const float *q = logits + (size_t)p * g.n_vocab;
            /* Our log-sum-exp and argmax over the full vocabulary. */
            double mx = -INFINITY;
            uint32_t arg = 0;
            for (uint32_t v = 0; v < g.n_vocab; v++)
                if (q[v] > mx) mx = q[v], arg = v;
            double z = 0;
            for (uint32_t v = 0; v < g.n_vocab; v++) z += exp((double)q[v] - mx);
            double lse_q = mx + log(z);
            double kl = 0, p_top = 0, q_top = 0;
            int32_t top1;
            memcpy(&top1, r + 4, 4);
            for (uint32_t j = 0; j < g.k; j++) {
                int32_t id;
                float lp;
                memcpy(&id, r + 4 + 4 * j, 4);
                memcpy(&lp, r + 4 + 4 * (size_t)g.k + 4 * j, 4);
                if (id < 0 || (uint32_t)id >= g.n_vocab) continue;
                double logp = (double)lp - lse_p, logq = (double)q[id] - lse_q;
                double pj = exp(logp);
                kl += pj * (logp - logq);
                p_top += pj;
                q_top += exp(logq);
            }
            double p_tail = 1.0 - p_top, q_tail = 1.0 - q_top;
            if (p_tail > 1e-12 && q_tail > 1e-300) kl += p_tail * log(p_tail / q_tail);
            if (kl < 0) kl = 0;
            kl_sum += kl;
            tail_sum += p_tail > 0 ? p_tail : 0;
            if (kl > kl_max) kl_max = kl;
            if (getenv("SJK_GOLDEN_VERBOSE"))
                printf("    prompt %u pos %u: KL %.3g top1 %d/%u tail %.3f\n", pi, p, kl, top1, arg, p_tail);
            n_top1 += (int32_t)arg == top1;
            n_pos++;
        }
        free(ids);
        free(logits);
    }
    if (n_pos) {
        double rate = (double)n_top1 / (double)n_pos, mean_kl = kl_sum / (double)n_pos;
        printf("  %s: %u prompts, %zu positions: top-1 agreement %.2f%% (%zu/%zu), "
               "mean KL %.3g, max KL %.3g, mean llama.cpp tail mass beyond top-%u %.3g\n",
               file, n_prompts, n_pos, 100.0 * rate, n_top1, n_pos, mean_kl, kl_max, g.k,
               tail_sum / (double)n_pos);
        double floor_kl = 0, floor_top1 = 1;
        char desc[512] = "";
        int n_var = read_floor(test_data_path(floor_name), &floor_kl, &floor_top1, desc, sizeof desc);
        CHECKF(n_var > 0, "no llama.cpp noise floor in %s", test_data_path(floor_name));
        /* Two binomial standard errors at our position count: top-1 agreement over a few
         * hundred positions moves by a couple of positions between equally good runs. */
        double se = sqrt(floor_top1 * (1 - floor_top1) / (double)n_pos);
        double max_kl = floor_kl > 1e-3 ? floor_kl : 1e-3;
        double min_top1 = floor_top1 - 2 * se < 0.99 ? floor_top1 - 2 * se : 0.99;
        int target = rate >= 0.99 && mean_kl <= 1e-3;
        printf("  %s: issue #5 target (top-1 >= 99%%, mean KL <= 1e-3) %s; llama.cpp against itself: %s\n"
               "  %s: enforced: mean KL <= %.3g, top-1 >= %.2f%%\n",
               file, target ? "MET" : "NOT MET (llama.cpp misses it against itself, see header)", desc, file,
               max_kl, 100 * min_top1);
        const measured *me = NULL;
        for (size_t i = 0; i < sizeof g_measured / sizeof g_measured[0]; i++)
            if (!strcmp(g_measured[i].file, file) && !strcmp(g_measured[i].path, dispatch_path()) &&
                g_measured[i].n_pos == n_pos && !getenv("SJK_GOLDEN_KV"))
                me = &g_measured[i];
        const char *shortname = strstr(file, "gemma")        ? "gemma3"
                                : strstr(file, "qwen2.5-coder-0.5b") ? "qwen2.5-0.5b"
                                : strstr(file, "qwen2.5-coder-1.5b") ? "qwen2.5-1.5b"
                                                                     : "smollm2";
        if (n_prompts < g.n_prompts) {
            printf("  %s: instrumented build or SJK_TEST_LIGHT, %u of %u prompts: bounds not enforced\n", file,
                   n_prompts, g.n_prompts);
            test_note("%s: %u of %u prompts, top-1 %.2f%%, KL %.3g (not enforced)", shortname, n_prompts,
                      g.n_prompts, 100 * rate, mean_kl);
        } else {
            CHECKF(rate >= min_top1, "top-1 agreement %.4f < %.4f", rate, min_top1);
            CHECKF(mean_kl <= max_kl, "mean KL %.3g > %.3g", mean_kl, max_kl);
            if (me) {
                double kl_cap = 1.10 * me->mean_kl;
                size_t top1_min = me->top1 > 3 ? me->top1 - 3 : 0;
                printf("  %s: enforced against our own measurement (%s path): mean KL <= %.3g, top-1 >= %zu/%zu\n",
                       file, me->path, kl_cap, top1_min, n_pos);
                CHECKF(mean_kl <= kl_cap, "mean KL %.4g > %.4g (measured %.4g on the %s path: update measured[] if "
                       "the forward pass changed on purpose)", mean_kl, kl_cap, me->mean_kl, me->path);
                CHECKF(n_top1 >= top1_min, "top-1 %zu/%zu < %zu (measured %zu on the %s path)", n_top1, n_pos,
                       top1_min, me->top1, me->path);
            } else {
                SKIP_PART("no measurement of %s on the %s path in measured[]: only llama.cpp's noise bound holds",
                          file, dispatch_path());
            }
            test_note("%s: top-1 %.2f%% (%zu/%zu), mean KL %.3g (%s path, bound %s)", shortname, 100 * rate,
                      n_top1, n_pos, mean_kl, dispatch_path(), me ? "measured + 10%" : "llama.cpp noise");
        }
    }
    CHECK(n_pos > 0);
    sjkh_session_free(s);
    sjkh_model_free(m);
    free(g.buf);
}

TEST(test_gemma3_logits_match_llama_cpp)
{
    check_model("gemma-3-270m-q4_k_m.gguf", "golden/logits-gemma3-270m.bin", "golden/floor-gemma3-270m.txt");
}

TEST(test_smollm2_logits_match_llama_cpp)
{
    check_model("SmolLM2-135M-Instruct.Q4_1.gguf", "golden/logits-smollm2-135m.bin",
                "golden/floor-smollm2-135m.txt");
}

TEST(test_qwen2_5_0_5b_logits_match_llama_cpp)
{
    check_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "golden/logits-qwen2.5-0.5b.bin",
                "golden/floor-qwen2.5-0.5b.txt");
}

TEST(test_qwen2_5_1_5b_logits_match_llama_cpp)
{
    check_model("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "golden/logits-qwen2.5-1.5b.bin",
                "golden/floor-qwen2.5-1.5b.txt");
}

int main(void)
{
    RUN(test_smollm2_logits_match_llama_cpp);
    RUN(test_gemma3_logits_match_llama_cpp);
    RUN(test_qwen2_5_0_5b_logits_match_llama_cpp);
    if (test_big()) RUN(test_qwen2_5_1_5b_logits_match_llama_cpp);
    return test_summary();
}
