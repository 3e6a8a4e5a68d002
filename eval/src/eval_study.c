/* eval_study.c — the study: what every configuration scored, position by position.
 *
 * Layout (one column set per configuration; the driver adds positions in lockstep, so its
 * columns have the same length and order, but pairs match positions by (doc, pos) key):
 *
 *   cfg c:  kl[i]  same[i]  doc[i]  pos[i]  bpv_occ[i]  bpv_alloc[i]      i = 0 .. n-1
 *   needles: one row per (configuration, answer token)
 *
 * finish() turns the columns into summaries and pairs; the writers (eval_report.c,
 * eval_svg.c) only read. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_internal.h"

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return p;
    size_t nc = *cap ? *cap : 256, nb;
    while (nc < need) {
        if (!eval_mul_ok(nc, 2, &nc)) return NULL;
    }
    if (!eval_mul_ok(nc, elem, &nb)) return NULL;
    void *q = realloc(p, nb);
    if (q) *cap = nc;
    return q;
}

sjk_eval_study *sjk_eval_study_create(size_t n_configs, const char *const *config_names,
                                      size_t n_docs, const char *const *doc_names)
{
    if (n_configs == 0 || n_configs > SJK_EVAL_MAX_CONFIGS || !config_names || n_docs == 0 ||
        n_docs > UINT32_MAX || !doc_names)
        return NULL;
    for (size_t c = 0; c < n_configs; c++)
        if (!config_names[c] || strlen(config_names[c]) >= SJK_EVAL_NAME_MAX) return NULL;
    sjk_eval_study *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->n_configs = n_configs;
    st->n_docs = n_docs;
    memcpy(st->reference, "f16", 4);
    st->cols = calloc(n_configs, sizeof *st->cols);
    st->res = calloc(n_configs, sizeof *st->res);
    st->doc_names = calloc(n_docs, sizeof *st->doc_names);
    if (!st->cols || !st->res || !st->doc_names) goto fail;
    for (size_t c = 0; c < n_configs; c++) {
        memcpy(st->cols[c].name, config_names[c], strlen(config_names[c]) + 1);
        st->res[c].config = st->cols[c].name;
    }
    for (size_t d = 0; d < n_docs; d++) {
        const char *s = doc_names[d] ? doc_names[d] : "";
        st->doc_names[d] = malloc(strlen(s) + 1);
        if (!st->doc_names[d]) goto fail;
        memcpy(st->doc_names[d], s, strlen(s) + 1);
    }
    return st;
fail:
    sjk_eval_study_free(st);
    return NULL;
}

void sjk_eval_study_free(sjk_eval_study *st)
{
    if (!st) return;
    if (st->cols)
        for (size_t c = 0; c < st->n_configs; c++) {
            eval_col *k = &st->cols[c];
            free(k->kl); free(k->same); free(k->doc); free(k->pos);
            free(k->bpv_occ); free(k->bpv_alloc);
        }
    if (st->doc_names)
        for (size_t d = 0; d < st->n_docs; d++) free(st->doc_names[d]);
    free(st->doc_names);
    free(st->cols);
    free(st->res);
    free(st->pairs);
    free(st->needles);
    free(st);
}

size_t sjk_eval_study_n_configs(const sjk_eval_study *st) { return st ? st->n_configs : 0; }
size_t sjk_eval_study_n_docs(const sjk_eval_study *st) { return st ? st->n_docs : 0; }
const char *sjk_eval_study_config_name(const sjk_eval_study *st, size_t cfg)
{
    return st && cfg < st->n_configs ? st->cols[cfg].name : NULL;
}

sjk_status sjk_eval_study_add(sjk_eval_study *st, size_t cfg, size_t doc, uint32_t pos,
                              const sjk_eval_cmp *cmp, const sjk_eval_mem *mem)
{
    if (!st || cfg >= st->n_configs || doc >= st->n_docs || !cmp || st->finished)
        return SJK_ERR_PARAM;
    eval_col *k = &st->cols[cfg];
    size_t need = k->n + 1, cap;
    void *p;
#define GROW(field, type)                                                   \
    do {                                                                    \
        cap = k->cap;                                                       \
        if (!(p = grow(k->field, &cap, need, sizeof(type)))) return SJK_ERR_NOMEM; \
        k->field = p;                                                       \
    } while (0)
    GROW(kl, double);
    GROW(same, uint8_t);
    GROW(doc, uint32_t);
    GROW(pos, uint32_t);
    GROW(bpv_occ, double);
    GROW(bpv_alloc, double);
#undef GROW
    k->cap = cap;
    k->kl[k->n] = cmp->kl;
    k->same[k->n] = cmp->top_p == cmp->top_q;
    k->doc[k->n] = (uint32_t)doc;
    k->pos[k->n] = pos;
    k->bpv_occ[k->n] = mem ? mem->bpv_occupied : 0.0;
    k->bpv_alloc[k->n] = mem ? mem->bpv_allocated : 0.0;
    if (mem && mem->kv_bytes > k->kv_bytes) k->kv_bytes = mem->kv_bytes;
    k->n++;
    return SJK_OK;
}

sjk_status sjk_eval_study_add_needle(sjk_eval_study *st, size_t cfg, size_t doc,
                                     uint32_t distance, uint32_t planned_distance,
                                     double kl, int q_top_is_gold, int p_top_is_gold)
{
    if (!st || cfg >= st->n_configs || doc >= st->n_docs || st->finished) return SJK_ERR_PARAM;
    void *p = grow(st->needles, &st->needle_cap, st->n_needles + 1, sizeof *st->needles);
    if (!p) return SJK_ERR_NOMEM;
    st->needles = p;
    eval_needle *nd = &st->needles[st->n_needles++];
    nd->cfg = (uint32_t)cfg;
    nd->doc = (uint32_t)doc;
    nd->distance = distance;
    nd->planned = planned_distance;
    nd->kl = kl;
    nd->q_gold = q_top_is_gold != 0;
    nd->p_gold = p_top_is_gold != 0;
    return SJK_OK;
}

sjk_status sjk_eval_study_set_reference(sjk_eval_study *st, const char *name)
{
    if (!st || !name || strlen(name) >= SJK_EVAL_NAME_MAX) return SJK_ERR_PARAM;
    memcpy(st->reference, name, strlen(name) + 1);
    return SJK_OK;
}

void sjk_eval_study_add_time(sjk_eval_study *st, size_t cfg, uint64_t tokens, double seconds)
{
    if (!st || cfg >= st->n_configs) return;
    st->cols[cfg].tokens += tokens;
    st->cols[cfg].seconds += seconds;
}

/* Pairs match positions by key, (document, position), not by index, so a study need not
 * be filled in lockstep: a merged study (eval_merge.c) holds configurations that were run
 * on different documents or in different batches. Each configuration's keys, sorted:
 *
 *   sorted[c][k] = {key = doc << 32 | pos, i}   k = 0 .. n-1, ascending key; i indexes cols[c]
 *
 * A key may occur once per configuration; two rows at one key could not be paired. */
typedef struct key_ix {
    uint64_t key;
    size_t i;
} key_ix;

static uint64_t col_key(const eval_col *k, size_t i)
{
    return (uint64_t)k->doc[i] << 32 | k->pos[i];
}

static int cmp_key_ix(const void *x, const void *y)
{
    uint64_t a = ((const key_ix *)x)->key, b = ((const key_ix *)y)->key;
    return (a > b) - (a < b);
}

/* Sorted keys of column k into *out (allocated; NULL when k is empty). SJK_ERR_PARAM if a
 * key repeats. */
static sjk_status col_sorted_keys(const eval_col *k, key_ix **out)
{
    *out = NULL;
    if (k->n == 0) return SJK_OK;
    size_t nb;
    if (!eval_mul_ok(k->n, sizeof(key_ix), &nb)) return SJK_ERR_NOMEM;
    key_ix *v = malloc(nb);
    if (!v) return SJK_ERR_NOMEM;
    for (size_t i = 0; i < k->n; i++) v[i] = (key_ix){col_key(k, i), i};
    qsort(v, k->n, sizeof *v, cmp_key_ix);
    for (size_t i = 1; i < k->n; i++)
        if (v[i].key == v[i - 1].key) { free(v); return SJK_ERR_PARAM; }
    *out = v;
    return SJK_OK;
}

/* Index in column b of key, or SIZE_MAX if b has no such key (bs: b's sorted keys). */
static size_t find_key(const key_ix *bs, size_t n, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (bs[mid].key < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && bs[lo].key == key ? bs[lo].i : SIZE_MAX;
}

/* Pair a ÷ b over the keys both have, in a's order. When both columns hold the same keys
 * in the same order (a study filled in lockstep by the driver) the columns are compared
 * as they are; otherwise the common positions are gathered into aligned scratch arrays:
 *
 *   ka[m] = a->kl[i], kb[m] = b->kl[j], doc[m] = a->doc[i]   for a's i whose key b has (j)
 *
 * Documents only one of the two has drop out of the pair (n_docs counts the rest). */
static sjk_status pair_by_key(const eval_col *a, const eval_col *b, const key_ix *b_sorted,
                              uint32_t n_docs, uint32_t n_boot, uint64_t seed,
                              sjk_eval_pair *out)
{
    if (a->n == b->n && (a->n == 0 ||
                         (!memcmp(a->doc, b->doc, a->n * sizeof *a->doc) &&
                          !memcmp(a->pos, b->pos, a->n * sizeof *a->pos))))
        return sjk_eval_pair_compare(a->kl, b->kl, a->doc, a->n, n_docs, n_boot, seed, out);
    size_t nb_kl, nb_doc;
    if (!eval_mul_ok(a->n, sizeof(double), &nb_kl) || !eval_mul_ok(a->n, sizeof(uint32_t), &nb_doc))
        return SJK_ERR_NOMEM;
    double *ka = malloc(nb_kl ? nb_kl : 1), *kb = malloc(nb_kl ? nb_kl : 1);
    uint32_t *doc = malloc(nb_doc ? nb_doc : 1);
    size_t *cnt = calloc(3 * (size_t)n_docs + 1, sizeof *cnt); /* per document: a's, b's, common */
    sjk_status s = SJK_ERR_NOMEM;
    if (ka && kb && doc && cnt) {
        size_t m = 0;
        for (size_t i = 0; i < a->n; i++) {
            cnt[3 * (size_t)a->doc[i]]++;
            size_t j = find_key(b_sorted, b->n, col_key(a, i));
            if (j == SIZE_MAX) continue;
            ka[m] = a->kl[i];
            kb[m] = b->kl[j];
            doc[m] = a->doc[i];
            cnt[3 * (size_t)a->doc[i] + 2]++;
            m++;
        }
        for (size_t j = 0; j < b->n; j++) cnt[3 * (size_t)b->doc[j] + 1]++;
        s = sjk_eval_pair_compare(ka, kb, doc, m, n_docs, n_boot, seed, out);
        if (s == SJK_OK)
            for (size_t d = 0; d < n_docs; d++) {
                const size_t *c = cnt + 3 * d;
                out->n_docs_partial += c[0] && c[1] && (c[2] != c[0] || c[2] != c[1]);
            }
    }
    free(ka);
    free(kb);
    free(doc);
    free(cnt);
    return s;
}

sjk_status sjk_eval_study_finish(sjk_eval_study *st, uint32_t n_boot, uint64_t seed)
{
    if (!st || st->finished) return SJK_ERR_PARAM;
    size_t nc = st->n_configs;
    for (size_t c = 0; c < nc; c++) {
        eval_col *k = &st->cols[c];
        sjk_eval_config_result *r = &st->res[c];
        sjk_status s = sjk_eval_summarize(k->kl, k->same, k->n, &r->s);
        if (s != SJK_OK) return s;
        double so = 0.0, sa = 0.0;
        for (size_t i = 0; i < k->n; i++) { so += k->bpv_occ[i]; sa += k->bpv_alloc[i]; }
        r->bpv_occupied = k->n ? so / (double)k->n : 0.0;
        r->bpv_allocated = k->n ? sa / (double)k->n : 0.0;
        r->kv_bytes = k->kv_bytes;
        r->tokens_per_s = k->seconds > 0.0 ? (double)k->tokens / k->seconds : 0.0;
        size_t nn = 0, gq = 0, gp = 0;
        double skl = 0.0;
        for (size_t i = 0; i < st->n_needles; i++) {
            const eval_needle *nd = &st->needles[i];
            if (nd->cfg != c) continue;
            nn++;
            skl += nd->kl;
            gq += nd->q_gold;
            gp += nd->p_gold;
        }
        r->n_needle = nn;
        r->needle_mean_kl = nn ? skl / (double)nn : 0.0;
        r->needle_gold_top = nn ? (double)gq / (double)nn : 0.0;
        r->needle_ref_gold_top = nn ? (double)gp / (double)nn : 0.0;
    }
    size_t np = nc * (nc - 1) / 2;
    key_ix **sorted = calloc(nc, sizeof *sorted);
    sjk_eval_pair *pairs = np ? calloc(np, sizeof *pairs) : NULL;
    sjk_status s = sorted && (pairs || !np) ? SJK_OK : SJK_ERR_NOMEM;
    for (size_t c = 0; c < nc && s == SJK_OK; c++) s = col_sorted_keys(&st->cols[c], &sorted[c]);
    size_t k = 0;
    for (size_t a = 0; a < nc && s == SJK_OK; a++)
        for (size_t b = a + 1; b < nc && s == SJK_OK; b++, k++)
            s = pair_by_key(&st->cols[a], &st->cols[b], sorted[b], (uint32_t)st->n_docs,
                            n_boot, seed, &pairs[k]);
    if (sorted)
        for (size_t c = 0; c < nc; c++) free(sorted[c]);
    free(sorted);
    if (s != SJK_OK) { free(pairs); return s; }
    st->pairs = pairs;
    st->n_pairs = np;
    st->finished = 1;
    return SJK_OK;
}

const sjk_eval_config_result *sjk_eval_study_result(const sjk_eval_study *st, size_t cfg)
{
    return st && st->finished && cfg < st->n_configs ? &st->res[cfg] : NULL;
}

size_t eval_pair_index(size_t nc, size_t a, size_t b)
{
    /* Pairs are stored row by row: (0,1) (0,2) ... (0,nc-1) (1,2) ... */
    return a * nc - a * (a + 1) / 2 + (b - a - 1);
}

const sjk_eval_pair *sjk_eval_study_pair(const sjk_eval_study *st, size_t a, size_t b)
{
    if (!st || !st->finished || a >= b || b >= st->n_configs) return NULL;
    return &st->pairs[eval_pair_index(st->n_configs, a, b)];
}
