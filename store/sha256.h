/* sha256.h — SHA-256 (FIPS 180-4), for the prefix store's keys and fingerprints.
 * Incremental: init, update any number of times, final. Thread-safe per context; never
 * allocates. Checked against the FIPS 180-4 test vectors in tests/test_store_redis.c. */
#ifndef SJKS_SHA256_H
#define SJKS_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sjks_sha256 {
    uint32_t h[8];
    uint64_t n_bytes;
    uint8_t buf[64];
    size_t n_buf;
} sjks_sha256;

void sjks_sha256_init(sjks_sha256 *c);
void sjks_sha256_update(sjks_sha256 *c, const void *data, size_t n);
void sjks_sha256_final(sjks_sha256 *c, uint8_t out[32]);
/* One call: out = SHA-256(data[0..n)). */
void sjks_sha256_once(const void *data, size_t n, uint8_t out[32]);

#endif
