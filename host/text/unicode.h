/* unicode.h — the little Unicode the tokenizers need: UTF-8 decoding with llama.cpp's
 * error behaviour, UTF-8 encoding, and code point classes (letter / number / White_Space)
 * from a generated table (unicode_data.c, made by scripts/gen-unicode-tables.py). */
#ifndef SJKH_UNICODE_H
#define SJKH_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum {
    SJKH_UCD_OTHER = 0,
    SJKH_UCD_LETTER = 1, /* general category L* */
    SJKH_UCD_NUMBER = 2, /* general category N* */
    SJKH_UCD_SPACE = 4   /* White_Space */
};

typedef struct sjkh_ucd_range {
    uint32_t first, last; /* inclusive */
    uint32_t cls;         /* one SJKH_UCD_* (never OTHER) */
} sjkh_ucd_range;

extern const sjkh_ucd_range sjkh_ucd_ranges[];
extern const size_t sjkh_ucd_n_ranges;

/* Class of a code point (any uint32_t; beyond U+10FFFF is OTHER). */
uint32_t sjkh_ucd_class(uint32_t cp);

/* Length of a UTF-8 sequence judged by its lead byte alone (1 for ASCII and stray
 * continuation bytes, 2/3/4 by the high bits), as llama.cpp's SPM splitter counts. */
static inline size_t sjkh_utf8_len(uint8_t lead)
{
    static const uint8_t k_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return k_len[lead >> 4];
}

/* Decodes one code point at s[*pos] (pos < n) and advances *pos. A malformed sequence
 * (bad lead byte, missing or bad continuation bytes) consumes one byte and yields U+FFFD.
 * Overlong forms and surrogates are accepted as llama.cpp accepts them. */
uint32_t sjkh_utf8_decode(const uint8_t *s, size_t n, size_t *pos);

/* Encodes cp (any value < 2^21) into out[4]; returns the byte count. */
size_t sjkh_utf8_encode(uint32_t cp, uint8_t out[4]);

#endif
