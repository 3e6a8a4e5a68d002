/* vocab.h — a tokenizer's vocabulary: its tables, the hashes they are keyed by and the
 * lookups of a token by text and a merge by its halves (vocab.c). tokenizer.c builds the
 * tables; the merge algorithms (tokenizer_spm.c, tokenizer_bpe.c) only search them.
 *
 * Memory of a tokenizer (all owned, allocated once at create):
 *
 *   arena    [token texts ... | merge texts ...]          bytes, no NULs needed
 *   tok_off  [n_tokens] u64   tok_len [n_tokens] u32      where each token text lives
 *   scores   [n_tokens] f32   types   [n_tokens] u8
 *   tok_hash [tok_hash_mask + 1] i32  open addressing (linear probing) over token
 *            texts, -1 = empty; when two tokens share a text the higher id wins, as in
 *            llama.cpp's text-to-id map
 *   merge_off/merge_len/merge_split [n_merges]  merge text and the length of its left part
 *   merge_hash [merge_hash_mask + 1] i32  merge ranks keyed by (left, right) text
 *   special  [n_special] i32  CONTROL/USER_DEFINED/UNKNOWN ids, longest text first
 */
#ifndef SJKH_VOCAB_H
#define SJKH_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "sjkhost.h"

struct sjkh_tokenizer {
    sjkh_tokenizer_kind kind;
    sjkh_bpe_pre pre;
    uint32_t n_tokens;
    char *arena;
    uint64_t *tok_off;
    uint32_t *tok_len;
    float *scores;
    uint8_t *types;
    int32_t *tok_hash;
    size_t tok_hash_mask;

    uint32_t n_merges;
    uint64_t *merge_off;
    uint32_t *merge_len;
    uint32_t *merge_split;
    int32_t *merge_hash;
    size_t merge_hash_mask;

    int32_t *special;
    uint32_t n_special;

    int32_t bos_id, eos_id, eot_id, unk_id, pad_id;
    int add_bos, add_eos, add_space_prefix;
    int32_t byte_token[256]; /* SPM: <0xXX> (or the 1-byte text); BPE: the 1-byte text; -1 */
    uint8_t *eog;            /* [n_tokens] 1 = end of generation */

    sjkh_chat_style chat_style;
    char *chat_default_system; /* ChatML default system text, NUL-terminated, or NULL */
};

static inline const char *sjkh_tok_text(const sjkh_tokenizer *t, int32_t id)
{
    return t->arena + t->tok_off[id];
}

/* FNV-1a over bytes, continued from h (start with SJKH_HASH_INIT). */
#define SJKH_HASH_INIT 1469598103934665603ull
static inline uint64_t sjkh_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = (const uint8_t *)p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}
static inline uint64_t sjkh_hash_mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/* The hashes of a token text and of a merge (left, right) the tables are keyed by, and
 * a table's size for n entries: the smallest power of two >= 2n (at least 16), as a
 * mask; 0 on overflow (vocab.c). */
uint64_t sjkh_tok_hash(const char *s, size_t n);
uint64_t sjkh_merge_hash(const char *l, size_t ln, const char *r, size_t rn);
size_t sjkh_table_mask(size_t n);

/* Id of the token with exactly this text, or -1. */
int32_t sjkh_tok_lookup(const sjkh_tokenizer *t, const char *s, size_t n);

/* Rank of the merge (left, right), or -1. */
int32_t sjkh_merge_rank(const sjkh_tokenizer *t, const char *l, size_t ln, const char *r,
                        size_t rn);

#endif
