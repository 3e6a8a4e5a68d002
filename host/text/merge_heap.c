/* merge_heap.c — the growable id vector of one encode call and the bigram min-heap both
 * merge algorithms (tokenizer_spm.c, tokenizer_bpe.c) pop their candidates from. */
#include <stdlib.h>

#include "hcommon.h"
#include "merge_heap.h"

sjk_status sjkh_idvec_push(sjkh_idvec *iv, int32_t id)
{
    if (iv->n == iv->cap) {
        size_t cap = iv->cap ? iv->cap * 2 : 256, nb;
        if (!sjkh_mul_ok(cap, sizeof *iv->v, &nb)) return SJK_ERR_NOMEM;
        int32_t *v = realloc(iv->v, nb);
        if (!v) return SJK_ERR_NOMEM;
        iv->v = v;
        iv->cap = cap;
    }
    iv->v[iv->n++] = id;
    return SJK_OK;
}

static inline int bigram_before(const sjkh_bigram *a, const sjkh_bigram *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

sjk_status sjkh_bigram_heap_push(sjkh_bigram_heap *h, sjkh_bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64, nb;
        if (!sjkh_mul_ok(cap, sizeof *h->v, &nb)) return SJK_ERR_NOMEM;
        sjkh_bigram *v = realloc(h->v, nb);
        if (!v) return SJK_ERR_NOMEM;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_before(&b, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
    return SJK_OK;
}

sjkh_bigram sjkh_bigram_heap_pop(sjkh_bigram_heap *h)
{
    sjkh_bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bigram_before(&h->v[c + 1], &h->v[c])) c++;
        if (!bigram_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}
