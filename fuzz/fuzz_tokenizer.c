/* fuzz_tokenizer.c — libFuzzer target: both tokenizers (SentencePiece-style and GPT-2
 * byte-level BPE). Byte 0 of the input: bit 0 = BPE, bit 1 = parse special tokens,
 * bit 2 = the vocabulary comes from the input too ("token\n"... then a NUL, then the
 * text; for BPE, lines with one space are merges), else a small fixed vocabulary. Encodes
 * the text, decodes the ids, renders every piece. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sjkhost.h"

#ifndef FUZZ_NAME
#define FUZZ_NAME LLVMFuzzerTestOneInput
#endif

#define FT_MAX_TOK (256 + 16 + 64)

typedef struct ft_vocab {
    const char *tok[FT_MAX_TOK];
    size_t len[FT_MAX_TOK];
    float score[FT_MAX_TOK];
    int32_t type[FT_MAX_TOK];
    uint32_t n;
    const char *merge[64];
    size_t merge_len[64];
    uint32_t n_merges;
    char bytes[256][8];
} ft_vocab;

static void ft_add(ft_vocab *v, const char *s, size_t n, float score, int32_t type)
{
    v->tok[v->n] = s;
    v->len[v->n] = n;
    v->score[v->n] = score;
    v->type[v->n] = type;
    v->n++;
}

/* Specials and the 256 byte tokens (SPM: <0xNN>; BPE: the GPT-2 byte mapping). */
static void ft_base(ft_vocab *v, int bpe)
{
    v->n = 0;
    v->n_merges = 0;
    ft_add(v, "<unk>", 5, 0, SJKH_TOKEN_UNKNOWN);
    ft_add(v, "<s>", 3, 0, SJKH_TOKEN_CONTROL);
    ft_add(v, "</s>", 4, 0, SJKH_TOKEN_CONTROL);
    ft_add(v, "<|user|>", 8, 0, SJKH_TOKEN_USER_DEFINED);
    for (int b = 0; b < 256; b++) {
        if (!bpe) {
            snprintf(v->bytes[b], sizeof v->bytes[b], "<0x%02X>", b);
            ft_add(v, v->bytes[b], 6, 0, SJKH_TOKEN_BYTE);
            continue;
        }
        unsigned cp;
        if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) cp = (unsigned)b;
        else if (b <= 0x20) cp = 0x100u + (unsigned)b;
        else if (b <= 0xA0) cp = 0x121u + (unsigned)(b - 0x7F);
        else cp = 0x143u;
        size_t n = 1;
        if (cp < 0x80) v->bytes[b][0] = (char)cp;
        else { v->bytes[b][0] = (char)(0xC0 | (cp >> 6)); v->bytes[b][1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
        ft_add(v, v->bytes[b], n, 0, SJKH_TOKEN_NORMAL);
    }
}

static sjkh_tokenizer *ft_build(ft_vocab *v, int bpe)
{
    sjkh_tokenizer_desc d;
    sjkh_tokenizer_desc_default(&d);
    d.kind = bpe ? SJKH_TOKENIZER_BPE : SJKH_TOKENIZER_SPM;
    d.pre = SJKH_BPE_PRE_SMOLLM;
    d.n_tokens = v->n;
    d.tokens = v->tok;
    d.token_nbytes = v->len;
    d.scores = v->score;
    d.types = v->type;
    d.n_merges = v->n_merges;
    d.merges = v->merge;
    d.merge_nbytes = v->merge_len;
    d.unk_id = 0;
    d.bos_id = 1;
    d.eos_id = 2;
    d.add_bos = !bpe;
    d.add_space_prefix = !bpe;
    sjkh_tokenizer *t = NULL;
    char err[128];
    if (sjkh_tokenizer_create(&d, &t, err, sizeof err) != SJK_OK) return NULL;
    return t;
}

static void ft_fixed_pieces(ft_vocab *v, int bpe)
{
    static const char *spm[] = {"\xE2\x96\x81", "\xE2\x96\x81the", "he", "th", "the", "in", "\xE2\x96\x81\x61", "ab"};
    static const char *bpe_t[] = {"th", "the", "\xC4\xA0t", "in", "12", "ab"};
    static const char *bpe_m[] = {"t h", "th e", "\xC4\xA0 t", "i n", "1 2", "a b"};
    if (!bpe) {
        for (size_t i = 0; i < sizeof spm / sizeof *spm; i++) ft_add(v, spm[i], strlen(spm[i]), -(float)i, SJKH_TOKEN_NORMAL);
    } else {
        for (size_t i = 0; i < sizeof bpe_t / sizeof *bpe_t; i++) ft_add(v, bpe_t[i], strlen(bpe_t[i]), 0, SJKH_TOKEN_NORMAL);
        for (size_t i = 0; i < sizeof bpe_m / sizeof *bpe_m; i++) {
            v->merge[i] = bpe_m[i];
            v->merge_len[i] = strlen(bpe_m[i]);
        }
        v->n_merges = sizeof bpe_m / sizeof *bpe_m;
    }
}

static void ft_exercise(const sjkh_tokenizer *t, const uint8_t *text, size_t n, unsigned flags)
{
    static int32_t ids[2 * 4096 + 2];
    static char out[64 * 1024];
    if (n > 4096) n = 4096;
    size_t n_ids = 0, m;
    if (sjkh_tokenizer_encode(t, (const char *)text, n, flags, ids, sizeof ids / sizeof *ids, &n_ids) != SJK_OK)
        return;
    if (n_ids > sizeof ids / sizeof *ids) abort(); /* the documented bound must hold */
    sjkh_tokenizer_decode(t, ids, n_ids, SJKH_DETOK_SPECIAL, out, sizeof out, &m);
    sjkh_tokenizer_decode(t, ids, n_ids, 0, out, sizeof out, &m);
    for (size_t i = 0; i < n_ids && i < 256; i++) sjkh_tokenizer_token_to_piece(t, ids[i], 0, out, 16, &m);
}

int FUZZ_NAME(const uint8_t *data, size_t size);
int FUZZ_NAME(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const int bpe = data[0] & 1;
    const unsigned flags = SJKH_TOKENIZE_ADD_SPECIAL | ((data[0] & 2) ? SJKH_TOKENIZE_PARSE_SPECIAL : 0);
    data++;
    size--;
    if (!(data[-1] & 4)) {
        static sjkh_tokenizer *fixed[2];
        static ft_vocab fv[2];
        if (!fixed[bpe]) {
            ft_base(&fv[bpe], bpe);
            ft_fixed_pieces(&fv[bpe], bpe);
            fixed[bpe] = ft_build(&fv[bpe], bpe);
            if (!fixed[bpe]) abort();
        }
        ft_exercise(fixed[bpe], data, size, flags);
        return 0;
    }
    /* vocabulary from the input: lines up to the first NUL */
    const uint8_t *nul = memchr(data, 0, size);
    size_t vocab_n = nul ? (size_t)(nul - data) : size;
    static ft_vocab v;
    ft_base(&v, bpe);
    size_t i = 0;
    while (i < vocab_n && v.n < FT_MAX_TOK) {
        size_t j = i;
        while (j < vocab_n && data[j] != '\n') j++;
        const char *s = (const char *)data + i;
        size_t len = j - i;
        if (len) {
            const char *sp = memchr(s, ' ', len);
            if (bpe && sp && v.n_merges < 64) {
                v.merge[v.n_merges] = s;
                v.merge_len[v.n_merges++] = len;
            } else {
                ft_add(&v, s, len, -(float)(v.n % 17), (s[0] == '<' && len > 2) ? SJKH_TOKEN_CONTROL : SJKH_TOKEN_NORMAL);
            }
        }
        i = j + 1;
    }
    if (bpe && v.n_merges == 0) {
        v.merge[0] = "a b";
        v.merge_len[0] = 3;
        v.n_merges = 1;
    }
    sjkh_tokenizer *t = ft_build(&v, bpe);
    if (!t) return 0;
    if (nul) ft_exercise(t, nul + 1, size - vocab_n - 1, flags);
    sjkh_tokenizer_free(t);
    return 0;
}
