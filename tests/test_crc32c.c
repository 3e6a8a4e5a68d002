/* test_crc32c.c — CRC-32C: known vectors (RFC 3720 B.4 and the "123456789" check value),
 * incremental use, and the SSE4.2 path against the software tables on random buffers of
 * every length and alignment. */
#include <stdint.h>

#include "common/crc32c.h"
#include "common/rng.h"
#include "harness.h"

TEST(test_crc32c_known_vectors)
{
    uint8_t b[32];
    CHECK(sjk_crc32c_sw(0, "123456789", 9) == 0xE3069283u);
    CHECK(sjk_crc32c_hw(0, "123456789", 9) == 0xE3069283u);
    memset(b, 0, sizeof b);
    CHECK(sjk_crc32c_sw(0, b, 32) == 0x8A9136AAu);
    CHECK(sjk_crc32c(0, b, 32) == 0x8A9136AAu);
    memset(b, 0xFF, sizeof b);
    CHECK(sjk_crc32c_sw(0, b, 32) == 0x62A8AB43u);
    CHECK(sjk_crc32c_hw(0, b, 32) == 0x62A8AB43u);
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
    CHECK(sjk_crc32c_sw(0, b, 32) == 0x46DD794Eu);
    CHECK(sjk_crc32c_hw(0, b, 32) == 0x46DD794Eu);
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)(31 - i);
    CHECK(sjk_crc32c(0, b, 32) == 0x113FDB5Cu);
    CHECK(sjk_crc32c(0, b, 0) == 0);
}

TEST(test_crc32c_hw_matches_sw_every_length_and_alignment)
{
    static uint8_t buf[4096 + 16];
    sjk_rng r;
    sjk_rng_seed(&r, 7);
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)sjk_rng_u64(&r);
    int bad = 0;
    for (size_t off = 0; off < 16; off++)
        for (size_t n = 0; n <= 300; n++)
            if (sjk_crc32c_sw(0x1234u, buf + off, n) != sjk_crc32c_hw(0x1234u, buf + off, n)) bad++;
    CHECK(bad == 0);
    CHECK(sjk_crc32c_sw(0, buf, 4096) == sjk_crc32c_hw(0, buf, 4096));
    if (!sjk_crc32c_hw_available()) fprintf(stderr, "  note: no SSE4.2 here; hw path fell back to software\n");
}

TEST(test_crc32c_incremental_equals_one_shot)
{
    uint8_t b[1000];
    for (int i = 0; i < 1000; i++) b[i] = (uint8_t)(i * 7 + 3);
    uint32_t whole = sjk_crc32c(0, b, sizeof b);
    for (size_t cut = 0; cut <= 1000; cut += 37)
        CHECK(sjk_crc32c(sjk_crc32c(0, b, cut), b + cut, 1000 - cut) == whole);
}

int main(void)
{
    RUN(test_crc32c_known_vectors);
    RUN(test_crc32c_hw_matches_sw_every_length_and_alignment);
    RUN(test_crc32c_incremental_equals_one_shot);
    return test_summary();
}
