/* merge_heap.h — the growable id vector of one encode call and the bigram min-heap both
 * merge algorithms pop their candidates from (merge_heap.c). */
#ifndef SJKH_MERGE_HEAP_H
#define SJKH_MERGE_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "sjkhost.h"

/* A growable id vector for one encode call. */
typedef struct sjkh_idvec {
    int32_t *v;
    size_t n, cap;
} sjkh_idvec;

sjk_status sjkh_idvec_push(sjkh_idvec *iv, int32_t id);

/* One candidate merge of two adjacent symbols, and a binary min-heap of them shared by
 * both tokenizers. The heap pops the lowest key first, ties to the lower left index:
 * SentencePiece pushes key = -score (best score first), BPE key = merge rank. */
typedef struct sjkh_bigram {
    double key;
    int32_t left, right;
    uint32_t size; /* bytes of left + right when pushed */
} sjkh_bigram;

typedef struct sjkh_bigram_heap {
    sjkh_bigram *v;
    size_t n, cap;
} sjkh_bigram_heap;

/* Pushes b (grows the heap; SJK_ERR_NOMEM leaves it unchanged). */
sjk_status sjkh_bigram_heap_push(sjkh_bigram_heap *h, sjkh_bigram b);
/* Pops the first bigram; the heap must not be empty. */
sjkh_bigram sjkh_bigram_heap_pop(sjkh_bigram_heap *h);

#endif
