/* fingerprint.c — the prefix store's model and cache fingerprint: SHA-256 over what
 * decides the bytes of a block, and nothing that differs between hosts holding the same
 * model (no path, file name, mtime or tensor offsets). docs/STORE.md "Fingerprint". */
#include <string.h>

#include "common/crc32c.h"
#include "common/util.h"
#include "prefix_store.h"
#include "sha256.h"

static void put_u32(sjks_sha256 *c, uint32_t v)
{
    uint8_t b[4];
    sjk_wr_u32le(b, v);
    sjks_sha256_update(c, b, 4);
}
static void put_u64(sjks_sha256 *c, uint64_t v)
{
    put_u32(c, (uint32_t)v);
    put_u32(c, (uint32_t)(v >> 32));
}
static void put_f32(sjks_sha256 *c, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(c, u);
}
static void put_str(sjks_sha256 *c, const char *s, size_t n)
{
    put_u64(c, n);
    sjks_sha256_update(c, s, n);
}

/* One metadata value: its type and bytes (integers as i64/u64, floats as f32 bits,
 * strings, arrays element by element). */
static void put_kv(sjks_sha256 *c, const sjkh_gguf *g, int64_t i)
{
    const char *key = sjkh_gguf_key(g, i);
    sjkh_gguf_vtype t = sjkh_gguf_kv_type(g, i);
    put_str(c, key, strlen(key));
    put_u32(c, t);
    if (t == SJKH_GGUF_STRING) {
        const char *s;
        size_t n;
        if (sjkh_gguf_get_str(g, key, &s, &n) == SJK_OK) put_str(c, s, n);
    } else if (t == SJKH_GGUF_ARRAY) {
        sjkh_gguf_arr a;
        if (sjkh_gguf_get_arr(g, key, &a) != SJK_OK) return;
        put_u32(c, a.elem_type);
        put_u64(c, a.count);
        if (a.elem_type == SJKH_GGUF_STRING) {
            for (uint64_t k = 0; k < a.count; k++) {
                size_t n = 0;
                const char *s = sjkh_gguf_arr_str(&a, k, &n);
                put_str(c, s ? s : "", s ? n : 0);
            }
        } else if (a.data) {
            sjks_sha256_update(c, a.data, (size_t)a.count * sjkh_gguf_vtype_nbytes(a.elem_type));
        }
    } else if (t == SJKH_GGUF_FLOAT32 || t == SJKH_GGUF_FLOAT64) {
        float f = 0;
        sjkh_gguf_get_f32(g, key, &f);
        put_f32(c, f);
    } else {
        int64_t v = 0;
        uint64_t u = 0;
        if (sjkh_gguf_get_i64(g, key, &v) == SJK_OK) put_u64(c, (uint64_t)v);
        else if (sjkh_gguf_get_u64(g, key, &u) == SJK_OK) put_u64(c, u);
    }
}

sjk_status sjks_fingerprint(const sjkh_model *m, const sjkh_session_params *sp, uint8_t out[32])
{
    const sjkh_model_info *in = sjkh_model_get_info(m);
    const sjkh_gguf *g = sjkh_model_gguf(m);
    sjks_sha256 c;
    sjks_sha256_init(&c);
    static const char tag[] = "sjkvarn prefix-store fingerprint";
    put_str(&c, tag, sizeof tag - 1);
    put_u32(&c, SJKS_VALUE_VERSION);
    /* geometry and rope, as the host resolved them */
    put_str(&c, in->arch_name, strlen(in->arch_name));
    uint32_t geo[] = {in->n_layers, in->n_embd, in->n_ff, in->n_head, in->n_head_kv, in->head_dim,
                      in->n_vocab, in->n_ctx_train, in->sliding_window, in->n_global_layers};
    for (size_t i = 0; i < sizeof geo / sizeof *geo; i++) put_u32(&c, geo[i]);
    put_f32(&c, in->rms_eps);
    put_f32(&c, in->rope_base);
    put_f32(&c, in->rope_base_local);
    for (uint32_t l = 0; l < in->n_layers; l++) put_u32(&c, (uint32_t)sjkh_model_layer_is_global(m, l));
    /* every metadata key but general.* (names, URLs, licences): the tokenizer's
     * vocabulary, merges, scores and special ids, rope scaling, norms, ... */
    int64_t nkv = sjkh_gguf_n_kv(g);
    for (int64_t i = 0; i < nkv; i++) {
        const char *key = sjkh_gguf_key(g, i);
        if (key && strncmp(key, "general.", 8)) put_kv(&c, g, i);
    }
    /* every tensor: name, type, shape and a CRC-32C of all of its bytes */
    int64_t nt = sjkh_gguf_n_tensors(g);
    for (int64_t i = 0; i < nt; i++) {
        const sjkh_tensor *t = sjkh_gguf_tensor(g, i);
        put_str(&c, t->name, strlen(t->name));
        put_u32(&c, t->type);
        for (int d = 0; d < 4; d++) put_u64(&c, t->ne[d]);
        put_u32(&c, sjk_crc32c(0, t->data, t->nbytes));
    }
    /* the cache: each growing layer's resolved configuration, the window storage, the
     * cache-block and record formats */
    put_u32(&c, SJK_CACHE_BLOCK_VERSION);
    put_str(&c, sp->kv, strlen(sp->kv));
    put_u32(&c, in->sliding_window ? sp->window_type : 0);
    if (strcmp(sp->kv, "host-f16")) {
        uint32_t n = in->n_global_layers;
        sjk_layer_config lc[256];
        if (n == 0 || n > 256 || sjk_cache_config_parse(sp->kv, n, lc, NULL, 0) != SJK_OK) return SJK_ERR_PARAM;
        for (uint32_t l = 0; l < n; l++) {
            char s[128];
            if (sjk_layer_config_str(&lc[l], s, sizeof s) == SJK_OK) put_str(&c, s, strlen(s));
            uint32_t f[] = {lc[l].kind, lc[l].k_format, lc[l].v_format, lc[l].rotate, lc[l].bits_k, lc[l].bits_v,
                            lc[l].body, lc[l].balance, lc[l].staging, lc[l].center, lc[l].sink, lc[l].tail_min,
                            lc[l].tail_max, lc[l].rot_block};
            for (size_t k = 0; k < sizeof f / sizeof *f; k++) put_u32(&c, f[k]);
        }
    }
    sjks_sha256_final(&c, out);
    return SJK_OK;
}
