/* vocab.c — the tokenizer's two hash tables: the hashes tokenizer.c builds them with, and
 * the lookups of a token's id by text and of a merge's rank by its two halves
 * (vocab.h describes the tables). */
#include <string.h>

#include "vocab.h"

/* ---- hash tables -------------------------------------------------------------------- */

uint64_t sjkh_tok_hash(const char *s, size_t n)
{
    return sjkh_hash_mix(sjkh_hash_bytes(SJKH_HASH_INIT, s, n));
}

uint64_t sjkh_merge_hash(const char *l, size_t ln, const char *r, size_t rn)
{
    uint64_t h = sjkh_hash_bytes(SJKH_HASH_INIT, l, ln);
    h ^= (uint64_t)ln * 0x9E3779B97F4A7C15ull;
    return sjkh_hash_mix(sjkh_hash_bytes(h, r, rn));
}

size_t sjkh_table_mask(size_t n)
{
    size_t cap = 16;
    while (cap < n * 2) {
        if (cap > SIZE_MAX / 4) return 0;
        cap *= 2;
    }
    return cap - 1;
}

int32_t sjkh_tok_lookup(const sjkh_tokenizer *t, const char *s, size_t n)
{
    size_t i = (size_t)sjkh_tok_hash(s, n) & t->tok_hash_mask;
    for (;;) {
        int32_t id = t->tok_hash[i];
        if (id < 0) return -1;
        if (t->tok_len[id] == n && memcmp(sjkh_tok_text(t, id), s, n) == 0) return id;
        i = (i + 1) & t->tok_hash_mask;
    }
}

int32_t sjkh_merge_rank(const sjkh_tokenizer *t, const char *l, size_t ln, const char *r,
                        size_t rn)
{
    if (!t->merge_hash) return -1;
    size_t i = (size_t)sjkh_merge_hash(l, ln, r, rn) & t->merge_hash_mask;
    for (;;) {
        int32_t m = t->merge_hash[i];
        if (m < 0) return -1;
        const char *mt = t->arena + t->merge_off[m];
        uint32_t split = t->merge_split[m];
        if (split == ln && t->merge_len[m] - split - 1 == rn && memcmp(mt, l, ln) == 0 &&
            memcmp(mt + split + 1, r, rn) == 0)
            return m;
        i = (i + 1) & t->merge_hash_mask;
    }
}
