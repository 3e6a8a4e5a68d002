/* unicode.c — UTF-8 helpers and the code point class lookup for the tokenizers. */
#include "unicode.h"

uint32_t sjkh_ucd_class(uint32_t cp)
{
    if (cp < 0x80) {
        if (cp >= 'a' && cp <= 'z') return SJKH_UCD_LETTER;
        if (cp >= 'A' && cp <= 'Z') return SJKH_UCD_LETTER;
        if (cp >= '0' && cp <= '9') return SJKH_UCD_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return SJKH_UCD_SPACE;
        return SJKH_UCD_OTHER;
    }
    size_t lo = 0, hi = sjkh_ucd_n_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < sjkh_ucd_ranges[mid].first) hi = mid;
        else if (cp > sjkh_ucd_ranges[mid].last) lo = mid + 1;
        else return sjkh_ucd_ranges[mid].cls;
    }
    return SJKH_UCD_OTHER;
}

static inline int is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

uint32_t sjkh_utf8_decode(const uint8_t *s, size_t n, size_t *pos)
{
    size_t i = *pos;
    uint8_t b = s[i];
    if (b < 0x80) {
        *pos = i + 1;
        return b;
    }
    /* Lead byte 10xxxxxx (stray continuation) or 11111xxx: invalid. */
    if ((b & 0xE0) == 0xC0) {
        if (i + 1 < n && is_cont(s[i + 1])) {
            *pos = i + 2;
            return ((uint32_t)(b & 0x1F) << 6) | (s[i + 1] & 0x3Fu);
        }
    } else if ((b & 0xF0) == 0xE0) {
        if (i + 2 < n && is_cont(s[i + 1]) && is_cont(s[i + 2])) {
            *pos = i + 3;
            return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) |
                   (s[i + 2] & 0x3Fu);
        }
    } else if ((b & 0xF8) == 0xF0) {
        if (i + 3 < n && is_cont(s[i + 1]) && is_cont(s[i + 2]) && is_cont(s[i + 3])) {
            *pos = i + 4;
            return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
                   ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3Fu);
        }
    }
    *pos = i + 1;
    return 0xFFFD;
}

size_t sjkh_utf8_encode(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | ((cp >> 18) & 0x07));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}
