/* tokenizer_spm.c — SentencePiece-style tokenization of one raw fragment (Gemma 3;
 * GGUF tokenizer.ggml.model = "llama"), as llama.cpp's SPM tokenizer does it:
 *
 *   1. (optional space prefix), every ' ' -> U+2581 "▁"; nothing else is normalised;
 *   2. split into UTF-8 characters by lead byte (stray continuation bytes alone);
 *   3. every adjacent pair whose concatenation is a vocabulary entry is a candidate with
 *      that entry's score; repeatedly merge the best candidate (highest score, leftmost
 *      on ties), skipping candidates made stale by an earlier merge, and offer the two
 *      new neighbour pairs;
 *   4. emit each final symbol's id, or, for a symbol outside the vocabulary (only single
 *      characters can be), one byte token <0xXX> per byte.
 *
 * There is no pre-splitting at spaces: a fragment (text between special tokens — for
 * Gemma every "\n" is one) is one merge problem, solved with a binary heap in
 * O(n log n). Symbols form a doubly linked list over the escaped text:
 *
 *   text  ▁ T h e ▁ c a t        sym[i] = {off, n, prev, next}; merging j into i sets
 *   sym   0 1 2 3 4 5 6 7        sym[i].n += sym[j].n, sym[j].n = 0, unlinks j.
 */
#include <stdlib.h>
#include <string.h>

#include "hcommon.h"
#include "merge.h"
#include "unicode.h"

typedef struct spm_sym {
    int32_t prev, next;
    uint32_t off, n;
} spm_sym;

static sjk_status try_add_bigram(const sjkh_tokenizer *t, const char *text, const spm_sym *sym,
                                 int32_t left, int32_t right, sjkh_bigram_heap *h)
{
    if (left < 0 || right < 0) return SJK_OK;
    uint32_t size = sym[left].n + sym[right].n;
    int32_t id = sjkh_tok_lookup(t, text + sym[left].off, size);
    if (id < 0) return SJK_OK;
    return sjkh_bigram_heap_push(h, (sjkh_bigram){-(double)t->scores[id], left, right, size});
}

sjk_status sjkh_spm_encode_fragment(const sjkh_tokenizer *t, const char *raw, size_t raw_n,
                                    int prefix_space, sjkh_idvec *out)
{
    /* Escaped text: at most 3 bytes per input byte, plus the prefix. */
    size_t cap, nsp = 0;
    for (size_t i = 0; i < raw_n; i++) nsp += raw[i] == ' ';
    if (!sjkh_mul_ok(nsp, 2, &cap) || !sjkh_add_ok(cap, raw_n + 3, &cap) || cap > UINT32_MAX)
        return SJK_ERR_NOMEM;
    char *text = malloc(cap);
    spm_sym *sym = malloc(cap * sizeof *sym);
    sjkh_bigram_heap heap = {0};
    sjk_status st = SJK_ERR_NOMEM;
    if (!text || !sym) goto done;
    size_t n = 0;
    if (prefix_space) {
        memcpy(text, "\xE2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < raw_n; i++) {
        if (raw[i] == ' ') {
            memcpy(text + n, "\xE2\x96\x81", 3);
            n += 3;
        } else {
            text[n++] = raw[i];
        }
    }

    int32_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t len = SJKH_MIN(sjkh_utf8_len((uint8_t)text[off]), n - off);
        sym[n_sym] = (spm_sym){n_sym - 1, off + len == n ? -1 : n_sym + 1, (uint32_t)off,
                               (uint32_t)len};
        n_sym++;
        off += len;
    }
    for (int32_t i = 1; i < n_sym; i++)
        if ((st = try_add_bigram(t, text, sym, i - 1, i, &heap)) != SJK_OK) goto done;

    while (heap.n) {
        sjkh_bigram b = sjkh_bigram_heap_pop(&heap);
        spm_sym *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if ((st = try_add_bigram(t, text, sym, l->prev, b.left, &heap)) != SJK_OK) goto done;
        if ((st = try_add_bigram(t, text, sym, b.left, l->next, &heap)) != SJK_OK) goto done;
    }

    st = SJK_OK;
    for (int32_t i = n_sym ? 0 : -1; i >= 0; i = sym[i].next) {
        int32_t id = sjkh_tok_lookup(t, text + sym[i].off, sym[i].n);
        if (id >= 0) {
            if ((st = sjkh_idvec_push(out, id)) != SJK_OK) goto done;
            continue;
        }
        for (uint32_t j = 0; j < sym[i].n; j++) {
            int32_t bid = t->byte_token[(uint8_t)text[sym[i].off + j]];
            if (bid < 0) {
                st = SJK_ERR_UNSUPPORTED;
                goto done;
            }
            if ((st = sjkh_idvec_push(out, bid)) != SJK_OK) goto done;
        }
    }
done:
    free(text);
    free(sym);
    free(heap.v);
    return st;
}
