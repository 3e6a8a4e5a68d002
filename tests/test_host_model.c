/* test_host_model.c — the forward passes, on synthetic models written as GGUF files (so
 * they run everywhere) and on the real models when the fetch cache has them.
 *
 * Synthetic: tiny `llama`, `qwen2` and `gemma3` models with f32 weights; the host's logits must
 * match a plain f32 reference forward written out below (a second implementation of
 * docs/BACKGROUND.md, "Engine facts"), for batched prefill and token-by-token decode,
 * across the sliding-window ring's wrap-around. Bad input: unknown architecture, missing
 * tensor, unsupported tensor type, a qwen2 bias missing or of the wrong shape, a head
 * count that does not divide the embedding, a context overflow and an out-of-vocabulary
 * id are refused with a status and a message naming the tensor or key.
 *
 * Real models (${SJK_MODEL_DIR:-$HOME/.cache/sjkvarn/models}, scripts/fetch-model): the
 * top token after "The capital of France is" is llama.cpp's (" Paris" for SmolLM2 and
 * Qwen2.5), and
 * prefill equals token-by-token decode. Missing files SKIP loudly. (The comparison with
 * llama.cpp's logits over many prompts is tests/test_model_golden.c.) */
#include <stdint.h>
#include <unistd.h>

#include "harness.h"
#include "support/gguf_writer.h"
#include "sjkhost.h"
#include "support/models.h"

#define MAX_T 128
typedef struct tdesc {
    char name[64];
    uint32_t n_dims, type;
    uint64_t ne[2];
    float *data; /* f32 values */
} tdesc;

enum { SYN_LLAMA, SYN_GEMMA3, SYN_QWEN2 };
typedef struct synth {
    int kind, gemma, qwen;
    uint32_t n_layers, n_embd, n_head, n_kv, hd, n_ff, n_vocab, window, n_ctx;
    float eps, base;
    tdesc t[MAX_T];
    int n_t;
} synth;

static uint64_t g_rng = 0x1234567887654321ull;
static float frand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) % 2000001) / 1000000.0f - 1.0f;
}

static float *add_tensor(synth *s, const char *name, uint64_t ne0, uint64_t ne1, float scale, float offset)
{
    if (s->n_t == MAX_T) abort();
    tdesc *t = &s->t[s->n_t++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->type = SJKH_TYPE_F32;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->data = malloc(ne0 * ne1 * sizeof(float));
    for (uint64_t i = 0; i < ne0 * ne1; i++) t->data[i] = offset + scale * frand();
    return t->data;
}

static tdesc *find_t(synth *s, const char *name)
{
    for (int i = 0; i < s->n_t; i++)
        if (!strcmp(s->t[i].name, name)) return &s->t[i];
    return NULL;
}

static const char *kind_name(int kind) { return kind == SYN_GEMMA3 ? "gemma3" : kind == SYN_QWEN2 ? "qwen2" : "llama"; }

static void synth_init(synth *s, int kind)
{
    int gemma = kind == SYN_GEMMA3;
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->gemma = gemma;
    s->qwen = kind == SYN_QWEN2;
    s->n_layers = gemma ? 6 : 2;
    /* head sizes of 64: what libsjkvarn caches accept; qwen2: 4 query heads on 2 KV heads,
     * head_dim from n_embd / n_head (the file has no key_length) */
    s->n_embd = gemma ? 64 : s->qwen ? 256 : 128;
    s->n_head = s->qwen ? 4 : 2;
    s->n_kv = s->qwen ? 2 : 1;
    s->hd = 64;
    s->n_ff = 96;
    s->n_vocab = 40;
    s->window = gemma ? 4 : 0;
    s->n_ctx = 1024;
    s->eps = 1e-6f;
    s->base = gemma || s->qwen ? 1000000.0f : 10000.0f;
    uint32_t E = s->n_embd, q = s->n_head * s->hd, kv = s->n_kv * s->hd;
    add_tensor(s, "token_embd.weight", E, s->n_vocab, 0.5f, 0);
    add_tensor(s, "output_norm.weight", E, 1, 0.2f, 1.0f);
    char nm[64];
    for (uint32_t l = 0; l < s->n_layers; l++) {
#define T(suffix, a, b, sc, off)                                 \
    snprintf(nm, sizeof nm, "blk.%u.%s.weight", l, suffix);     \
    add_tensor(s, nm, a, b, sc, off);
        T("attn_norm", E, 1, 0.2f, 1.0f)
        T("attn_q", E, q, 0.25f, 0)
        T("attn_k", E, kv, 0.25f, 0)
        T("attn_v", E, kv, 0.25f, 0)
        T("attn_output", q, E, 0.25f, 0)
        T("ffn_norm", E, 1, 0.2f, 1.0f)
        T("ffn_gate", E, s->n_ff, 0.25f, 0)
        T("ffn_up", E, s->n_ff, 0.25f, 0)
        T("ffn_down", s->n_ff, E, 0.2f, 0)
        if (s->qwen) {
            snprintf(nm, sizeof nm, "blk.%u.attn_q.bias", l);
            add_tensor(s, nm, q, 1, 0.5f, 0);
            snprintf(nm, sizeof nm, "blk.%u.attn_k.bias", l);
            add_tensor(s, nm, kv, 1, 0.5f, 0.5f); /* an offset, as Qwen2.5's key biases have */
            snprintf(nm, sizeof nm, "blk.%u.attn_v.bias", l);
            add_tensor(s, nm, kv, 1, 0.5f, 0);
        }
        if (gemma) {
            T("attn_q_norm", s->hd, 1, 0.2f, 1.0f)
            T("attn_k_norm", s->hd, 1, 0.2f, 1.0f)
            T("post_attention_norm", E, 1, 0.2f, 1.0f)
            T("post_ffw_norm", E, 1, 0.2f, 1.0f)
        }
#undef T
    }
}

static void synth_free(synth *s)
{
    for (int i = 0; i < s->n_t; i++) free(s->t[i].data);
}

/* > 0: synth_write adds tokenizer.ggml.tokens with this many tokens (the vocabulary
 * check of issue 21: more tokens than embedding rows). */
static uint32_t g_synth_tokens;

/* Writes the model; skip_tensor (or NULL) is left out, bad_type_tensor gets type q2_K.
 * (s->n_head is written as is: a test may set one that does not divide n_embd.) */
static void synth_write(const synth *s, const char *path, const char *arch, const char *skip_tensor,
                        const char *bad_type_tensor)
{
    gw_buf w = {0};
    int n_t = 0;
    for (int i = 0; i < s->n_t; i++) n_t += !(skip_tensor && !strcmp(skip_tensor, s->t[i].name));
    gw_u32(&w, 0x46554747u);
    gw_u32(&w, 3);
    gw_u64(&w, (uint64_t)n_t);
    gw_u64(&w, (s->gemma ? 11 : 9) + (g_synth_tokens ? 1 : 0));
    const char *a = arch ? arch : kind_name(s->kind);
    if (g_synth_tokens) { /* an array (9) of strings (8) */
        gw_str(&w, "tokenizer.ggml.tokens");
        gw_u32(&w, 9);
        gw_u32(&w, GW_STRING);
        gw_u64(&w, g_synth_tokens);
        for (uint32_t i = 0; i < g_synth_tokens; i++) {
            char tk[16];
            snprintf(tk, sizeof tk, "t%u", i);
            gw_str(&w, tk);
        }
    }
    char k[96];
    gw_kv_str(&w, "general.architecture", a);
#define K(suffix) (snprintf(k, sizeof k, "%s.%s", a, suffix), k)
    gw_kv_u32(&w, K("block_count"), s->n_layers);
    gw_kv_u32(&w, K("embedding_length"), s->n_embd);
    gw_kv_u32(&w, K("feed_forward_length"), s->n_ff);
    gw_kv_u32(&w, K("attention.head_count"), s->n_head);
    gw_kv_u32(&w, K("attention.head_count_kv"), s->n_kv);
    gw_kv_u32(&w, K("context_length"), s->n_ctx);
    gw_kv_f32(&w, K("attention.layer_norm_rms_epsilon"), s->eps);
    gw_kv_f32(&w, K("rope.freq_base"), s->base);
    if (s->gemma) {
        gw_kv_u32(&w, K("attention.key_length"), s->hd);
        gw_kv_u32(&w, K("attention.sliding_window"), s->window);
    }
#undef K
    uint64_t off = 0;
    for (int i = 0; i < s->n_t; i++) {
        const tdesc *t = &s->t[i];
        if (skip_tensor && !strcmp(skip_tensor, t->name)) continue;
        gw_str(&w, t->name);
        gw_u32(&w, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) gw_u64(&w, t->ne[d]);
        gw_u32(&w, bad_type_tensor && !strcmp(bad_type_tensor, t->name) ? SJKH_TYPE_Q2_K : t->type);
        gw_u64(&w, off);
        off += (t->ne[0] * t->ne[1] * 4 + 31) / 32 * 32;
    }
    while (w.n % 32) gw_bytes(&w, "", 1);
    for (int i = 0; i < s->n_t; i++) {
        const tdesc *t = &s->t[i];
        if (skip_tensor && !strcmp(skip_tensor, t->name)) continue;
        gw_bytes(&w, t->data, t->ne[0] * t->ne[1] * 4);
        while (w.n % 32) gw_bytes(&w, "", 1);
    }
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(w.p, 1, w.n, f);
        fclose(f);
    }
    free(w.p);
}

/* A synth of the kind and the temporary file it will be written to (path: 64 bytes,
 * /tmp/sjk_test_<tag>_XXXXXX): 0, with a failed CHECK and nothing left, when the file
 * cannot be made. synth_done removes both. */
static int synth_tmpfile(synth *s, int kind, const char *tag, char *path)
{
    synth_init(s, kind);
    snprintf(path, 64, "/tmp/sjk_test_%s_XXXXXX", tag);
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) {
        synth_free(s);
        return 0;
    }
    close(fd);
    return 1;
}

static void synth_done(synth *s, const char *path)
{
    unlink(path);
    synth_free(s);
}

/* ---- the reference forward (f32 throughout, one position at a time) --------------- */

static void ref_rmsnorm(float *y, const float *x, const float *w, uint32_t n, float eps)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float sc = 1.0f / sqrtf((float)(ss / n) + eps);
    for (uint32_t i = 0; i < n; i++) y[i] = x[i] * sc * w[i];
}

/* y[r] = sum_c W[r][c] x[c], W from a tensor of ne = [n_in, n_out] */
static void ref_matvec(float *y, const tdesc *W, const float *x)
{
    for (uint64_t r = 0; r < W->ne[1]; r++) {
        double s = 0;
        for (uint64_t c = 0; c < W->ne[0]; c++) s += (double)W->data[r * W->ne[0] + c] * x[c];
        y[r] = (float)s;
    }
}

static void ref_rope(float *v, uint32_t hd, uint32_t pos, float base, int neox)
{
    for (uint32_t i = 0; i < hd / 2; i++) {
        double th = pos * pow(base, -2.0 * i / hd);
        uint32_t a = neox ? i : 2 * i, b = neox ? i + hd / 2 : 2 * i + 1;
        float x0 = v[a], x1 = v[b], c = (float)cos(th), sn = (float)sin(th);
        v[a] = x0 * c - x1 * sn;
        v[b] = x0 * sn + x1 * c;
    }
}

/* logits [n][V] for tokens at positions 0..n-1 */
static void ref_forward(synth *s, const int32_t *tok, uint32_t n, float *logits)
{
    uint32_t E = s->n_embd, H = s->n_head, KV = s->n_kv, hd = s->hd, F = s->n_ff, L = s->n_layers;
    float *kc = calloc((size_t)L * n * KV * hd, 4), *vc = calloc((size_t)L * n * KV * hd, 4);
    float *x = malloc(E * 4), *xb = malloc(E * 4), *q = malloc(H * hd * 4), *att = malloc(H * hd * 4);
    float *hb = malloc(F * 4), *hb2 = malloc(F * 4), *sc = malloc(n * 4);
    char nm[64];
#define W(suffix) (snprintf(nm, sizeof nm, "blk.%u.%s.weight", l, suffix), find_t(s, nm))
    for (uint32_t p = 0; p < n; p++) {
        const tdesc *emb = find_t(s, "token_embd.weight");
        for (uint32_t i = 0; i < E; i++) x[i] = emb->data[(size_t)tok[p] * E + i] * (s->gemma ? sqrtf((float)E) : 1.0f);
        for (uint32_t l = 0; l < L; l++) {
            int global = !s->gemma || l % 6 == 5;
            float base = s->gemma && !global ? 10000.0f : s->base;
            float *k = kc + ((size_t)l * n + p) * KV * hd, *v = vc + ((size_t)l * n + p) * KV * hd;
            ref_rmsnorm(xb, x, W("attn_norm")->data, E, s->eps);
            ref_matvec(q, W("attn_q"), xb);
            ref_matvec(k, W("attn_k"), xb);
            ref_matvec(v, W("attn_v"), xb);
            if (s->qwen) {
#define B(suffix) (snprintf(nm, sizeof nm, "blk.%u.%s.bias", l, suffix), find_t(s, nm)->data)
                for (uint32_t i = 0; i < H * hd; i++) q[i] += B("attn_q")[i];
                for (uint32_t i = 0; i < KV * hd; i++) k[i] += B("attn_k")[i], v[i] += B("attn_v")[i];
#undef B
            }
            int neox = s->gemma || s->qwen;
            for (uint32_t h = 0; h < H; h++) {
                if (s->gemma) ref_rmsnorm(q + h * hd, q + h * hd, W("attn_q_norm")->data, hd, s->eps);
                ref_rope(q + h * hd, hd, p, base, neox);
            }
            for (uint32_t h = 0; h < KV; h++) {
                if (s->gemma) ref_rmsnorm(k + h * hd, k + h * hd, W("attn_k_norm")->data, hd, s->eps);
                ref_rope(k + h * hd, hd, p, base, neox);
            }
            uint32_t lo = (!global && s->window && p + 1 > s->window) ? p + 1 - s->window : 0;
            for (uint32_t h = 0; h < H; h++) {
                uint32_t g = h / (H / KV);
                float mx = -INFINITY;
                for (uint32_t t = lo; t <= p; t++) {
                    const float *kt = kc + ((size_t)l * n + t) * KV * hd + g * hd;
                    double d = 0;
                    for (uint32_t i = 0; i < hd; i++) d += (double)q[h * hd + i] * kt[i];
                    sc[t] = (float)d / sqrtf((float)hd);
                    if (sc[t] > mx) mx = sc[t];
                }
                double sum = 0;
                for (uint32_t t = lo; t <= p; t++) sum += sc[t] = expf(sc[t] - mx);
                for (uint32_t i = 0; i < hd; i++) {
                    double o = 0;
                    for (uint32_t t = lo; t <= p; t++) o += sc[t] / sum * vc[((size_t)l * n + t) * KV * hd + g * hd + i];
                    att[h * hd + i] = (float)o;
                }
            }
            ref_matvec(xb, W("attn_output"), att);
            if (s->gemma) ref_rmsnorm(xb, xb, W("post_attention_norm")->data, E, s->eps);
            for (uint32_t i = 0; i < E; i++) x[i] += xb[i];
            ref_rmsnorm(xb, x, W("ffn_norm")->data, E, s->eps);
            ref_matvec(hb, W("ffn_gate"), xb);
            ref_matvec(hb2, W("ffn_up"), xb);
            for (uint32_t i = 0; i < F; i++) {
                float a = hb[i];
                a = s->gemma ? 0.5f * a * (1.0f + tanhf(0.7978845608f * (a + 0.044715f * a * a * a))) : a / (1.0f + expf(-a));
                hb[i] = a * hb2[i];
            }
            ref_matvec(xb, W("ffn_down"), hb);
            if (s->gemma) ref_rmsnorm(xb, xb, W("post_ffw_norm")->data, E, s->eps);
            for (uint32_t i = 0; i < E; i++) x[i] += xb[i];
        }
        ref_rmsnorm(xb, x, find_t(s, "output_norm.weight")->data, E, s->eps);
        ref_matvec(logits + (size_t)p * s->n_vocab, find_t(s, "token_embd.weight"), xb);
    }
#undef W
    free(kc), free(vc), free(x), free(xb), free(q), free(att), free(hb), free(hb2), free(sc);
}

/* ---- tests --------------------------------------------------------------------------- */

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double mx = 0, scale = 1e-6;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(a[i]));
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs((double)a[i] - b[i]));
    return mx / scale;
}

static void check_synthetic(int kind, const char *kv)
{
    synth s;
    int gemma = kind == SYN_GEMMA3;
    char path[64];
    if (!synth_tmpfile(&s, kind, "model", path)) return;
    synth_write(&s, path, NULL, NULL, NULL);
    const uint32_t n = 20;
    int32_t tok[20];
    for (uint32_t i = 0; i < n; i++) tok[i] = (int32_t)((i * 7 + 3) % s.n_vocab);
    float *ref = malloc((size_t)n * s.n_vocab * 4), *got = malloc((size_t)n * s.n_vocab * 4);
    float *dec = malloc((size_t)n * s.n_vocab * 4);
    ref_forward(&s, tok, n, ref);

    sjkh_model *m = NULL;
    char err[512] = "";
    sjk_status st = sjkh_model_load(path, &m, err, sizeof err);
    CHECKF(st == SJK_OK, "%s", err);
    if (!st) {
        const sjkh_model_info *in = sjkh_model_get_info(m);
        CHECK(in->n_layers == s.n_layers && in->head_dim == s.hd && in->n_vocab == s.n_vocab);
        CHECK(in->n_global_layers == (gemma ? 1u : s.n_layers));
        sjkh_session_params sp = sjkh_session_params_default();
        sp.n_ctx = 32;
        sp.n_batch = 3; /* chunks of 3: the window ring (4 + 3 slots) wraps */
        sp.n_threads = 2;
        sp.kv = kv;
        sjkh_session *ss = NULL;
        st = sjkh_session_create(m, &sp, &ss, err, sizeof err);
        CHECKF(st == SJK_OK, "%s", err);
        if (!st) {
            CHECK(sjkh_session_feed(ss, tok, n, got, 1, err, sizeof err) == SJK_OK);
            double d = max_rel_diff(ref, got, (size_t)n * s.n_vocab);
            CHECKF(d < 2e-2, "%s kv=%s prefill: max relative logit difference %g", kind_name(kind), kv, d);
            /* decode one token at a time gives the same logits */
            CHECK(sjkh_session_reset(ss) == SJK_OK && sjkh_session_n_past(ss) == 0);
            for (uint32_t i = 0; i < n; i++)
                CHECK(sjkh_session_feed(ss, tok + i, 1, dec + (size_t)i * s.n_vocab, 0, err, sizeof err) == SJK_OK);
            d = max_rel_diff(got, dec, (size_t)n * s.n_vocab);
            CHECKF(d < 1e-3, "%s kv=%s decode vs prefill: %g", kind_name(kind), kv, d);
            /* context overflow and bad ids are refused without changing anything */
            int32_t many[13] = {0};
            err[0] = 0;
            CHECK(sjkh_session_feed(ss, many, 13, NULL, 0, err, sizeof err) == SJK_ERR_RANGE && strstr(err, "context"));
            int32_t bad = (int32_t)s.n_vocab;
            CHECK(sjkh_session_feed(ss, &bad, 1, NULL, 0, err, sizeof err) == SJK_ERR_RANGE && strstr(err, "vocabulary"));
            CHECK(sjkh_session_n_past(ss) == n);
            sjkh_kv_report r;
            CHECK(sjkh_session_kv_report(ss, &r) == SJK_OK && r.total_nbytes > 0 && r.occupied_nbytes > 0);
            sjkh_session_free(ss);
        }
        /* a long context: one decode step over 599 positions takes the split path (over
         * 299 under SJK_TEST_LIGHT: still > 256, so still split, in 2 ranges instead of 3) */
        const uint32_t nl = test_light() ? 300 : 600;
        int32_t *lt = malloc(nl * sizeof *lt);
        for (uint32_t i = 0; i < nl; i++) lt[i] = (int32_t)((i * 13 + 5) % s.n_vocab);
        float *lref = malloc((size_t)nl * s.n_vocab * 4), *last = malloc(s.n_vocab * 4);
        ref_forward(&s, lt, nl, lref);
        sp.n_ctx = 1024;
        sp.n_batch = 128;
        ss = NULL;
        CHECK(sjkh_session_create(m, &sp, &ss, err, sizeof err) == SJK_OK);
        if (ss) {
            CHECK(sjkh_session_feed(ss, lt, nl - 1, NULL, 0, err, sizeof err) == SJK_OK);
            CHECK(sjkh_session_feed(ss, lt + nl - 1, 1, last, 0, err, sizeof err) == SJK_OK);
            double d = max_rel_diff(lref + (size_t)(nl - 1) * s.n_vocab, last, s.n_vocab);
            CHECKF(d < 2e-2, "%s kv=%s long decode: max relative logit difference %g", kind_name(kind), kv, d);
            sjkh_session_free(ss);
        }
        free(lt), free(lref), free(last);
        sjkh_model_free(m);
    }
    free(ref), free(got), free(dec);
    synth_done(&s, path);
}

TEST(test_llama_forward_matches_reference) { check_synthetic(SYN_LLAMA, "host-f16"); }
TEST(test_gemma3_forward_matches_reference_across_window_wrap) { check_synthetic(SYN_GEMMA3, "host-f16"); }
/* biases and NeoX pairs; 4 query heads on 2 KV heads through both caches */
TEST(test_qwen2_forward_matches_reference_grouped_heads)
{
    check_synthetic(SYN_QWEN2, "host-f16");
    check_synthetic(SYN_QWEN2, "f16");
}
TEST(test_forward_through_libsjkvarn_f16_cache)
{
    check_synthetic(SYN_LLAMA, "f16");
    check_synthetic(SYN_GEMMA3, "f16");
}

TEST(test_model_bad_inputs)
{
    synth s;
    char path[64];
    if (!synth_tmpfile(&s, 0, "badmodel", path)) return;
    sjkh_model *m = NULL;
    char err[512];
    synth_write(&s, path, "mamba", NULL, NULL);
    CHECK(sjkh_model_load(path, &m, err, sizeof err) == SJK_ERR_UNSUPPORTED && strstr(err, "mamba") && !m);
    synth_write(&s, path, NULL, "blk.1.ffn_up.weight", NULL);
    CHECK(sjkh_model_load(path, &m, err, sizeof err) == SJK_ERR_FORMAT && strstr(err, "blk.1.ffn_up.weight") && !m);
    synth_write(&s, path, NULL, NULL, "blk.0.attn_q.weight");
    /* q2_K needs rows of 256: the loader refuses the file before the model does */
    CHECK(sjkh_model_load(path, &m, err, sizeof err) != SJK_OK && !m);
    CHECK(sjkh_model_load("/nonexistent/model.gguf", &m, err, sizeof err) == SJK_ERR_IO && strstr(err, "nonexistent"));
    /* a truncated real-shaped file */
    synth_write(&s, path, NULL, NULL, NULL);
    CHECK(truncate(path, 4000) == 0);
    CHECK(sjkh_model_load(path, &m, err, sizeof err) == SJK_ERR_CORRUPT && !m);
    /* context larger than the model's */
    synth_write(&s, path, NULL, NULL, NULL);
    CHECK(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK);
    if (m) {
        sjkh_session_params sp = sjkh_session_params_default();
        sp.n_ctx = 5000;
        sjkh_session *ss = NULL;
        CHECK(sjkh_session_create(m, &sp, &ss, err, sizeof err) == SJK_ERR_PARAM && !ss && strstr(err, "context"));
        sp.n_ctx = 16;
        sp.kv = "no-such-cache";
        CHECK(sjkh_session_create(m, &sp, &ss, err, sizeof err) != SJK_OK && !ss);
        sjkh_model_free(m);
    }
    synth_done(&s, path);
}

/* Writes s with tensor `name` replaced by one of n values (n == 0: left out). */
static void write_with_vector(synth *s, const char *path, const char *name, uint64_t n)
{
    tdesc *t = find_t(s, name), saved = *t;
    if (n) {
        t->ne[0] = n;
        t->ne[1] = 1;
        t->n_dims = 1;
        t->data = calloc(n, sizeof(float));
        synth_write(s, path, NULL, NULL, NULL);
        free(t->data);
    } else {
        synth_write(s, path, NULL, name, NULL);
    }
    *t = saved;
}

TEST(test_qwen2_bad_inputs_name_the_tensor_or_key)
{
    synth s;
    char path[64];
    if (!synth_tmpfile(&s, SYN_QWEN2, "badqwen", path)) return;
    sjkh_model *m = NULL;
    char err[512] = "";
    static const char *const biases[] = {"blk.0.attn_q.bias", "blk.1.attn_k.bias", "blk.1.attn_v.bias"};
    for (size_t i = 0; i < 3; i++) {
        write_with_vector(&s, path, biases[i], 0); /* missing */
        CHECKF(sjkh_model_load(path, &m, err, sizeof err) == SJK_ERR_FORMAT && !m && strstr(err, biases[i]) &&
                   strstr(err, "missing"),
               "%s", err);
        write_with_vector(&s, path, biases[i], 96); /* wrong shape */
        CHECKF(sjkh_model_load(path, &m, err, sizeof err) == SJK_ERR_FORMAT && !m && strstr(err, biases[i]) &&
                   strstr(err, "96"),
               "%s", err);
    }
    /* 3 heads do not divide n_embd 256 (and there is no key_length) */
    s.n_head = 3;
    s.n_kv = 1;
    synth_write(&s, path, NULL, NULL, NULL);
    CHECKF(sjkh_model_load(path, &m, err, sizeof err) == SJK_ERR_FORMAT && !m &&
               strstr(err, "qwen2.embedding_length") && strstr(err, "qwen2.attention.head_count"),
           "%s", err);
    /* KV heads that do not divide the query heads */
    s.n_head = 4;
    s.n_kv = 3;
    synth_write(&s, path, NULL, NULL, NULL);
    CHECKF(sjkh_model_load(path, &m, err, sizeof err) == SJK_ERR_FORMAT && !m &&
               strstr(err, "qwen2.attention.head_count_kv"),
           "%s", err);
    s.n_kv = 2;
    synth_write(&s, path, NULL, NULL, NULL);
    CHECKF(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK && m, "%s", err);
    sjkh_model_free(m);
    synth_done(&s, path);
}

/* Issue 21: a NaN in a weight reached the logits, where greedy sampling took token 0 and
 * `run` printed nothing and exited 0. The forward pass now stops at the first layer whose
 * output is not finite and names it; a NaN or Inf in the output projection is named as
 * such. */
TEST(test_nonfinite_weight_is_an_error_naming_the_layer)
{
    synth s;
    char path[64];
    if (!synth_tmpfile(&s, 0, "nanmodel", path)) return;
    /* (norm vectors are checked for finite values at load already) */
    tdesc *q1 = find_t(&s, "blk.1.attn_q.weight"), *emb = find_t(&s, "token_embd.weight");
    for (int which = 0; which < 2 && q1 && emb; which++) {
        if (which == 0) q1->data[5] = NAN;
        else { /* the tied output projection: a row no input token embeds */
            q1->data[5] = 0.1f;
            emb->data[(size_t)(s.n_vocab - 1) * s.n_embd + 3] = INFINITY;
        }
        synth_write(&s, path, NULL, NULL, NULL);
        sjkh_model *m = NULL;
        char err[512] = "";
        CHECKF(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK, "%d: %s", which, err);
        sjkh_session_params sp = sjkh_session_params_default();
        sp.n_ctx = 32;
        sp.kv = "host-f16";
        sjkh_session *ss = NULL;
        if (m) CHECK(sjkh_session_create(m, &sp, &ss, err, sizeof err) == SJK_OK);
        if (ss) {
            int32_t ids[3] = {1, 2, 3};
            float logits[64];
            sjk_status st = sjkh_session_feed(ss, ids, 3, logits, 0, err, sizeof err);
            CHECKF(st == SJK_ERR_CORRUPT, "feed: %s (%s)", sjk_status_str(st), err);
            if (which == 0) CHECKF(strstr(err, "after layer 1") != NULL, "%s", err);
            else CHECKF(strstr(err, "output projection") != NULL, "%s", err);
        }
        sjkh_session_free(ss);
        sjkh_model_free(m);
    }
    synth_done(&s, path);
}

/* Issue 18: in a batched decode step (the server's sessions sharing one pass), a row that
 * goes non-finite fails alone: the others advance with the logits they would have had on
 * their own, and the failed session refuses feeds until it is reset. A NaN in one token's
 * embedding row (with an untied output projection) makes exactly the row that feeds that
 * token go bad. */
TEST(test_decode_batch_bad_row_fails_alone)
{
    synth s;
    char path[64];
    if (!synth_tmpfile(&s, 0, "batchnan", path)) return;
    add_tensor(&s, "output.weight", s.n_embd, s.n_vocab, 0.5f, 0); /* untied: the NaN row is not a logit */
    tdesc *emb = find_t(&s, "token_embd.weight");
    const int32_t BAD = 7;
    if (emb) emb->data[(size_t)BAD * s.n_embd + 2] = NAN;
    synth_write(&s, path, NULL, NULL, NULL);
    sjkh_model *m = NULL;
    char err[512] = "";
    CHECKF(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK, "%s", err);
    sjkh_session_params sp = sjkh_session_params_default();
    sp.n_ctx = 32;
    sp.n_batch = 8;
    sp.kv = "host-f16";
    sjkh_session *b[3] = {NULL, NULL, NULL}, *one[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3 && m; i++) {
        CHECK(sjkh_session_create(m, &sp, &b[i], err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_create(m, &sp, &one[i], err, sizeof err) == SJK_OK);
    }
    if (b[0] && b[1] && b[2] && one[0] && one[1] && one[2]) {
        const size_t V = s.n_vocab;
        float lb[3 * 64], l1[64];
        CHECK(V <= 64);
        for (int i = 0; i < 3; i++) {
            int32_t ids[2] = {1 + i, 2 + i};
            CHECK(sjkh_session_feed(b[i], ids, 2, l1, 0, err, sizeof err) == SJK_OK);
            CHECK(sjkh_session_feed(one[i], ids, 2, l1, 0, err, sizeof err) == SJK_OK);
        }
        int32_t next[3] = {3, BAD, 4};
        sjk_status st[3];
        CHECKF(sjkh_session_decode_batch(b, 3, next, lb, st, err, sizeof err) == SJK_OK, "%s", err);
        CHECK(st[0] == SJK_OK && st[1] == SJK_ERR_CORRUPT && st[2] == SJK_OK);
        for (int i = 0; i < 3; i += 2) {
            CHECK(sjkh_session_feed(one[i], &next[i], 1, l1, 0, err, sizeof err) == SJK_OK);
            CHECK(memcmp(lb + (size_t)i * V, l1, V * sizeof(float)) == 0);
            CHECK(sjkh_session_n_past(b[i]) == 3);
        }
        int32_t t = 5;
        CHECK(sjkh_session_feed(b[1], &t, 1, l1, 0, err, sizeof err) != SJK_OK); /* refused until reset */
        CHECK(sjkh_session_decode_batch(b, 3, next, lb, st, err, sizeof err) != SJK_OK);
        CHECK(sjkh_session_reset(b[1]) == SJK_OK);
        CHECK(sjkh_session_feed(b[1], &t, 1, l1, 0, err, sizeof err) == SJK_OK);
    }
    for (int i = 0; i < 3; i++) {
        sjkh_session_free(b[i]);
        sjkh_session_free(one[i]);
    }
    sjkh_model_free(m);
    synth_done(&s, path);
}

/* Issue 21: a tokenizer with more tokens than the embedding has rows was caught only when
 * a prompt id went past the table, after `run` had printed the prompt. Load refuses it. */
TEST(test_vocabulary_larger_than_embedding_refused_at_load)
{
    synth s;
    char path[64];
    if (!synth_tmpfile(&s, 0, "vocab", path)) return;
    sjkh_model *m = NULL;
    char err[512] = "";
    g_synth_tokens = s.n_vocab; /* as many tokens as rows: fine */
    synth_write(&s, path, NULL, NULL, NULL);
    CHECKF(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK, "%s", err);
    sjkh_model_free(m);
    m = NULL;
    g_synth_tokens = s.n_vocab + 1;
    synth_write(&s, path, NULL, NULL, NULL);
    CHECK(sjkh_model_load(path, &m, err, sizeof err) == SJK_ERR_FORMAT && !m);
    CHECKF(strstr(err, "tokenizer has 41 tokens") != NULL, "%s", err);
    g_synth_tokens = 0;
    synth_done(&s, path);
}

TEST(test_sampler)
{
    float lg[8] = {0.1f, 3.0f, 2.9f, -1.0f, 0.0f, 2.0f, -5.0f, 1.0f};
    sjkh_sampler *sm = NULL;
    sjkh_sampler_params p = {0, 40, 0.95f, 7};
    CHECK(sjkh_sampler_create(&p, 8, &sm) == SJK_OK);
    CHECK(sjkh_sampler_sample(sm, lg) == 1);
    sjkh_sampler_free(sm);
    p.temp = 1.0f;
    p.top_k = 2;
    int seen[8] = {0};
    CHECK(sjkh_sampler_create(&p, 8, &sm) == SJK_OK);
    for (int i = 0; i < 200; i++) seen[sjkh_sampler_sample(sm, lg)]++;
    CHECK(seen[1] > 50 && seen[2] > 50 && seen[1] + seen[2] == 200);
    sjkh_sampler_free(sm);
    /* same seed, same draws */
    int32_t a[20], b[20];
    p.top_k = 0;
    p.top_p = 1.0f;
    for (int rep = 0; rep < 2; rep++) {
        CHECK(sjkh_sampler_create(&p, 8, &sm) == SJK_OK);
        for (int i = 0; i < 20; i++) (rep ? b : a)[i] = sjkh_sampler_sample(sm, lg);
        sjkh_sampler_free(sm);
    }
    CHECK(!memcmp(a, b, sizeof a));
}

/* ---- real models --------------------------------------------------------------------- */

static void check_real(const char *file, const char *prompt_ids_desc, const int32_t *prompt, size_t n_prompt,
                       int32_t want_top)
{
    const char *path = test_model_find(file);
    if (!path) SKIP("%s not in the model cache: run scripts/fetch-model", file);
    sjkh_model *m = NULL;
    char err[512];
    CHECKF(sjkh_model_load(path, &m, err, sizeof err) == SJK_OK, "%s", err);
    if (!m) return;
    const sjkh_model_info *in = sjkh_model_get_info(m);
    sjkh_session_params sp = sjkh_session_params_default();
    sp.n_ctx = 256;
    sp.n_threads = 2;
    sp.kv = "host-f16";
    sjkh_session *s = NULL;
    CHECKF(sjkh_session_create(m, &sp, &s, err, sizeof err) == SJK_OK, "%s", err);
    float *a = malloc((size_t)in->n_vocab * 4), *b = malloc((size_t)in->n_vocab * 4);
    if (s) {
        CHECK(sjkh_session_feed(s, prompt, n_prompt, a, 0, err, sizeof err) == SJK_OK);
        uint32_t arg = 0;
        for (uint32_t v = 1; v < in->n_vocab; v++)
            if (a[v] > a[arg]) arg = v;
        CHECKF((int32_t)arg == want_top, "%s: top token %u, want %d", prompt_ids_desc, arg, want_top);
        sjkh_session_reset(s);
        for (size_t i = 0; i < n_prompt; i++) CHECK(sjkh_session_feed(s, prompt + i, 1, b, 0, err, sizeof err) == SJK_OK);
        double d = max_rel_diff(a, b, in->n_vocab);
        CHECKF(d < 0.05, "prefill vs decode logits differ by %g", d);
        sjkh_session_free(s);
    }
    free(a);
    free(b);
    sjkh_model_free(m);
}

TEST(test_real_smollm2)
{
    /* "The capital of France is" -> " Paris" */
    const int32_t p[] = {504, 3575, 282, 4649, 314};
    check_real("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2 'The capital of France is'", p, 5, 7042);
}

TEST(test_real_gemma3)
{
    /* "<bos>The capital of France is" -> top token as llama.cpp gives it */
    const int32_t p[] = {2, 818, 5279, 529, 7001, 563};
    check_real("gemma-3-270m-q4_k_m.gguf", "gemma3 'The capital of France is'", p, 6, 506);
}

TEST(test_real_qwen2_5_0_5b)
{
    /* "The capital of France is" (no BOS) -> " Paris", as llama.cpp gives it */
    const int32_t p[] = {785, 6722, 315, 9625, 374};
    check_real("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2.5-0.5b 'The capital of France is'", p, 5, 12095);
}

int main(void)
{
    RUN(test_llama_forward_matches_reference);
    RUN(test_gemma3_forward_matches_reference_across_window_wrap);
    RUN(test_qwen2_forward_matches_reference_grouped_heads);
    RUN(test_forward_through_libsjkvarn_f16_cache);
    RUN(test_qwen2_bad_inputs_name_the_tensor_or_key);
    RUN(test_model_bad_inputs);
    RUN(test_nonfinite_weight_is_an_error_naming_the_layer);
    RUN(test_decode_batch_bad_row_fails_alone);
    RUN(test_vocabulary_larger_than_embedding_refused_at_load);
    RUN(test_sampler);
    RUN(test_real_smollm2);
    RUN(test_real_gemma3);
    RUN(test_real_qwen2_5_0_5b);
    return test_summary();
}
