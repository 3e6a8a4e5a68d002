/* fuzz_record.c — libFuzzer target: the sealed-record decoder (sjk_record_decode).
 * Input: byte 0 picks (head_dim, body), bytes 1–2 pick bits_k / bits_v, the rest is the
 * record (any length: short inputs must give SJK_ERR_BUFFER, never a read past the end).
 * Every decoded value must be finite or the input's own NaN-free fp16 fields make it so;
 * the target only checks that decoding never faults. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sjkvarn.h"

#ifndef FUZZ_NAME
#define FUZZ_NAME LLVMFuzzerTestOneInput
#endif

int FUZZ_NAME(const uint8_t *data, size_t size);
int FUZZ_NAME(const uint8_t *data, size_t size)
{
    static float k[SJK_GROUP * 512], v[SJK_GROUP * 512];
    if (size < 3) return 0;
    static const uint32_t dims[4] = {64, 128, 256, 512};
    sjk_record_params p = sjk_record_params_default();
    p.head_dim = dims[data[0] & 3];
    p.body = (uint8_t)((data[0] >> 2) % 6); /* every sjk_body (4, 5: record format v4) */
    p.bits_k = (uint8_t)(2 + data[1] % 7); /* 2..8 (record format v2) */
    p.bits_v = (uint8_t)(2 + data[2] % 7);
    if (sjk_record_params_validate(&p, NULL) != SJK_OK) return 0;
    size_t need = sjk_record_nbytes(&p);
    const uint8_t *rec = data + 3;
    size_t n = size - 3;
    /* Short inputs are tiled up to a full record so the decoder also sees whole ones. */
    static uint8_t buf[SJK_GROUP * 512 * 2 + 8192];
    if (n && n < need && need <= sizeof buf && (data[0] & 0x80)) {
        for (size_t i = 0; i < need; i++) buf[i] = rec[i % n];
        rec = buf;
        n = need;
    }
    sjk_record_decode(&p, k, v, rec, n);
    return 0;
}
