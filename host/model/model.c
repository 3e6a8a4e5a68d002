/* model.c — loading a `llama`, `qwen2` or `gemma3` GGUF: hyper-parameters from the metadata,
 * every weight looked up by name and checked for shape and type before a session may
 * touch it. Weights stay in the mapping; only the small norm vectors are copied to f32.
 *
 * Facts per architecture (docs/BACKGROUND.md, "Engine facts"):
 *   llama : RoPE on adjacent pairs (the converter permuted Wq/Wk), SwiGLU, no embedding
 *           scale, every layer global.
 *   qwen2 : llama's block with f32 biases on Q, K and V and RoPE on (i, i + hd/2) pairs
 *           (llama.cpp's NEOX rope type); head_dim = n_embd / n_head; every layer global.
 *   gemma3: RoPE on (i, i + hd/2) pairs, local base 10000 / global base from the file,
 *           layer il is global iff il % 6 == 5 (when a sliding window is set), q/k
 *           RMSNorm per head, post-attention and post-FFN norms, GELU-tanh gate,
 *           embedding scaled by sqrt(n_embd). Norm weights already include the +1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hcommon.h"
#include "model.h"
#include "kernels/quants.h"

#define FAIL(st, ...) sjkh_fail((st), err, err_cap, __VA_ARGS__)

/* arch.suffix as an unsigned 32-bit integer; a missing key is an error when def is NULL,
 * else *def. */
static sjk_status key_u32(const sjkh_gguf *g, const char *arch, const char *suffix, uint32_t *out,
                          const uint32_t *def, char *err, size_t err_cap)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    sjk_status st = sjkh_gguf_get_u32(g, key, out);
    if (st == SJK_ERR_RANGE && def) {
        *out = *def;
        return SJK_OK;
    }
    if (st == SJK_ERR_RANGE) return FAIL(SJK_ERR_FORMAT, "model: missing metadata key '%s'", key);
    if (st) return FAIL(SJK_ERR_FORMAT, "model: metadata key '%s' is not an unsigned 32-bit integer", key);
    return SJK_OK;
}

static sjk_status need_u32(const sjkh_gguf *g, const char *arch, const char *suffix, uint32_t *out, char *err,
                           size_t err_cap)
{
    return key_u32(g, arch, suffix, out, NULL, err, err_cap);
}

static sjk_status opt_u32(const sjkh_gguf *g, const char *arch, const char *suffix, uint32_t *out, uint32_t def,
                          char *err, size_t err_cap)
{
    return key_u32(g, arch, suffix, out, &def, err, err_cap);
}

static sjk_status opt_f32(const sjkh_gguf *g, const char *arch, const char *suffix, float *out, float def,
                          char *err, size_t err_cap)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    sjk_status st = sjkh_gguf_get_f32(g, key, out);
    if (st == SJK_ERR_RANGE) {
        *out = def;
        return SJK_OK;
    }
    if (st || !isfinite(*out)) return FAIL(SJK_ERR_FORMAT, "model: metadata key '%s' is not a finite number", key);
    return SJK_OK;
}

/* A weight matrix [n_in -> n_out]: ne = [n_in, n_out], a type the kernels multiply. */
static sjk_status get_matrix(const sjkh_model *m, const char *name, uint64_t n_in, uint64_t n_out,
                             const sjkh_tensor **out, int optional, char *err, size_t err_cap)
{
    const sjkh_tensor *t = sjkh_gguf_find_tensor(m->g, name);
    *out = t;
    if (!t) return optional ? SJK_OK : FAIL(SJK_ERR_FORMAT, "model: missing tensor '%s'", name);
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != 1 || t->ne[3] != 1)
        return FAIL(SJK_ERR_FORMAT, "model: tensor '%s' has shape [%llu, %llu, %llu, %llu], expected [%llu, %llu]",
                    name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                    (unsigned long long)t->ne[3], (unsigned long long)n_in, (unsigned long long)n_out);
    const sjkh_qtraits *qt = sjkh_qtraits_get(t->type);
    if (!qt) return FAIL(SJK_ERR_UNSUPPORTED, "model: tensor '%s' has type %s, which the host cannot multiply", name,
                         sjkh_type_get(t->type)->name);
    if (qt->dot_type == SJKH_TYPE_Q8_K && n_in % 256)
        return FAIL(SJK_ERR_FORMAT, "model: tensor '%s': row length %llu is not a multiple of 256", name,
                    (unsigned long long)n_in);
    return SJK_OK;
}

/* A vector [n] copied to f32 at dst. */
static sjk_status get_vector(const sjkh_model *m, const char *name, uint64_t n, float *dst, char *err,
                             size_t err_cap)
{
    const sjkh_tensor *t = sjkh_gguf_find_tensor(m->g, name);
    if (!t) return FAIL(SJK_ERR_FORMAT, "model: missing tensor '%s'", name);
    if (t->ne[0] != n || t->n_values != n)
        return FAIL(SJK_ERR_FORMAT, "model: tensor '%s' has %llu values, expected %llu", name,
                    (unsigned long long)t->n_values, (unsigned long long)n);
    if (!sjkh_qtraits_get(t->type))
        return FAIL(SJK_ERR_UNSUPPORTED, "model: tensor '%s' has unsupported type %s", name, sjkh_type_get(t->type)->name);
    sjkh_dequant_row(t->type, t->data, dst, (size_t)n);
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(dst[i])) return FAIL(SJK_ERR_CORRUPT, "model: tensor '%s' holds a non-finite value", name);
    return SJK_OK;
}

void sjkh_model_free(sjkh_model *m)
{
    if (!m) return;
    sjkh_gguf_close(m->g);
    free(m->layers);
    free(m->norm_arena);
    free(m);
}

const sjkh_model_info *sjkh_model_get_info(const sjkh_model *m) { return &m->info; }
const sjkh_gguf *sjkh_model_gguf(const sjkh_model *m) { return m->g; }
int sjkh_model_layer_is_global(const sjkh_model *m, uint32_t il)
{
    return il < m->info.n_layers ? m->layers[il].global : 0;
}

static sjk_status load(sjkh_model *m, char *err, size_t err_cap)
{
    sjk_status st;
    const sjkh_gguf *g = m->g;
    sjkh_model_info *in = &m->info;
    st = sjkh_gguf_get_cstr(g, "general.architecture", m->arch_name, sizeof m->arch_name);
    if (st == SJK_ERR_RANGE) return FAIL(SJK_ERR_FORMAT, "model: missing metadata key 'general.architecture'");
    static const struct {
        const char *name;
        sjkh_arch arch;
    } k_archs[] = {{"llama", SJKH_ARCH_LLAMA}, {"qwen2", SJKH_ARCH_QWEN2}, {"gemma3", SJKH_ARCH_GEMMA3}};
    in->arch = 0;
    for (size_t i = 0; !st && i < sizeof k_archs / sizeof k_archs[0]; i++)
        if (!strcmp(m->arch_name, k_archs[i].name)) in->arch = k_archs[i].arch;
    if (st == SJK_ERR_BUFFER || (!st && !in->arch))
        return FAIL(SJK_ERR_UNSUPPORTED, "model: unknown architecture '%.15s' (supported: llama, qwen2, gemma3)",
                    m->arch_name);
    if (st) return FAIL(SJK_ERR_FORMAT, "model: 'general.architecture' is not a string");
    const char *a = m->arch_name;
    in->arch_name = m->arch_name;
    int gemma = in->arch == SJKH_ARCH_GEMMA3, qwen = in->arch == SJKH_ARCH_QWEN2;

    if ((st = need_u32(g, a, "block_count", &in->n_layers, err, err_cap)) ||
        (st = need_u32(g, a, "embedding_length", &in->n_embd, err, err_cap)) ||
        (st = need_u32(g, a, "feed_forward_length", &in->n_ff, err, err_cap)) ||
        (st = need_u32(g, a, "attention.head_count", &in->n_head, err, err_cap)) ||
        (st = opt_u32(g, a, "attention.head_count_kv", &in->n_head_kv, in->n_head, err, err_cap)) ||
        (st = opt_u32(g, a, "context_length", &in->n_ctx_train, 2048, err, err_cap)) ||
        (st = opt_f32(g, a, "attention.layer_norm_rms_epsilon", &in->rms_eps, 1e-5f, err, err_cap)) ||
        (st = opt_f32(g, a, "rope.freq_base", &in->rope_base, 10000.0f, err, err_cap)))
        return st;
    if (!in->n_layers || in->n_layers > 1024 || !in->n_embd || in->n_embd > 65536 || !in->n_ff ||
        in->n_ff > 1u << 20 || !in->n_head || in->n_head > 1024 || !in->n_head_kv || !in->n_ctx_train ||
        in->rms_eps <= 0 || in->rope_base <= 0)
        return FAIL(SJK_ERR_FORMAT, "model: implausible hyper-parameters (layers %u, embd %u, ff %u, heads %u/%u)",
                    in->n_layers, in->n_embd, in->n_ff, in->n_head, in->n_head_kv);
    if (in->n_head % in->n_head_kv)
        return FAIL(SJK_ERR_FORMAT, "model: %s.attention.head_count %u is not a multiple of %s.attention.head_count_kv %u",
                    a, in->n_head, a, in->n_head_kv);
    uint32_t kl, vl, n_rot;
    if ((st = opt_u32(g, a, "attention.key_length", &kl, 0, err, err_cap))) return st;
    if (!kl) { /* no key_length: the heads split the embedding */
        if (in->n_embd % in->n_head)
            return FAIL(SJK_ERR_FORMAT, "model: %s.embedding_length %u is not a multiple of %s.attention.head_count %u "
                                        "(and %s.attention.key_length is absent)",
                        a, in->n_embd, a, in->n_head, a);
        kl = in->n_embd / in->n_head;
    }
    if ((st = opt_u32(g, a, "attention.value_length", &vl, kl, err, err_cap)) ||
        (st = opt_u32(g, a, "rope.dimension_count", &n_rot, kl, err, err_cap)))
        return st;
    if (kl != vl || n_rot != kl || kl == 0 || kl % 2 || kl > 1024)
        return FAIL(SJK_ERR_UNSUPPORTED, "model: head sizes K %u / V %u / rope %u are not supported", kl, vl, n_rot);
    in->head_dim = kl;
    if (gemma) {
        if ((st = opt_u32(g, a, "attention.sliding_window", &in->sliding_window, 0, err, err_cap))) return st;
        in->rope_base_local = 10000.0f;
    } else {
        in->rope_base_local = in->rope_base;
    }

    m->tok_embd = sjkh_gguf_find_tensor(g, "token_embd.weight");
    if (!m->tok_embd) return FAIL(SJK_ERR_FORMAT, "model: missing tensor 'token_embd.weight'");
    if (m->tok_embd->ne[0] != in->n_embd || m->tok_embd->ne[1] < 1 || m->tok_embd->ne[1] > (1u << 24))
        return FAIL(SJK_ERR_FORMAT, "model: 'token_embd.weight' is not [n_embd, n_vocab]");
    in->n_vocab = (uint32_t)m->tok_embd->ne[1];
    /* A tokenizer with more tokens than the embedding has rows would hand out ids the
     * forward pass cannot embed: refuse the file here, before any text is produced. */
    sjkh_gguf_arr toks;
    if (sjkh_gguf_get_arr(g, "tokenizer.ggml.tokens", &toks) == SJK_OK && toks.count > in->n_vocab)
        return FAIL(SJK_ERR_FORMAT, "model: the tokenizer has %llu tokens but 'token_embd.weight' only %u rows",
                    (unsigned long long)toks.count, in->n_vocab);
    if ((st = get_matrix(m, "token_embd.weight", in->n_embd, in->n_vocab, &m->tok_embd, 0, err, err_cap))) return st;
    if ((st = get_matrix(m, "output.weight", in->n_embd, in->n_vocab, &m->output, 1, err, err_cap))) return st;
    if (!m->output) m->output = m->tok_embd;

    uint64_t nq = (uint64_t)in->n_head * in->head_dim, nkv = (uint64_t)in->n_head_kv * in->head_dim;
    /* f32 vectors: output norm + per layer 2 norms (llama), + 3 biases (qwen2), or 4 norms
     * + 2 head-sized ones (gemma3) */
    size_t per_layer = gemma ? 4 * (size_t)in->n_embd + 2 * (size_t)in->head_dim : 2 * (size_t)in->n_embd;
    if (qwen) per_layer += (size_t)(nq + 2 * nkv);
    m->norm_arena = malloc((in->n_embd + per_layer * in->n_layers) * sizeof(float));
    m->layers = calloc(in->n_layers, sizeof *m->layers);
    if (!m->norm_arena || !m->layers) return FAIL(SJK_ERR_NOMEM, "model: out of memory");
    float *na = m->norm_arena;
    m->output_norm = na;
    na += in->n_embd;
    if ((st = get_vector(m, "output_norm.weight", in->n_embd, m->output_norm, err, err_cap))) return st;

    for (uint32_t il = 0; il < in->n_layers; il++) {
        sjkh_layer_w *L = &m->layers[il];
        char nm[96];
#define MAT(field, suffix, nin, nout)                                                        \
    snprintf(nm, sizeof nm, "blk.%u.%s.weight", il, suffix);                                \
    if ((st = get_matrix(m, nm, (nin), (nout), &L->field, 0, err, err_cap))) return st;
#define VEC(field, name, n)                                                                  \
    L->field = na;                                                                           \
    na += (n);                                                                               \
    snprintf(nm, sizeof nm, "blk.%u.%s", il, name);                                         \
    if ((st = get_vector(m, nm, (n), L->field, err, err_cap))) return st;
        MAT(wq, "attn_q", in->n_embd, nq)
        MAT(wk, "attn_k", in->n_embd, nkv)
        MAT(wv, "attn_v", in->n_embd, nkv)
        MAT(wo, "attn_output", nq, in->n_embd)
        MAT(w_gate, "ffn_gate", in->n_embd, in->n_ff)
        MAT(w_up, "ffn_up", in->n_embd, in->n_ff)
        MAT(w_down, "ffn_down", in->n_ff, in->n_embd)
        VEC(attn_norm, "attn_norm.weight", in->n_embd)
        VEC(ffn_norm, "ffn_norm.weight", in->n_embd)
        if (qwen) {
            VEC(bq, "attn_q.bias", nq)
            VEC(bk, "attn_k.bias", nkv)
            VEC(bv, "attn_v.bias", nkv)
        }
        if (gemma) {
            VEC(q_norm, "attn_q_norm.weight", in->head_dim)
            VEC(k_norm, "attn_k_norm.weight", in->head_dim)
            VEC(post_attn_norm, "post_attention_norm.weight", in->n_embd)
            VEC(post_ffw_norm, "post_ffw_norm.weight", in->n_embd)
        }
#undef MAT
#undef VEC
        L->global = !gemma || !in->sliding_window || il % 6 == 5;
        L->rope_base = L->global ? in->rope_base : in->rope_base_local;
        in->n_global_layers += (uint32_t)L->global;
    }
    for (int64_t i = 0; i < sjkh_gguf_n_tensors(g); i++) in->weights_nbytes += sjkh_gguf_tensor(g, i)->nbytes;
    m->attn_scale = 1.0f / sqrtf((float)in->head_dim);
    return SJK_OK;
}

sjk_status sjkh_model_load(const char *path, sjkh_model **out, char *err, size_t err_cap)
{
    if (!out) return SJK_ERR_PARAM;
    *out = NULL;
    sjkh_model *m = calloc(1, sizeof *m);
    if (!m) return FAIL(SJK_ERR_NOMEM, "model: out of memory");
    sjk_status st = sjkh_gguf_open(path, &m->g, err, err_cap);
    if (!st) {
        st = load(m, err, err_cap);
        if (st && err && err_cap) {
            char tmp[512];
            snprintf(tmp, sizeof tmp, "%s: %s", path, err);
            snprintf(err, err_cap, "%s", tmp);
        }
    }
    if (st) {
        sjkh_model_free(m);
        return st;
    }
    *out = m;
    return SJK_OK;
}
