/* tokenizer_bpe.c — GPT-2 byte-level BPE of one raw fragment (SmolLM2; GGUF
 * tokenizer.ggml.model = "gpt2", tokenizer.ggml.pre = "smollm"), as llama.cpp does it.
 *
 *   "x = 42;\n"
 *     | code points (malformed UTF-8 -> U+FFFD, one byte at a time)
 *     | stage A ("smollm" only): every \p{N} code point is a piece of its own
 *   "x = " "4" "2" ";\n"
 *     | stage B, inside each piece: the GPT-2 pattern
 *     |   's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
 *   "x" " =" " " "4" "2" ";\n"          (a lone trailing space stays a word)
 *     | bytes -> printable code points (space -> "Ġ", newline -> "Ċ", ...)
 *     | per word: merge adjacent symbols by merge rank (lowest first, leftmost on ties)
 *   ids of the final symbols (single-byte tokens for any symbol outside the vocabulary)
 *
 * The pattern is matched by hand with the code point classes of unicode_data.c (letter,
 * number, White_Space, other), following the rules in docs/BACKGROUND.md, "Engine facts".
 */
#include <stdlib.h>
#include <string.h>

#include "hcommon.h"
#include "merge.h"
#include "unicode.h"

/* ---- the byte mapping ----------------------------------------------------------------- */

static int byte_kept(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t sjkh_bpe_byte_to_cp(uint8_t b)
{
    if (byte_kept(b)) return b;
    if (b <= 0x20) return 0x100u + b;           /* 0x00-0x20 -> U+0100-U+0120 */
    if (b >= 0x7F && b <= 0xA0) return 0x121u + (b - 0x7Fu); /* -> U+0121-U+0142 */
    return 0x143u;                              /* 0xAD */
}

int sjkh_bpe_cp_to_byte(uint32_t cp)
{
    if (cp < 0x100) return byte_kept(cp) ? (int)cp : -1;
    if (cp <= 0x120) return (int)(cp - 0x100);
    if (cp <= 0x142) return (int)(0x7F + (cp - 0x121));
    if (cp == 0x143) return 0xAD;
    return -1;
}

/* ---- pre-tokenization ----------------------------------------------------------------- */

#define CLS_NONE 0xFFu /* past the end of the current piece */

typedef struct span {
    size_t a, b; /* code point range [a, b) */
} span;

typedef struct spanvec {
    span *v;
    size_t n, cap;
} spanvec;

static sjk_status span_push(spanvec *sv, size_t a, size_t b)
{
    if (a == b) return SJK_OK;
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 64, nb;
        if (!sjkh_mul_ok(cap, sizeof *sv->v, &nb)) return SJK_ERR_NOMEM;
        span *v = realloc(sv->v, nb);
        if (!v) return SJK_ERR_NOMEM;
        sv->v = v;
        sv->cap = cap;
    }
    sv->v[sv->n++] = (span){a, b};
    return SJK_OK;
}

/* The GPT-2 pattern over code points [ini, end) (one stage-A piece). */
static sjk_status split_gpt2(const uint32_t *cp, const uint8_t *cls, size_t ini, size_t end,
                             spanvec *words)
{
#define CLS_AT(p) ((p) < end ? cls[p] : CLS_NONE)
    size_t pos = ini, prev = ini;
    sjk_status st;
    while (pos < end) {
        uint32_t c = cp[pos];
        /* 's 't 'm 'd 're 've 'll */
        if (c == '\'' && pos + 1 < end) {
            uint32_t c1 = cp[pos + 1];
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                pos += 2;
                goto emit;
            }
            if (pos + 2 < end) {
                uint32_t c2 = cp[pos + 2];
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    pos += 3;
                    goto emit;
                }
            }
        }
        {
            uint8_t k = c == ' ' ? CLS_AT(pos + 1) : cls[pos];
            if (k == SJKH_UCD_LETTER || k == SJKH_UCD_NUMBER || k == SJKH_UCD_OTHER) {
                /* ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+` */
                pos += c == ' ';
                while (CLS_AT(pos) == k) pos++;
                goto emit;
            }
            size_t nws = 0;
            while (CLS_AT(pos + nws) == SJKH_UCD_SPACE) nws++;
            if (nws > 1 && pos + nws < end) {
                pos += nws - 1; /* `\s+(?!\S)`: leave one for the next word */
            } else if (nws > 0) {
                pos += nws;
            } else {
                pos++;
            }
        }
    emit:
        if ((st = span_push(words, prev, pos)) != SJK_OK) return st;
        prev = pos;
    }
    return SJK_OK;
#undef CLS_AT
}

/* ---- merging one word ------------------------------------------------------------------ */

typedef struct bpe_sym {
    int32_t prev, next;
    uint32_t off, n;
} bpe_sym;

static sjk_status add_bigram(const sjkh_tokenizer *t, const char *w, const bpe_sym *sym,
                             int32_t left, int32_t right, sjkh_bigram_heap *h)
{
    if (left < 0 || right < 0) return SJK_OK;
    int32_t rank = sjkh_merge_rank(t, w + sym[left].off, sym[left].n, w + sym[right].off,
                                   sym[right].n);
    if (rank < 0) return SJK_OK;
    return sjkh_bigram_heap_push(h, (sjkh_bigram){(double)rank, left, right, sym[left].n + sym[right].n});
}

/* BPE over one mapped word w[0..n) (UTF-8 of mapped code points). sym has room for n. */
static sjk_status bpe_word(const sjkh_tokenizer *t, const char *w, size_t n, bpe_sym *sym,
                           sjkh_bigram_heap *heap, sjkh_idvec *out)
{
    sjk_status st;
    int32_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t len = SJKH_MIN(sjkh_utf8_len((uint8_t)w[off]), n - off);
        sym[n_sym] = (bpe_sym){n_sym - 1, off + len == n ? -1 : n_sym + 1, (uint32_t)off,
                               (uint32_t)len};
        n_sym++;
        off += len;
    }
    heap->n = 0;
    for (int32_t i = 1; i < n_sym; i++)
        if ((st = add_bigram(t, w, sym, i - 1, i, heap)) != SJK_OK) return st;
    while (heap->n) {
        sjkh_bigram b = sjkh_bigram_heap_pop(heap);
        bpe_sym *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if ((st = add_bigram(t, w, sym, l->prev, b.left, heap)) != SJK_OK) return st;
        if ((st = add_bigram(t, w, sym, b.left, l->next, heap)) != SJK_OK) return st;
    }
    for (int32_t i = n_sym ? 0 : -1; i >= 0; i = sym[i].next) {
        int32_t id = sjkh_tok_lookup(t, w + sym[i].off, sym[i].n);
        if (id >= 0) {
            if ((st = sjkh_idvec_push(out, id)) != SJK_OK) return st;
            continue;
        }
        /* Not in the vocabulary: its bytes as one-byte tokens, skipping any missing. */
        for (uint32_t j = 0; j < sym[i].n; j++) {
            int32_t bid = t->byte_token[(uint8_t)w[sym[i].off + j]];
            if (bid >= 0 && (st = sjkh_idvec_push(out, bid)) != SJK_OK) return st;
        }
    }
    return SJK_OK;
}

sjk_status sjkh_bpe_encode_fragment(const sjkh_tokenizer *t, const char *raw, size_t raw_n,
                                    sjkh_idvec *out)
{
    /* Sizes: at most raw_n code points; a word's mapped text takes at most 6 bytes per
     * input byte (an invalid byte becomes U+FFFD = 3 bytes, each mapped to 2). */
    size_t map_cap;
    if (!sjkh_mul_ok(raw_n, 6, &map_cap) || map_cap > UINT32_MAX) return SJK_ERR_NOMEM;
    uint32_t *cp = malloc((raw_n ? raw_n : 1) * sizeof *cp);
    uint8_t *cls = malloc(raw_n ? raw_n : 1);
    char *w = malloc(map_cap ? map_cap : 1);
    bpe_sym *sym = malloc((map_cap ? map_cap : 1) * sizeof *sym);
    spanvec words = {0};
    sjkh_bigram_heap heap = {0};
    sjk_status st = SJK_ERR_NOMEM;
    if (!cp || !cls || !w || !sym) goto done;

    size_t n_cp = 0;
    for (size_t pos = 0; pos < raw_n;) {
        cp[n_cp] = sjkh_utf8_decode((const uint8_t *)raw, raw_n, &pos);
        cls[n_cp] = (uint8_t)sjkh_ucd_class(cp[n_cp]);
        n_cp++;
    }

    /* Stage A, then stage B inside each piece. */
    size_t a = 0;
    for (size_t i = 0; i <= n_cp; i++) {
        int cut = i == n_cp || (t->pre == SJKH_BPE_PRE_SMOLLM && cls[i] == SJKH_UCD_NUMBER);
        if (!cut) continue;
        if ((st = split_gpt2(cp, cls, a, i, &words)) != SJK_OK) goto done;
        if (i < n_cp) {
            if ((st = split_gpt2(cp, cls, i, i + 1, &words)) != SJK_OK) goto done;
        }
        a = i + 1;
    }

    for (size_t k = 0; k < words.n; k++) {
        size_t wn = 0;
        for (size_t i = words.v[k].a; i < words.v[k].b; i++) {
            uint8_t u8[4], m8[4];
            size_t nb = sjkh_utf8_encode(cp[i], u8);
            for (size_t j = 0; j < nb; j++) {
                size_t mn = sjkh_utf8_encode(sjkh_bpe_byte_to_cp(u8[j]), m8);
                memcpy(w + wn, m8, mn);
                wn += mn;
            }
        }
        if ((st = bpe_word(t, w, wn, sym, &heap, out)) != SJK_OK) goto done;
    }
    st = SJK_OK;
done:
    free(cp);
    free(cls);
    free(w);
    free(sym);
    free(words.v);
    free(heap.v);
    return st;
}
