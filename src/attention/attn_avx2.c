/* attn_avx2.c — the AVX2/FMA/F16C attention kernels (attn_kernels.h): the kernels both
 * instruction sets share, from attn_x86.h at 8 lanes, and the payload unpacking (which
 * attn_avx512.c reuses). The families that need AVX-512 (the tq6_0 ring, trellis records
 * and ggml blocks read in place, int16 record scores) are NULL here: attend.c decodes
 * those chunks and uses chunk_f32, or chunk_rec for 4-bit records. Tested against
 * attn_ref.c (tests/test_attention.c).
 */
#define SJK_ATTN_W 8
#include "attention/attn_x86.h"

void sjk_attn_unpack_row_avx2(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits);
void sjk_attn_unpack_row_avx2(uint8_t *codes, const uint8_t *row, size_t n, unsigned bits)
{
    const __m128i m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(0x03);
    if (bits == 8) {
        memcpy(codes, row, n);
        return;
    }
    if (bits > 4) { /* record format v2: a 4-bit row of low nibbles, then the high bits */
        uint8_t hi[512]; /* n <= max(D, G) = 512 */
        if (n > sizeof hi) return;
        if (bits == 5) {
            for (size_t i = 0; i < n; i++) hi[i] = (uint8_t)((row[n / 2 + i / 8] >> (i % 8)) & 1u);
        } else {
            sjk_attn_unpack_row_avx2(hi, row + n / 2, n, bits - 4);
        }
        sjk_attn_unpack_row_avx2(codes, row, n, 4);
        for (size_t i = 0; i < n; i += 16) {
            __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(codes + i));
            __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(hi + i));
            _mm_storeu_si128((__m128i *)(void *)(codes + i), _mm_or_si128(c, _mm_and_si128(_mm_slli_epi16(h, 4), _mm_set1_epi8((char)0xF0))));
        }
        return;
    }
    if (bits == 4) {
        for (size_t u = 0; u < n; u += 32) {
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(row + u / 2));
            _mm_storeu_si128((__m128i *)(void *)(codes + u), _mm_and_si128(x, m4));
            _mm_storeu_si128((__m128i *)(void *)(codes + u + 16), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
        }
        return;
    }
    for (size_t u = 0; u < n; u += 64) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(row + u / 4));
        _mm_storeu_si128((__m128i *)(void *)(codes + u), _mm_and_si128(x, m2));
        _mm_storeu_si128((__m128i *)(void *)(codes + u + 16), _mm_and_si128(_mm_srli_epi16(x, 2), m2));
        _mm_storeu_si128((__m128i *)(void *)(codes + u + 32), _mm_and_si128(_mm_srli_epi16(x, 4), m2));
        _mm_storeu_si128((__m128i *)(void *)(codes + u + 48), _mm_and_si128(_mm_srli_epi16(x, 6), m2));
    }
    if (bits == 3) {
        const uint8_t *hi = row + n / 4;
        const __m128i bitsel = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, (char)128, 1, 2, 4, 8, 16, 32, 64, (char)128);
        const __m128i spread = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        const __m128i four = _mm_set1_epi8(4);
        for (size_t i = 0; i < n; i += 16) {
            uint16_t two;
            memcpy(&two, hi + i / 8, 2);
            __m128i b = _mm_shuffle_epi8(_mm_cvtsi32_si128(two), spread);
            __m128i on = _mm_cmpeq_epi8(_mm_and_si128(b, bitsel), bitsel);
            __m128i cv = _mm_loadu_si128((const __m128i *)(const void *)(codes + i));
            _mm_storeu_si128((__m128i *)(void *)(codes + i), _mm_or_si128(cv, _mm_and_si128(on, four)));
        }
    }
}

const sjk_attn_kernels sjk_attn_kernels_table_avx2 = {
    "avx2", chunk_f32_x, chunk_f32_many_x, chunk_f16_x, NULL /* tq6_0 rows: decoded by the caller */, chunk_rec_scalar,
    sjk_attn_unpack_row_avx2, f16_to_f32_x, 0 /* trellis records: decoded by the caller */,
    NULL /* ggml block rows: decoded by the caller */,
    NULL /* 4-bit records by integer dot products: chunk_rec scores them in fp32 */,
    NULL /* tq6_0 rows by integer dot products: decoded by the caller */,
};
