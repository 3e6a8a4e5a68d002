/* plan.c — the size model (include: plan/include/sjkplan.h): a model's attention geometry
 * from GGUF metadata, and the bytes its KV caches take at a context.
 *
 * Nothing here knows a byte layout. Each kind of layer is priced by the code that
 * allocates it:
 *
 *   FULL layers      -> one libsjkvarn cache, priced by sjk_cache_estimate() with exactly
 *                       the sjk_cache_params sjkh_kv_create() passes to sjk_cache_create()
 *                       (or, for "host-f16", sjkh_kv_host_layer_nbytes(window = 0));
 *   WINDOW layers    -> the host's window ring (fp16 or q8_0: window_type), sjkh_kv_host_layer_nbytes(window = the model's);
 *   RECURRENT layers -> a constant state (llama.cpp's f32 conv + SSM state sizes).
 *
 * Layers of different KV-head counts (per-layer head_count_kv arrays) are priced as one
 * cache per distinct (n_kv, n_q) group, the way a host that supports them would have to
 * hold them (sjk_cache has one geometry per handle). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

#define FAIL(st, ...) plan_fail((st), err, err_cap, __VA_ARGS__)

sjkh_plan_params sjkh_plan_params_default(void)
{
    sjkh_plan_params p = {4096, 512, 1, 1, SJKH_WINDOW_F16};
    return p;
}

uint32_t sjkh_plan_model_count(const sjkh_plan_model *m, sjkh_plan_layer_kind kind)
{
    uint32_t n = 0;
    for (uint32_t l = 0; l < m->n_layers && l < SJKH_PLAN_MAX_LAYERS; l++) n += m->kind[l] == kind;
    return n;
}

/* ---- reading the geometry -------------------------------------------------------- */

static void add_note(sjkh_plan_model *m, const char *s)
{
    size_t n = strlen(m->note);
    snprintf(m->note + n, sizeof m->note - n, "%s%s", n ? "; " : "", s);
}

/* "<arch>.<suffix>" as u32: SJK_OK, SJK_ERR_RANGE (absent), SJK_ERR_FORMAT. */
static sjk_status arch_u32(const sjkh_gguf *g, const char *arch, const char *suffix, uint32_t *out)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return sjkh_gguf_get_u32(g, key, out);
}

/* A per-layer value: a scalar (every layer) or an array of n_layers integers. */
static sjk_status per_layer(const sjkh_gguf *g, const char *arch, const char *suffix, uint32_t n_layers,
                            uint16_t *out, int *present, char *err, size_t err_cap)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    *present = 0;
    int64_t i = sjkh_gguf_find_key(g, key);
    if (i < 0) return SJK_OK;
    *present = 1;
    if (sjkh_gguf_kv_type(g, i) == SJKH_GGUF_ARRAY) {
        sjkh_gguf_arr a;
        if (sjkh_gguf_get_arr(g, key, &a) || a.elem_type == SJKH_GGUF_STRING || a.elem_type == SJKH_GGUF_FLOAT32 ||
            a.elem_type == SJKH_GGUF_FLOAT64 || a.count != n_layers)
            return FAIL(SJK_ERR_FORMAT, "plan: '%s' is not an integer array of %u entries (one per layer)", key,
                        n_layers);
        for (uint32_t l = 0; l < n_layers; l++) {
            int64_t v = sjkh_gguf_arr_i64(&a, l);
            if (v < 0 || v > 65535) return FAIL(SJK_ERR_FORMAT, "plan: '%s'[%u] = %lld is implausible", key, l, (long long)v);
            out[l] = (uint16_t)v;
        }
        return SJK_OK;
    }
    uint32_t v;
    if (sjkh_gguf_get_u32(g, key, &v) || v > 65535)
        return FAIL(SJK_ERR_FORMAT, "plan: '%s' is not an integer in 0..65535", key);
    for (uint32_t l = 0; l < n_layers; l++) out[l] = (uint16_t)v;
    return SJK_OK;
}

/* The layer pattern of sliding-window attention: 1 = layer slides. Returns 0 when no
 * pattern is known (the caller treats every attention layer as full). */
static int swa_pattern(const sjkh_gguf *g, const char *arch, uint32_t n_layers, uint8_t *slides,
                       sjkh_plan_model *m, char *err, size_t err_cap, sjk_status *st)
{
    char key[160];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    *st = SJK_OK;
    int64_t i = sjkh_gguf_find_key(g, key);
    uint32_t period = 0;
    if (i >= 0 && sjkh_gguf_kv_type(g, i) == SJKH_GGUF_ARRAY) {
        sjkh_gguf_arr a;
        if (sjkh_gguf_get_arr(g, key, &a) || a.count != n_layers || a.elem_type == SJKH_GGUF_STRING) {
            *st = FAIL(SJK_ERR_FORMAT, "plan: '%s' is not an array of %u flags", key, n_layers);
            return 0;
        }
        for (uint32_t l = 0; l < n_layers; l++) slides[l] = sjkh_gguf_arr_i64(&a, l) != 0;
        return 1;
    }
    if (i >= 0) {
        if (sjkh_gguf_get_u32(g, key, &period) || period == 0 || period > n_layers + 1) {
            *st = FAIL(SJK_ERR_FORMAT, "plan: '%s' is not a layer period in 1..%u", key, n_layers + 1);
            return 0;
        }
    } else {
        /* architectures whose pattern is fixed in the model code, not in the file */
        static const struct {
            const char *arch;
            uint32_t period;
        } builtin[] = {{"gemma3", 6}, {"gemma2", 2}, {"cohere2", 4}, {"gpt-oss", 2}};
        for (size_t k = 0; k < PLAN_ARRAY_LEN(builtin); k++)
            if (!strcmp(arch, builtin[k].arch)) period = builtin[k].period;
        if (!period) return 0;
        char note[96];
        snprintf(note, sizeof note, "%s: every %u%s layer global (built-in pattern)", arch, period,
                 period == 2 ? "nd" : "th");
        add_note(m, note);
    }
    for (uint32_t l = 0; l < n_layers; l++) slides[l] = period > 1 && l % period < period - 1;
    return 1;
}

sjk_status sjkh_plan_model_from_gguf(const sjkh_gguf *g, sjkh_plan_model *m, char *err, size_t err_cap)
{
    if (!g || !m) return FAIL(SJK_ERR_PARAM, "plan: bad arguments");
    memset(m, 0, sizeof *m);
    sjk_status st = sjkh_gguf_get_cstr(g, "general.architecture", m->arch, sizeof m->arch);
    if (st == SJK_ERR_RANGE) return FAIL(SJK_ERR_FORMAT, "plan: missing metadata key 'general.architecture'");
    if (st) return FAIL(SJK_ERR_FORMAT, "plan: 'general.architecture' is not a short string");
    if (sjkh_gguf_get_cstr(g, "general.name", m->name, sizeof m->name) != SJK_OK) m->name[0] = 0;
    const char *a = m->arch;

    if ((st = arch_u32(g, a, "block_count", &m->n_layers)))
        return FAIL(SJK_ERR_FORMAT, "plan: %s metadata key '%s.block_count'", st == SJK_ERR_RANGE ? "missing" : "bad", a);
    if (m->n_layers == 0 || m->n_layers > SJKH_PLAN_MAX_LAYERS)
        return FAIL(SJK_ERR_FORMAT, "plan: '%s.block_count' = %u is outside 1..%u", a, m->n_layers, SJKH_PLAN_MAX_LAYERS);
    const uint32_t L = m->n_layers;
    int has_q, has_kv;
    if ((st = per_layer(g, a, "attention.head_count", L, m->n_q_heads, &has_q, err, err_cap))) return st;
    if ((st = per_layer(g, a, "attention.head_count_kv", L, m->n_kv_heads, &has_kv, err, err_cap))) return st;
    if (!has_kv) memcpy(m->n_kv_heads, m->n_q_heads, L * sizeof *m->n_kv_heads);
    if (!has_q) add_note(m, "no attention.head_count: every layer counted as recurrent (no KV)");
    if ((st = arch_u32(g, a, "context_length", &m->n_ctx_train)) && st != SJK_ERR_RANGE)
        return FAIL(SJK_ERR_FORMAT, "plan: '%s.context_length' is not an unsigned integer", a);

    /* head size: key_length / value_length, default embedding_length / head_count */
    uint32_t max_q = 0;
    for (uint32_t l = 0; l < L; l++) max_q = PLAN_MAX(max_q, m->n_q_heads[l]);
    uint32_t kl = 0, vl = 0, embd = 0;
    if ((st = arch_u32(g, a, "attention.key_length", &kl)) && st != SJK_ERR_RANGE)
        return FAIL(SJK_ERR_FORMAT, "plan: '%s.attention.key_length' is not an unsigned integer", a);
    if ((st = arch_u32(g, a, "attention.value_length", &vl)) && st != SJK_ERR_RANGE)
        return FAIL(SJK_ERR_FORMAT, "plan: '%s.attention.value_length' is not an unsigned integer", a);
    if (!kl && max_q) {
        if (arch_u32(g, a, "embedding_length", &embd) || !embd)
            return FAIL(SJK_ERR_FORMAT, "plan: no '%s.attention.key_length' and no usable '%s.embedding_length'", a, a);
        if (embd % max_q)
            return FAIL(SJK_ERR_FORMAT, "plan: '%s.embedding_length' %u is not a multiple of '%s.attention.head_count' %u "
                                        "(and '%s.attention.key_length' is absent)",
                        a, embd, a, max_q, a);
        kl = embd / max_q;
    }
    if (!vl) vl = kl;
    if (max_q && (kl == 0 || kl > 4096))
        return FAIL(SJK_ERR_FORMAT, "plan: head size %u is implausible", kl);
    if (kl != vl)
        return FAIL(SJK_ERR_UNSUPPORTED, "plan: K head size %u differs from V head size %u (not a cache geometry)", kl, vl);
    m->head_dim = kl;

    /* which layers attend, and how */
    uint32_t interval = 0;
    if ((st = arch_u32(g, a, "full_attention_interval", &interval)) && st != SJK_ERR_RANGE)
        return FAIL(SJK_ERR_FORMAT, "plan: '%s.full_attention_interval' is not an unsigned integer", a);
    for (uint32_t l = 0; l < L; l++) {
        int attn = m->n_q_heads[l] && m->n_kv_heads[l];
        if (interval && (l + 1) % interval) attn = 0;
        if (attn && m->n_q_heads[l] % m->n_kv_heads[l])
            return FAIL(SJK_ERR_FORMAT, "plan: layer %u has %u query heads, not a multiple of its %u KV heads", l,
                        m->n_q_heads[l], m->n_kv_heads[l]);
        m->kind[l] = attn ? SJKH_PLAN_LAYER_FULL : SJKH_PLAN_LAYER_RECURRENT;
        if (!attn) m->n_q_heads[l] = m->n_kv_heads[l] = 0;
    }
    if (interval) {
        char note[96];
        snprintf(note, sizeof note, "every %u%s layer has attention (full_attention_interval)", interval,
                 interval == 2 ? "nd" : interval == 3 ? "rd" : "th");
        add_note(m, note);
    }

    if ((st = arch_u32(g, a, "attention.sliding_window", &m->sliding_window)) && st != SJK_ERR_RANGE)
        return FAIL(SJK_ERR_FORMAT, "plan: '%s.attention.sliding_window' is not an unsigned integer", a);
    if (m->sliding_window) {
        uint8_t slides[SJKH_PLAN_MAX_LAYERS];
        int known = swa_pattern(g, a, L, slides, m, err, err_cap, &st);
        if (st) return st;
        if (known) {
            for (uint32_t l = 0; l < L; l++)
                if (slides[l] && m->kind[l] == SJKH_PLAN_LAYER_FULL) m->kind[l] = SJKH_PLAN_LAYER_WINDOW;
        } else {
            add_note(m, "sliding window set but no layer pattern known: every attention layer counted as full");
        }
    }

    /* recurrent state (llama.cpp: conv state (d_conv - 1) * (d_inner + 2 * n_group *
     * d_state) and SSM state d_state * d_inner, f32, per layer and sequence) */
    if (sjkh_plan_model_count(m, SJKH_PLAN_LAYER_RECURRENT)) {
        uint32_t d_conv = 0, d_inner = 0, d_state = 0, n_group = 0;
        arch_u32(g, a, "ssm.conv_kernel", &d_conv);
        arch_u32(g, a, "ssm.inner_size", &d_inner);
        arch_u32(g, a, "ssm.state_size", &d_state);
        arch_u32(g, a, "ssm.group_count", &n_group);
        if (d_inner && d_state) {
            uint64_t conv = (uint64_t)(d_conv ? d_conv - 1 : 0) * ((uint64_t)d_inner + 2ull * n_group * d_state);
            m->recurrent_state_nbytes = 4 * (conv + (uint64_t)d_state * d_inner);
        } else {
            add_note(m, "recurrent layers without ssm.* sizes: their state is not counted");
        }
    }
    for (int64_t i = 0; i < sjkh_gguf_n_tensors(g); i++) m->weights_nbytes += sjkh_gguf_tensor(g, i)->nbytes;
    return SJK_OK;
}

sjk_status sjkh_plan_model_open(const char *path, sjkh_plan_model *m, char *err, size_t err_cap)
{
    sjkh_gguf *g = NULL;
    sjk_status st = sjkh_gguf_open(path, &g, err, err_cap);
    if (st) return st;
    st = sjkh_plan_model_from_gguf(g, m, err, err_cap);
    sjkh_gguf_close(g);
    return st;
}

/* ---- the estimate ------------------------------------------------------------------ */

/* Bytes of the growing layers of one session at n_ctx (see the top of the file). */
/* The growing layers' caches at n_ctx: *out their allocation; *alloc (if given) what of
 * it holds K/V or only compressed layers need (regions + seal scratch: eval's
 * "allocated", docs/EVAL.md; a host-f16 layer counts whole). */
static sjk_status growing_nbytes(const sjkh_plan_model *m, const char *kv, const sjkh_plan_params *p,
                                 uint32_t n_ctx, size_t *out, size_t *alloc, char *err, size_t err_cap)
{
    *out = 0;
    if (alloc) *alloc = 0;
    const uint32_t B = PLAN_MIN(p->n_batch, n_ctx); /* as sjkh_session_create */
    int host = !strcmp(kv, "host-f16");
    uint8_t done[SJKH_PLAN_MAX_LAYERS];
    memset(done, 0, m->n_layers);
    for (uint32_t l = 0; l < m->n_layers; l++) {
        if (m->kind[l] != SJKH_PLAN_LAYER_FULL || done[l]) continue;
        uint32_t nkv = m->n_kv_heads[l], nq = m->n_q_heads[l], n = 0;
        for (uint32_t j = l; j < m->n_layers; j++)
            if (m->kind[j] == SJKH_PLAN_LAYER_FULL && m->n_kv_heads[j] == nkv && m->n_q_heads[j] == nq) {
                done[j] = 1;
                n++;
            }
        size_t nb = 0, na = 0;
        if (host) {
            size_t one = sjkh_kv_host_layer_nbytes(nkv, m->head_dim, n_ctx, B, 0, SJKH_WINDOW_F16);
            if (!one || !plan_mul_ok(one, n, &nb)) return FAIL(SJK_ERR_NOMEM, "plan: sizes overflow");
            na = nb;
        } else {
            /* the parameters sjkh_kv_create passes to sjk_cache_create */
            sjk_layer_config lc[SJKH_PLAN_MAX_LAYERS];
            char perr[256] = "";
            if (sjk_cache_config_parse(kv, n, lc, perr, sizeof perr))
                return FAIL(SJK_ERR_PARAM, "plan: bad cache configuration '%s': %s", kv, perr);
            sjk_cache_params cp = sjk_cache_params_default();
            cp.n_layers = n;
            cp.n_kv_heads = nkv;
            cp.n_q_heads = nq;
            cp.head_dim = m->head_dim;
            cp.max_pos = n_ctx;
            cp.n_seqs = 1;
            cp.max_q_rows = B;
            cp.n_threads = sjkh_kv_cache_threads(p->n_threads);
            cp.layers = lc;
            cp.layer = lc[0];
            char bad[64] = "";
            if (sjk_cache_params_check(&cp, bad, sizeof bad))
                return FAIL(SJK_ERR_UNSUPPORTED, "plan: '%s' cannot hold %u KV head(s) of D = %u (%s)", kv, nkv,
                            m->head_dim, bad[0] ? bad : "invalid");
            sjk_status st = sjk_cache_estimate(&cp, &nb);
            if (st) return FAIL(st, "plan: '%s': %s", kv, sjk_status_str(st));
            if (alloc) {
                sjk_cache_memory cm;
                if ((st = sjk_cache_estimate_memory(&cp, &cm))) return FAIL(st, "plan: '%s': %s", kv, sjk_status_str(st));
                na = cm.sink_nbytes + cm.body_nbytes + cm.ring_nbytes + cm.uniform_nbytes + cm.seal_scratch_nbytes;
            }
        }
        if (!plan_add_ok(*out, nb, out)) return FAIL(SJK_ERR_NOMEM, "plan: sizes overflow");
        if (alloc && !plan_add_ok(*alloc, na, alloc)) return FAIL(SJK_ERR_NOMEM, "plan: sizes overflow");
    }
    return SJK_OK;
}

/* One session at n_ctx: growing, window, recurrent. */
static sjk_status session_nbytes(const sjkh_plan_model *m, const char *kv, const sjkh_plan_params *p,
                                 uint32_t n_ctx, sjkh_plan_size *s, char *err, size_t err_cap)
{
    sjk_status st = growing_nbytes(m, kv, p, n_ctx, &s->growing_nbytes, &s->kv_alloc_nbytes, err, err_cap);
    if (st) return st;
    const uint32_t B = PLAN_MIN(p->n_batch, n_ctx);
    s->window_nbytes = s->recurrent_nbytes = 0;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        if (m->kind[l] == SJKH_PLAN_LAYER_WINDOW) {
            if (p->window_type == SJKH_WINDOW_Q8_0 && m->head_dim % 32)
                return FAIL(SJK_ERR_UNSUPPORTED, "plan: a q8_0 window needs a head size that is a multiple of 32 "
                                                 "(this one is %u)", m->head_dim);
            size_t nb = sjkh_kv_host_layer_nbytes(m->n_kv_heads[l], m->head_dim, n_ctx, B, m->sliding_window,
                                                  p->window_type);
            if (!nb || !plan_add_ok(s->window_nbytes, nb, &s->window_nbytes))
                return FAIL(SJK_ERR_NOMEM, "plan: sizes overflow");
        } else if (m->kind[l] == SJKH_PLAN_LAYER_RECURRENT) {
            if (m->recurrent_state_nbytes > SIZE_MAX ||
                !plan_add_ok(s->recurrent_nbytes, (size_t)m->recurrent_state_nbytes, &s->recurrent_nbytes))
                return FAIL(SJK_ERR_NOMEM, "plan: sizes overflow");
        }
    }
    size_t t;
    if (!plan_add_ok(s->growing_nbytes, s->window_nbytes, &t) || !plan_add_ok(t, s->recurrent_nbytes, &t))
        return FAIL(SJK_ERR_NOMEM, "plan: sizes overflow");
    s->session_nbytes = t;
    return SJK_OK;
}

static sjk_status check_args(const sjkh_plan_model *m, const char *kv, const sjkh_plan_params *p, char *err,
                             size_t err_cap)
{
    if (!m || !kv || !p) return FAIL(SJK_ERR_PARAM, "plan: bad arguments");
    if (m->n_layers == 0 || m->n_layers > SJKH_PLAN_MAX_LAYERS) return FAIL(SJK_ERR_PARAM, "plan: n_layers");
    if (!p->n_ctx || p->n_ctx > (1u << 30)) return FAIL(SJK_ERR_PARAM, "plan: context %u is outside 1..2^30", p->n_ctx);
    if (!p->n_batch || !p->n_threads || !p->n_sessions)
        return FAIL(SJK_ERR_PARAM, "plan: batch, threads and sessions must be >= 1");
    if (!sjkh_window_type_name(p->window_type))
        return FAIL(SJK_ERR_PARAM, "plan: window_type %u is not f16 (0) or q8_0 (1)", p->window_type);
    return SJK_OK;
}

sjk_status sjkh_plan_estimate(const sjkh_plan_model *m, const char *kv, const sjkh_plan_params *p,
                              sjkh_plan_size *out, char *err, size_t err_cap)
{
    if (!out) return FAIL(SJK_ERR_PARAM, "plan: bad arguments");
    memset(out, 0, sizeof *out);
    sjk_status st = check_args(m, kv, p, err, err_cap);
    if (st) return st;
    if ((st = session_nbytes(m, kv, p, p->n_ctx, out, err, err_cap))) return st;
    if (!plan_mul_ok(out->session_nbytes, p->n_sessions, &out->total_nbytes))
        return FAIL(SJK_ERR_NOMEM, "plan: sizes overflow");
    out->n_full = sjkh_plan_model_count(m, SJKH_PLAN_LAYER_FULL);
    out->n_window = sjkh_plan_model_count(m, SJKH_PLAN_LAYER_WINDOW);
    out->n_recurrent = sjkh_plan_model_count(m, SJKH_PLAN_LAYER_RECURRENT);

    /* Bytes per position: the slope of the growing part between two long contexts
     * (multiples of 128, far past the sink and any staging ring), so every fixed part
     * cancels and what is left is the per-position cost the allocator really pays. */
    double values = 0; /* K and V values per position over the growing layers */
    for (uint32_t l = 0; l < m->n_layers; l++)
        if (m->kind[l] == SJKH_PLAN_LAYER_FULL) values += 2.0 * m->n_kv_heads[l] * m->head_dim;
    out->f16_token_nbytes = 2.0 * values;
    if (values > 0) {
        for (uint32_t lo = 1u << 21; lo >= 1u << 16; lo >>= 1) {
            size_t a, b;
            if (growing_nbytes(m, kv, p, lo, &a, NULL, NULL, 0) || growing_nbytes(m, kv, p, 2 * lo, &b, NULL, NULL, 0))
                continue;
            out->token_nbytes = (double)(b - a) / (double)lo;
            break;
        }
        out->bits_per_value = 8.0 * out->token_nbytes / values;
        out->bits_per_value_allocated = 8.0 * (double)out->kv_alloc_nbytes / (values * (double)p->n_ctx);
    }
    return SJK_OK;
}

sjk_status sjkh_plan_max_ctx(const sjkh_plan_model *m, const char *kv, const sjkh_plan_params *p,
                             size_t budget_nbytes, uint32_t max_ctx, uint32_t *n_ctx)
{
    if (!n_ctx || !p) return SJK_ERR_PARAM;
    *n_ctx = 0;
    sjkh_plan_params q = *p;
    q.n_ctx = 1;
    sjk_status st = check_args(m, kv, &q, NULL, 0);
    if (st) return st;
    if (max_ctx == 0 || max_ctx > (1u << 30)) max_ctx = 1u << 30;
    /* invariant: fits(lo) (or lo == 0), !fits(hi + 1) is unknown; classic upper search */
    uint32_t lo = 0, hi = max_ctx;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        sjkh_plan_size s;
        memset(&s, 0, sizeof s);
        st = session_nbytes(m, kv, &q, mid, &s, NULL, 0);
        size_t total;
        int fits = st == SJK_OK && plan_mul_ok(s.session_nbytes, q.n_sessions, &total) && total <= budget_nbytes;
        if (st && st != SJK_ERR_NOMEM) return st;
        if (fits) lo = mid;
        else hi = mid - 1;
    }
    *n_ctx = lo;
    return SJK_OK;
}

/* ---- sizes as text ------------------------------------------------------------------- */

void sjkh_format_size(size_t n, char *dst, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)n;
    size_t u = 0;
    while (v >= 1024 && u + 1 < PLAN_ARRAY_LEN(unit)) {
        v /= 1024;
        u++;
    }
    if (u == 0) snprintf(dst, cap, "%zu B", n);
    else snprintf(dst, cap, "%.*f %s", v < 10 ? 2 : 1, v, unit[u]);
}
