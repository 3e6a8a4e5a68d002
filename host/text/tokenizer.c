/* tokenizer.c — vocabulary tables (built here; vocab.c hashes and searches them), the
 * special-token partition, encode/decode entry points and chat templates. The two merge
 * algorithms live in tokenizer_spm.c (Gemma) and tokenizer_bpe.c (SmolLM2);
 * docs/BACKGROUND.md, "Engine facts", describes what they reproduce.
 *
 * Encoding a text:
 *
 *   "<start_of_turn>user\nHi<end_of_turn>"          raw text
 *     | partition at special tokens (longest text first, leftmost occurrences)
 *   [105] ["user"] [107] ["Hi"] [106]                 token and raw fragments
 *     | BOS if ADD_SPECIAL and the vocabulary adds it; raw fragments through SPM / BPE
 *   2 105 2364 107 ... 106
 */
#include <stdlib.h>
#include <string.h>

#include "hcommon.h"
#include "merge.h"
#include "merge_heap.h"
#include "unicode.h"
#include "vocab.h"

/* ---- create / free ------------------------------------------------------------------ */

void sjkh_tokenizer_desc_default(sjkh_tokenizer_desc *d)
{
    memset(d, 0, sizeof *d);
    d->kind = SJKH_TOKENIZER_SPM;
    d->pre = SJKH_BPE_PRE_SMOLLM;
    d->bos_id = d->eos_id = d->eot_id = d->unk_id = d->pad_id = -1;
}

void sjkh_tokenizer_free(sjkh_tokenizer *t)
{
    if (!t) return;
    free(t->arena);
    free(t->tok_off);
    free(t->tok_len);
    free(t->scores);
    free(t->types);
    free(t->tok_hash);
    free(t->merge_off);
    free(t->merge_len);
    free(t->merge_split);
    free(t->merge_hash);
    free(t->special);
    free(t->eog);
    free(t->chat_default_system);
    free(t);
}

typedef struct special_key {
    uint32_t len;
    int32_t id;
} special_key;

static int special_cmp(const void *a, const void *b)
{
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static const void *find_bytes(const void *hay, size_t hn, const void *needle, size_t nn)
{
    if (nn == 0 || nn > hn) return NULL;
    return memmem(hay, hn, needle, nn);
}

/* Chat style and (for ChatML) the default system text the template inserts. */
static sjk_status detect_chat(sjkh_tokenizer *t, const char *tmpl, size_t tn)
{
    static const char k_im_start[] = "<|im_start|>", k_sys[] = "<|im_start|>system\n",
                      k_im_end[] = "<|im_end|>", k_turn[] = "<start_of_turn>";
    int has_im = sjkh_tok_lookup(t, k_im_start, sizeof k_im_start - 1) >= 0 &&
                 sjkh_tok_lookup(t, k_im_end, sizeof k_im_end - 1) >= 0;
    int has_turn = sjkh_tok_lookup(t, k_turn, sizeof k_turn - 1) >= 0;
    t->chat_style = SJKH_CHAT_NONE;
    if (tmpl && tn) {
        if (find_bytes(tmpl, tn, k_im_start, sizeof k_im_start - 1) && has_im)
            t->chat_style = SJKH_CHAT_CHATML;
        else if (find_bytes(tmpl, tn, k_turn, sizeof k_turn - 1) && has_turn)
            t->chat_style = SJKH_CHAT_GEMMA;
    } else if (has_im) {
        t->chat_style = SJKH_CHAT_CHATML;
    } else if (has_turn) {
        t->chat_style = SJKH_CHAT_GEMMA;
    }
    if (t->chat_style != SJKH_CHAT_CHATML || !tmpl) return SJK_OK;
    /* A template that opens with a literal system block when the first message is not
     * a system message (SmolLM2's does) carries the default system text. */
    const char *p = find_bytes(tmpl, tn, k_sys, sizeof k_sys - 1);
    if (!p) return SJK_OK;
    p += sizeof k_sys - 1;
    const char *e = find_bytes(p, tn - (size_t)(p - tmpl), k_im_end, sizeof k_im_end - 1);
    if (!e || memchr(p, '{', (size_t)(e - p)) || memchr(p, '\'', (size_t)(e - p))) return SJK_OK;
    size_t n = (size_t)(e - p);
    t->chat_default_system = malloc(n + 1);
    if (!t->chat_default_system) return SJK_ERR_NOMEM;
    memcpy(t->chat_default_system, p, n);
    t->chat_default_system[n] = 0;
    return SJK_OK;
}

/* Marks the tokens that end generation, as llama.cpp does: EOS, EOT, and CONTROL tokens
 * with the usual end-of-turn / end-of-text / repository-marker texts. */
static void mark_eog(sjkh_tokenizer *t)
{
    static const char *const k_eog[] = {"<|im_end|>", "<|endoftext|>", "<end_of_turn>",
                                        "<|eot_id|>", "<|end|>",       "<EOT>",
                                        "<reponame>", "<|file_sep|>",  "<|repo_name|>"};
    if (t->eos_id >= 0) t->eog[t->eos_id] = 1;
    if (t->eot_id >= 0) t->eog[t->eot_id] = 1;
    for (size_t i = 0; i < SJKH_ARRAY_LEN(k_eog); i++) {
        int32_t id = sjkh_tok_lookup(t, k_eog[i], strlen(k_eog[i]));
        if (id >= 0 && t->types[id] == SJKH_TOKEN_CONTROL) t->eog[id] = 1;
    }
}

sjk_status sjkh_tokenizer_create(const sjkh_tokenizer_desc *d, sjkh_tokenizer **out,
                                 char *err, size_t err_cap)
{
    if (!d || !out) return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "tokenizer: NULL argument");
    *out = NULL;
    if (d->kind != SJKH_TOKENIZER_SPM && d->kind != SJKH_TOKENIZER_BPE)
        return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "tokenizer: bad kind %d", (int)d->kind);
    if (d->kind == SJKH_TOKENIZER_BPE && d->pre != SJKH_BPE_PRE_SMOLLM && d->pre != SJKH_BPE_PRE_GPT2)
        return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "tokenizer: bad pre %d", (int)d->pre);
    if (d->n_tokens == 0 || d->n_tokens > INT32_MAX / 2 || !d->tokens || !d->token_nbytes)
        return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "tokenizer: tokens missing or too many");
    if (d->kind == SJKH_TOKENIZER_BPE && (d->n_merges == 0 || !d->merges || !d->merge_nbytes))
        return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "tokenizer: BPE needs merges");
    if (d->n_merges > INT32_MAX / 2)
        return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "tokenizer: too many merges");
    const int32_t ids[5] = {d->bos_id, d->eos_id, d->eot_id, d->unk_id, d->pad_id};
    static const char *const id_names[5] = {"bos_id", "eos_id", "eot_id", "unk_id", "pad_id"};
    for (int i = 0; i < 5; i++)
        if (ids[i] < -1 || ids[i] >= (int64_t)d->n_tokens)
            return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "tokenizer: %s %d out of range",
                             id_names[i], (int)ids[i]);

    sjkh_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return SJK_ERR_NOMEM;
    sjk_status st = SJK_ERR_NOMEM;
    uint32_t n = d->n_tokens;
    t->kind = d->kind;
    t->pre = d->pre;
    t->n_tokens = n;
    t->bos_id = d->bos_id;
    t->eos_id = d->eos_id;
    t->eot_id = d->eot_id;
    t->unk_id = d->unk_id;
    t->pad_id = d->pad_id;
    t->add_bos = !!d->add_bos && d->bos_id >= 0;
    t->add_eos = !!d->add_eos && d->eos_id >= 0;
    t->add_space_prefix = d->kind == SJKH_TOKENIZER_SPM && !!d->add_space_prefix;

    /* Arena size: every text, plus room for "[EMPTY_<id>]" names of empty tokens (the
     * name llama.cpp gives them). */
    size_t arena_n = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t len = d->token_nbytes[i];
        if (len > UINT32_MAX / 2 || (len && !d->tokens[i])) {
            sjkh_fail(SJK_ERR_PARAM, err, err_cap, "tokenizer: token %u has a bad text", i);
            st = SJK_ERR_PARAM;
            goto fail;
        }
        if (!sjkh_add_ok(arena_n, len ? len : 20, &arena_n)) goto fail;
    }
    for (uint32_t i = 0; i < d->n_merges; i++) {
        size_t len = d->merge_nbytes[i];
        if (len > UINT32_MAX / 2 || (len && !d->merges[i])) {
            sjkh_fail(SJK_ERR_PARAM, err, err_cap, "tokenizer: merge %u has a bad text", i);
            st = SJK_ERR_PARAM;
            goto fail;
        }
        if (!sjkh_add_ok(arena_n, len, &arena_n)) goto fail;
    }
    t->arena = malloc(arena_n ? arena_n : 1);
    t->tok_off = malloc((size_t)n * sizeof *t->tok_off);
    t->tok_len = malloc((size_t)n * sizeof *t->tok_len);
    t->scores = malloc((size_t)n * sizeof *t->scores);
    t->types = malloc((size_t)n);
    t->eog = calloc(n, 1);
    t->tok_hash_mask = sjkh_table_mask(n);
    if (!t->tok_hash_mask) goto fail;
    t->tok_hash = malloc((t->tok_hash_mask + 1) * sizeof *t->tok_hash);
    if (!t->arena || !t->tok_off || !t->tok_len || !t->scores || !t->types || !t->eog ||
        !t->tok_hash)
        goto fail;
    memset(t->tok_hash, 0xFF, (t->tok_hash_mask + 1) * sizeof *t->tok_hash);

    size_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t len = d->token_nbytes[i];
        t->tok_off[i] = at;
        if (len) {
            memcpy(t->arena + at, d->tokens[i], len);
        } else {
            char name[24];
            len = (size_t)snprintf(name, sizeof name, "[EMPTY_%u]", i);
            memcpy(t->arena + at, name, len);
        }
        t->tok_len[i] = (uint32_t)len;
        at += len;
        t->scores[i] = d->scores ? d->scores[i] : 0.0f;
        int32_t ty = d->types ? d->types[i] : SJKH_TOKEN_NORMAL;
        t->types[i] = (uint8_t)(ty >= SJKH_TOKEN_NORMAL && ty <= SJKH_TOKEN_BYTE ? ty : 0);
        /* Insert; a later token with the same text replaces the earlier one. */
        size_t h = (size_t)sjkh_tok_hash(sjkh_tok_text(t, (int32_t)i), len) & t->tok_hash_mask;
        for (;;) {
            int32_t o = t->tok_hash[h];
            if (o < 0 || (t->tok_len[o] == len &&
                          memcmp(sjkh_tok_text(t, o), sjkh_tok_text(t, (int32_t)i), len) == 0)) {
                t->tok_hash[h] = (int32_t)i;
                break;
            }
            h = (h + 1) & t->tok_hash_mask;
        }
    }

    if (d->n_merges) {
        uint32_t nm = d->n_merges;
        t->n_merges = nm;
        t->merge_off = malloc((size_t)nm * sizeof *t->merge_off);
        t->merge_len = malloc((size_t)nm * sizeof *t->merge_len);
        t->merge_split = malloc((size_t)nm * sizeof *t->merge_split);
        t->merge_hash_mask = sjkh_table_mask(nm);
        if (!t->merge_hash_mask) goto fail;
        t->merge_hash = malloc((t->merge_hash_mask + 1) * sizeof *t->merge_hash);
        if (!t->merge_off || !t->merge_len || !t->merge_split || !t->merge_hash) goto fail;
        memset(t->merge_hash, 0xFF, (t->merge_hash_mask + 1) * sizeof *t->merge_hash);
        for (uint32_t i = 0; i < nm; i++) {
            size_t len = d->merge_nbytes[i];
            const char *m = d->merges[i];
            /* Split at the first space at index >= 1; a merge without one can never
             * match and is kept out of the table (llama.cpp stores it as an empty pair). */
            const char *sp = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
            t->merge_off[i] = at;
            t->merge_len[i] = (uint32_t)len;
            t->merge_split[i] = sp ? (uint32_t)(sp - m) : 0;
            memcpy(t->arena + at, m, len);
            at += len;
            if (!sp) continue;
            const char *l = t->arena + t->merge_off[i];
            size_t ln = (size_t)(sp - m), rn = len - ln - 1;
            size_t h = (size_t)sjkh_merge_hash(l, ln, l + ln + 1, rn) & t->merge_hash_mask;
            for (;;) {
                int32_t o = t->merge_hash[h];
                if (o < 0) {
                    t->merge_hash[h] = (int32_t)i;
                    break;
                }
                if (t->merge_len[o] == len && memcmp(t->arena + t->merge_off[o], l, len) == 0)
                    break; /* duplicate merge: the lower rank stays */
                h = (h + 1) & t->merge_hash_mask;
            }
        }
    }

    /* Special tokens, longest text first; equal lengths by id. */
    uint32_t ns = 0;
    for (uint32_t i = 0; i < n; i++)
        if (t->types[i] == SJKH_TOKEN_CONTROL || t->types[i] == SJKH_TOKEN_USER_DEFINED ||
            t->types[i] == SJKH_TOKEN_UNKNOWN)
            ns++;
    if (ns) {
        special_key *keys = malloc((size_t)ns * sizeof *keys);
        t->special = malloc((size_t)ns * sizeof *t->special);
        if (!keys || !t->special) {
            free(keys);
            goto fail;
        }
        ns = 0;
        for (uint32_t i = 0; i < n; i++)
            if (t->types[i] == SJKH_TOKEN_CONTROL || t->types[i] == SJKH_TOKEN_USER_DEFINED ||
                t->types[i] == SJKH_TOKEN_UNKNOWN)
                keys[ns++] = (special_key){t->tok_len[i], (int32_t)i};
        qsort(keys, ns, sizeof *keys, special_cmp);
        for (uint32_t i = 0; i < ns; i++) t->special[i] = keys[i].id;
        free(keys);
        t->n_special = ns;
    }

    /* Byte fallback tokens. */
    for (int b = 0; b < 256; b++) {
        char one = (char)b;
        int32_t id = -1;
        if (t->kind == SJKH_TOKENIZER_SPM) {
            static const char hex[] = "0123456789ABCDEF";
            char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            id = sjkh_tok_lookup(t, name, 6);
        }
        if (id < 0) id = sjkh_tok_lookup(t, &one, 1);
        t->byte_token[b] = id;
    }

    mark_eog(t);
    st = detect_chat(t, d->chat_template, d->chat_template ? d->chat_template_nbytes : 0);
    if (st != SJK_OK) goto fail;
    *out = t;
    return SJK_OK;

fail:
    if (st == SJK_ERR_NOMEM) sjkh_fail(st, err, err_cap, "tokenizer: out of memory");
    sjkh_tokenizer_free(t);
    return st;
}

/* ---- from GGUF ---------------------------------------------------------------------- */

static int str_is(const char *s, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

/* Reads an optional token id key into *id (left alone when absent). */
static sjk_status gguf_opt_id(const sjkh_gguf *g, const char *key, uint32_t n_tokens,
                              int32_t *id, char *err, size_t err_cap)
{
    uint32_t v;
    sjk_status st = sjkh_gguf_get_u32(g, key, &v);
    if (st == SJK_ERR_RANGE) return SJK_OK;
    if (st != SJK_OK) return sjkh_fail(SJK_ERR_FORMAT, err, err_cap, "gguf: %s is not an id", key);
    if (v >= n_tokens)
        return sjkh_fail(SJK_ERR_FORMAT, err, err_cap, "gguf: %s = %u is outside the vocabulary (%u)",
                         key, v, n_tokens);
    *id = (int32_t)v;
    return SJK_OK;
}

static sjk_status gguf_opt_bool(const sjkh_gguf *g, const char *key, int *v, char *err,
                                size_t err_cap)
{
    int b;
    sjk_status st = sjkh_gguf_get_bool(g, key, &b);
    if (st == SJK_ERR_RANGE) return SJK_OK;
    if (st != SJK_OK) return sjkh_fail(SJK_ERR_FORMAT, err, err_cap, "gguf: %s is not a bool", key);
    *v = b;
    return SJK_OK;
}

sjk_status sjkh_tokenizer_from_gguf(const sjkh_gguf *g, sjkh_tokenizer **out, char *err,
                                    size_t err_cap)
{
    if (!g || !out) return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "tokenizer: NULL argument");
    *out = NULL;
    sjkh_tokenizer_desc d;
    sjkh_tokenizer_desc_default(&d);
    const char *model, *pre = NULL;
    size_t model_n, pre_n = 0;
    if (sjkh_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_n) != SJK_OK)
        return sjkh_fail(SJK_ERR_FORMAT, err, err_cap, "gguf: no tokenizer.ggml.model");
    if (sjkh_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_n) != SJK_OK) pre = NULL;
    if (str_is(model, model_n, "llama")) {
        d.kind = SJKH_TOKENIZER_SPM;
        d.add_bos = 1; /* llama.cpp's defaults for SPM vocabularies */
        d.add_space_prefix = 1;
        d.bos_id = 1;
        d.eos_id = 2;
        d.unk_id = 0;
    } else if (str_is(model, model_n, "gpt2")) {
        d.kind = SJKH_TOKENIZER_BPE;
        /* Other pre-tokenizers differ in their split patterns and in decoding
         * (llama.cpp cleans spaces for most of them), so only "smollm" is accepted. */
        if (pre && str_is(pre, pre_n, "smollm"))
            d.pre = SJKH_BPE_PRE_SMOLLM;
        else
            return sjkh_fail(SJK_ERR_UNSUPPORTED, err, err_cap,
                             "tokenizer: BPE pre-tokenizer '%.*s' is not implemented (smollm is)",
                             pre ? (int)SJKH_MIN(pre_n, 64) : 6, pre ? pre : "absent");
    } else {
        return sjkh_fail(SJK_ERR_UNSUPPORTED, err, err_cap,
                         "tokenizer: model '%.*s' is not implemented (llama, gpt2 are)",
                         (int)SJKH_MIN(model_n, 64), model);
    }

    sjkh_gguf_arr toks, scores, types, merges;
    if (sjkh_gguf_get_arr(g, "tokenizer.ggml.tokens", &toks) != SJK_OK ||
        toks.elem_type != SJKH_GGUF_STRING || toks.count == 0 || toks.count > INT32_MAX / 2)
        return sjkh_fail(SJK_ERR_FORMAT, err, err_cap, "gguf: tokenizer.ggml.tokens missing or not strings");
    uint32_t n = (uint32_t)toks.count;
    int have_scores = sjkh_gguf_get_arr(g, "tokenizer.ggml.scores", &scores) == SJK_OK;
    int have_types = sjkh_gguf_get_arr(g, "tokenizer.ggml.token_type", &types) == SJK_OK;
    int have_merges = sjkh_gguf_get_arr(g, "tokenizer.ggml.merges", &merges) == SJK_OK;
    if (have_scores && (scores.elem_type != SJKH_GGUF_FLOAT32 || scores.count < n))
        return sjkh_fail(SJK_ERR_FORMAT, err, err_cap, "gguf: tokenizer.ggml.scores is not f32[%u]", n);
    if (have_types && (types.elem_type != SJKH_GGUF_INT32 || types.count < n))
        return sjkh_fail(SJK_ERR_FORMAT, err, err_cap, "gguf: tokenizer.ggml.token_type is not i32[%u]", n);
    if (d.kind == SJKH_TOKENIZER_BPE &&
        (!have_merges || merges.elem_type != SJKH_GGUF_STRING || merges.count == 0 ||
         merges.count > INT32_MAX / 2))
        return sjkh_fail(SJK_ERR_FORMAT, err, err_cap, "gguf: tokenizer.ggml.merges missing or not strings");

    sjk_status st;
    if ((st = gguf_opt_id(g, "tokenizer.ggml.bos_token_id", n, &d.bos_id, err, err_cap)) ||
        (st = gguf_opt_id(g, "tokenizer.ggml.eos_token_id", n, &d.eos_id, err, err_cap)) ||
        (st = gguf_opt_id(g, "tokenizer.ggml.eot_token_id", n, &d.eot_id, err, err_cap)) ||
        (st = gguf_opt_id(g, "tokenizer.ggml.unknown_token_id", n, &d.unk_id, err, err_cap)) ||
        (st = gguf_opt_id(g, "tokenizer.ggml.padding_token_id", n, &d.pad_id, err, err_cap)) ||
        (st = gguf_opt_bool(g, "tokenizer.ggml.add_bos_token", &d.add_bos, err, err_cap)) ||
        (st = gguf_opt_bool(g, "tokenizer.ggml.add_eos_token", &d.add_eos, err, err_cap)) ||
        (st = gguf_opt_bool(g, "tokenizer.ggml.add_space_prefix", &d.add_space_prefix, err, err_cap)))
        return st;
    if (d.bos_id < 0) d.add_bos = 0;
    if (d.eos_id < 0) d.add_eos = 0;
    const char *tmpl;
    size_t tmpl_n;
    if (sjkh_gguf_get_str(g, "tokenizer.chat_template", &tmpl, &tmpl_n) == SJK_OK) {
        d.chat_template = tmpl;
        d.chat_template_nbytes = tmpl_n;
    }

    uint32_t nm = d.kind == SJKH_TOKENIZER_BPE ? (uint32_t)merges.count : 0;
    const char **tp = malloc((size_t)n * sizeof *tp);
    size_t *tl = malloc((size_t)n * sizeof *tl);
    float *sc = have_scores ? malloc((size_t)n * sizeof *sc) : NULL;
    int32_t *ty = have_types ? malloc((size_t)n * sizeof *ty) : NULL;
    const char **mp = nm ? malloc((size_t)nm * sizeof *mp) : NULL;
    size_t *ml = nm ? malloc((size_t)nm * sizeof *ml) : NULL;
    st = SJK_ERR_NOMEM;
    if (!tp || !tl || (have_scores && !sc) || (have_types && !ty) || (nm && (!mp || !ml))) {
        sjkh_fail(st, err, err_cap, "tokenizer: out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < n; i++) {
        tp[i] = sjkh_gguf_arr_str(&toks, i, &tl[i]);
        if (sc) sc[i] = sjkh_gguf_arr_f32(&scores, i);
        if (ty) ty[i] = (int32_t)sjkh_gguf_arr_i64(&types, i);
    }
    for (uint32_t i = 0; i < nm; i++) mp[i] = sjkh_gguf_arr_str(&merges, i, &ml[i]);
    d.n_tokens = n;
    d.tokens = tp;
    d.token_nbytes = tl;
    d.scores = sc;
    d.types = ty;
    d.n_merges = nm;
    d.merges = mp;
    d.merge_nbytes = ml;
    st = sjkh_tokenizer_create(&d, out, err, err_cap);
done:
    free(tp);
    free(tl);
    free(sc);
    free(ty);
    free(mp);
    free(ml);
    return st;
}

/* ---- encode ------------------------------------------------------------------------- */

/* A piece of the input: a token already decided (id >= 0) or raw text [off, off+len). */
typedef struct fragment {
    int32_t id;
    size_t off, len;
} fragment;

typedef struct fragvec {
    fragment *v;
    size_t n, cap;
} fragvec;

static sjk_status frag_push(fragvec *fv, int32_t id, size_t off, size_t len)
{
    if (fv->n == fv->cap) {
        size_t cap = fv->cap ? fv->cap * 2 : 64, nb;
        if (!sjkh_mul_ok(cap, sizeof *fv->v, &nb)) return SJK_ERR_NOMEM;
        fragment *v = realloc(fv->v, nb);
        if (!v) return SJK_ERR_NOMEM;
        fv->v = v;
        fv->cap = cap;
    }
    fv->v[fv->n++] = (fragment){id, off, len};
    return SJK_OK;
}

/* Cuts the text at special tokens (docs/BACKGROUND.md, "Engine facts"). Each candidate, longest first, splits
 * every raw fragment at each of its leftmost non-overlapping occurrences. */
static sjk_status partition(const sjkh_tokenizer *t, const char *text, size_t n, int parse_special,
                            fragvec *cur)
{
    sjk_status st;
    fragvec next = {0};
    uint8_t present[256] = {0};
    for (size_t i = 0; i < n; i++) present[(uint8_t)text[i]] = 1;
    if ((st = frag_push(cur, -1, 0, n)) != SJK_OK) return st;
    for (uint32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        uint8_t ty = t->types[id];
        if (!parse_special && (ty == SJKH_TOKEN_CONTROL || ty == SJKH_TOKEN_UNKNOWN)) continue;
        const char *s = sjkh_tok_text(t, id);
        size_t sn = t->tok_len[id];
        if (sn > n || !present[(uint8_t)s[0]]) continue;
        /* Any occurrence at all? Most candidates have none. */
        size_t i;
        for (i = 0; i < cur->n; i++)
            if (cur->v[i].id < 0 && find_bytes(text + cur->v[i].off, cur->v[i].len, s, sn)) break;
        if (i == cur->n) continue;
        next.n = 0;
        for (i = 0; i < cur->n; i++) {
            fragment f = cur->v[i];
            if (f.id >= 0) {
                if ((st = frag_push(&next, f.id, 0, 0)) != SJK_OK) goto out;
                continue;
            }
            size_t off = f.off, end = f.off + f.len;
            const char *m;
            while ((m = find_bytes(text + off, end - off, s, sn)) != NULL) {
                size_t at = (size_t)(m - text);
                if (at > off && (st = frag_push(&next, -1, off, at - off)) != SJK_OK) goto out;
                if ((st = frag_push(&next, id, 0, 0)) != SJK_OK) goto out;
                off = at + sn;
            }
            if (off < end && (st = frag_push(&next, -1, off, end - off)) != SJK_OK) goto out;
        }
        fragvec tmp = *cur;
        *cur = next;
        next = tmp;
    }
    st = SJK_OK;
out:
    free(next.v);
    return st;
}

sjk_status sjkh_tokenizer_encode(const sjkh_tokenizer *t, const char *text, size_t text_nbytes,
                                 unsigned flags, int32_t *ids, size_t ids_cap, size_t *n_ids)
{
    if (!t || (!text && text_nbytes) || (!ids && ids_cap) || !n_ids) return SJK_ERR_PARAM;
    *n_ids = 0;
    sjk_status st = SJK_OK;
    sjkh_idvec out = {0};
    fragvec frags = {0};
    int add_special = !!(flags & SJKH_TOKENIZE_ADD_SPECIAL);
    if (text_nbytes) {
        st = partition(t, text, text_nbytes, !!(flags & SJKH_TOKENIZE_PARSE_SPECIAL), &frags);
        if (st != SJK_OK) goto done;
    }
    if (add_special && t->add_bos && (st = sjkh_idvec_push(&out, t->bos_id)) != SJK_OK) goto done;
    int prev_special = 1; /* SPM space prefix: at the start and after a special token */
    for (size_t i = 0; i < frags.n; i++) {
        const fragment *f = &frags.v[i];
        if (f->id >= 0) {
            st = sjkh_idvec_push(&out, f->id);
            prev_special = 1;
        } else if (t->kind == SJKH_TOKENIZER_SPM) {
            st = sjkh_spm_encode_fragment(t, text + f->off, f->len,
                                          t->add_space_prefix && prev_special, &out);
            prev_special = 0;
        } else {
            st = sjkh_bpe_encode_fragment(t, text + f->off, f->len, &out);
        }
        if (st != SJK_OK) goto done;
    }
    if (add_special && t->add_eos && (st = sjkh_idvec_push(&out, t->eos_id)) != SJK_OK) goto done;
    *n_ids = out.n;
    if (out.n) memcpy(ids, out.v, SJKH_MIN(out.n, ids_cap) * sizeof *ids);
    if (out.n > ids_cap) st = SJK_ERR_BUFFER;
done:
    free(out.v);
    free(frags.v);
    return st;
}

/* ---- decode ------------------------------------------------------------------------- */

/* Appends bytes to dst while they fit; always advances *n. */
static void put_bytes(char *dst, size_t cap, size_t *n, const void *src, size_t len)
{
    if (*n < cap) memcpy(dst + *n, src, SJKH_MIN(len, cap - *n));
    *n += len;
}

/* Writes the piece of token id at dst (capacity cap, counting from *n), stripping at
 * most one leading space when lstrip. */
static void piece(const sjkh_tokenizer *t, int32_t id, unsigned flags, int lstrip, char *dst,
                  size_t cap, size_t *n)
{
    uint8_t ty = t->types[id];
    const char *s = sjkh_tok_text(t, id);
    size_t len = t->tok_len[id];
    if ((ty == SJKH_TOKEN_CONTROL || ty == SJKH_TOKEN_UNKNOWN) && !(flags & SJKH_DETOK_SPECIAL))
        return;
    if (ty == SJKH_TOKEN_CONTROL || ty == SJKH_TOKEN_UNKNOWN || ty == SJKH_TOKEN_USER_DEFINED) {
        if (lstrip && len && s[0] == ' ') s++, len--;
        put_bytes(dst, cap, n, s, len);
        return;
    }
    if (ty == SJKH_TOKEN_BYTE) {
        /* "<0xXX>" */
        unsigned v = 0;
        for (size_t i = 3; i < len && i < 5; i++) {
            char c = s[i];
            v = v * 16 + (unsigned)(c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0');
        }
        char b = (char)(v & 0xFF);
        if (!(lstrip && b == ' ')) put_bytes(dst, cap, n, &b, 1);
        return;
    }
    if (ty != SJKH_TOKEN_NORMAL) return; /* UNUSED and unknown types render as nothing */
    if (t->kind == SJKH_TOKENIZER_SPM) {
        size_t i = 0;
        while (i < len) {
            if (i + 3 <= len && (uint8_t)s[i] == 0xE2 && (uint8_t)s[i + 1] == 0x96 &&
                (uint8_t)s[i + 2] == 0x81) {
                if (!lstrip) put_bytes(dst, cap, n, " ", 1);
                i += 3;
            } else {
                if (!(lstrip && s[i] == ' ')) put_bytes(dst, cap, n, s + i, 1);
                i++;
            }
            lstrip = 0;
        }
        return;
    }
    /* BPE: undo the byte mapping; code points outside it pass through as UTF-8. */
    size_t pos = 0;
    while (pos < len) {
        size_t at = pos;
        uint32_t cp = sjkh_utf8_decode((const uint8_t *)s, len, &pos);
        int b = sjkh_bpe_cp_to_byte(cp);
        if (b >= 0) {
            char c = (char)b;
            if (!(lstrip && c == ' ')) put_bytes(dst, cap, n, &c, 1);
        } else {
            put_bytes(dst, cap, n, s + at, pos - at);
        }
        lstrip = 0;
    }
}

sjk_status sjkh_tokenizer_token_to_piece(const sjkh_tokenizer *t, int32_t id, unsigned flags,
                                         char *dst, size_t dst_cap, size_t *n)
{
    if (!t || !n || (!dst && dst_cap)) return SJK_ERR_PARAM;
    *n = 0;
    if (id < 0 || (uint32_t)id >= t->n_tokens) return SJK_ERR_RANGE;
    piece(t, id, flags, 0, dst, dst_cap, n);
    return *n > dst_cap ? SJK_ERR_BUFFER : SJK_OK;
}

sjk_status sjkh_tokenizer_decode(const sjkh_tokenizer *t, const int32_t *ids, size_t n_ids,
                                 unsigned flags, char *dst, size_t dst_cap, size_t *n)
{
    if (!t || !n || (!ids && n_ids) || (!dst && dst_cap)) return SJK_ERR_PARAM;
    *n = 0;
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= t->n_tokens) return SJK_ERR_RANGE;
    for (size_t i = 0; i < n_ids; i++) piece(t, ids[i], flags, i == 0 && t->add_space_prefix, dst, dst_cap, n);
    if (*n > dst_cap) return SJK_ERR_BUFFER;
    if (*n < dst_cap) dst[*n] = 0;
    return SJK_OK;
}

/* ---- accessors ---------------------------------------------------------------------- */

sjkh_tokenizer_kind sjkh_tokenizer_kind_of(const sjkh_tokenizer *t) { return t->kind; }
uint32_t sjkh_tokenizer_n_tokens(const sjkh_tokenizer *t) { return t->n_tokens; }
int32_t sjkh_tokenizer_bos(const sjkh_tokenizer *t) { return t->bos_id; }
int32_t sjkh_tokenizer_eos(const sjkh_tokenizer *t) { return t->eos_id; }
int sjkh_tokenizer_add_bos(const sjkh_tokenizer *t) { return t->add_bos; }

int sjkh_tokenizer_is_eog(const sjkh_tokenizer *t, int32_t id)
{
    return id >= 0 && (uint32_t)id < t->n_tokens && t->eog[id];
}

const char *sjkh_tokenizer_token_text(const sjkh_tokenizer *t, int32_t id, size_t *nbytes)
{
    if (id < 0 || (uint32_t)id >= t->n_tokens) {
        if (nbytes) *nbytes = 0;
        return NULL;
    }
    if (nbytes) *nbytes = t->tok_len[id];
    return sjkh_tok_text(t, id);
}

int sjkh_tokenizer_token_type(const sjkh_tokenizer *t, int32_t id)
{
    return id >= 0 && (uint32_t)id < t->n_tokens ? t->types[id] : 0;
}

int32_t sjkh_tokenizer_find(const sjkh_tokenizer *t, const char *text, size_t nbytes)
{
    if (!t || (!text && nbytes)) return -1;
    return sjkh_tok_lookup(t, text, nbytes);
}

/* ---- chat templates ----------------------------------------------------------------- */

sjkh_chat_style sjkh_tokenizer_chat_style(const sjkh_tokenizer *t) { return t->chat_style; }

static void put_str(char *dst, size_t cap, size_t *n, const char *s)
{
    put_bytes(dst, cap, n, s, strlen(s));
}

/* Python's str.strip() over ASCII whitespace, as llama.cpp's trim(). */
static void put_trimmed(char *dst, size_t cap, size_t *n, const char *s)
{
    size_t len = strlen(s), a = 0;
    while (a < len && strchr(" \t\n\r\v\f", s[a])) a++;
    while (len > a && strchr(" \t\n\r\v\f", s[len - 1])) len--;
    put_bytes(dst, cap, n, s + a, len - a);
}

sjk_status sjkh_tokenizer_chat_render(const sjkh_tokenizer *t, const sjkh_chat_message *msgs,
                                      size_t n_msgs, int add_generation_prompt, char *dst,
                                      size_t dst_cap, size_t *n)
{
    if (!t || !n || (!msgs && n_msgs) || (!dst && dst_cap)) return SJK_ERR_PARAM;
    *n = 0;
    for (size_t i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content) return SJK_ERR_PARAM;
    if (t->chat_style == SJKH_CHAT_CHATML) {
        if (t->chat_default_system && (n_msgs == 0 || strcmp(msgs[0].role, "system") != 0)) {
            put_str(dst, dst_cap, n, "<|im_start|>system\n");
            put_str(dst, dst_cap, n, t->chat_default_system);
            put_str(dst, dst_cap, n, "<|im_end|>\n");
        }
        for (size_t i = 0; i < n_msgs; i++) {
            put_str(dst, dst_cap, n, "<|im_start|>");
            put_str(dst, dst_cap, n, msgs[i].role);
            put_str(dst, dst_cap, n, "\n");
            put_str(dst, dst_cap, n, msgs[i].content);
            put_str(dst, dst_cap, n, "<|im_end|>\n");
        }
        if (add_generation_prompt) put_str(dst, dst_cap, n, "<|im_start|>assistant\n");
    } else if (t->chat_style == SJKH_CHAT_GEMMA) {
        /* System messages since the last flush join (trimmed, concatenated) the next
         * non-model turn, as llama.cpp's built-in Gemma template does. */
        size_t sys_from = 0;
        int sys_pending = 0;
        for (size_t i = 0; i < n_msgs; i++) {
            const char *role = msgs[i].role;
            if (strcmp(role, "system") == 0) {
                if (msgs[i].content[strspn(msgs[i].content, " \t\n\r\v\f")]) sys_pending = 1;
                continue;
            }
            int model = strcmp(role, "assistant") == 0 || strcmp(role, "model") == 0;
            put_str(dst, dst_cap, n, "<start_of_turn>");
            put_str(dst, dst_cap, n, model ? "model" : role);
            put_str(dst, dst_cap, n, "\n");
            if (sys_pending && !model) {
                for (size_t j = sys_from; j < i; j++)
                    if (strcmp(msgs[j].role, "system") == 0) put_trimmed(dst, dst_cap, n, msgs[j].content);
                put_str(dst, dst_cap, n, "\n\n");
                sys_pending = 0;
                sys_from = i + 1;
            }
            put_trimmed(dst, dst_cap, n, msgs[i].content);
            put_str(dst, dst_cap, n, "<end_of_turn>\n");
        }
        if (add_generation_prompt) put_str(dst, dst_cap, n, "<start_of_turn>model\n");
    } else {
        return SJK_ERR_UNSUPPORTED;
    }
    if (*n > dst_cap) return SJK_ERR_BUFFER;
    if (*n < dst_cap) dst[*n] = 0;
    return SJK_OK;
}
