/* crc32c.h — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the
 * cache file sections (docs/FORMAT.md "## Cache files").
 *
 * sjk_crc32c() picks the SSE4.2 `crc32` instruction when the CPU has it (and
 * SJK_CPU_DISABLE does not say "all"), else a table-driven software loop; both give the
 * same value (tests/test_crc32c.c). Incremental: crc = sjk_crc32c(crc, next, n), starting
 * from 0. Thread-safe; never allocates. */
#ifndef SJK_CRC32C_H
#define SJK_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#include "sjkvarn.h" /* sjk_crc32c */

/* The two implementations, for tests. sjk_crc32c_hw() falls back to software when the
 * CPU lacks SSE4.2; sjk_crc32c_hw_available() says which ran. */
uint32_t sjk_crc32c_sw(uint32_t crc, const void *data, size_t n);
uint32_t sjk_crc32c_hw(uint32_t crc, const void *data, size_t n);
int sjk_crc32c_hw_available(void);

#endif
